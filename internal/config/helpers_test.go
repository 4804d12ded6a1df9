package config

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/helios-lb/helios/internal/certgen"
)

// testHostPort is the allowed part of host:port messages, spelled out
// here so that the tests pin the text rather than echo the package constant.
const testHostPort = "host:port such as :8080, 127.0.0.1:8080 or [::1]:8080; port 1-65535"

// envFrom returns a lookupEnv that knows only the variables in m.
func envFrom(m map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}

// testEnv returns variables for test configs: DIR, an existing directory,
// and FILE, an existing regular file.
func testEnv(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "file.txt")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	return map[string]string{"DIR": dir, "FILE": file}
}

// parseProblems parses src as t.yaml and returns its problems, failing the
// test if Parse returns an error that is not Problems.
func parseProblems(t *testing.T, src string, env map[string]string) (*Config, Problems) {
	t.Helper()
	cfg, err := Parse([]byte(src), "t.yaml", envFrom(env))
	if err == nil {
		return cfg, nil
	}
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("Parse error is %T, want Problems: %v", err, err)
	}
	if cfg != nil {
		t.Errorf("got a Config along with problems, want nil")
	}
	return nil, ps
}

// mustParse parses src as t.yaml and fails the test on any problem.
func mustParse(t *testing.T, src string, env map[string]string) *Config {
	t.Helper()
	cfg, ps := parseProblems(t, src, env)
	if ps != nil {
		t.Fatalf("Parse: got problems\n%v\nwant none", ps)
	}
	return cfg
}

// testNumCPU is the default Listener.Sockets on this machine.
func testNumCPU() int { return min(runtime.GOMAXPROCS(0), 1024) }

// writeTestTLS writes certificates for TLS configs into a new directory and
// returns it: ca.pem (the CA), a.pem/a.key (a.example, ECDSA), b.pem/b.key
// (*.b.example, Ed25519; RSA keys are slow to make), client.pem/client.key
// (a client certificate), all valid for a year.
func writeTestTLS(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	ca, err := certgen.NewCA("config test CA")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), ca.CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]certgen.Request{
		"a":      {Hosts: []string{"a.example"}},
		"b":      {Hosts: []string{"*.b.example"}, Key: certgen.Ed25519},
		"client": {CommonName: "helios", Client: true},
	} {
		c, err := ca.Issue(r)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.WriteFiles(dir, name); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
