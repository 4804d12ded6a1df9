package main

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/certgen"
)

// run runs helios with args and returns its combined output and exit code.
func run(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, err := exec.Command(helios, args...).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

func TestCertSelfSignedValidateAndServe(t *testing.T) {
	dir := t.TempDir()
	out, code := run(t, "cert", "selfsigned", "--out", dir, "--host", "localhost,127.0.0.1", "--days", "5")
	if code != 0 || !strings.Contains(out, "helios.pem") {
		t.Fatalf("cert selfsigned: exit %d, output %q; want 0 and the files named", code, out)
	}
	expired, err := certgen.SelfSigned(certgen.Request{Hosts: []string{"old.example"}, NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := expired.WriteFiles(dir, "expired"); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	config := func(name, base string) string {
		t.Helper()
		file := filepath.Join(dir, name+".yaml")
		yaml := `listeners:
  - name: web
    address: "` + addr + `"
    tls: {cert_file: "` + filepath.Join(dir, base+".pem") + `", key_file: "` + filepath.Join(dir, base+".key") + `"}
routes: [{name: ping, respond: {body: pong}}]
admin: {address: "off"}
`
		if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		return file
	}
	soon, old := config("soon", "helios"), config("old", "expired")

	tests := []struct {
		name     string
		args     []string
		code     int
		contains []string
	}{
		{name: "validate warns of an expiry within 14 days", args: []string{"validate", "-c", soon}, code: 0, contains: []string{
			soon + `:4: listeners[0].tls.cert_file: WARNING: "` + filepath.Join(dir, "helios.pem") + `" (localhost) expires in 5 days`,
			"\nok\n",
		}},
		{name: "validate refuses an expired certificate", args: []string{"validate", "-c", old}, code: 1, contains: []string{
			old + `:4: listeners[0].tls.cert_file: "` + filepath.Join(dir, "expired.pem") + `" (old.example) expired on`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, code := run(t, tt.args...)
			if code != tt.code {
				t.Errorf("exit code: got %d, want %d; output:\n%s", code, tt.code, out)
			}
			for _, want := range tt.contains {
				if !strings.Contains(out, want) {
					t.Errorf("output does not contain %q; output:\n%s", want, out)
				}
			}
		})
	}

	// serve answers over TLS with the certificate, trusted by itself as
	// curl --cacert trusts it.
	srv := start(t, "serve", "-c", soon)
	waitListening(t, addr)
	pemBytes, err := os.ReadFile(filepath.Join(dir, "helios.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemBytes)
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	res, err := c.Get("https://localhost:" + addr[strings.LastIndexByte(addr, ':')+1:] + "/ping")
	if err != nil {
		t.Fatalf("GET over TLS: got %v, want nil; log:\n%s", err, srv.out.String())
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || string(b) != "pong" {
		t.Errorf("GET over TLS: got %d %q, want 200 pong", res.StatusCode, b)
	}
}
