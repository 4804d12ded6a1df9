package server

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/helios-lb/helios/internal/certgen"
)

// tlsBackend is an HTTPS backend with a certificate for backend.example
// from the test CA, offering h2 in ALPN or not, that answers with the
// SHA-256 of the request body and what it saw of the connection, and
// counts its connections.
type tlsBackend struct {
	addr  string
	conns atomic.Int64
}

func startTLSBackend(t *testing.T, certs *testCerts, h2 bool) *tlsBackend {
	t.Helper()
	cert, err := certs.ca.Issue(certgen.Request{Hosts: []string{"backend.example"}})
	if err != nil {
		t.Fatal(err)
	}
	b := &tlsBackend{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sum := sha256.New()
		n, _ := io.Copy(sum, r.Body)
		w.Header().Set("X-Proto", r.Proto)
		w.Header().Set("X-TLS", fmt.Sprint(r.TLS != nil))
		w.Header().Set("X-SNI", r.TLS.ServerName)
		w.Header().Set("X-Body-Bytes", fmt.Sprint(n))
		fmt.Fprintf(w, "%x", sum.Sum(nil))
	}))
	srv.EnableHTTP2 = h2
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert.TLS()}}
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			b.conns.Add(1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	b.addr = srv.Listener.Addr().String()
	return b
}

// TestUpstreamTLS forwards to HTTPS backends: HTTP/1.1 over TLS (kept
// alive, a buffered body partly in a file), HTTP/2 over TLS (protocol
// h2), and refuses what the transport does not trust or speak.
func TestUpstreamTLS(t *testing.T) {
	certs := newTestCerts(t)
	h1 := startTLSBackend(t, certs, false)
	h2 := startTLSBackend(t, certs, true)
	other := newTestCerts(t) // a CA the transport does not trust
	untrusted := startTLSBackend(t, other, false)
	yaml := strings.NewReplacer("{{CA}}", certs.dir+"/ca.pem", "{{H1}}", h1.addr, "{{H2}}", h2.addr, "{{BAD}}", untrusted.addr).Replace(`
listeners: [{name: web, address: "127.0.0.1:1"}]
routes:
  - {name: h1, match: {path_prefix: /h1/}, upstream: h1, request_buffering: "on"}
  - {name: h2, match: {path_prefix: /h2/}, upstream: h2, request_buffering: "on"}
  - {name: bad, match: {path_prefix: /bad/}, upstream: bad}
  - {name: noh2, match: {path_prefix: /noh2/}, upstream: noh2}
upstreams:
  - {name: h1, backends: [{address: "{{H1}}"}], transport: {tls: {ca_file: "{{CA}}", server_name: backend.example}}}
  - {name: h2, backends: [{address: "{{H2}}"}], transport: {protocol: h2, tls: {ca_file: "{{CA}}", server_name: backend.example}}}
  - {name: bad, backends: [{address: "{{BAD}}"}], transport: {tls: {ca_file: "{{CA}}", server_name: backend.example}}}
  - {name: noh2, backends: [{address: "{{H1}}"}], transport: {protocol: h2, tls: {ca_file: "{{CA}}", server_name: backend.example}}}
admin: {address: "off"}
`)
	_, base := startServer(t, yamlConfig(t, yaml, nil), Options{})
	tests := []struct {
		name      string
		path      string
		body      int
		wantProto string
	}{
		{name: "http1 GET", path: "/h1/a", wantProto: "HTTP/1.1"},
		{name: "http1 small body", path: "/h1/b", body: 1000, wantProto: "HTTP/1.1"},
		{name: "http1 body partly in a file", path: "/h1/c", body: 700 << 10, wantProto: "HTTP/1.1"},
		{name: "h2 GET", path: "/h2/a", wantProto: "HTTP/2.0"},
		{name: "h2 body partly in a file", path: "/h2/c", body: 700 << 10, wantProto: "HTTP/2.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := make([]byte, tt.body)
			rand.Read(body)
			resp, err := http.Post(base+tt.path, "application/octet-stream", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("status: got %d, want 200 (%s)", resp.StatusCode, got)
			}
			for h, want := range map[string]string{"X-Proto": tt.wantProto, "X-TLS": "true", "X-SNI": "backend.example", "X-Body-Bytes": fmt.Sprint(tt.body)} {
				if v := resp.Header.Get(h); v != want {
					t.Errorf("%s: got %q, want %q", h, v, want)
				}
			}
			if want := fmt.Sprintf("%x", sha256.Sum256(body)); string(got) != want {
				t.Errorf("body digest: got %s, want %s", got, want)
			}
		})
	}
	// Keep-alive over TLS: the HTTP/1.1 requests above shared few
	// connections (one per loop at most, as they came one at a time).
	if n := h1.conns.Load(); n < 1 || n > 2 {
		t.Errorf("TLS backend connections: got %d, want 1 or 2 (kept alive)", n)
	}
	if n := h2.conns.Load(); n < 1 || n > 2 {
		t.Errorf("h2 backend connections: got %d, want 1 or 2 (multiplexed)", n)
	}
	for _, tt := range []struct{ name, path string }{
		{"untrusted certificate", "/bad/x"},
		{"h2 to a backend without h2 in ALPN", "/noh2/x"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Get(base + tt.path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 502 {
				t.Errorf("status: got %d, want 502", resp.StatusCode)
			}
		})
	}
}
