package server

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/certgen"
	"github.com/helios-lb/helios/internal/tlsconf"
)

// testCerts is a CA and the directory its certificates are written to.
type testCerts struct {
	ca   *certgen.Cert
	pool *x509.CertPool
	dir  string
}

func newTestCerts(t *testing.T) *testCerts {
	t.Helper()
	ca, err := certgen.NewCA("server test CA")
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Leaf)
	c := &testCerts{ca: ca, pool: pool, dir: t.TempDir()}
	if err := os.WriteFile(filepath.Join(c.dir, "ca.pem"), ca.CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	return c
}

// write issues a certificate for hosts and writes it to name.pem and
// name.key, replacing what was there.
func (c *testCerts) write(t *testing.T, name string, hosts ...string) *certgen.Cert {
	t.Helper()
	cert, err := c.ca.Issue(certgen.Request{Hosts: hosts})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := cert.WriteFiles(c.dir, name); err != nil {
		t.Fatal(err)
	}
	return cert
}

// tlsConfigYAML is a config with a TLS listener "web" serving
// {{DIR}}/site.pem, and an upstream whose backend {{B1}} is reached with
// TLS, verified with {{DIR}}/ca.pem.
const tlsConfigYAML = `
listeners:
  - name: web
    address: "127.0.0.1:1"
    tls: {cert_file: "{{DIR}}/site.pem", key_file: "{{DIR}}/site.key"}
routes:
  - {name: app, match: {path_prefix: /}, upstream: app}
upstreams:
  - name: app
    backends: [{address: "{{B1}}"}]
    transport: {tls: {ca_file: "{{DIR}}/ca.pem"}}
admin: {address: "127.0.0.1:1"}
`

// siteConfig returns tlsConfigYAML with certs' directory, without the
// upstream's tls block unless upstreamTLS.
func siteConfig(certs *testCerts, upstreamTLS bool) string {
	yaml := strings.ReplaceAll(tlsConfigYAML, "{{DIR}}", certs.dir)
	if !upstreamTLS {
		yaml = strings.ReplaceAll(yaml, `transport: {tls: {ca_file: "`+certs.dir+`/ca.pem"}}`, "")
	}
	return yaml
}

// handshake serves one TLS handshake with p on a loopback listener (the
// way the engine does: BeginHandshake, then the Handshake's End) and returns
// the certificate a client trusting pool saw for name.
func handshake(t *testing.T, p *tlsconf.Provider, pool *x509.CertPool, name string) *x509.Certificate {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := tls.NewListener(ln, p.TLSConfig()).Accept()
		if err != nil {
			return
		}
		defer c.Close()
		tc := c.(*tls.Conn)
		h := p.BeginHandshake(func() {})
		if h == nil {
			return
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		err = tc.Handshake()
		h.End(tc.ConnectionState(), err)
		io.Copy(io.Discard, c)
	}()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String(), &tls.Config{RootCAs: pool, ServerName: name})
	if err != nil {
		t.Fatalf("handshake: got %v, want nil", err)
	}
	leaf := conn.ConnectionState().PeerCertificates[0]
	conn.Close()
	<-done
	return leaf
}

func TestTLSListenerHasProvider(t *testing.T) {
	certs := newTestCerts(t)
	site := certs.write(t, "site", "site.example")
	tlsBackend := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "tls backend") }))
	backendCert, err := certs.ca.Issue(certgen.Request{Hosts: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	tlsBackend.TLS = &tls.Config{Certificates: []tls.Certificate{backendCert.TLS()}}
	tlsBackend.StartTLS()
	defer tlsBackend.Close()

	yaml := strings.ReplaceAll(siteConfig(certs, true), "{{B1}}", tlsBackend.Listener.Addr().String())
	cfg := yamlConfig(t, yaml, nil)
	s, _ := startServer(t, cfg, Options{})

	p := s.TLSProvider("web")
	if p == nil {
		t.Fatalf("TLSProvider(web): got nil, want the listener's provider")
	}
	if got := handshake(t, p, certs.pool, "site.example"); !got.Equal(site.Leaf) {
		t.Errorf("served certificate: got %v, want site.example's", got.DNSNames)
	}
	if got, ok := metric(t, s, "helios_tls_handshakes_total", map[string]string{"listener": "web", "result": "ok", "version": "1.3", "resumed": "false"}); !ok || got != 1 {
		t.Errorf("helios_tls_handshakes_total{ok,1.3}: got %v (present %v), want 1", got, ok)
	}
	before := time.Until(site.Leaf.NotAfter).Seconds()
	left, ok := metric(t, s, "helios_tls_certificate_expiry_seconds", map[string]string{"listener": "web", "name": filepath.Join(certs.dir, "site.pem")})
	if want := time.Until(site.Leaf.NotAfter).Seconds(); !ok || left > before || left < want {
		t.Errorf("helios_tls_certificate_expiry_seconds: got %v (present %v), want about %v", left, ok, want)
	}

	for _, m := range []struct {
		name   string
		labels map[string]string
	}{
		{name: "helios_tls_handshakes_in_progress", labels: map[string]string{"listener": "web"}},
		{name: "helios_tls_handshakes_waiting", labels: map[string]string{"listener": "web"}},
		{name: "helios_tls_ocsp_stapled", labels: map[string]string{"listener": "web", "name": filepath.Join(certs.dir, "site.pem")}},
	} {
		if got, ok := metric(t, s, m.name, m.labels); !ok || got != 0 {
			t.Errorf("%s: got %v (present %v), want 0", m.name, got, ok)
		}
	}

	// The upstream's client config verifies the backend with the CA file.
	c := s.UpstreamTLS("app")
	if c == nil {
		t.Fatalf("UpstreamTLS(app): got nil, want a config")
	}
	addr := tlsBackend.Listener.Addr().String()
	tr := &http.Transport{TLSClientConfig: c.Config(addr)}
	defer tr.CloseIdleConnections()
	_, body, _ := get(t, &http.Client{Transport: tr, Timeout: 10 * time.Second}, "https://"+addr+"/")
	if body != "tls backend" {
		t.Errorf("through the upstream's TLS config: got %q, want %q", body, "tls backend")
	}
}

func TestReloadRenewsCertificateAndRefusesABadOne(t *testing.T) {
	certs := newTestCerts(t)
	certs.write(t, "site", "site.example")
	bs := startBackends(t, 1)
	yaml := siteConfig(certs, false)
	s, _ := startServer(t, yamlConfig(t, yaml, bs), Options{})
	p := s.TLSProvider("web")

	renewed := certs.write(t, "site", "site.example")
	if err := s.Reload(yamlConfig(t, yaml, bs)); err != nil {
		t.Fatalf("Reload with a renewed certificate: got %v, want nil", err)
	}
	if s.TLSProvider("web") != p {
		t.Errorf("after reload: got another provider, want the listener's own, changed in place")
	}
	if got := handshake(t, p, certs.pool, "site.example"); !got.Equal(renewed.Leaf) {
		t.Errorf("after reload: got the old certificate, want the renewed one")
	}

	// A key that does not match, with a route change in the same reload:
	// nothing of it applies.
	cfg := yamlConfig(t, yaml, bs)
	certs.write(t, "other", "site.example")
	cfg.Listeners[0].TLS.KeyFile = filepath.Join(certs.dir, "other.key")
	cfg.Routes[0].Name = "renamed"
	err := s.Reload(cfg)
	if err == nil || !strings.Contains(err.Error(), "listener web: tls:") {
		t.Fatalf("Reload with a mismatched key: got %v, want a tls error naming the listener", err)
	}
	if got := handshake(t, p, certs.pool, "site.example"); !got.Equal(renewed.Leaf) {
		t.Errorf("after the refused reload: got another certificate, want the renewed one still served")
	}
	if got := s.Config().Routes[0].Name; got != "app" {
		t.Errorf("after the refused reload: route %q, want app", got)
	}
}

func TestReloadRefusesTurningTLSOnOrOff(t *testing.T) {
	certs := newTestCerts(t)
	certs.write(t, "site", "site.example")
	bs := startBackends(t, 1)
	withTLS := siteConfig(certs, false)
	without := strings.ReplaceAll(withTLS, `tls: {cert_file: "`+certs.dir+`/site.pem", key_file: "`+certs.dir+`/site.key"}`, "")
	tests := []struct {
		name       string
		start, new string
	}{
		{name: "on", start: without, new: withTLS},
		{name: "off", start: withTLS, new: without},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := startServer(t, yamlConfig(t, tt.start, bs), Options{})
			err := s.Reload(yamlConfig(t, tt.new, bs))
			if err == nil || !strings.Contains(err.Error(), "turning tls on or off needs a restart") {
				t.Errorf("got %v, want a refusal", err)
			}
		})
	}
}
