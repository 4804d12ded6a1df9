// Package pebbletest runs Pebble, the ACME test server Let's Encrypt
// publishes (a Go tool of this module: go tool pebble), on loopback for
// tests, with a DNS server of its own that resolves every name to
// 127.0.0.1 so that Pebble's validations reach the Helios under test.
//
// Start skips the test only when Pebble cannot be built, and never when
// the environment says CI=true.
package pebbletest

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/helios-lb/helios/internal/certgen"
)

// Options say how to run Pebble. The zero value of each field is noted.
type Options struct {
	// HTTPPort and TLSPort are where Pebble sends HTTP-01 and
	// TLS-ALPN-01 validations (on 127.0.0.1). Zero: a port nothing
	// listens on.
	HTTPPort, TLSPort int
	// AlwaysValid makes every challenge pass without a validation
	// request (PEBBLE_VA_ALWAYS_VALID), for tests where the challenge is
	// not under test. False: real validations.
	AlwaysValid bool
	// Validity is how long certificates are valid. Zero: 90 days.
	Validity time.Duration
	// EAB requires external account binding with these key ids and
	// base64url MAC keys. Nil: no binding needed.
	EAB map[string]string
}

// Pebble is a running Pebble.
type Pebble struct {
	// Directory is the ACME directory URL (the acme block's ca).
	Directory string
	// RootFile is a PEM file with the root of Pebble's own HTTPS
	// certificate (the acme block's ca_root).
	RootFile string
	mgmt     string
	client   *http.Client
	logFile  string
}

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// build returns the path of the pebble binary, built once per process
// into Go's build cache by `go tool -n`.
func build() (string, error) {
	buildOnce.Do(func() {
		out, err := exec.Command("go", "tool", "-n", "pebble").Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				err = fmt.Errorf("%v: %s", err, ee.Stderr)
			}
			buildErr = fmt.Errorf("building pebble (go tool -n pebble): %w", err)
			return
		}
		binary = strings.TrimSpace(string(out))
	})
	return binary, buildErr
}

// Start runs Pebble for the test's life.
func Start(t testing.TB, o Options) *Pebble {
	t.Helper()
	bin, err := build()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	dir := t.TempDir()
	ca, err := certgen.NewCA("pebble test HTTPS CA")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Issue(certgen.Request{Hosts: []string{"localhost", "127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := leaf.WriteFiles(dir, "pebble")
	if err != nil {
		t.Fatal(err)
	}
	rootFile := filepath.Join(dir, "root.pem")
	if err := os.WriteFile(rootFile, ca.CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	resolver := startDNS(t)
	roots := x509.NewCertPool()
	roots.AddCert(ca.Leaf)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	t.Cleanup(client.CloseIdleConnections)

	for attempt := 0; ; attempt++ {
		listen, mgmt := freePort(t), freePort(t)
		httpPort, tlsPort := o.HTTPPort, o.TLSPort
		if httpPort == 0 {
			httpPort = freePort(t)
		}
		if tlsPort == 0 {
			tlsPort = freePort(t)
		}
		cfg := map[string]any{
			"listenAddress":                  fmt.Sprintf("127.0.0.1:%d", listen),
			"managementListenAddress":        fmt.Sprintf("127.0.0.1:%d", mgmt),
			"certificate":                    certFile,
			"privateKey":                     keyFile,
			"httpPort":                       httpPort,
			"tlsPort":                        tlsPort,
			"ocspResponderURL":               "",
			"externalAccountBindingRequired": len(o.EAB) > 0,
			"externalAccountMACKeys":         o.EAB,
			"keyAlgorithm":                   "ecdsa",
			"retryAfter":                     map[string]int{"authz": 1, "order": 1},
		}
		if o.Validity > 0 {
			cfg["profiles"] = map[string]any{"default": map[string]any{"description": "test", "validityPeriod": int(o.Validity / time.Second)}}
		}
		js, _ := json.Marshal(map[string]any{"pebble": cfg})
		cfgFile := filepath.Join(dir, "pebble.json")
		if err := os.WriteFile(cfgFile, js, 0o644); err != nil {
			t.Fatal(err)
		}
		p := &Pebble{
			Directory: fmt.Sprintf("https://127.0.0.1:%d/dir", listen),
			RootFile:  rootFile,
			mgmt:      fmt.Sprintf("https://127.0.0.1:%d", mgmt),
			client:    client,
			logFile:   filepath.Join(dir, fmt.Sprintf("pebble%d.log", attempt)),
		}
		logOut, err := os.Create(p.logFile)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "-config", cfgFile, "-dnsserver", resolver)
		cmd.Env = append(os.Environ(), "PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0", "PEBBLE_AUTHZREUSE=0")
		if o.AlwaysValid {
			cmd.Env = append(cmd.Env, "PEBBLE_VA_ALWAYS_VALID=1")
		}
		cmd.Stdout, cmd.Stderr = logOut, logOut
		err = cmd.Start()
		logOut.Close() // the child has its own copy
		if err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		stop := func() {
			cmd.Process.Kill()
			<-exited
		}
		if p.ready(exited) {
			t.Cleanup(func() {
				stop()
				if t.Failed() {
					t.Logf("pebble's log:\n%s", p.Log())
				}
			})
			return p
		}
		stop()
		if attempt == 2 { // a port taken between reserving and binding, three times
			t.Fatalf("pebble did not start:\n%s", p.Log())
		}
	}
}

// ready waits (up to 10 s) for Pebble's directory to answer, false when
// Pebble exits first.
func (p *Pebble) ready(exited <-chan struct{}) bool {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return false
		default:
		}
		resp, err := p.client.Get(p.Directory)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// freePort returns a loopback port nothing listened on a moment ago.
func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startDNS runs a DNS server over TCP (how Pebble asks) on loopback that
// answers every A question with 127.0.0.1 and every other with nothing.
func startDNS(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{Listener: ln, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		for _, q := range r.Question {
			if q.Qtype == dns.TypeA {
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET}, A: net.IPv4(127, 0, 0, 1)})
			}
		}
		w.WriteMsg(m)
	})}
	go srv.ActivateAndServe()
	t.Cleanup(func() { srv.Shutdown() })
	return ln.Addr().String()
}

// IssuerRoots returns the roots that Pebble's certificates chain to,
// for clients that verify what Helios serves.
func (p *Pebble) IssuerRoots(t testing.TB) *x509.CertPool {
	t.Helper()
	resp, err := p.client.Get(p.mgmt + "/roots/0")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		t.Fatalf("pebble's root: no certificate in %q", b)
	}
	return pool
}

// SetRenewalInfo makes Pebble's ARI answer for cert a window from start
// to end.
func (p *Pebble) SetRenewalInfo(t testing.TB, cert *x509.Certificate, start, end time.Time) {
	t.Helper()
	ari, _ := json.Marshal(map[string]any{"suggestedWindow": map[string]string{
		"start": start.UTC().Format(time.RFC3339), "end": end.UTC().Format(time.RFC3339),
	}})
	body, _ := json.Marshal(map[string]string{
		"Certificate": string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})),
		"ARIResponse": string(ari),
	})
	resp, err := p.client.Post(p.mgmt+"/set-renewal-info/", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("set-renewal-info: got %d %s, want 200", resp.StatusCode, b)
	}
}

// Issued returns how many certificates Pebble has issued.
func (p *Pebble) Issued() int { return strings.Count(p.Log(), "Issued certificate serial") }

// Log returns what Pebble printed.
func (p *Pebble) Log() string {
	b, _ := os.ReadFile(p.logFile)
	return string(b)
}
