package h1

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/upstream"
	"github.com/helios-lb/helios/internal/wire"
)

// testProxy is a Server whose handler forwards every request to one
// backend through a Transport, like internal/proxy does without retries.
type testProxy struct {
	*testServer
	tr   *Transport
	be   *upstream.Backend
	errs chan error // errors from RoundTrip and Send, in order
}

func startProxy(t testing.TB, backendAddr string, to TransportOptions, so Options) *testProxy {
	t.Helper()
	p := &testProxy{
		tr:   NewTransport(to, []string{backendAddr}, nil),
		be:   &upstream.Backend{Addr: backendAddr, Index: 0},
		errs: make(chan error, 100),
	}
	t.Cleanup(p.tr.Close)
	p.testServer = startServer(t, HandlerFunc(p.serve), so)
	return p
}

func (p *testProxy) serve(ex wire.Exchange) {
	resp, err := p.tr.RoundTrip(ex, p.be)
	if err != nil {
		p.report(err)
		switch {
		case errors.Is(err, wire.ErrClientGone):
		case errors.Is(err, wire.ErrTimeout):
			ex.Respond(504, nil, []byte("timeout"))
		case errors.Is(err, wire.ErrBadRequest):
			ex.Respond(400, nil, []byte("bad request"))
		default:
			ex.Respond(502, nil, []byte("bad gateway"))
		}
		return
	}
	if _, err := resp.Send(); err != nil {
		p.report(err)
	}
}

func (p *testProxy) report(err error) {
	select {
	case p.errs <- err:
	default:
	}
}

// noErrors checks no exchange failed so far.
func (p *testProxy) noErrors(t testing.TB) {
	t.Helper()
	select {
	case err := <-p.errs:
		t.Errorf("got error %v, want none", err)
	default:
	}
}

// nextErr returns the next reported error.
func (p *testProxy) nextErr(t testing.TB) error {
	t.Helper()
	select {
	case err := <-p.errs:
		return err
	case <-time.After(testTimeout):
		t.Fatal("no error reported")
		return nil
	}
}

// defaultTransport keeps connections and bounds every wait.
var defaultTransport = TransportOptions{
	MaxIdlePerBackend:     8,
	IdleTimeout:           time.Minute,
	DialTimeout:           testTimeout,
	ResponseHeaderTimeout: testTimeout,
	ReadTimeout:           testTimeout,
}

// rawBackend runs a scripted function per accepted connection.
type rawBackend struct {
	addr    string
	accepts atomic.Int32
}

func startRawBackend(t testing.TB, serve func(nc net.Conn, br *bufio.Reader)) *rawBackend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &rawBackend{addr: ln.Addr().String()}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			b.accepts.Add(1)
			nc.SetDeadline(time.Now().Add(testTimeout))
			mu.Lock()
			conns = append(conns, nc)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer nc.Close()
				serve(nc, bufio.NewReader(nc))
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return b
}

// readReqHead reads a request head; "" at EOF.
func readReqHead(br *bufio.Reader) string {
	var sb strings.Builder
	for {
		line, err := br.ReadString('\n')
		sb.WriteString(line)
		if err != nil {
			return ""
		}
		if line == "\r\n" {
			return sb.String()
		}
	}
}

// headFields parses the field lines of a raw head into name -> values,
// names lower-cased, values in order.
func headFields(head string) map[string][]string {
	m := make(map[string][]string)
	lines := strings.Split(strings.TrimSuffix(head, "\r\n\r\n"), "\r\n")
	for _, l := range lines[1:] {
		name, value, _ := strings.Cut(l, ":")
		name = strings.ToLower(name)
		m[name] = append(m[name], strings.TrimSpace(value))
	}
	return m
}

// okBackend answers every request on a connection with a fixed 200 and
// hands each request head to heads.
func okBackend(t testing.TB, heads chan<- string) *rawBackend {
	return startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
		for {
			h := readReqHead(br)
			if h == "" {
				return
			}
			if heads != nil {
				heads <- h
			}
			io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
}

func TestProxyRequestHeaders(t *testing.T) {
	tests := []struct {
		name    string
		req     string
		line    string              // request line the backend must see
		want    map[string][]string // fields that must be there (lower-case names)
		absent  []string            // fields that must not
		tlsFlag bool
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
			name: "forwarded headers",
			req: "GET / HTTP/1.1\r\nHost: front.example\r\nX-Forwarded-For: 203.0.113.1\r\nX-Forwarded-For: 198.51.100.2, 192.0.2.3\r\n" +
				"X-Forwarded-Proto: https\r\nX-Forwarded-Host: evil.example\r\n\r\n",
			line: "GET / HTTP/1.1",
			want: map[string][]string{
				"x-forwarded-for":   {"203.0.113.1, 198.51.100.2, 192.0.2.3, 127.0.0.1"},
				"x-forwarded-proto": {"http"},
				"x-forwarded-host":  {"front.example"},
				"host":              {"front.example"},
			},
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
			// HTTP/1.1 requires a Host: the backend's address stands in.
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
			name: "body framing regenerated",
			req:  "POST /b HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\nabc",
			line: "POST /b HTTP/1.1",
			want: map[string][]string{"content-length": {"3"}},
			// Expect is this hop's: the body is already here.
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
			p := startProxy(t, be.addr, defaultTransport, Options{TLS: tt.tlsFlag})
			c := dialRaw(t, p.addr)
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
			p.noErrors(t)
		})
	}
}

func TestProxyResponseHeaders(t *testing.T) {
	be := startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
		for readReqHead(br) != "" {
			io.WriteString(nc, "HTTP/1.1 201 Made It\r\nConnection: X-Hop, keep-alive\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\n"+
				"Proxy-Authenticate: Basic\r\nProxy-Connection: keep-alive\r\nUpgrade: h2c\r\nTE: x\r\nX-Keep: yes\r\n"+
				"Set-Cookie: a=1\r\nSet-Cookie: b=2\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	p := startProxy(t, be.addr, defaultTransport, Options{})
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

// newHTTPBackend starts a net/http backend and counts its connections.
func newHTTPBackend(t testing.TB, h http.Handler) (*httptest.Server, *atomic.Int32) {
	var conns atomic.Int32
	s := httptest.NewUnstartedServer(h)
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s, &conns
}

func httpMux() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/chunked", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Sum")
		io.WriteString(w, "part1,")
		w.(http.Flusher).Flush()
		io.WriteString(w, "part2")
		w.Header().Set("X-Sum", "42")
	})
	mux.HandleFunc("/fixed", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "5")
		io.WriteString(w, "fixed")
	})
	mux.HandleFunc("/head", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		if r.Method != "HEAD" {
			w.Write(make([]byte, 100))
		}
	})
	mux.HandleFunc("/204", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	mux.HandleFunc("/304", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"x"`)
		w.WriteHeader(304)
	})
	mux.HandleFunc("/size/", func(w http.ResponseWriter, r *http.Request) {
		var n int
		fmt.Sscan(strings.TrimPrefix(r.URL.Path, "/size/"), &n)
		w.Header().Set("Content-Length", fmt.Sprint(n))
		w.Write(bytes.Repeat([]byte("s"), n))
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(400)
			return
		}
		w.Header().Set("X-Req-CL", fmt.Sprint(r.ContentLength))
		w.Header().Set("X-Req-TE", strings.Join(r.TransferEncoding, ","))
		var tr []string
		for k, v := range r.Trailer {
			tr = append(tr, k+"="+strings.Join(v, ","))
		}
		sort.Strings(tr)
		w.Header().Set("X-Req-Trailer", strings.Join(tr, ";"))
		w.Header().Set("X-Req-Sum", fmt.Sprintf("%x", sha256.Sum256(b)))
		w.Header().Set("Content-Length", fmt.Sprint(len(b)))
		w.Write(b)
	})
	return mux
}

func TestProxyHTTPBackend(t *testing.T) {
	hb, conns := newHTTPBackend(t, httpMux())
	p := startProxy(t, hb.Listener.Addr().String(), defaultTransport, Options{})
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
	t.Run("large fixed request body", func(t *testing.T) {
		body := bytes.Repeat([]byte("0123456789abcdef"), 512<<10) // 8 MiB
		c := dialRaw(t, p.addr)
		go func() {
			c.nc.Write([]byte(fmt.Sprintf("POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n", len(body))))
			c.nc.Write(body)
		}()
		r := c.read("POST")
		if sum := fmt.Sprintf("%x", sha256.Sum256(body)); r.header.Get("X-Req-Sum") != sum || r.body != string(body) {
			t.Errorf("got (%d bytes, backend sum %s), want (%d bytes, %s)", len(r.body), r.header.Get("X-Req-Sum"), len(body), sum)
		}
		c.send("GET /fixed HTTP/1.1\r\nHost: a\r\n\r\n")
		if r := c.read("GET"); r.body != "fixed" {
			t.Errorf("next: got %q, want %q", r.body, "fixed")
		}
	})
	t.Run("chunked request with trailers", func(t *testing.T) {
		c := dialRaw(t, p.addr)
		c.send("POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n" +
			"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-Sum: 99\r\nHost: evil\r\n\r\n")
		r := c.read("POST")
		if r.body != "hello world" || r.header.Get("X-Req-TE") != "chunked" || r.header.Get("X-Req-Trailer") != "X-Sum=99" {
			t.Errorf("got (%q, TE %q, trailer %q), want (%q, chunked, X-Sum=99)", r.body, r.header.Get("X-Req-TE"),
				r.header.Get("X-Req-Trailer"), "hello world")
		}
	})
	t.Run("malformed chunked request", func(t *testing.T) {
		c := dialRaw(t, p.addr)
		c.send("POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX\r\n0\r\n\r\n")
		if r := c.read("POST"); r.status != 400 {
			t.Errorf("got %v, want 400", r.status)
		}
		c.expectClosed(time.Second)
		if err := p.nextErr(t); !errors.Is(err, wire.ErrBadRequest) {
			t.Errorf("got %v, want %v", err, wire.ErrBadRequest)
		}
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
		p := startProxy(t, hb.Listener.Addr().String(), defaultTransport, Options{})
		for i := 0; i < 50; i++ {
			// A new client connection each time: the backend
			// connection is pooled across them.
			c := dialRaw(t, p.addr)
			c.send("GET /fixed HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
			if r := c.read("GET"); r.body != "fixed" {
				t.Fatalf("request %d: got %q, want %q", i, r.body, "fixed")
			}
		}
		if got := conns.Load(); got != 1 {
			t.Errorf("got %v backend connections, want 1", got)
		}
		if got := p.tr.IdleConns(0); got != 1 {
			t.Errorf("got %v idle connections, want 1", got)
		}
	})
	p.noErrors(t)
	_ = conns
}

// TestProxyDiscard checks Discard keeps a backend connection whose small
// body it can read at once and closes one with a large body.
func TestProxyDiscard(t *testing.T) {
	tests := []struct {
		name      string
		path      string
		wantConns int32
	}{
		{"small body kept", "/size/1000", 1},
		{"empty body kept", "/size/0", 1},
		{"large body closed", "/size/100000", 2},
		{"chunked body closed", "/chunked", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hb, conns := newHTTPBackend(t, httpMux())
			tr := NewTransport(defaultTransport, []string{hb.Listener.Addr().String()}, nil)
			defer tr.Close()
			be := &upstream.Backend{Addr: hb.Listener.Addr().String()}
			s := startServer(t, HandlerFunc(func(ex wire.Exchange) {
				resp, err := tr.RoundTrip(ex, be)
				if err != nil {
					t.Errorf("first attempt: %v", err)
					return
				}
				resp.Discard()
				if resp, err = tr.RoundTrip(ex, be); err != nil {
					t.Errorf("second attempt: %v", err)
					return
				}
				resp.Send()
			}), Options{})
			c := dialRaw(t, s.addr)
			c.send("GET " + tt.path + " HTTP/1.1\r\nHost: a\r\n\r\n")
			if r := c.read("GET"); r.status != 200 {
				t.Fatalf("got %v, want 200", r.status)
			}
			if got := conns.Load(); got != tt.wantConns {
				t.Errorf("got %v backend connections, want %v", got, tt.wantConns)
			}
		})
	}
}

func TestProxyBackendFailures(t *testing.T) {
	t.Run("closes mid fixed body", func(t *testing.T) {
		be := startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
			readReqHead(br)
			io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b")
		})
		p := startProxy(t, be.addr, defaultTransport, Options{})
		c := dialRaw(t, p.addr)
		c.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
		if _, err := c.tryRead("GET"); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("got %v, want %v", err, io.ErrUnexpectedEOF)
		}
		c.expectClosed(time.Second)
		if err := p.nextErr(t); !errors.Is(err, wire.ErrBackend) {
			t.Errorf("got %v, want %v", err, wire.ErrBackend)
		}
	})
	t.Run("closes mid chunked body", func(t *testing.T) {
		be := startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
			readReqHead(br)
			io.WriteString(nc, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
		})
		p := startProxy(t, be.addr, defaultTransport, Options{})
		c := dialRaw(t, p.addr)
		c.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
		if _, err := c.tryRead("GET"); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("got %v, want %v", err, io.ErrUnexpectedEOF)
		}
		c.expectClosed(time.Second)
	})
	t.Run("malformed response head", func(t *testing.T) {
		be := startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
			readReqHead(br)
			io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nx")
		})
		p := startProxy(t, be.addr, defaultTransport, Options{})
		c := dialRaw(t, p.addr)
		c.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
		if r := c.read("GET"); r.status != 502 {
			t.Errorf("got %v, want 502", r.status)
		}
		if err := p.nextErr(t); !errors.Is(err, wire.ErrBackend) {
			t.Errorf("got %v, want %v", err, wire.ErrBackend)
		}
	})
	t.Run("response header timeout", func(t *testing.T) {
		be := startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
			readReqHead(br)
			io.Copy(io.Discard, br)
		})
		to := defaultTransport
		to.ResponseHeaderTimeout = 100 * time.Millisecond
		p := startProxy(t, be.addr, to, Options{})
		c := dialRaw(t, p.addr)
		c.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
		if r := c.read("GET"); r.status != 504 {
			t.Errorf("got %v, want 504", r.status)
		}
		if err := p.nextErr(t); !errors.Is(err, wire.ErrTimeout) {
			t.Errorf("got %v, want %v", err, wire.ErrTimeout)
		}
	})
	t.Run("body read timeout", func(t *testing.T) {
		be := startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
			readReqHead(br)
			io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
			io.Copy(io.Discard, br)
		})
		to := defaultTransport
		to.ReadTimeout = 100 * time.Millisecond
		p := startProxy(t, be.addr, to, Options{})
		c := dialRaw(t, p.addr)
		c.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
		if _, err := c.tryRead("GET"); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("got %v, want %v", err, io.ErrUnexpectedEOF)
		}
		if err := p.nextErr(t); !errors.Is(err, wire.ErrTimeout) {
			t.Errorf("got %v, want %v", err, wire.ErrTimeout)
		}
	})
	t.Run("dial refused", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		p := startProxy(t, addr, defaultTransport, Options{})
		c := dialRaw(t, p.addr)
		c.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
		if r := c.read("GET"); r.status != 502 {
			t.Errorf("got %v, want 502", r.status)
		}
		if err := p.nextErr(t); !errors.Is(err, wire.ErrConnect) {
			t.Errorf("got %v, want %v", err, wire.ErrConnect)
		}
		// The client connection is fine: nothing was read wrongly.
		c.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
		if r := c.read("GET"); r.status != 502 {
			t.Errorf("got %v, want 502", r.status)
		}
	})
}

func TestProxyResponseFraming(t *testing.T) {
	tests := []struct {
		name       string
		resp       string // sent by the backend, which then closes
		client     string // request line and fields
		wantBody   string
		wantStatus int
		chunked    bool // to the client
		close      bool // announced to the client
		absent     []string
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
			// Transfer-Encoding wins, and the length is not passed on
			// next to a chunked encoding of our own.
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
			name: "large response head", resp: "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("v", 20000) + "\r\nContent-Length: 2\r\n\r\nok",
			client: "GET / HTTP/1.1\r\nHost: a\r\n", wantBody: "ok", wantStatus: 200,
		},
		{
			name: "too large response head", resp: "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("v", 70000) + "\r\nContent-Length: 2\r\n\r\nok",
			client: "GET / HTTP/1.1\r\nHost: a\r\n", wantBody: "bad gateway", wantStatus: 502,
		},
		{
			name: "no response at all", resp: "",
			client: "GET / HTTP/1.1\r\nHost: a\r\n", wantBody: "bad gateway", wantStatus: 502,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			be := startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
				readReqHead(br)
				io.WriteString(nc, tt.resp)
			})
			p := startProxy(t, be.addr, defaultTransport, Options{})
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
			if tt.close {
				c.expectClosed(time.Second)
			}
		})
	}
}

// TestProxyStaleConnection checks a pooled connection the backend closed
// while it was idle is replaced transparently for a GET, but a POST is
// not sent twice.
func TestProxyStaleConnection(t *testing.T) {
	tests := []struct {
		name       string
		idle       time.Duration
		req        string
		wantStatus int
		wantConns  int32
	}{
		{"get retried", 20 * time.Millisecond, "GET / HTTP/1.1\r\nHost: a\r\n\r\n", 200, 2},
		{"get after a long idle", 1100 * time.Millisecond, "GET / HTTP/1.1\r\nHost: a\r\n\r\n", 200, 2},
		// A request that cannot be replayed gets a connection checked
		// for the backend's close before it is used.
		{"post", 20 * time.Millisecond, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nhi", 200, 2},
		{"streamed upload", 20 * time.Millisecond, "PUT / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n", 200, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// One request per connection, announced as keep-alive, then
			// the backend closes: what an idle timeout does.
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
			p := startProxy(t, be.addr, defaultTransport, Options{})
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

// TestProxyEarlyAnswer has the backend answer before it read the request
// body.
func TestProxyEarlyAnswer(t *testing.T) {
	tests := []struct {
		name    string
		backend func(nc net.Conn, br *bufio.Reader, stop <-chan struct{})
	}{
		{
			// Answers and keeps the connection without reading the body:
			// Helios must stop streaming and not reuse the connection.
			name: "keeps connection, never reads", backend: func(nc net.Conn, br *bufio.Reader, stop <-chan struct{}) {
				for h := readReqHead(br); h != ""; h = readReqHead(br) {
					if strings.HasPrefix(h, "POST") {
						io.WriteString(nc, "HTTP/1.1 413 Too Large\r\nContent-Length: 3\r\n\r\nbig")
						<-stop
						return
					}
					io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				}
			},
		},
		{
			name: "answers and closes", backend: func(nc net.Conn, br *bufio.Reader, _ <-chan struct{}) {
				for h := readReqHead(br); h != ""; h = readReqHead(br) {
					if strings.HasPrefix(h, "POST") {
						io.WriteString(nc, "HTTP/1.1 413 Too Large\r\nContent-Length: 3\r\nConnection: close\r\n\r\nbig")
						return
					}
					io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stop := make(chan struct{})
			be := startRawBackend(t, func(nc net.Conn, br *bufio.Reader) { tt.backend(nc, br, stop) })
			t.Cleanup(func() { close(stop) })
			p := startProxy(t, be.addr, defaultTransport, Options{})
			c := dialRaw(t, p.addr)
			// Warm the pool so the upload goes over a pooled connection.
			c.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
			c.read("GET")
			// Larger than loopback socket buffers can hold, so the
			// body cannot all be written while the backend ignores it.
			body := bytes.Repeat([]byte("u"), 32<<20)
			go func() {
				c.nc.Write([]byte(fmt.Sprintf("POST /up HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n", len(body))))
				c.nc.Write(body)
			}()
			if r := c.read("POST"); r.status != 413 || r.body != "big" {
				t.Errorf("got (%v, %q), want (413, %q)", r.status, r.body, "big")
			}
			// The rest of the body cannot be told from a next request.
			c.expectClosed(2 * time.Second)
			// And the backend connection that carried it is not reused.
			for i := 0; i < 3; i++ {
				c2 := dialRaw(t, p.addr)
				c2.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
				if r := c2.read("GET"); r.status != 200 {
					t.Errorf("request %d after: got %v, want 200", i, r.status)
				}
			}
		})
	}
}

// TestProxySlowUpload checks the response header timeout counts from the
// end of the request, not from its head: an upload slower than the
// timeout must not fail while the backend keeps reading it.
func TestProxySlowUpload(t *testing.T) {
	hb, _ := newHTTPBackend(t, httpMux())
	to := defaultTransport
	to.ResponseHeaderTimeout = 300 * time.Millisecond
	p := startProxy(t, hb.Listener.Addr().String(), to, Options{})
	c := dialRaw(t, p.addr)
	c.send("POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n")
	for i := 0; i < 6; i++ {
		c.send("5\r\nchunk\r\n")
		time.Sleep(100 * time.Millisecond)
	}
	c.send("0\r\n\r\n")
	if r := c.read("POST"); r.status != 200 || r.body != strings.Repeat("chunk", 6) {
		t.Errorf("got (%v, %q), want (200, %q)", r.status, r.body, strings.Repeat("chunk", 6))
	}
	p.noErrors(t)
}

// TestProxyStalledUpload checks who is blamed when an upload stalls: a
// backend that stops reading and never answers is a backend timeout; a
// client that stops sending is the client's doing, whatever the response
// header timeout.
func TestProxyStalledUpload(t *testing.T) {
	tests := []struct {
		name    string
		backend func(nc net.Conn, br *bufio.Reader, stop <-chan struct{})
		body    int // bytes of a 64 MiB body the client sends
		status  int // 0: no answer wanted, only the close
		wantErr error
		notErr  error
	}{
		{
			name: "backend stops reading",
			backend: func(nc net.Conn, br *bufio.Reader, stop <-chan struct{}) {
				readReqHead(br)
				<-stop
			},
			body: 64 << 20, status: 504, wantErr: wire.ErrTimeout, notErr: wire.ErrClientGone,
		},
		{
			name: "client stops sending",
			backend: func(nc net.Conn, br *bufio.Reader, _ <-chan struct{}) {
				readReqHead(br)
				io.Copy(io.Discard, br)
			},
			body: 10000, wantErr: wire.ErrClientGone, notErr: wire.ErrTimeout,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stop := make(chan struct{})
			be := startRawBackend(t, func(nc net.Conn, br *bufio.Reader) { tt.backend(nc, br, stop) })
			t.Cleanup(func() { close(stop) })
			to := defaultTransport
			to.ResponseHeaderTimeout = 100 * time.Millisecond
			p := startProxy(t, be.addr, to, Options{IdleTimeout: 400 * time.Millisecond})
			c := dialRaw(t, p.addr)
			go func() {
				io.WriteString(c.nc, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 67108864\r\n\r\n")
				c.nc.Write(make([]byte, tt.body))
			}()
			err := p.nextErr(t)
			if !errors.Is(err, tt.wantErr) || errors.Is(err, tt.notErr) {
				t.Errorf("got %v, want %v and not %v", err, tt.wantErr, tt.notErr)
			}
			if tt.status != 0 {
				if r, err := c.tryRead("POST"); err != nil || r.status != tt.status {
					t.Errorf("got (%v, %v), want %v", r.status, err, tt.status)
				}
			}
			c.nc.SetReadDeadline(time.Now().Add(2 * time.Second))
			io.Copy(io.Discard, c.br)
		})
	}
}

// TestProxyPipelinedResponseNotHeld checks a response is sent while the
// backend works on the next pipelined request.
func TestProxyPipelinedResponseNotHeld(t *testing.T) {
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/fast", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "fast") })
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		<-release
		io.WriteString(w, "slow")
	})
	hb, _ := newHTTPBackend(t, mux)
	p := startProxy(t, hb.Listener.Addr().String(), defaultTransport, Options{})
	c := dialRaw(t, p.addr)
	c.send("GET /fast HTTP/1.1\r\nHost: a\r\n\r\nGET /slow HTTP/1.1\r\nHost: a\r\n\r\n")
	c.nc.SetReadDeadline(time.Now().Add(2 * time.Second))
	r, err := c.tryRead("GET")
	close(release)
	if err != nil || r.body != "fast" {
		t.Fatalf("got (%q, %v), want the first response while the second is pending", r.body, err)
	}
	c.nc.SetReadDeadline(time.Now().Add(testTimeout))
	if r := c.read("GET"); r.body != "slow" {
		t.Errorf("got %q, want %q", r.body, "slow")
	}
}

func TestProxyUpgrade(t *testing.T) {
	heads := make(chan string, 1)
	be := startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
		heads <- readReqHead(br)
		io.WriteString(nc, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: x\r\n\r\nhello-from-backend;")
		buf := make([]byte, 1024)
		for {
			n, err := br.Read(buf)
			if n > 0 {
				io.WriteString(nc, "echo:"+string(buf[:n])+";")
			}
			if err != nil {
				return
			}
		}
	})
	p := startProxy(t, be.addr, defaultTransport, Options{IdleTimeout: time.Second, ReadHeaderTimeout: time.Second})
	c := dialRaw(t, p.addr)
	// Bytes right behind the request belong to the new protocol.
	c.send("GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: k\r\n\r\nearly")
	head := c.readHead()
	f := headFields(head)
	if !strings.HasPrefix(head, "HTTP/1.1 101 ") || !equalStrings(f["upgrade"], []string{"websocket"}) ||
		!equalStrings(f["connection"], []string{"Upgrade"}) || !equalStrings(f["sec-websocket-accept"], []string{"x"}) {
		t.Fatalf("got %q, want a 101 with Upgrade: websocket and Connection: Upgrade", head)
	}
	bh := headFields(<-heads)
	if !equalStrings(bh["upgrade"], []string{"websocket"}) || !equalStrings(bh["connection"], []string{"Upgrade"}) {
		t.Errorf("backend got %v, want Upgrade and Connection: Upgrade", bh)
	}
	want := "hello-from-backend;echo:early;"
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c.br, got); err != nil || string(got) != want {
		t.Fatalf("got (%q, %v), want %q", got, err, want)
	}
	// Bytes both ways, past the server's idle and header timeouts.
	for i := 0; i < 3; i++ {
		msg := fmt.Sprintf("ping%d", i)
		c.send(msg)
		want := "echo:" + msg + ";"
		got := make([]byte, len(want))
		if _, err := io.ReadFull(c.br, got); err != nil || string(got) != want {
			t.Fatalf("got (%q, %v), want %q", got, err, want)
		}
		if i == 1 {
			time.Sleep(1200 * time.Millisecond)
		}
	}
	c.nc.(*net.TCPConn).CloseWrite()
	c.expectClosed(2 * time.Second)
}

func TestProxyUpgradeRefused(t *testing.T) {
	// A 101 to a request that did not ask for it is a backend fault.
	be := startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
		readReqHead(br)
		io.WriteString(nc, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n")
	})
	p := startProxy(t, be.addr, defaultTransport, Options{})
	c := dialRaw(t, p.addr)
	c.send("GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n")
	if r := c.read("GET"); r.status != 502 {
		t.Errorf("got %v, want 502", r.status)
	}
}

// keepAliveLoop is a client, proxy and backend (on this engine) over
// loopback, with the client in keep-alive.
type keepAliveLoop struct {
	c   *rawClient
	req []byte
	buf []byte
}

var (
	benchHeader = []byte("Content-Type: text/plain\r\n")
	benchBody   = []byte("hello, world\n")
)

func newKeepAliveLoop(t testing.TB) *keepAliveLoop {
	backend := startServer(t, HandlerFunc(func(ex wire.Exchange) {
		ex.Respond(200, benchHeader, benchBody)
	}), Options{IdleTimeout: time.Minute, WriteTimeout: time.Minute})
	p := startProxy(t, backend.addr, defaultTransport, Options{
		ReadHeaderTimeout: time.Minute, IdleTimeout: time.Minute, WriteTimeout: time.Minute,
	})
	l := &keepAliveLoop{
		c:   dialRaw(t, p.addr),
		req: []byte("GET /bench HTTP/1.1\r\nHost: bench.example\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n"),
	}
	l.c.nc.SetDeadline(time.Time{})
	// Learn the response size once, then read exactly that much.
	l.c.nc.Write(l.req)
	size := len(l.c.readHead()) + len(benchBody)
	l.c.br.Discard(len(benchBody))
	l.buf = make([]byte, size)
	return l
}

func (l *keepAliveLoop) roundTrip() error {
	if _, err := l.c.nc.Write(l.req); err != nil {
		return err
	}
	_, err := io.ReadFull(l.c.br, l.buf)
	return err
}

func BenchmarkProxyRoundTrip(b *testing.B) {
	l := newKeepAliveLoop(b)
	b.ReportAllocs()
	for b.Loop() {
		if err := l.roundTrip(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestProxyRoundTripAllocs checks the steady keep-alive proxy path does
// not allocate per request (client, proxy and backend all count; an
// average under one per round trip leaves room for the runtime's own).
func TestProxyRoundTripAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool allocate")
	}
	l := newKeepAliveLoop(t)
	for i := 0; i < 100; i++ {
		if err := l.roundTrip(); err != nil {
			t.Fatal(err)
		}
	}
	allocs := testing.AllocsPerRun(500, func() {
		if err := l.roundTrip(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs >= 0.5 {
		t.Errorf("got %v allocs per round trip, want 0", allocs)
	}
}

// TestProxySlowReader checks a large body (the splice path) reaches a
// client that reads more slowly than the backend sends: the backend read
// timeout bounds waits for the backend, not the time the client takes.
func TestProxySlowReader(t *testing.T) {
	hb, _ := newHTTPBackend(t, httpMux())
	to := defaultTransport
	to.ReadTimeout = 500 * time.Millisecond
	p := startProxy(t, hb.Listener.Addr().String(), to, Options{WriteTimeout: 5 * time.Second})
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		// A small receive buffer makes the client the bottleneck.
		rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 64<<10) })
		return nil
	}}
	nc, err := d.Dial("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(testTimeout))
	const size = 8 << 20
	fmt.Fprintf(nc, "GET /size/%d HTTP/1.1\r\nHost: a\r\n\r\n", size)
	resp, err := http.ReadResponse(bufio.NewReaderSize(nc, 16<<10), nil)
	if err != nil {
		t.Fatal(err)
	}
	// At most about 3 MB/s: the body takes several read timeouts, and
	// 4 MiB more than one.
	buf := make([]byte, 64<<10)
	var got int
	for {
		n, err := resp.Body.Read(buf)
		got += n
		if err != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got != size {
		t.Errorf("got %d bytes, want %d", got, size)
	}
	p.noErrors(t)
}
