package server

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/acme"
	"github.com/helios-lb/helios/internal/acme/pebbletest"
	"github.com/helios-lb/helios/internal/config"
)

// The ACME tests run Pebble on loopback (pebbletest) and Helios with
// listeners on ports reserved for Pebble's validations. Names are
// unique per test: certmagic keeps its renewal backoff per name for the
// whole process.

// acmeName returns a name no other test uses.
func acmeName(prefix string) string {
	b := make([]byte, 4)
	rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b) + ".helios.test"
}

// reservePort returns a loopback port nothing listened on a moment ago.
func reservePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// acmeSetup is one test's Pebble and the ports Helios listens on.
type acmeSetup struct {
	pebble    *pebbletest.Pebble
	httpPort  int // Pebble's HTTP-01 port, where the "http" listener is
	httpsPort int // Pebble's TLS-ALPN-01 port, where the "https" listener is
	storage   string
}

func newACMESetup(t *testing.T, o pebbletest.Options) *acmeSetup {
	t.Helper()
	s := &acmeSetup{httpPort: reservePort(t), httpsPort: reservePort(t), storage: t.TempDir()}
	if o.HTTPPort == 0 {
		o.HTTPPort = s.httpPort
	}
	if o.TLSPort == 0 {
		o.TLSPort = s.httpsPort
	}
	s.pebble = pebbletest.Start(t, o)
	return s
}

// config parses a Helios config: {{HTTP}}, {{HTTPS}}, {{CA}}, {{ROOT}} and
// {{STORAGE}} are the setup's.
func (s *acmeSetup) config(t *testing.T, tmpl string) *config.Config {
	t.Helper()
	r := strings.NewReplacer("{{HTTP}}", fmt.Sprintf("127.0.0.1:%d", s.httpPort), "{{HTTPS}}", fmt.Sprintf("127.0.0.1:%d", s.httpsPort),
		"{{CA}}", s.pebble.Directory, "{{ROOT}}", s.pebble.RootFile, "{{STORAGE}}", s.storage)
	cfg, err := config.Parse([]byte(r.Replace(tmpl)), "acme.yaml", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	for i := range cfg.Listeners {
		if e := os.Getenv("HELIOS_TEST_ENGINE"); e != "" {
			cfg.Listeners[i].Poller = e
		}
	}
	return cfg
}

// start runs Helios with cfg, renewal checks every second.
func (s *acmeSetup) start(t *testing.T, cfg *config.Config) *Server {
	t.Helper()
	srv, err := New(cfg, Options{ACME: acme.Env{RenewCheckInterval: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopServer(srv) })
	return srv
}

func stopServer(srv *Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(ctx)
}

// handshake connects to the https listener asking for name and returns
// the verified leaf, or the handshake's error.
func (s *acmeSetup) handshake(t *testing.T, roots *x509.CertPool, name string) (*x509.Certificate, error) {
	t.Helper()
	return handshakeAt(fmt.Sprintf("127.0.0.1:%d", s.httpsPort), roots, name)
}

// handshakeAt connects to addr asking for name and returns the verified
// leaf, or the handshake's error.
func handshakeAt(addr string, roots *x509.CertPool, name string) (*x509.Certificate, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{ServerName: name, RootCAs: roots})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0], nil
}

// waitCert waits (up to limit) for a verified handshake for name whose
// certificate is not old (nil: any), and returns its leaf.
func (s *acmeSetup) waitCert(t *testing.T, roots *x509.CertPool, name string, old *x509.Certificate, limit time.Duration) *x509.Certificate {
	t.Helper()
	deadline := time.Now().Add(limit)
	var err error
	for time.Now().Before(deadline) {
		var leaf *x509.Certificate
		if leaf, err = s.handshake(t, roots, name); err == nil && (old == nil || leaf.SerialNumber.Cmp(old.SerialNumber) != 0) {
			return leaf
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no new certificate for %s within %v (last handshake error: %v)", name, limit, err)
	return nil
}

func managerOf(t *testing.T, srv *Server) *acme.Manager {
	t.Helper()
	ms := srv.ACMEManagers()
	if len(ms) != 1 {
		t.Fatalf("got %d ACME managers, want 1", len(ms))
	}
	return ms[0]
}

const acmeHTTP01 = `
listeners:
  - {name: http, address: "{{HTTP}}"}
  - name: https
    address: "{{HTTPS}}"
    tls:
      acme: {ca: "{{CA}}", ca_root: "{{ROOT}}", storage: "{{STORAGE}}", email: ops@helios.test, http_listener: http, challenges: [http-01], domains: [%s]}
routes:
  - {name: app, respond: {body: "served over %%s"}}
admin: {address: "off"}
`

// First issuance through HTTP-01, answered by the cleartext listener's
// pipeline before routing; the certificate verifies against Pebble's
// root; cleartext requests for the name are redirected to HTTPS; a
// restart loads the certificate from storage and issues nothing.
func TestACMEHTTP01IssuesAndRestartLoadsFromStorage(t *testing.T) {
	s := newACMESetup(t, pebbletest.Options{})
	name := acmeName("h1")
	cfg := s.config(t, fmt.Sprintf(acmeHTTP01, name))
	srv := s.start(t, cfg)
	roots := s.pebble.IssuerRoots(t)
	leaf := s.waitCert(t, roots, name, nil, 20*time.Second)
	if got := leaf.DNSNames; len(got) != 1 || got[0] != name {
		t.Errorf("certificate names: got %v, want [%s]", got, name)
	}
	if n := s.pebble.Issued(); n != 1 {
		t.Errorf("pebble issued %d certificates, want 1", n)
	}
	m := managerOf(t, srv)
	if n := m.Stats().Obtained.Load(); n != 1 {
		t.Errorf("obtained: got %d, want 1", n)
	}
	if !strings.Contains(s.pebble.Log(), "Attempting to validate w/ HTTP") {
		t.Errorf("pebble did not validate over HTTP:\n%s", s.pebble.Log())
	}
	// The metrics.
	if v, ok := metric(t, srv, "helios_acme_certificate_expiry_seconds", map[string]string{"listener": "https", "name": name}); !ok || v < 80*24*3600 {
		t.Errorf("helios_acme_certificate_expiry_seconds for %s: got %v (present %v), want about 90 days", name, v, ok)
	}
	if v, _ := metric(t, srv, "helios_acme_issuances_total", map[string]string{"listener": "https", "kind": "obtain", "result": "success"}); v != 1 {
		t.Errorf("helios_acme_issuances_total{obtain,success}: got %v, want 1", v)
	}

	// http -> https for the name, not for another host.
	resp := rawExchange(t, fmt.Sprintf("127.0.0.1:%d", s.httpPort), "GET /a/b?c=d HTTP/1.1\r\nHost: "+name+"\r\nConnection: close\r\n\r\n")
	want := fmt.Sprintf("Location: https://%s:%d/a/b?c=d\r\n", name, s.httpsPort)
	if !strings.HasPrefix(resp, "HTTP/1.1 308 ") || !strings.Contains(resp, want) {
		t.Errorf("cleartext request for %s: got\n%s\nwant 308 with %q", name, resp, want)
	}
	resp = rawExchange(t, fmt.Sprintf("127.0.0.1:%d", s.httpPort), "GET / HTTP/1.1\r\nHost: other.helios.test\r\nConnection: close\r\n\r\n")
	if !strings.HasPrefix(resp, "HTTP/1.1 200 ") {
		t.Errorf("cleartext request for another host: got\n%s\nwant 200", resp)
	}

	// A reload that keeps the acme block keeps the manager and what it
	// loaded.
	if err := srv.Reload(s.config(t, fmt.Sprintf(acmeHTTP01, name))); err != nil {
		t.Fatal(err)
	}
	if managerOf(t, srv) != m {
		t.Errorf("a reload with the same acme block replaced the manager")
	}
	if again, err := s.handshake(t, roots, name); err != nil || again.SerialNumber.Cmp(leaf.SerialNumber) != 0 {
		t.Errorf("after a reload: got %v, want the same certificate", err)
	}

	stopServer(srv)
	srv = s.start(t, s.config(t, fmt.Sprintf(acmeHTTP01, name)))
	again, err := s.handshake(t, roots, name)
	if err != nil {
		t.Fatalf("after a restart: %v", err)
	}
	if again.SerialNumber.Cmp(leaf.SerialNumber) != 0 {
		t.Errorf("after a restart: serial %x, want %x (the stored one)", again.SerialNumber, leaf.SerialNumber)
	}
	time.Sleep(500 * time.Millisecond) // anything issued in the background would show by now
	if n := s.pebble.Issued(); n != 1 {
		t.Errorf("after a restart pebble issued %d certificates in all, want 1", n)
	}
	if n := managerOf(t, srv).Stats().Obtained.Load(); n != 0 {
		t.Errorf("after a restart obtained %d, want 0", n)
	}
}

const acmeTLSALPN = `
listeners:
  - name: https
    address: "{{HTTPS}}"
    tls:
      acme: {ca: "{{CA}}", ca_root: "{{ROOT}}", storage: "{{STORAGE}}", challenges: [tls-alpn-01], domains: [%s]}
routes:
  - {name: app, respond: {body: "hello"}}
admin: {address: "off"}
`

// First issuance through TLS-ALPN-01, answered in the handshakes of the
// listener's event loops; a name with no certificate fails its own
// handshake with unrecognized_name while the listener serves the other.
func TestACMETLSALPN01Issues(t *testing.T) {
	s := newACMESetup(t, pebbletest.Options{})
	name := acmeName("alpn")
	srv := s.start(t, s.config(t, fmt.Sprintf(acmeTLSALPN, name)))
	roots := s.pebble.IssuerRoots(t)
	s.waitCert(t, roots, name, nil, 20*time.Second)
	// No cleartext listener: the CA could only have validated in the
	// listener's own handshakes.
	_, err := s.handshake(t, roots, "unknown.helios.test")
	if err == nil || !strings.Contains(err.Error(), "unrecognized name") {
		t.Errorf("handshake for a name without a certificate: got %v, want the unrecognized_name alert", err)
	}
	// An HTTPS request for the name is served.
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots},
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", s.httpsPort))
		}}}
	defer c.CloseIdleConnections()
	code, body, _ := get(t, c, "https://"+name+"/")
	if code != 200 || body != "hello" {
		t.Errorf("GET over HTTPS: got %d %q, want 200 hello", code, body)
	}
	_ = srv
}

// A short-lived certificate is renewed before it expires, and the new
// one is served without a restart.
func TestACMERenewsShortLivedCertificate(t *testing.T) {
	s := newACMESetup(t, pebbletest.Options{AlwaysValid: true, Validity: 8 * time.Second})
	name := acmeName("renew")
	srv := s.start(t, s.config(t, fmt.Sprintf(acmeTLSALPN, name)))
	roots := s.pebble.IssuerRoots(t)
	first := s.waitCert(t, roots, name, nil, 20*time.Second)
	second := s.waitCert(t, roots, name, first, 15*time.Second)
	if !second.NotAfter.After(first.NotAfter) {
		t.Errorf("renewed certificate expires %v, want after %v", second.NotAfter, first.NotAfter)
	}
	if n := managerOf(t, srv).Stats().Renewed.Load(); n < 1 {
		t.Errorf("renewed: got %d, want at least 1", n)
	}
}

// A renewal whose challenge fails is counted and backed off, and the
// certificate still valid keeps being served: a reload switches the
// listener to HTTP-01 on a port Pebble's validation cannot reach.
func TestACMEFailedRenewalKeepsServingAndBacksOff(t *testing.T) {
	s := newACMESetup(t, pebbletest.Options{Validity: 8 * time.Second, HTTPPort: reservePort(t)})
	name := acmeName("fail")
	srv := s.start(t, s.config(t, fmt.Sprintf(acmeTLSALPN, name)))
	roots := s.pebble.IssuerRoots(t)
	first := s.waitCert(t, roots, name, nil, 20*time.Second)

	broken := s.config(t, fmt.Sprintf(acmeHTTP01, name))
	if err := srv.Reload(broken); err != nil {
		t.Fatal(err)
	}
	m := managerOf(t, srv)
	waitFor(t, 15*time.Second, "a failed renewal", func() bool { return m.Stats().RenewFailed.Load() >= 1 })
	leaf, err := s.handshake(t, roots, name)
	if err != nil {
		t.Fatalf("after the failed renewal: %v", err)
	}
	if leaf.SerialNumber.Cmp(first.SerialNumber) != 0 {
		t.Errorf("after the failed renewal: serial %x, want the old %x", leaf.SerialNumber, first.SerialNumber)
	}
	// Renewal checks run every second; the backoff (a minute at first)
	// keeps them from trying again meanwhile.
	time.Sleep(3 * time.Second)
	if n := m.Stats().RenewFailed.Load(); n != 1 {
		t.Errorf("renewal attempts within 3s of the failure: got %d failures, want 1 (backoff)", n)
	}
}

// After the CA's renewal information (ARI) moves the window to now, the
// certificate is renewed early, as a replacement of the old one.
func TestACMERenewsWhenARIWindowOpens(t *testing.T) {
	s := newACMESetup(t, pebbletest.Options{AlwaysValid: true})
	name := acmeName("ari")
	srv := s.start(t, s.config(t, fmt.Sprintf(acmeTLSALPN, name)))
	roots := s.pebble.IssuerRoots(t)
	first := s.waitCert(t, roots, name, nil, 20*time.Second)
	stopServer(srv)

	now := time.Now()
	s.pebble.SetRenewalInfo(t, first, now.Add(-time.Hour), now.Add(-time.Minute))
	// The CA said when to ask again (Pebble: six hours); let that time
	// have passed, as a restart a day later would see it.
	expireRetryAfter(t, s.storage, name)

	s.start(t, s.config(t, fmt.Sprintf(acmeTLSALPN, name)))
	second := s.waitCert(t, roots, name, first, 20*time.Second)
	if time.Until(first.NotAfter) < 80*24*time.Hour {
		t.Fatalf("the first certificate was already due: expires %v", first.NotAfter)
	}
	if !strings.Contains(s.pebble.Log(), "is a replacement of") {
		t.Errorf("pebble saw no ARI replacement order:\n%s", s.pebble.Log())
	}
	_ = second
}

// expireRetryAfter drops the ARI retry time from a stored certificate's
// metadata.
func expireRetryAfter(t *testing.T, storage, name string) {
	t.Helper()
	var meta string
	filepath.WalkDir(storage, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == name+".json" {
			meta = p
		}
		return nil
	})
	if meta == "" {
		t.Fatalf("no metadata for %s in %s", name, storage)
	}
	b, err := os.ReadFile(meta)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	issuer, _ := m["issuer_data"].(map[string]any)
	ri, _ := issuer["renewal_info"].(map[string]any)
	if ri == nil {
		t.Fatalf("no renewal_info in %s: %s", meta, b)
	}
	delete(ri, "_retryAfter")
	b, _ = json.Marshal(m)
	if err := os.WriteFile(meta, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

const acmeEAB = `
listeners:
  - name: https
    address: "{{HTTPS}}"
    tls:
      acme:
        ca: "{{CA}}"
        ca_root: "{{ROOT}}"
        storage: "{{STORAGE}}"
        challenges: [tls-alpn-01]
        domains: [%s]
%s
routes:
  - {name: app, respond: {body: "hello"}}
admin: {address: "off"}
`

// A CA that requires external account binding refuses an account
// without it and issues with it.
func TestACMEExternalAccountBinding(t *testing.T) {
	const kid, key = "kid-1", "zWNDZM6eQGHWpSRTPal5eIUYFTu7EajVIoguysqZ9wG44nMEtx3MUAsUDkMTQ12W"
	s := newACMESetup(t, pebbletest.Options{AlwaysValid: true, EAB: map[string]string{kid: key}})
	roots := s.pebble.IssuerRoots(t)

	name := acmeName("eab")
	srv := s.start(t, s.config(t, fmt.Sprintf(acmeEAB, name, "")))
	m := managerOf(t, srv)
	waitFor(t, 15*time.Second, "a refused order without EAB", func() bool { return m.Stats().ObtainFailed.Load() >= 1 })
	if n := s.pebble.Issued(); n != 0 {
		t.Errorf("without EAB pebble issued %d, want 0", n)
	}
	stopServer(srv)

	s.storage = t.TempDir() // a new account
	srv = s.start(t, s.config(t, fmt.Sprintf(acmeEAB, name, "        eab: {key_id: "+kid+", mac_key: "+key+"}")))
	s.waitCert(t, roots, name, nil, 20*time.Second)
	if n := managerOf(t, srv).Stats().Obtained.Load(); n != 1 {
		t.Errorf("with EAB obtained %d, want 1", n)
	}
}

const acmeOnDemand = `
listeners:
  - name: https
    address: "{{HTTPS}}"
    tls:
      acme:
        ca: "{{CA}}"
        ca_root: "{{ROOT}}"
        storage: "{{STORAGE}}"
        challenges: [tls-alpn-01]
        on_demand: {ask: "%s", burst: 1, interval: 1h}
routes:
  - {name: app, respond: {body: "hello"}}
admin: {address: "off"}
`

// On-demand TLS: a name the ask endpoint refuses fails its handshake and
// nothing is issued; a name it approves gets a certificate during its
// first handshake; past the rate limit the next approved name is
// refused too.
func TestACMEOnDemandAsk(t *testing.T) {
	var asked atomic.Int32
	ask := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		if strings.HasPrefix(r.URL.Query().Get("domain"), "yes-") {
			return
		}
		w.WriteHeader(http.StatusForbidden)
	}))
	defer ask.Close()
	s := newACMESetup(t, pebbletest.Options{AlwaysValid: true})
	srv := s.start(t, s.config(t, fmt.Sprintf(acmeOnDemand, ask.URL)))
	roots := s.pebble.IssuerRoots(t)
	m := managerOf(t, srv)

	if _, err := s.handshake(t, roots, acmeName("no")); err == nil {
		t.Errorf("a refused name: handshake succeeded, want it refused")
	}
	if n := m.Stats().AskRefused.Load(); n != 1 {
		t.Errorf("ask refusals: got %d, want 1", n)
	}
	if n := s.pebble.Issued(); n != 0 {
		t.Errorf("after a refused name pebble issued %d, want 0", n)
	}

	yes := acmeName("yes")
	leaf, err := s.handshake(t, roots, yes)
	if err != nil {
		t.Fatalf("an approved name: %v", err)
	}
	if leaf.DNSNames[0] != yes {
		t.Errorf("an approved name: certificate for %v, want %s", leaf.DNSNames, yes)
	}
	if _, err := s.handshake(t, roots, acmeName("yes")); err == nil {
		t.Errorf("a second approved name within the hour: handshake succeeded, want the rate limit (burst 1) to refuse it")
	}
	if n := m.Stats().RateLimited.Load(); n != 1 {
		t.Errorf("rate limited: got %d, want 1", n)
	}
	if n := s.pebble.Issued(); n != 1 {
		t.Errorf("pebble issued %d, want 1", n)
	}
}
