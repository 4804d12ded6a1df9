package server

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/helios-lb/helios/internal/certgen"
	"github.com/helios-lb/helios/internal/proxyproto"
)

// ppBackend is a backend behind a PROXY protocol listener: every
// connection must open with a header, whose source it answers with
// (X-PP-Src), beside the protocol it was asked in (X-Proto); it counts
// its connections by the source they named.
type ppBackend struct {
	addr  string
	mu    sync.Mutex
	conns map[string]int
	bad   int // connections without a valid header
}

// ppConn is a connection whose PROXY header has been read.
type ppConn struct {
	net.Conn
	br  *bufio.Reader
	src net.Addr
}

func (c *ppConn) Read(p []byte) (int, error) { return c.br.Read(p) }
func (c *ppConn) RemoteAddr() net.Addr       { return c.src }

// ppListener reads each accepted connection's PROXY header.
type ppListener struct {
	net.Listener
	b *ppBackend
}

func (l *ppListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		br := bufio.NewReader(c)
		var h proxyproto.Header
		n := 0
		for n == 0 && err == nil {
			// One byte more than is buffered: what arrived, whole.
			if _, err = br.Peek(br.Buffered() + 1); err != nil && br.Buffered() == 0 {
				break
			}
			b, _ := br.Peek(br.Buffered())
			h, n, err = proxyproto.Parse(b)
		}
		if err != nil || h.Local {
			l.b.mu.Lock()
			l.b.bad++
			l.b.mu.Unlock()
			c.Close()
			continue
		}
		br.Discard(n)
		c.SetReadDeadline(time.Time{})
		src := h.Source.String()
		l.b.mu.Lock()
		l.b.conns[src]++
		l.b.mu.Unlock()
		return &ppConn{Conn: c, br: br, src: net.TCPAddrFromAddrPort(h.Source)}, nil
	}
}

// startPPBackend serves a PROXY protocol backend speaking proto: http1,
// h2c, tls (HTTP/1.1 over TLS) or h2 (over TLS), with a certificate for
// backend.example from certs.
func startPPBackend(t *testing.T, proto string, certs *testCerts) *ppBackend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &ppBackend{addr: ln.Addr().String(), conns: map[string]int{}}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-PP-Src", r.RemoteAddr)
		w.Header().Set("X-Proto", r.Proto)
		io.WriteString(w, "ok")
	})}
	var pl net.Listener = &ppListener{Listener: ln, b: b}
	switch proto {
	case "h2c":
		srv.Protocols = new(http.Protocols)
		srv.Protocols.SetUnencryptedHTTP2(true)
	case "tls", "h2":
		cert, err := certs.ca.Issue(certgen.Request{Hosts: []string{"backend.example"}})
		if err != nil {
			t.Fatal(err)
		}
		cfg := &tls.Config{Certificates: []tls.Certificate{cert.TLS()}, NextProtos: []string{"http/1.1"}}
		if proto == "h2" {
			cfg.NextProtos = []string{"h2"}
			if err := http2.ConfigureServer(srv, nil); err != nil {
				t.Fatal(err)
			}
		}
		pl = tls.NewListener(pl, cfg)
	}
	go srv.Serve(pl)
	t.Cleanup(func() { srv.Close() })
	return b
}

// connsBy returns how many connections named src.
func (b *ppBackend) connsBy(src string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.conns[src]
}

// TestProxyProtocolToBackends sends PROXY headers to backends of every
// protocol (HTTP/1.1, HTTP/1.1 over TLS, h2c, h2), v1 and v2, on both
// engines: each connection opens with a header naming the client the
// listener found (here from a trusted X-Forwarded-For) before its TLS
// handshake or HTTP/2 preface, and carries only that client's requests:
// a client's requests share its connection, another client gets its own.
func TestProxyProtocolToBackends(t *testing.T) {
	certs := newTestCerts(t)
	backends := map[string]*ppBackend{}
	for _, p := range []string{"http1", "tls", "h2c", "h2"} {
		backends[p] = startPPBackend(t, p, certs)
	}
	ca := certs.dir + "/ca.pem"
	yaml := `
listeners: [{name: web, address: "127.0.0.1:1", trusted_proxies: [127.0.0.0/8]}]
routes:
  - {name: http1, match: {path_prefix: /http1/}, upstream: http1}
  - {name: tls, match: {path_prefix: /tls/}, upstream: tls}
  - {name: h2c, match: {path_prefix: /h2c/}, upstream: h2c}
  - {name: h2, match: {path_prefix: /h2/}, upstream: h2}
upstreams:
  - {name: http1, backends: [{address: "` + backends["http1"].addr + `"}], transport: {proxy_protocol: v1}}
  - {name: tls, backends: [{address: "` + backends["tls"].addr + `"}], transport: {proxy_protocol: v2, tls: {ca_file: "` + ca + `", server_name: backend.example}}}
  - {name: h2c, backends: [{address: "` + backends["h2c"].addr + `"}], transport: {proxy_protocol: v2, protocol: h2c}}
  - {name: h2, backends: [{address: "` + backends["h2"].addr + `"}], transport: {proxy_protocol: v1, protocol: h2, tls: {ca_file: "` + ca + `", server_name: backend.example}}}
admin: {address: "off"}
`
	eachEngine(t, func(t *testing.T, engine string) {
		cfg := yamlConfig(t, yaml, nil)
		setEngine(cfg, engine)
		_, base := startServer(t, cfg, Options{})
		tr := &http.Transport{MaxConnsPerHost: 1} // one client connection: one loop, one pool
		t.Cleanup(tr.CloseIdleConnections)
		c := &http.Client{Transport: tr}
		for name, b := range backends {
			t.Run(name+"/"+engine, func(t *testing.T) {
				ask := func(client string) {
					t.Helper()
					req, _ := http.NewRequest("GET", base+"/"+name+"/x", nil)
					req.Header.Set("X-Forwarded-For", client)
					res, err := c.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					io.Copy(io.Discard, res.Body)
					res.Body.Close()
					if got := res.Header.Get("X-PP-Src"); res.StatusCode != 200 || got != client+":0" {
						t.Fatalf("got (%d, source %q), want (200, %s:0)", res.StatusCode, got, client)
					}
				}
				a, o := fmt.Sprintf("198.51.100.%d", len(engine)), fmt.Sprintf("203.0.113.%d", len(engine))
				for range 3 {
					ask(a)
				}
				ask(o)
				ask(a)
				if got := b.connsBy(a + ":0"); got != 1 {
					t.Errorf("connections for %s: got %d, want 1 (its requests share one)", a, got)
				}
				if got := b.connsBy(o + ":0"); got != 1 {
					t.Errorf("connections for %s: got %d, want 1 (a connection of its own)", o, got)
				}
				if b.bad != 0 {
					t.Errorf("connections without a valid header: got %d, want 0", b.bad)
				}
			})
		}
	})
}
