package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runEnv runs helios with args and env added to the test's environment,
// and returns its stdout, stderr and exit code.
func runEnv(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(helios, args...)
	cmd.Env = append(os.Environ(), env...)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

// TestCLIHabits guards issue 18 item 8: --version was an unknown flag,
// "helios validate FILE" an unknown command, and healthcheck printed
// nothing on success although its help said it printed the answer.
func TestCLIHabits(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte("listeners: [{name: web, address: \"127.0.0.1:8080\"}]\nroutes: [{name: r, respond: {}}]\n"), 0o644)
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("listeners: [{name: web, address: \"127.0.0.1:80800\"}]\nroutes: [{name: r, respond: {}}]\n"), 0o644)
	tests := []struct {
		name     string
		args     []string
		code     int
		contains string
	}{
		{"--version", []string{"--version"}, 0, "helios "},
		{"validate FILE", []string{"validate", good}, 0, "ok"},
		{"validate FILE with a problem", []string{"validate", bad}, 1, bad + ":1: listeners[0].address:"},
		{"validate --config FILE", []string{"validate", "--config", good}, 0, "ok"},
		{"validate FILE and --config FILE disagree", []string{"validate", "--config", good, bad}, 1, "two config files"},
		{"validate two files", []string{"validate", good, bad}, 1, "accepts at most 1 arg"},
		{"serve FILE", []string{"serve", filepath.Join(dir, "nope.yaml")}, 1, "nope.yaml"},
		{"config FILE", []string{"config", good}, 0, "name: web"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := runEnv(t, nil, tt.args...)
			if code != tt.code || !strings.Contains(out+errOut, tt.contains) {
				t.Errorf("helios %s: got exit %d\n%s%s\nwant exit %d and output containing %q", strings.Join(tt.args, " "), code, out, errOut, tt.code, tt.contains)
			}
		})
	}
	t.Run("version agrees", func(t *testing.T) {
		a, _, _ := runEnv(t, nil, "--version")
		b, _, _ := runEnv(t, nil, "version")
		if a != b {
			t.Errorf("--version printed %q, version %q; want the same", a, b)
		}
	})
	t.Run("healthcheck prints the answer", func(t *testing.T) {
		to := startBackends(t, 1)
		front, admin := freePort(t), freePort(t)
		start(t, "proxy", "--from", front, "--to", to[0], "--admin", admin, "--access-log", "off")
		waitListening(t, front)
		waitListening(t, admin)
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"healthcheck", "--address", admin}, "ready\n"},
			{[]string{"healthcheck", "--address", admin, "--live"}, "ok\n"},
		} {
			out, errOut, code := runEnv(t, nil, tc.args...)
			if code != 0 || out != tc.want {
				t.Errorf("helios %s: got exit %d, stdout %q (stderr %q), want 0 and %q", strings.Join(tc.args, " "), code, out, errOut, tc.want)
			}
		}
	})
}

// TestConfigCommand guards issue 18 item 9: there was no way to see the
// configuration serve runs. helios config prints it with the defaults
// filled in and the environment expanded, in YAML that validate accepts
// and that helios config prints again unchanged; the admin token shows
// as the ${VAR} it came from, never as its value.
func TestConfigCommand(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "public"), 0o755)
	file := filepath.Join(dir, "helios.yaml")
	os.WriteFile(file, []byte(`listeners: [{name: web, address: "${ADDR:-127.0.0.1:8080}"}]
routes:
  - {name: price, match: {path: /price}, respond: {body: "costs $$5 (${CURRENCY})"}}
  - {name: files, match: {path_prefix: /static/}, static: {root: ./public}}
  - {name: app, match: {path_prefix: /}, upstream: app}
upstreams:
  - name: app
    backends: [{address: "${BACKEND}"}]
    retries: {attempts: 0}
admin: {token: "${TOKEN}"}
`), 0o644)
	const token = "0123456789abcdef0123456789abcdef"
	env := []string{"BACKEND=127.0.0.1:9001", "CURRENCY=EUR", "TOKEN=" + token}
	out, errOut, code := runEnv(t, env, "config", file)
	if code != 0 {
		t.Fatalf("helios config: exit %d\n%s", code, errOut)
	}
	for _, want := range []string{
		"address: 127.0.0.1:8080",         // a default from ${ADDR:-...}
		"address: 127.0.0.1:9001",         // ${BACKEND} expanded
		"body: costs $$5 (EUR)",           // $ written as $$, read back as $
		"root: " + dir + "/public",        // a relative path made absolute
		"idle_timeout: 1m0s",              // a default filled in
		"attempts: 0",                     // an explicit zero kept
		`token: "${TOKEN}"`,               // the secret by its reference
		"strategy: round_robin",           // another default
		"max_body_bytes: 104857600",       // and another
		"health_check", "passive", "tls:", // absent blocks stay absent
	} {
		absent := want == "health_check" || want == "passive" || want == "tls:"
		if strings.Contains(out, want) == absent {
			t.Errorf("output has %q: %v, want %v; output:\n%s", want, !absent, absent, out)
		}
	}
	if strings.Contains(out, token) {
		t.Errorf("the output shows the admin token:\n%s", out)
	}
	// Round trip: saved elsewhere, the output validates and prints again
	// the same, with the same environment.
	again := filepath.Join(t.TempDir(), "effective.yaml")
	os.WriteFile(again, []byte(out), 0o644)
	if vout, verr, code := runEnv(t, env, "validate", again); code != 0 {
		t.Fatalf("validate on helios config's output: exit %d\n%s%s\noutput was:\n%s", code, vout, verr, out)
	}
	out2, _, _ := runEnv(t, env, "config", again)
	body := func(s string) string { _, b, _ := strings.Cut(s, "\n"); return b }
	if body(out2) != body(out) {
		t.Errorf("helios config on its own output:\n%s\nwant\n%s", out2, out)
	}

	// A token the file holds itself is redacted, and so is a sticky
	// secret.
	lit := filepath.Join(t.TempDir(), "lit.yaml")
	os.WriteFile(lit, []byte("listeners: [{name: web, address: \":8080\"}]\nroutes: [{name: r, upstream: app}]\nadmin: {token: "+token+"}\n"+
		"upstreams: [{name: app, sticky: {secret: sticky-"+token+"}, backends: [{address: \"127.0.0.1:9001\"}]}]\n"), 0o644)
	out, _, code = runEnv(t, nil, "config", lit)
	if code != 0 || strings.Contains(out, token) || !strings.Contains(out, "token: <redacted>") || !strings.Contains(out, "secret: <redacted>") {
		t.Errorf("a literal token and sticky secret: exit %d\n%s\nwant token: <redacted> and secret: <redacted>", code, out)
	}
	// Problems go to stderr, with exit status 1.
	out, errOut, code = runEnv(t, nil, "config", file)
	if code != 1 || out != "" || !strings.Contains(errOut, "(from ${BACKEND}, which is not set)") {
		t.Errorf("without the environment: exit %d, stdout %q, stderr %q; want 1, nothing, and the problems", code, out, errOut)
	}
}
