package engine

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/netpoll"
	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/wire"
)

// The client side of the engine, on every driver (run): keep-alive,
// pipelining, reading heads, timeouts, in-process handlers and shutdown.
// Fixed answers come from the pipeline's respond routes, bodies are echoed
// by a backend.

func TestLoopKeepAlive(t *testing.T) { run(t, testLoopKeepAlive) }

func testLoopKeepAlive(t *testing.T, k netpoll.Kind) {
	tests := []struct {
		name      string
		req       string // sent twice
		wantClose bool
		wantConn  string
	}{
		{"http/1.1", "GET /fixed/a HTTP/1.1\r\nHost: x\r\n\r\n", false, ""},
		{"http/1.1 close", "GET /fixed/a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", true, ""},
		{"http/1.0", "GET /fixed/a HTTP/1.0\r\n\r\n", true, ""},
		{"http/1.0 keep-alive", "GET /fixed/a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", false, "keep-alive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := startLoopProxy(t, k, loopConfig{})
			c := dialRaw(t, p.addr)
			for i := 0; i < 2; i++ {
				c.send(tt.req)
				r := c.read("GET")
				if r.status != 200 || r.body != "fixed" {
					t.Fatalf("got (%v, %q), want (200, %q)", r.status, r.body, "fixed")
				}
				if got := r.header.Get("Connection"); got != tt.wantConn || r.close != tt.wantClose {
					t.Errorf("Connection: got (%q, close %v), want (%q, close %v)", got, r.close, tt.wantConn, tt.wantClose)
				}
				if r.header.Get("Date") == "" || r.header.Get("X-Test") != "1" {
					t.Errorf("header: got %v, want Date and X-Test", r.header)
				}
				if rec := p.nextRec(t); rec.Status != 200 || rec.Route == nil || rec.Route.Name != "fixed" {
					t.Errorf("record: got (%v, %v), want (200, route fixed)", rec.Status, rec.Route)
				}
				if tt.wantClose {
					c.expectClosed(time.Second)
					return
				}
			}
			c.expectOpen(50 * time.Millisecond)
		})
	}
}

func TestLoopPipelining(t *testing.T) { run(t, testLoopPipelining) }

func testLoopPipelining(t *testing.T, k netpoll.Kind) {
	hb, _ := newHTTPBackend(t, httpMux())
	p := startLoopProxy(t, k, loopConfig{backends: []string{hb.Listener.Addr().String()}, to: defaultTransport})
	c := dialRaw(t, p.addr)
	c.send("GET /fixed/1 HTTP/1.1\r\nHost: x\r\n\r\n" +
		"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello" +
		"HEAD /fixed/3 HTTP/1.1\r\nHost: x\r\n\r\n" +
		"GET /fixed HTTP/1.1\r\nHost: x\r\n\r\n" +
		"HEAD /head HTTP/1.1\r\nHost: x\r\n\r\n" +
		"GET /fixed/6 HTTP/1.1\r\nHost: x\r\n\r\n" +
		// Chunked: streamed to the backend on the loop, and the
		// requests behind it are served after it, in order.
		"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n" +
		"GET /fixed/8 HTTP/1.1\r\nHost: x\r\n\r\n" +
		"GET /fixed HTTP/1.1\r\nHost: x\r\n\r\n")
	want := []struct {
		method, body string
	}{
		{"GET", "fixed"}, {"POST", "hello"}, {"HEAD", ""}, {"GET", "fixed"}, {"HEAD", ""},
		{"GET", "fixed"}, {"POST", "abc"}, {"GET", "fixed"}, {"GET", "fixed"},
	}
	for i, w := range want {
		r := c.read(w.method)
		if r.status != 200 || r.body != w.body {
			t.Errorf("response %d: got (%v, %q), want (200, %q)", i, r.status, r.body, w.body)
		}
	}
	c.expectOpen(50 * time.Millisecond)
}

// TestLoopPipeliningMany sends many pipelined requests in one write,
// proxied and fixed ones interleaved, and checks every answer comes back
// in order.
func TestLoopPipeliningMany(t *testing.T) { run(t, testLoopPipeliningMany) }

func testLoopPipeliningMany(t *testing.T, k netpoll.Kind) {
	hb, conns := newHTTPBackend(t, httpMux())
	p := startLoopProxy(t, k, loopConfig{backends: []string{hb.Listener.Addr().String()}, to: defaultTransport})
	c := dialRaw(t, p.addr)
	const n = 200
	var sb strings.Builder
	for i := 0; i < n; i++ {
		if i%3 == 0 {
			fmt.Fprintf(&sb, "GET /fixed/%d HTTP/1.1\r\nHost: x\r\n\r\n", i)
		} else {
			fmt.Fprintf(&sb, "GET /size/%d HTTP/1.1\r\nHost: x\r\n\r\n", i)
		}
	}
	go c.nc.Write([]byte(sb.String()))
	for i := 0; i < n; i++ {
		r := c.read("GET")
		want := "fixed"
		if i%3 != 0 {
			want = strings.Repeat("s", i)
		}
		if r.status != 200 || r.body != want {
			t.Fatalf("response %d: got (%v, %d bytes), want (200, %d bytes)", i, r.status, len(r.body), len(want))
		}
	}
	if got := conns.Load(); got != 1 {
		t.Errorf("got %d backend connections, want 1", got)
	}
}

func TestLoopSplitHead(t *testing.T) { run(t, testLoopSplitHead) }

func testLoopSplitHead(t *testing.T, k netpoll.Kind) {
	hb, _ := newHTTPBackend(t, httpMux())
	p := startLoopProxy(t, k, loopConfig{backends: []string{hb.Listener.Addr().String()}, to: defaultTransport,
		opts: Options{ReadHeaderTimeout: 5 * time.Second}})
	c := dialRaw(t, p.addr)
	req := "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello world"
	for i := 0; i < len(req); i++ {
		c.send(req[i : i+1])
		if i%8 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	if r := c.read("POST"); r.status != 200 || r.body != "hello world" {
		t.Errorf("got (%v, %q), want (200, %q)", r.status, r.body, "hello world")
	}
}

// TestLoopHeadFillsBuffer sends heads whose end falls at or near the end
// of the read buffer (a client connection starts with headBufSize and
// grows), followed by a body the loop buffers itself.
func TestLoopHeadFillsBuffer(t *testing.T) { run(t, testLoopHeadFillsBuffer) }

func testLoopHeadFillsBuffer(t *testing.T, k netpoll.Kind) {
	hb, _ := newHTTPBackend(t, httpMux())
	p := startLoopProxy(t, k, loopConfig{backends: []string{hb.Listener.Addr().String()}, to: defaultTransport})
	for _, size := range []int{headBufSize - 1, headBufSize, headBufSize + 1, readBufSize - 100, readBufSize - 1, readBufSize, readBufSize + 1, 2 * readBufSize} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			c := dialRaw(t, p.addr)
			head := "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 20000\r\nX-Pad: "
			head += strings.Repeat("p", size-len(head)-4) + "\r\n\r\n"
			if len(head) != size {
				t.Fatalf("head is %v bytes, want %v", len(head), size)
			}
			body := strings.Repeat("0123456789", 2000)
			c.send(head)
			time.Sleep(10 * time.Millisecond)
			c.send(body)
			if r := c.read("POST"); r.status != 200 || r.body != body {
				t.Errorf("got (%v, %d bytes), want (200, %d bytes)", r.status, len(r.body), len(body))
			}
		})
	}
}

func TestLoopHeadErrors(t *testing.T) { run(t, testLoopHeadErrors) }

func testLoopHeadErrors(t *testing.T, k netpoll.Kind) {
	tests := []struct {
		name   string
		opts   Options
		first  string
		req    string
		status int
	}{
		{"bad request", Options{}, "", "GET / HTTP/1.1\r\n\r\n", 400},
		{"bad request after a good one", Options{}, "GET /fixed/ HTTP/1.1\r\nHost: x\r\n\r\n", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400},
		{"smuggling attempt", Options{}, "", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
		{"version", Options{}, "", "GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505},
		{"te", Options{}, "", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
		{"huge head", Options{MaxHeaderBytes: 1024}, "", "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("b", 8000) + "\r\n\r\n", 431},
		{"huge head default limit", Options{}, "", "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("b", 70<<10) + "\r\n\r\n", 431},
		{"head over limit in one read", Options{MaxHeaderBytes: 1024}, "", "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("b", 2000) + "\r\n\r\n", 431},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := startLoopProxy(t, k, loopConfig{opts: tt.opts})
			c := dialRaw(t, p.addr)
			if tt.first != "" {
				c.send(tt.first)
				c.read("GET")
			}
			c.send(tt.req)
			r := c.read("GET")
			if r.status != tt.status {
				t.Errorf("got %v, want %v", r.status, tt.status)
			}
			if !r.close {
				t.Errorf("got keep-alive, want Connection: close")
			}
			if d, err := http.ParseTime(r.header.Get("Date")); err != nil || time.Since(d) > time.Minute {
				t.Errorf("Date: got %q, want now", r.header.Get("Date"))
			}
			c.expectClosed(time.Second)
		})
	}
}

func TestLoopTimeouts(t *testing.T) { run(t, testLoopTimeouts) }

func testLoopTimeouts(t *testing.T, k netpoll.Kind) {
	t.Run("stalled head gets 408", func(t *testing.T) {
		p := startLoopProxy(t, k, loopConfig{opts: Options{ReadHeaderTimeout: 100 * time.Millisecond}})
		c := dialRaw(t, p.addr)
		start := time.Now()
		c.send("GET / HTTP/1.1\r\nHost:")
		r := c.read("GET")
		if r.status != 408 || !r.close {
			t.Errorf("got (%v, close %v), want (408, close true)", r.status, r.close)
		}
		if el := time.Since(start); el < 90*time.Millisecond {
			t.Errorf("408 after %v, want at least the timeout", el)
		}
		c.expectClosed(time.Second)
	})
	t.Run("read timeout bounds the head too", func(t *testing.T) {
		p := startLoopProxy(t, k, loopConfig{opts: Options{ReadTimeout: 100 * time.Millisecond}})
		c := dialRaw(t, p.addr)
		c.send("GET / HTTP/1.1\r\nHost:")
		c.nc.SetReadDeadline(time.Now().Add(2 * time.Second))
		if r, err := c.tryRead("GET"); err != nil || r.status != 408 {
			t.Errorf("got (%v, %v), want 408", r.status, err)
		}
	})
	t.Run("idle timeout bounds a stalled head without a header timeout", func(t *testing.T) {
		p := startLoopProxy(t, k, loopConfig{opts: Options{IdleTimeout: 100 * time.Millisecond}})
		c := dialRaw(t, p.addr)
		c.send("GET / HTTP/1.1\r\nHost:")
		c.nc.SetReadDeadline(time.Now().Add(2 * time.Second))
		if r, err := c.tryRead("GET"); err != nil || r.status != 408 {
			t.Errorf("got (%v, %v), want 408", r.status, err)
		}
	})
	t.Run("idle timeout bounds a stalled pipelined head", func(t *testing.T) {
		for _, first := range []string{"GET /fixed/ HTTP/1.1\r\nHost: x\r\n\r\n", "GET /up HTTP/1.1\r\nHost: x\r\n\r\n"} {
			be := okBackend(t, nil)
			cfg := loopTo(be.addr)
			cfg.opts.IdleTimeout = 100 * time.Millisecond
			p := startLoopProxy(t, k, cfg)
			c := dialRaw(t, p.addr)
			// An answer, then the start of a head that never ends.
			c.send(first + "GET / HTTP/1.1\r\nHost:")
			c.read("GET")
			c.nc.SetReadDeadline(time.Now().Add(2 * time.Second))
			if r, err := c.tryRead("GET"); err != nil || r.status != 408 {
				t.Errorf("after %q: got (%v, %v), want 408", first, r.status, err)
			}
		}
	})
	t.Run("idle connection closed silently", func(t *testing.T) {
		p := startLoopProxy(t, k, loopConfig{opts: Options{IdleTimeout: 150 * time.Millisecond}})
		c := dialRaw(t, p.addr)
		c.send("GET /fixed/ HTTP/1.1\r\nHost: x\r\n\r\n")
		c.read("GET")
		c.expectOpen(50 * time.Millisecond)
		c.expectClosed(2 * time.Second)
	})
	t.Run("idle wait not cut by the read timeout", func(t *testing.T) {
		p := startLoopProxy(t, k, loopConfig{opts: Options{ReadTimeout: 100 * time.Millisecond, IdleTimeout: 5 * time.Second}})
		c := dialRaw(t, p.addr)
		c.send("GET /fixed/ HTTP/1.1\r\nHost: x\r\n\r\n")
		c.read("GET")
		c.expectOpen(300 * time.Millisecond)
		c.send("GET /fixed/ HTTP/1.1\r\nHost: x\r\n\r\n")
		if r := c.read("GET"); r.status != 200 {
			t.Errorf("got %v, want 200", r.status)
		}
	})
	t.Run("idle wait not cut by the header timeout", func(t *testing.T) {
		p := startLoopProxy(t, k, loopConfig{opts: Options{ReadHeaderTimeout: 100 * time.Millisecond}})
		c := dialRaw(t, p.addr)
		c.send("GET /fixed/ HTTP/1.1\r\n")
		time.Sleep(10 * time.Millisecond)
		c.send("Host: x\r\n\r\n")
		c.read("GET")
		c.expectOpen(300 * time.Millisecond)
		c.send("GET /fixed/ HTTP/1.1\r\nHost: x\r\n\r\n")
		if r := c.read("GET"); r.status != 200 {
			t.Errorf("got %v, want 200", r.status)
		}
	})
	t.Run("write timeout counts from the write", func(t *testing.T) {
		p := startLoopProxy(t, k, loopConfig{opts: Options{WriteTimeout: 100 * time.Millisecond, IdleTimeout: 5 * time.Second}})
		c := dialRaw(t, p.addr)
		for i := 0; i < 2; i++ {
			c.send("GET /big-fixed HTTP/1.1\r\nHost: x\r\n\r\n")
			if r := c.read("GET"); r.status != 200 || len(r.body) != len(bigFixed.Body) {
				t.Fatalf("request %d: got (%v, %d bytes), want (200, %d bytes)", i, r.status, len(r.body), len(bigFixed.Body))
			}
			time.Sleep(300 * time.Millisecond)
		}
	})
	t.Run("client that stops reading is cut off", func(t *testing.T) {
		hb, _ := newHTTPBackend(t, httpMux())
		p := startLoopProxy(t, k, loopConfig{backends: []string{hb.Listener.Addr().String()}, to: defaultTransport,
			opts: Options{WriteTimeout: 100 * time.Millisecond}})
		c := dialRaw(t, p.addr)
		c.tcp().SetReadBuffer(16 << 10)
		const size = 32 << 20 // more than socket buffers hold
		fmt.Fprintf(c.nc, "GET /size/%d HTTP/1.1\r\nHost: x\r\n\r\n", size)
		// The loop gives up on the client (what the kernel holds may
		// still trickle out to it).
		start := time.Now()
		if rec := p.nextRec(t); rec.Status != proxy.StatusClientClosed || !errors.Is(rec.Err, wire.ErrClientGone) {
			t.Errorf("got (%v, %v), want (%v, %v)", rec.Status, rec.Err, proxy.StatusClientClosed, wire.ErrClientGone)
		}
		// Far below the idle timeout (60s) the loop would otherwise
		// wait; a loaded machine takes a while to fill the socket
		// buffers before the write timeout can start.
		if el := time.Since(start); el > 3*time.Second {
			t.Errorf("gave up after %v, want about the write timeout", el)
		}
		waitFor(t, "the connection to close", func() bool { return p.eng.OpenConns() == 0 })
	})
	t.Run("slow body gets 408", func(t *testing.T) {
		p := startLoopProxy(t, k, loopConfig{opts: Options{IdleTimeout: 200 * time.Millisecond}})
		c := dialRaw(t, p.addr)
		c.send("POST /fixed/ HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
		if r := c.read("POST"); r.status != 408 {
			t.Errorf("got %v, want 408", r.status)
		}
		c.expectClosed(2 * time.Second)
	})
	t.Run("read timeout bounds a trickled body", func(t *testing.T) {
		p := startLoopProxy(t, k, loopConfig{opts: Options{ReadTimeout: 200 * time.Millisecond, IdleTimeout: 5 * time.Second}})
		c := dialRaw(t, p.addr)
		start := time.Now()
		c.send("POST /fixed/ HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; i < 50 && time.Since(start) < 2*time.Second; i++ {
				if _, err := c.nc.Write([]byte("x")); err != nil {
					return
				}
				time.Sleep(40 * time.Millisecond)
			}
		}()
		r := c.read("POST")
		<-done
		if r.status != 408 || time.Since(start) > time.Second {
			t.Errorf("got %v after %v, want 408 after the read timeout", r.status, time.Since(start))
		}
	})
}

func TestLoopFixedBodyDropped(t *testing.T) { run(t, testLoopFixedBodyDropped) }

func testLoopFixedBodyDropped(t *testing.T, k netpoll.Kind) {
	// A body sent to a fixed answer is read and dropped; the next
	// request on the connection is served.
	p := startLoopProxy(t, k, loopConfig{})
	c := dialRaw(t, p.addr)
	c.send("POST /fixed/ HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n" + strings.Repeat("a", 1000) +
		"GET /fixed/next HTTP/1.1\r\nHost: x\r\n\r\n")
	for i := 0; i < 2; i++ {
		if r := c.read("GET"); r.status != 200 || r.body != "fixed" || r.close {
			t.Errorf("response %d: got (%v, %q, close %v), want (200, fixed, keep-alive)", i, r.status, r.body, r.close)
		}
	}
}

func TestLoopExpectContinue(t *testing.T) { run(t, testLoopExpectContinue) }

func testLoopExpectContinue(t *testing.T, k netpoll.Kind) {
	hb, _ := newHTTPBackend(t, httpMux())
	p := startLoopProxy(t, k, loopConfig{backends: []string{hb.Listener.Addr().String()}, to: defaultTransport})
	t.Run("100 sent when the body is wanted", func(t *testing.T) {
		c := dialRaw(t, p.addr)
		c.send("PUT /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
		if head := c.readHead(); head != "HTTP/1.1 100 Continue\r\n\r\n" {
			t.Fatalf("got %q, want a 100 Continue", head)
		}
		c.send("hello")
		if r := c.read("PUT"); r.status != 200 || r.body != "hello" || r.close {
			t.Errorf("got (%v, %q, close %v), want (200, %q, false)", r.status, r.body, r.close, "hello")
		}
		c.send("GET /fixed/ HTTP/1.1\r\nHost: x\r\n\r\n")
		if r := c.read("GET"); r.body != "fixed" {
			t.Errorf("next: got %q, want %q", r.body, "fixed")
		}
	})
	t.Run("http/1.0 gets no 100", func(t *testing.T) {
		c := dialRaw(t, p.addr)
		c.send("PUT /echo HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\nhello")
		if r := c.read("PUT"); r.status != 200 || r.body != "hello" {
			t.Errorf("got (%v, %q), want (200, %q)", r.status, r.body, "hello")
		}
	})
}

func TestLoopRespond(t *testing.T) { run(t, testLoopRespond) }

func testLoopRespond(t *testing.T, k netpoll.Kind) {
	fixed := map[string]proxy.Fixed{
		"/r/200": {Status: 200, Body: []byte("abc")},
		"/r/204": {Status: 204, Body: []byte("abc")},
		"/r/304": {Status: 304, Body: []byte("abc")},
		"/r/404": {Status: 404, Body: []byte("abc")},
	}
	tests := []struct {
		name   string
		method string
		path   string
		status int
		wantCL string
		body   string
	}{
		{"200", "GET", "/r/200", 200, "3", "abc"},
		{"head", "HEAD", "/r/200", 200, "3", ""},
		{"204 has no length", "GET", "/r/204", 204, "", ""},
		{"304 has no length", "GET", "/r/304", 304, "", ""},
		{"404", "GET", "/r/404", 404, "3", "abc"},
		{"no backend", "GET", "/up", 503, "", ""},
	}
	p := startLoopProxy(t, k, loopConfig{fixed: fixed})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dialRaw(t, p.addr)
			c.send(tt.method + " " + tt.path + " HTTP/1.1\r\nHost: x\r\n\r\n")
			r := c.read(tt.method)
			if r.status != tt.status {
				t.Errorf("got %v, want %v", r.status, tt.status)
			}
			if tt.wantCL != "" && (r.body != tt.body || r.header.Get("Content-Length") != tt.wantCL) {
				t.Errorf("got (%q, CL %q), want (%q, CL %q)", r.body, r.header.Get("Content-Length"), tt.body, tt.wantCL)
			}
			if tt.status == 204 || tt.status == 304 {
				if r.body != "" || r.header.Get("Content-Length") != "" {
					t.Errorf("got (%q, CL %q), want no body and no length", r.body, r.header.Get("Content-Length"))
				}
			}
			c.send("GET /fixed/next HTTP/1.1\r\nHost: x\r\n\r\n")
			if r := c.read("GET"); r.body != "fixed" {
				t.Errorf("next: got %q, want %q", r.body, "fixed")
			}
		})
	}
}

// TestLoopLocalHandler checks requests for a net/http handler (an
// in-process backend, local.go) are answered in order with the loop's own
// answers around them, framed for the client's version, and recorded with
// their route. Static files do not come this way: the loop serves them
// itself (TestLoopFiles).
func TestLoopLocalHandler(t *testing.T) { run(t, testLoopLocalHandler) }

func testLoopLocalHandler(t *testing.T, k netpoll.Kind) {
	p := startLoopProxy(t, k, loopConfig{})
	t.Run("chunked for 1.1", func(t *testing.T) {
		c := dialRaw(t, p.addr)
		c.send("GET /local/a HTTP/1.1\r\nHost: h.example\r\n\r\nGET /local/b HTTP/1.1\r\nHost: h.example\r\n\r\n")
		for _, want := range []string{"local:/local/a", "local:/local/b"} {
			r := c.read("GET")
			if r.body != want || !r.chunked || r.header.Get("X-Local") != "1" {
				t.Errorf("got (%q, chunked %v, %v), want (%q, chunked)", r.body, r.chunked, r.header, want)
			}
		}
		c.send("GET /fixed/ HTTP/1.1\r\nHost: x\r\n\r\n")
		if r := c.read("GET"); r.body != "fixed" {
			t.Errorf("next: got %q, want %q", r.body, "fixed")
		}
	})
	t.Run("after loop answers", func(t *testing.T) {
		c := dialRaw(t, p.addr)
		c.send("GET /fixed/1 HTTP/1.1\r\nHost: x\r\n\r\nGET /big-fixed HTTP/1.1\r\nHost: x\r\n\r\nGET /local/c HTTP/1.1\r\nHost: x\r\n\r\n")
		for _, want := range []string{"fixed", string(bigFixed.Body), "local:/local/c"} {
			if r := c.read("GET"); r.body != want {
				t.Errorf("got %d bytes, want %d", len(r.body), len(want))
			}
		}
	})
	t.Run("until close for 1.0", func(t *testing.T) {
		c := dialRaw(t, p.addr)
		c.send("GET /local/x HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
		r := c.read("GET")
		if r.body != "local:/local/x" || r.chunked || !r.close {
			t.Errorf("got (%q, chunked %v, close %v), want (%q, not chunked, close)", r.body, r.chunked, r.close, "local:/local/x")
		}
	})
	// Every request is recorded once, with its route: four to the
	// handler, three answered by the loop.
	local := 0
	for i := 0; i < 7; i++ {
		rec := p.nextRec(t)
		if rec.Route == nil {
			t.Fatalf("record %d: got no route", i)
		}
		if rec.Route.Name == "local" {
			local++
		}
	}
	if local != 4 {
		t.Errorf("got %d records for route local, want 4", local)
	}
	p.noRec(t, 50*time.Millisecond)
}

func TestLoopShutdown(t *testing.T) { run(t, testLoopShutdown) }

func testLoopShutdown(t *testing.T, k netpoll.Kind) {
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		<-release
		io.WriteString(w, "done")
	})
	hb, _ := newHTTPBackend(t, mux)
	p := startLoopProxy(t, k, loopConfig{backends: []string{hb.Listener.Addr().String()}, to: defaultTransport})
	idle := dialRaw(t, p.addr)
	idle.send("GET /fixed/ HTTP/1.1\r\nHost: x\r\n\r\n")
	idle.read("GET")
	busy := dialRaw(t, p.addr)
	busy.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	waitFor(t, "the request to reach the backend", func() bool { return p.up.Backends[0].Inflight() == 1 })

	p.ll.Stop()
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		shut <- p.ll.Shutdown(ctx)
	}()
	idle.expectClosed(2 * time.Second)
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v with a busy connection", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	r := busy.read("GET")
	if r.status != 200 || r.body != "done" || !r.close {
		t.Errorf("got (%v, %q, close %v), want (200, %q, close true)", r.status, r.body, r.close, "done")
	}
	busy.expectClosed(time.Second)
	select {
	case err := <-shut:
		if err != nil {
			t.Errorf("got %v, want nil", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("Shutdown did not return")
	}
	if n := p.eng.OpenConns(); n != 0 {
		t.Errorf("got %v open connections, want 0", n)
	}
	// Stopped: nobody is accepted any more.
	p.closeListener()
	if nc, err := net.DialTimeout("tcp", p.addr, time.Second); err == nil {
		nc.SetReadDeadline(time.Now().Add(time.Second))
		if _, err := bufio.NewReader(nc).ReadByte(); err == nil {
			t.Errorf("a connection after Stop was served")
		}
		nc.Close()
	}
}

// TestLoopEngineShutdown drains the whole engine: idle connections close
// at once, a busy one after its answer, which says so.
func TestLoopEngineShutdown(t *testing.T) { run(t, testLoopEngineShutdown) }

func testLoopEngineShutdown(t *testing.T, k netpoll.Kind) {
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		<-release
		io.WriteString(w, "done")
	})
	hb, _ := newHTTPBackend(t, mux)
	p := startLoopProxy(t, k, loopConfig{backends: []string{hb.Listener.Addr().String()}, to: defaultTransport, loops: 2})
	idle := dialRaw(t, p.addr)
	idle.send("GET /fixed/ HTTP/1.1\r\nHost: x\r\n\r\n")
	idle.read("GET")
	busy := dialRaw(t, p.addr)
	busy.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	waitFor(t, "the request to reach the backend", func() bool { return p.up.Backends[0].Inflight() == 1 })
	p.ll.Stop()
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		shut <- p.eng.Shutdown(ctx)
	}()
	idle.expectClosed(2 * time.Second)
	close(release)
	if r := busy.read("GET"); r.body != "done" || !r.close {
		t.Errorf("got (%q, close %v), want (done, close)", r.body, r.close)
	}
	busy.expectClosed(time.Second)
	if err := <-shut; err != nil {
		t.Errorf("got %v, want nil", err)
	}
}

// TestLoopDrainServesFirstRequests guards issue 12's upgrade: a drain
// closed connections whose first request had not been read yet, and an
// upgrade under load lost those requests. A keep-alive connection that
// has served a request closes at once (its client retries); one accepted
// just before the drain gets its first request served, with Connection:
// close, whether the request is already in the kernel's buffer or
// arrives a moment later; one that never sends is closed after the grace.
func TestLoopDrainServesFirstRequests(t *testing.T) { run(t, testLoopDrainServesFirstRequests) }

func testLoopDrainServesFirstRequests(t *testing.T, k netpoll.Kind) {
	p := startLoopProxy(t, k, loopConfig{loops: 1})
	kept := dialRaw(t, p.addr)
	kept.send("GET /fixed/ HTTP/1.1\r\nHost: x\r\n\r\n")
	kept.read("GET")
	late := dialRaw(t, p.addr)
	dialed := time.Now() // silent is accepted after this
	silent := dialRaw(t, p.addr)
	buffered := dialRaw(t, p.addr)
	waitFor(t, "four connections", func() bool { return p.eng.OpenConns() == 4 })

	p.ll.Stop()
	p.ll.draining.Store(true)
	// The first drain round runs while buffered's request waits in the
	// kernel: the loop is held until it is there, so no event has told it.
	l := p.eng.loops[0]
	l.do(func() {
		buffered.send("GET /fixed/ HTTP/1.1\r\nHost: x\r\n\r\n")
		time.Sleep(50 * time.Millisecond)
		l.drainListener(p.ll)
	})
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		shut <- p.ll.Shutdown(ctx)
	}()
	kept.expectClosed(freshGrace / 2)
	if r := buffered.read("GET"); r.status != 200 || !r.close {
		t.Errorf("request sent before the drain: got (%v, close %v), want (200, close)", r.status, r.close)
	}
	time.Sleep(freshGrace / 5)
	late.send("GET /fixed/ HTTP/1.1\r\nHost: x\r\n\r\n")
	if r := late.read("GET"); r.status != 200 || !r.close {
		t.Errorf("first request sent during the drain: got (%v, close %v), want (200, close)", r.status, r.close)
	}
	silent.expectClosed(2 * freshGrace)
	if d := time.Since(dialed); d < freshGrace {
		t.Errorf("a connection that sent nothing was closed %v after it was accepted, before its grace (%v)", d, freshGrace)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: got %v, want nil", err)
	}
}

// TestLoopListenerStop checks a stopped listener's socket can be closed
// at once, new connections are then refused, and connections already
// accepted go on being served.
func TestLoopListenerStop(t *testing.T) { run(t, testLoopListenerStop) }

func testLoopListenerStop(t *testing.T, k netpoll.Kind) {
	p := startLoopProxy(t, k, loopConfig{})
	c := dialRaw(t, p.addr)
	c.send("GET /fixed/ HTTP/1.1\r\nHost: x\r\n\r\n")
	c.read("GET")
	p.ll.Stop()
	p.closeListener()
	if nc, err := net.DialTimeout("tcp", p.addr, time.Second); err == nil {
		nc.Close()
		t.Errorf("dial after Stop: got a connection, want it refused")
	}
	for i := 0; i < 2; i++ {
		c.send("GET /fixed/ HTTP/1.1\r\nHost: x\r\n\r\n")
		if r := c.read("GET"); r.body != "fixed" || r.close {
			t.Errorf("got (%q, close %v), want (fixed, keep-alive)", r.body, r.close)
		}
	}
	p.ll.Stop() // again: nothing happens
}
