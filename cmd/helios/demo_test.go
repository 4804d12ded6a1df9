package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// withoutHeliosEnv returns the environment without HELIOS_* variables:
// what a new user's shell holds.
func withoutHeliosEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HELIOS_") {
			env = append(env, kv)
		}
	}
	return env
}

// TestDemoConfigNeedsNoEnvironment guards issue 18 item 1: the demo config
// read its certificate from ${HELIOS_DEMO_TLS_DIR}, which only
// scripts/demo.sh set, so validate and serve from the repository root
// failed with `"/helios.pem" does not exist`. In a copy of the repository's
// layout, with the certificate where make build makes it (.cache/demo-tls
// at the top), validate says ok from the top and from elsewhere, with no
// HELIOS_ variable set.
func TestDemoConfigNeedsNoEnvironment(t *testing.T) {
	repo := t.TempDir()
	if err := os.CopyFS(filepath.Join(repo, "configs"), os.DirFS("../../configs")); err != nil {
		t.Fatal(err)
	}
	script, err := filepath.Abs("../../scripts/demo-tls.sh")
	if err != nil {
		t.Fatal(err)
	}
	// make build's step, from the top of the repository.
	mk := exec.Command(script, helios)
	mk.Dir = repo
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("scripts/demo-tls.sh: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(repo, ".cache/demo-tls/helios.pem")); err != nil {
		t.Fatalf("scripts/demo-tls.sh made no certificate: %v", err)
	}
	for _, dir := range []string{repo, t.TempDir()} {
		cmd := exec.Command(helios, "validate", "--config", filepath.Join(repo, "configs/helios.yaml"))
		if dir == repo {
			cmd.Args[len(cmd.Args)-1] = "configs/helios.yaml"
		}
		cmd.Dir, cmd.Env = dir, withoutHeliosEnv()
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "ok") {
			t.Errorf("validate from %s: got %v\n%s\nwant ok", dir, err, out)
		}
	}
	// Without the certificate, the problem names the path and the variable.
	os.RemoveAll(filepath.Join(repo, ".cache"))
	cmd := exec.Command(helios, "validate", "--config", "configs/helios.yaml")
	cmd.Dir, cmd.Env = repo, withoutHeliosEnv()
	out, err := cmd.CombinedOutput()
	for _, want := range []string{".cache/demo-tls/helios.pem\" does not exist", "HELIOS_DEMO_TLS_DIR is not set, so its default"} {
		if err == nil || !strings.Contains(string(out), want) {
			t.Errorf("validate without the certificate: got %v\n%s\nwant a problem containing %q", err, out, want)
		}
	}
}
