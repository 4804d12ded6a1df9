// Package deploy holds no code: its tests check the deployment files
// beside them (systemd units, the container image and Compose example,
// Kubernetes manifests, the observability kit) with the real tools.
package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// needTool returns the path of a command-line tool. Without it the test
// fails under CI (make deploy-deps installs it) and is skipped elsewhere,
// saying how to get it.
func needTool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	msg := name + " not found: run make deploy-deps (Debian package " + pkg + ")"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// repoRoot is the repository's top directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	abs, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// run runs a command and returns its combined output, failing the test
// when it fails.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// buildHelios builds the static binary (as make build does) into dir.
func buildHelios(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "helios")
	run(t, repoRoot(t), []string{"CGO_ENABLED=0"}, "go", "build", "-trimpath", "-o", bin, "./cmd/helios")
	return bin
}
