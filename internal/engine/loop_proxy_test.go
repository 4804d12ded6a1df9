package engine

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/netpoll"
	"github.com/helios-lb/helios/internal/realip"
)

// The backend side of the engine, on every driver (run): the request and
// response heads as forwarded, bodies both ways, retries, backend
// failures, framing, stale pooled connections, upgrades and slow readers.

// loopTo is one backend at addr with the default transport options.
func loopTo(addr string) loopConfig {
	return loopConfig{backends: []string{addr}, to: defaultTransport}
}

func TestLoopProxyRequestHeaders(t *testing.T) { run(t, testLoopProxyRequestHeaders) }

func testLoopProxyRequestHeaders(t *testing.T, k netpoll.Kind) {
	tests := []struct {
		name    string
		req     string
		line    string
		want    map[string][]string
		absent  []string
		tlsFlag bool
		// trusted: the client (127.0.0.1) is a trusted proxy.
		trusted bool
	}{
		{
			name: "hop-by-hop stripped",
			req: "GET /p?q=1 HTTP/1.1\r\nHost: front.example:8080\r\nConnection: X-Drop, keep-alive\r\nX-Drop: 1\r\n" +
				"Keep-Alive: timeout=300\r\nProxy-Authorization: Basic eA==\r\nProxy: http://evil\r\nProxy-Connection: keep-alive\r\n" +
				"TE: trailers\r\nUpgrade: h2c\r\nX-Keep: yes\r\nAccept: */*\r\n\r\n",
			line:   "GET /p?q=1 HTTP/1.1",
			want:   map[string][]string{"host": {"front.example:8080"}, "x-keep": {"yes"}, "accept": {"*/*"}},
			absent: []string{"connection", "x-drop", "keep-alive", "proxy-authorization", "proxy", "proxy-connection", "te", "upgrade", "content-length", "transfer-encoding"},
		},
		{
			name: "forwarded headers from a client",
			req: "GET / HTTP/1.1\r\nHost: front.example\r\nX-Forwarded-For: 203.0.113.1\r\nX-Forwarded-For: 198.51.100.2, 192.0.2.3\r\n" +
				"X-Forwarded-Proto: https\r\nX-Forwarded-Host: evil.example\r\nForwarded: for=203.0.113.9\r\nX-Real-IP: 203.0.113.8\r\n\r\n",
			line: "GET / HTTP/1.1",
			want: map[string][]string{
				"x-forwarded-for":   {"127.0.0.1"},
				"x-forwarded-proto": {"http"},
				"x-forwarded-host":  {"front.example"},
				"host":              {"front.example"},
			},
			absent: []string{"forwarded", "x-real-ip"},
		},
		{
			name: "forwarded headers from a trusted proxy",
			req: "GET / HTTP/1.1\r\nHost: front.example\r\nX-Forwarded-For: 203.0.113.1\r\nX-Forwarded-For: 198.51.100.2, 192.0.2.3\r\n" +
				"X-Forwarded-Proto: https\r\nX-Forwarded-Host: public.example\r\nForwarded: for=203.0.113.9\r\nX-Real-IP: 203.0.113.8\r\n\r\n",
			line: "GET / HTTP/1.1",
			want: map[string][]string{
				"x-forwarded-for":   {"203.0.113.1, 198.51.100.2, 192.0.2.3, 127.0.0.1"},
				"x-forwarded-proto": {"https"},
				"x-forwarded-host":  {"public.example"},
				"forwarded":         {"for=203.0.113.9"},
				"x-real-ip":         {"203.0.113.8"},
				"host":              {"front.example"},
			},
			trusted: true,
		},
		{
			name:    "forwarded proto over TLS",
			req:     "GET / HTTP/1.1\r\nHost: front.example\r\n\r\n",
			line:    "GET / HTTP/1.1",
			want:    map[string][]string{"x-forwarded-for": {"127.0.0.1"}, "x-forwarded-proto": {"https"}},
			tlsFlag: true,
		},
		{
			name: "absolute-form target",
			req:  "GET http://origin.example:81/a/b?c HTTP/1.1\r\nHost: ignored.example\r\n\r\n",
			line: "GET /a/b?c HTTP/1.1",
			want: map[string][]string{"host": {"origin.example:81"}, "x-forwarded-host": {"origin.example:81"}},
		},
		{
			name:   "http/1.0 client without host, 1.1 upstream",
			req:    "GET /old HTTP/1.0\r\n\r\n",
			line:   "GET /old HTTP/1.1",
			want:   map[string][]string{"host": {"$backend"}},
			absent: []string{"x-forwarded-host", "connection"},
		},
		{
			name: "http/1.0 client with host",
			req:  "GET /old HTTP/1.0\r\nHost: old.example\r\n\r\n",
			line: "GET /old HTTP/1.1",
			want: map[string][]string{"host": {"old.example"}},
		},
		{
			name:   "body framing regenerated",
			req:    "POST /b HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
			line:   "POST /b HTTP/1.1",
			want:   map[string][]string{"content-length": {"3"}},
			absent: []string{"expect", "transfer-encoding"},
		},
		{
			name: "empty post gets a length",
			req:  "POST /b HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n",
			line: "POST /b HTTP/1.1",
			want: map[string][]string{"content-length": {"0"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			heads := make(chan string, 1)
			be := okBackend(t, heads)
			cfg := loopTo(be.addr)
			var tp *testTLS
			if tt.tlsFlag {
				tp = newTestTLS(t)
				cfg.opts.TLS = tp
			}
			if tt.trusted {
				cfg.opts.RealIP = realip.New([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, realip.XForwardedFor)
			}
			p := startLoopProxy(t, k, cfg)
			var c *rawClient
			if tp != nil {
				c = dialTLS(t, p.addr, tp)
			} else {
				c = dialRaw(t, p.addr)
			}
			c.send(tt.req)
			if r := c.read("GET"); r.status != 200 {
				t.Fatalf("got %v, want 200", r.status)
			}
			head := <-heads
			if line, _, _ := strings.Cut(head, "\r\n"); line != tt.line {
				t.Errorf("request line: got %q, want %q", line, tt.line)
			}
			f := headFields(head)
			for name, vs := range tt.want {
				if len(vs) == 1 && vs[0] == "$backend" {
					vs = []string{be.addr}
				}
				if !equalStrings(f[name], vs) {
					t.Errorf("%s: got %q, want %q", name, f[name], vs)
				}
			}
			for _, name := range tt.absent {
				if vs, ok := f[name]; ok {
					t.Errorf("%s: got %q, want it absent", name, vs)
				}
			}
			if rec := p.nextRec(t); rec.Status != 200 || rec.Err != nil || rec.Attempts != 1 {
				t.Errorf("record: got (%v, %v, %d attempts), want (200, nil, 1)", rec.Status, rec.Err, rec.Attempts)
			}
		})
	}
}

func TestLoopProxyResponseHeaders(t *testing.T) { run(t, testLoopProxyResponseHeaders) }

func testLoopProxyResponseHeaders(t *testing.T, k netpoll.Kind) {
	be := startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
		for readReqHead(br) != "" {
			io.WriteString(nc, "HTTP/1.1 201 Made It\r\nConnection: X-Hop, keep-alive\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\n"+
				"Proxy-Authenticate: Basic\r\nProxy-Connection: keep-alive\r\nUpgrade: h2c\r\nTE: x\r\nX-Keep: yes\r\n"+
				"Set-Cookie: a=1\r\nSet-Cookie: b=2\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	p := startLoopProxy(t, k, loopTo(be.addr))
	c := dialRaw(t, p.addr)
	c.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	head := c.readHead()
	if line, _, _ := strings.Cut(head, "\r\n"); line != "HTTP/1.1 201 Made It" {
		t.Errorf("status line: got %q, want %q", line, "HTTP/1.1 201 Made It")
	}
	f := headFields(head)
	for _, name := range []string{"connection", "x-hop", "keep-alive", "proxy-authenticate", "proxy-connection", "upgrade", "te"} {
		if vs, ok := f[name]; ok {
			t.Errorf("%s: got %q, want it absent", name, vs)
		}
	}
	if got := f["x-keep"]; !equalStrings(got, []string{"yes"}) {
		t.Errorf("x-keep: got %q, want [yes]", got)
	}
	if got := f["set-cookie"]; !equalStrings(got, []string{"a=1", "b=2"}) {
		t.Errorf("set-cookie: got %q, want [a=1 b=2]", got)
	}
	if got := f["content-length"]; !equalStrings(got, []string{"2"}) {
		t.Errorf("content-length: got %q, want [2]", got)
	}
}

func TestLoopProxyHTTPBackend(t *testing.T) { run(t, testLoopProxyHTTPBackend) }

func testLoopProxyHTTPBackend(t *testing.T, k netpoll.Kind) {
	hb, _ := newHTTPBackend(t, httpMux())
	p := startLoopProxy(t, k, loopTo(hb.Listener.Addr().String()))
	t.Run("chunked to 1.1 client, trailers kept", func(t *testing.T) {
		c := dialRaw(t, p.addr)
		c.send("GET /chunked HTTP/1.1\r\nHost: a\r\nTE: trailers\r\n\r\n")
		r := c.read("GET")
		if r.body != "part1,part2" || !r.chunked || r.close || r.trailer.Get("X-Sum") != "42" {
			t.Errorf("got (%q, chunked %v, close %v, trailer %v), want (%q, chunked, keep-alive, X-Sum 42)",
				r.body, r.chunked, r.close, r.trailer, "part1,part2")
		}
		c.send("GET /fixed HTTP/1.1\r\nHost: a\r\n\r\n")
		if r := c.read("GET"); r.body != "fixed" {
			t.Errorf("next: got %q, want %q", r.body, "fixed")
		}
	})
	t.Run("chunked to 1.0 client, until close", func(t *testing.T) {
		c := dialRaw(t, p.addr)
		c.send("GET /chunked HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
		r := c.read("GET")
		if r.body != "part1,part2" || r.chunked || !r.close {
			t.Errorf("got (%q, chunked %v, close %v), want (%q, not chunked, close)", r.body, r.chunked, r.close, "part1,part2")
		}
		c.expectClosed(time.Second)
	})
	t.Run("fixed to 1.0 client keeps alive", func(t *testing.T) {
		c := dialRaw(t, p.addr)
		for i := 0; i < 2; i++ {
			c.send("GET /fixed HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
			if r := c.read("GET"); r.body != "fixed" || r.close || r.header.Get("Connection") != "keep-alive" {
				t.Errorf("got (%q, close %v, %q), want (%q, keep-alive)", r.body, r.close, r.header.Get("Connection"), "fixed")
			}
		}
	})
	t.Run("head", func(t *testing.T) {
		c := dialRaw(t, p.addr)
		c.send("HEAD /head HTTP/1.1\r\nHost: a\r\n\r\n")
		r := c.read("HEAD")
		if r.status != 200 || r.header.Get("Content-Length") != "100" || r.body != "" {
			t.Errorf("got (%v, CL %q, %q), want (200, CL 100, empty)", r.status, r.header.Get("Content-Length"), r.body)
		}
		c.send("GET /fixed HTTP/1.1\r\nHost: a\r\n\r\n")
		if r := c.read("GET"); r.body != "fixed" {
			t.Errorf("next: got %q, want %q", r.body, "fixed")
		}
	})
	for _, code := range []int{204, 304} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			c := dialRaw(t, p.addr)
			c.send(fmt.Sprintf("GET /%d HTTP/1.1\r\nHost: a\r\n\r\n", code))
			if r := c.read("GET"); r.status != code || r.body != "" || r.chunked {
				t.Errorf("got (%v, %q, chunked %v), want (%v, empty, not chunked)", r.status, r.body, r.chunked, code)
			}
			c.send("GET /fixed HTTP/1.1\r\nHost: a\r\n\r\n")
			if r := c.read("GET"); r.body != "fixed" {
				t.Errorf("next: got %q, want %q", r.body, "fixed")
			}
		})
	}
	t.Run("small fixed request body", func(t *testing.T) {
		c := dialRaw(t, p.addr)
		c.send("POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello")
		r := c.read("POST")
		if r.body != "hello" || r.header.Get("X-Req-CL") != "5" {
			t.Errorf("got (%q, CL %q), want (%q, 5)", r.body, r.header.Get("X-Req-CL"), "hello")
		}
	})
	t.Run("largest buffered request body", func(t *testing.T) {
		body := bytes.Repeat([]byte("b"), maxLoopBody)
		c := dialRaw(t, p.addr)
		go func() {
			fmt.Fprintf(c.nc, "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n", len(body))
			c.nc.Write(body)
		}()
		if r := c.read("POST"); r.body != string(body) {
			t.Errorf("got %d bytes, want %d", len(r.body), len(body))
		}
		c.send("GET /fixed HTTP/1.1\r\nHost: a\r\n\r\n")
		if r := c.read("GET"); r.body != "fixed" {
			t.Errorf("next: got %q, want %q", r.body, "fixed")
		}
	})
	t.Run("large fixed request body", func(t *testing.T) {
		body := bytes.Repeat([]byte("0123456789abcdef"), 512<<10) // 8 MiB: more than maxLoopBody, so streamed
		c := dialRaw(t, p.addr)
		go func() {
			c.nc.Write([]byte(fmt.Sprintf("POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n", len(body))))
			c.nc.Write(body)
			c.nc.Write([]byte("GET /fixed HTTP/1.1\r\nHost: a\r\n\r\n"))
		}()
		r := c.read("POST")
		if sum := fmt.Sprintf("%x", sha256.Sum256(body)); r.header.Get("X-Req-Sum") != sum || r.body != string(body) {
			t.Errorf("got (%d bytes, backend sum %s), want (%d bytes, %s)", len(r.body), r.header.Get("X-Req-Sum"), len(body), sum)
		}
		if r := c.read("GET"); r.body != "fixed" {
			t.Errorf("pipelined next: got %q, want %q", r.body, "fixed")
		}
	})
	t.Run("chunked request with trailers", func(t *testing.T) {
		c := dialRaw(t, p.addr)
		c.send("POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n" +
			"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-Sum: 99\r\nHost: evil\r\n\r\n" +
			"GET /fixed HTTP/1.1\r\nHost: a\r\n\r\n")
		r := c.read("POST")
		if r.body != "hello world" || r.header.Get("X-Req-TE") != "chunked" || r.header.Get("X-Req-Trailer") != "X-Sum=99" {
			t.Errorf("got (%q, TE %q, trailer %q), want (%q, chunked, X-Sum=99)", r.body, r.header.Get("X-Req-TE"),
				r.header.Get("X-Req-Trailer"), "hello world")
		}
		if r := c.read("GET"); r.body != "fixed" {
			t.Errorf("pipelined next: got %q, want %q", r.body, "fixed")
		}
	})
	t.Run("malformed chunked request", func(t *testing.T) {
		c := dialRaw(t, p.addr)
		c.send("POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX\r\n0\r\n\r\n")
		if r := c.read("POST"); r.status != 400 {
			t.Errorf("got %v, want 400", r.status)
		}
		c.expectClosed(time.Second)
	})
	t.Run("large response", func(t *testing.T) {
		c := dialRaw(t, p.addr)
		for _, n := range []int{100 << 10, 3 << 20} {
			c.send(fmt.Sprintf("GET /size/%d HTTP/1.1\r\nHost: a\r\n\r\n", n))
			if r := c.read("GET"); len(r.body) != n || strings.Trim(r.body, "s") != "" {
				t.Errorf("got %d bytes, want %d", len(r.body), n)
			}
		}
	})
	t.Run("connection reuse", func(t *testing.T) {
		hb, conns := newHTTPBackend(t, httpMux())
		p := startLoopProxy(t, k, loopTo(hb.Listener.Addr().String()))
		for i := 0; i < 50; i++ {
			c := dialRaw(t, p.addr)
			c.send("GET /fixed HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
			if r := c.read("GET"); r.body != "fixed" {
				t.Fatalf("request %d: got %q, want %q", i, r.body, "fixed")
			}
		}
		if got := conns.Load(); got != 1 {
			t.Errorf("got %v backend connections, want 1", got)
		}
		if got := p.idleBackendConns(); got != 1 {
			t.Errorf("got %v idle connections, want 1", got)
		}
	})
}

// TestLoopProxyRetryDrops checks a response given up for a retry keeps
// its backend connection when the rest of a small body can be read at
// once, and closes it otherwise.
func TestLoopProxyRetryDrops(t *testing.T) { run(t, testLoopProxyRetryDrops) }

func testLoopProxyRetryDrops(t *testing.T, k netpoll.Kind) {
	tests := []struct {
		name      string
		resp      string
		wantConns int32
	}{
		{"small body kept", "HTTP/1.1 503 No\r\nContent-Length: 1000\r\n\r\n" + strings.Repeat("x", 1000), 1},
		{"empty body kept", "HTTP/1.1 503 No\r\nContent-Length: 0\r\n\r\n", 1},
		{"large body closed", "HTTP/1.1 503 No\r\nContent-Length: 100000\r\n\r\n" + strings.Repeat("x", 100000), 2},
		{"chunked body closed", "HTTP/1.1 503 No\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var n atomic.Int32
			be := startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
				for readReqHead(br) != "" {
					if n.Add(1) == 1 {
						io.WriteString(nc, tt.resp)
					} else {
						io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
					}
				}
			})
			cfg := loopConfig{backends: []string{be.addr, be.addr}, to: defaultTransport}
			cfg.retry.Attempts = 1
			cfg.retry.Statuses.Add(503)
			p := startLoopProxy(t, k, cfg)
			c := dialRaw(t, p.addr)
			c.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
			if r := c.read("GET"); r.status != 200 || r.body != "ok" {
				t.Fatalf("got (%v, %q), want (200, ok)", r.status, r.body)
			}
			if got := be.accepts.Load(); got != tt.wantConns {
				t.Errorf("got %v backend connections, want %v", got, tt.wantConns)
			}
			if rec := p.nextRec(t); rec.Attempts != 2 || rec.Status != 200 {
				t.Errorf("record: got (%d attempts, %v), want (2, 200)", rec.Attempts, rec.Status)
			}
		})
	}
}

// Backends that fail: TestMatrixScriptedBackendFailures.

func TestLoopProxyResponseFraming(t *testing.T) { run(t, testLoopProxyResponseFraming) }

func testLoopProxyResponseFraming(t *testing.T, k netpoll.Kind) {
	tests := []struct {
		name       string
		resp       string
		client     string
		wantBody   string
		wantStatus int
		chunked    bool
		close      bool
		absent     []string
		want       map[string][]string
	}{
		{
			name: "until close to 1.1 is chunked", resp: "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nstream until close",
			client: "GET / HTTP/1.1\r\nHost: a\r\n", wantBody: "stream until close", wantStatus: 200, chunked: true,
		},
		{
			name: "until close to 1.0 closes", resp: "HTTP/1.0 200 OK\r\n\r\nstream until close",
			client: "GET / HTTP/1.0\r\nConnection: keep-alive\r\n", wantBody: "stream until close", wantStatus: 200, close: true,
		},
		{
			name: "te gzip and length", resp: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 3\r\n\r\nraw bytes",
			client: "GET / HTTP/1.1\r\nHost: a\r\n", wantBody: "raw bytes", wantStatus: 200, chunked: true,
			absent: []string{"content-length"},
		},
		{
			name: "chunked and length", resp: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
			client: "GET / HTTP/1.1\r\nHost: a\r\n", wantBody: "hello", wantStatus: 200, chunked: true,
			absent: []string{"content-length"},
		},
		{
			name: "interim responses skipped", resp: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
			client: "GET / HTTP/1.1\r\nHost: a\r\n", wantBody: "ok", wantStatus: 200,
		},
		{
			name: "response head at the buffer boundary",
			resp: "HTTP/1.1 200 OK\r\nContent-Length: 5000\r\nX-Pad: " + strings.Repeat("p", readBufSize-len("HTTP/1.1 200 OK\r\nContent-Length: 5000\r\nX-Pad: ")-4) +
				"\r\n\r\n" + strings.Repeat("b", 5000),
			client: "GET / HTTP/1.1\r\nHost: a\r\n", wantBody: strings.Repeat("b", 5000), wantStatus: 200,
		},
		{
			// The final head is parsed behind an interim one and fills
			// the buffer: making room for the body must not move the
			// bytes the parsed fields point to.
			name: "large head behind an interim one",
			resp: "HTTP/1.1 103 Early Hints\r\nLink: </style.css>\r\n\r\n" +
				"HTTP/1.1 200 Fine\r\nX-First: first-value\r\nX-Pad: " + strings.Repeat("p", 3300) + "\r\nX-Last: last-value\r\nContent-Length: 4\r\n\r\nbody",
			client: "GET / HTTP/1.1\r\nHost: a\r\n", wantBody: "body", wantStatus: 200,
			want: map[string][]string{"x-first": {"first-value"}, "x-last": {"last-value"}, "x-pad": {strings.Repeat("p", 3300)}},
		},
		{
			name: "large response head", resp: "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("v", 20000) + "\r\nContent-Length: 2\r\n\r\nok",
			client: "GET / HTTP/1.1\r\nHost: a\r\n", wantBody: "ok", wantStatus: 200,
		},
		{
			name: "too large response head", resp: "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("v", 70000) + "\r\nContent-Length: 2\r\n\r\nok",
			client: "GET / HTTP/1.1\r\nHost: a\r\n", wantBody: string(bodyBadGateway), wantStatus: 502,
		},
		{
			name: "no response at all", resp: "",
			client: "GET / HTTP/1.1\r\nHost: a\r\n", wantBody: string(bodyBadGateway), wantStatus: 502,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			be := startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
				readReqHead(br)
				io.WriteString(nc, tt.resp)
			})
			p := startLoopProxy(t, k, loopTo(be.addr))
			c := dialRaw(t, p.addr)
			c.send(tt.client + "\r\n")
			head := c.readHead()
			resp, err := http.ReadResponse(bufio.NewReader(io.MultiReader(strings.NewReader(head), c.br)), nil)
			if err != nil {
				t.Fatalf("got %v reading %q", err, head)
			}
			body, err := io.ReadAll(resp.Body)
			if err != nil || string(body) != tt.wantBody || resp.StatusCode != tt.wantStatus {
				t.Errorf("got (%v, %q, %v), want (%v, %q, nil)", resp.StatusCode, trunc(body), err, tt.wantStatus, tt.wantBody)
			}
			if got := len(resp.TransferEncoding) > 0; got != tt.chunked {
				t.Errorf("chunked: got %v, want %v", got, tt.chunked)
			}
			if resp.Close != tt.close {
				t.Errorf("close: got %v, want %v", resp.Close, tt.close)
			}
			f := headFields(head)
			for _, name := range tt.absent {
				if vs, ok := f[name]; ok {
					t.Errorf("%s: got %q, want it absent", name, vs)
				}
			}
			for name, vs := range tt.want {
				if !equalStrings(f[name], vs) {
					t.Errorf("%s: got %q, want %q", name, trunc([]byte(strings.Join(f[name], ","))), trunc([]byte(strings.Join(vs, ","))))
				}
			}
			if tt.close {
				c.expectClosed(time.Second)
			}
		})
	}
}

// bodyBadGateway is the pipeline's 502 body.
var bodyBadGateway = []byte("502 Bad Gateway: the backend could not be reached or failed\n")

// TestLoopProxyStaleConnection checks a pooled connection the backend
// closed while it was idle is not used: the loop sees the close.
func TestLoopProxyStaleConnection(t *testing.T) { run(t, testLoopProxyStaleConnection) }

func testLoopProxyStaleConnection(t *testing.T, k netpoll.Kind) {
	tests := []struct {
		name       string
		idle       time.Duration
		req        string
		wantStatus int
		wantConns  int32
	}{
		{"get retried", 20 * time.Millisecond, "GET / HTTP/1.1\r\nHost: a\r\n\r\n", 200, 2},
		{"get after a long idle", 1100 * time.Millisecond, "GET / HTTP/1.1\r\nHost: a\r\n\r\n", 200, 2},
		{"post", 20 * time.Millisecond, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nhi", 200, 2},
		{"streamed upload", 20 * time.Millisecond, "PUT / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n", 200, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			be := startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
				h := readReqHead(br)
				if strings.Contains(h, "chunked") {
					for l, _ := br.ReadString('\n'); l != "0\r\n"; l, _ = br.ReadString('\n') {
					}
					br.ReadString('\n')
				} else if strings.Contains(h, "Content-Length: 2") {
					br.Discard(2)
				}
				io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			})
			p := startLoopProxy(t, k, loopTo(be.addr))
			c := dialRaw(t, p.addr)
			c.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
			if r := c.read("GET"); r.status != 200 {
				t.Fatalf("first: got %v, want 200", r.status)
			}
			time.Sleep(tt.idle)
			c.send(tt.req)
			if r := c.read("GET"); r.status != tt.wantStatus {
				t.Errorf("got %v, want %v", r.status, tt.wantStatus)
			}
			if got := be.accepts.Load(); got != tt.wantConns {
				t.Errorf("got %v backend connections, want %v", got, tt.wantConns)
			}
		})
	}
}

// TestLoopProxyEarlyAnswer has the backend answer a large (streamed)
// upload before it read it.
func TestLoopProxyEarlyAnswer(t *testing.T) { run(t, testLoopProxyEarlyAnswer) }

func testLoopProxyEarlyAnswer(t *testing.T, k netpoll.Kind) {
	stop := make(chan struct{})
	be := startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
		for h := readReqHead(br); h != ""; h = readReqHead(br) {
			if strings.HasPrefix(h, "POST") {
				io.WriteString(nc, "HTTP/1.1 413 Too Large\r\nContent-Length: 3\r\n\r\nbig")
				<-stop
				return
			}
			io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	t.Cleanup(func() { close(stop) })
	p := startLoopProxy(t, k, loopTo(be.addr))
	c := dialRaw(t, p.addr)
	c.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	c.read("GET")
	body := bytes.Repeat([]byte("u"), 32<<20)
	go func() {
		c.nc.Write([]byte(fmt.Sprintf("POST /up HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n", len(body))))
		c.nc.Write(body)
	}()
	if r := c.read("POST"); r.status != 413 || r.body != "big" {
		t.Errorf("got (%v, %q), want (413, %q)", r.status, r.body, "big")
	}
	c.expectClosed(2 * time.Second)
	for i := 0; i < 3; i++ {
		c2 := dialRaw(t, p.addr)
		c2.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
		if r := c2.read("GET"); r.status != 200 {
			t.Errorf("request %d after: got %v, want 200", i, r.status)
		}
	}
}
