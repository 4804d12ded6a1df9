package server

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/certgen"
	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/wire"
)

// httpsConfig is a TLS listener "web" with {{DIR}}/site.pem in front of one
// cleartext backend; {{EXTRA}} is more of the listener's tls block.
const httpsConfig = `
listeners:
  - name: web
    address: "127.0.0.1:1"
    tls: {cert_file: "{{DIR}}/site.pem", key_file: "{{DIR}}/site.key"{{EXTRA}}}
routes: [{name: app, match: {path_prefix: /}, upstream: app}]
upstreams: [{name: app, backends: [{address: "{{B1}}"}]}]
admin: {address: "off"}
`

// httpsClient trusts certs' CA for site.example and presents cert when not
// nil. Its transport is closed at the end of the test.
func httpsClient(t *testing.T, certs *testCerts, cert *certgen.Cert) (*http.Client, *http.Transport) {
	t.Helper()
	cfg := &tls.Config{RootCAs: certs.pool, ServerName: "site.example"}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{cert.TLS()}
	}
	tr := &http.Transport{TLSClientConfig: cfg}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}, tr
}

func TestHTTPSThroughTheEngine(t *testing.T) {
	certs := newTestCerts(t)
	old := certs.write(t, "site", "site.example")
	bs := startBackends(t, 1)
	yaml := strings.NewReplacer("{{DIR}}", certs.dir, "{{EXTRA}}", "").Replace(httpsConfig)
	versions := &tlsVersions{}
	s, _ := startServer(t, yamlConfig(t, yaml, bs), Options{Recorder: versions})
	url := "https://" + s.Addr("web").String()
	c, tr := httpsClient(t, certs, nil)

	// The backend hears that the client spoke HTTPS.
	res, err := c.Get(url + "/echo")
	if err != nil {
		t.Fatalf("GET over TLS: got %v, want nil", err)
	}
	echoed := readAll(t, res)
	if res.StatusCode != 200 || !strings.Contains(echoed, "\r\nX-Forwarded-Proto: https\r\n") {
		t.Errorf("got %d with the backend hearing\n%s\nwant 200 and X-Forwarded-Proto: https", res.StatusCode, echoed)
	}
	if !res.TLS.PeerCertificates[0].Equal(old.Leaf) {
		t.Errorf("served certificate: got another, want site.pem's")
	}
	// The access log and other recorders hear the TLS version.
	if got := versions.last(t); got != "1.3" {
		t.Errorf("recorded TLS version: got %q, want 1.3", got)
	}

	// A renewed certificate is taken on reload; the open keep-alive
	// connection goes on with the old one, a new connection gets the new.
	renewed := certs.write(t, "site", "site.example")
	if err := s.Reload(yamlConfig(t, yaml, bs)); err != nil {
		t.Fatalf("Reload: got %v, want nil", err)
	}
	reused := false
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused },
	}), http.MethodGet, url+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err = c.Do(req)
	if err != nil {
		t.Fatalf("GET on the open connection after reload: got %v, want nil", err)
	}
	readAll(t, res)
	if !reused || res.StatusCode != 200 || !res.TLS.PeerCertificates[0].Equal(old.Leaf) {
		t.Errorf("after reload: got status %d, connection reused %v, want 200 on the open connection with its old certificate", res.StatusCode, reused)
	}
	tr.CloseIdleConnections()
	res, err = c.Get(url + "/")
	if err != nil {
		t.Fatalf("GET on a new connection after reload: got %v, want nil", err)
	}
	readAll(t, res)
	if !res.TLS.PeerCertificates[0].Equal(renewed.Leaf) {
		t.Errorf("new connection after reload: got the old certificate, want the renewed one")
	}

	// ALPN: HTTP/2 only once the engine speaks it.
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", s.Addr("web").String(),
		&tls.Config{RootCAs: certs.pool, ServerName: "site.example", NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	want := "h2"
	if got := conn.ConnectionState().NegotiatedProtocol; got != want {
		t.Errorf("ALPN: got %q, want %q", got, want)
	}
	conn.Close()

	// The engine counts its handshakes through the provider: three so far
	// (the first, the new one after reload, the ALPN probe) and more may
	// be in flight; all ok.
	waitFor(t, 10*time.Second, "the handshakes to be counted", func() bool {
		n := 0.0
		for _, r := range []string{"true", "false"} {
			got, _ := metric(t, s, "helios_tls_handshakes_total", map[string]string{"listener": "web", "result": "ok", "version": "1.3", "resumed": r})
			n += got
		}
		return n >= 3
	})
}

func TestMutualTLSThroughTheEngine(t *testing.T) {
	certs := newTestCerts(t)
	certs.write(t, "site", "site.example")
	clientCA, err := certgen.NewCA("client CA")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := clientCA.WriteFiles(certs.dir, "clients"); err != nil {
		t.Fatal(err)
	}
	alice, err := clientCA.Issue(certgen.Request{CommonName: "alice", Client: true})
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := certs.ca.Issue(certgen.Request{CommonName: "mallory", Client: true})
	if err != nil {
		t.Fatal(err)
	}
	bs := startBackends(t, 1)
	yaml := strings.NewReplacer("{{DIR}}", certs.dir, "{{EXTRA}}", `, client_ca_file: "`+certs.dir+`/clients.pem"`).Replace(httpsConfig)
	s, _ := startServer(t, yamlConfig(t, yaml, bs), Options{})
	url := "https://" + s.Addr("web").String() + "/"

	tests := []struct {
		name   string
		cert   *certgen.Cert
		wantOK bool
	}{
		{name: "certificate from the client CA", cert: alice, wantOK: true},
		{name: "certificate from another CA", cert: stranger},
		{name: "no certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := httpsClient(t, certs, tt.cert)
			res, err := c.Get(url)
			if err == nil {
				readAll(t, res)
			}
			if ok := err == nil && res.StatusCode == 200; ok != tt.wantOK {
				t.Errorf("got %v, want success %v", err, tt.wantOK)
			}
		})
	}
}

// readAll reads and closes a response's body.
func readAll(t *testing.T, res *http.Response) string {
	t.Helper()
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	return string(b)
}

// tlsVersions records the TLS version of each request.
type tlsVersions struct {
	mu   sync.Mutex
	seen []string
}

func (v *tlsVersions) Record(ex wire.Exchange, _ proxy.Record) {
	v.mu.Lock()
	v.seen = append(v.seen, string(ex.TLSVersion()))
	v.mu.Unlock()
}

// last returns the version of the last request recorded, waiting briefly
// for its record.
func (v *tlsVersions) last(t *testing.T) string {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		v.mu.Lock()
		n := len(v.seen)
		var s string
		if n > 0 {
			s = v.seen[n-1]
		}
		v.mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			return s
		}
		time.Sleep(10 * time.Millisecond)
	}
}
