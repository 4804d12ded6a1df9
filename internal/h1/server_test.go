package h1

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/wire"
)

func TestServerKeepAlive(t *testing.T) {
	tests := []struct {
		name      string
		req       string // sent twice
		wantClose bool   // the response says Connection: close and the connection closes
		wantConn  string // Connection header of a kept response
	}{
		{"http/1.1", "GET /a HTTP/1.1\r\nHost: x\r\n\r\n", false, ""},
		{"http/1.1 close", "GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", true, ""},
		{"http/1.0", "GET /a HTTP/1.0\r\n\r\n", true, ""},
		{"http/1.0 keep-alive", "GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", false, "keep-alive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startServer(t, funcHandler{}, Options{})
			c := dialRaw(t, s.addr)
			for i := 0; i < 2; i++ {
				c.send(tt.req)
				r := c.read("GET")
				if r.status != 200 || r.body != "path=/a" {
					t.Fatalf("got (%v, %q), want (200, %q)", r.status, r.body, "path=/a")
				}
				// net/http's ReadResponse removes "Connection: close" and
				// reports it as Close.
				if got := r.header.Get("Connection"); got != tt.wantConn || r.close != tt.wantClose {
					t.Errorf("Connection: got (%q, close %v), want (%q, close %v)", got, r.close, tt.wantConn, tt.wantClose)
				}
				if r.header.Get("Date") == "" || r.header.Get("X-Test") != "1" {
					t.Errorf("header: got %v, want Date and X-Test", r.header)
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

func TestServerPipelining(t *testing.T) {
	s := startServer(t, funcHandler{
		"/body": echoBody,
	}, Options{})
	c := dialRaw(t, s.addr)
	c.send("GET /1 HTTP/1.1\r\nHost: x\r\n\r\n" +
		"POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello" +
		"HEAD /3 HTTP/1.1\r\nHost: x\r\n\r\n" +
		"POST /body HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n" +
		"GET /5 HTTP/1.1\r\nHost: x\r\n\r\n")
	want := []struct {
		method, body string
	}{{"GET", "path=/1"}, {"POST", "hello"}, {"HEAD", ""}, {"POST", "abc"}, {"GET", "path=/5"}}
	for i, w := range want {
		r := c.read(w.method)
		if r.status != 200 || r.body != w.body {
			t.Errorf("response %d: got (%v, %q), want (200, %q)", i, r.status, r.body, w.body)
		}
	}
	c.expectOpen(50 * time.Millisecond)
}

func TestServerSplitHead(t *testing.T) {
	s := startServer(t, funcHandler{"/body": echoBody}, Options{ReadHeaderTimeout: 5 * time.Second})
	c := dialRaw(t, s.addr)
	req := "POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello world"
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

// TestServerHeadFillsBuffer sends heads whose end falls at or near the end
// of the read buffer, followed by a body.
func TestServerHeadFillsBuffer(t *testing.T) {
	for _, size := range []int{readBufSize - 100, readBufSize - 1, readBufSize, readBufSize + 1, 2 * readBufSize} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			s := startServer(t, funcHandler{"/body": echoBody}, Options{})
			c := dialRaw(t, s.addr)
			head := "POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 20000\r\nX-Pad: "
			head += strings.Repeat("p", size-len(head)-4) + "\r\n\r\n"
			if len(head) != size {
				t.Fatalf("head is %v bytes, want %v", len(head), size)
			}
			body := strings.Repeat("0123456789", 2000)
			c.send(head)
			time.Sleep(10 * time.Millisecond) // the head alone in the first read
			c.send(body)
			if r := c.read("POST"); r.status != 200 || r.body != body {
				t.Errorf("got (%v, %d bytes), want (200, %d bytes)", r.status, len(r.body), len(body))
			}
		})
	}
}

func TestServerHeadErrors(t *testing.T) {
	tests := []struct {
		name   string
		opts   Options
		first  string // a good request before, or ""
		req    string
		status int
	}{
		{"bad request", Options{}, "", "GET / HTTP/1.1\r\n\r\n", 400},
		{"bad request after a good one", Options{}, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400},
		{"smuggling attempt", Options{}, "", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
		{"version", Options{}, "", "GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505},
		{"te", Options{}, "", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
		{"huge head", Options{MaxHeaderBytes: 1024}, "", "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("b", 8000) + "\r\n\r\n", 431},
		{"huge head default limit", Options{}, "", "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("b", 70<<10) + "\r\n\r\n", 431},
		{"head over limit in one read", Options{MaxHeaderBytes: 1024}, "", "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("b", 2000) + "\r\n\r\n", 431},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startServer(t, funcHandler{}, tt.opts)
			c := dialRaw(t, s.addr)
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

func TestServerTimeouts(t *testing.T) {
	t.Run("stalled head gets 408", func(t *testing.T) {
		s := startServer(t, funcHandler{}, Options{ReadHeaderTimeout: 100 * time.Millisecond})
		c := dialRaw(t, s.addr)
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
		s := startServer(t, funcHandler{}, Options{ReadTimeout: 100 * time.Millisecond})
		c := dialRaw(t, s.addr)
		c.send("GET / HTTP/1.1\r\nHost:")
		c.nc.SetReadDeadline(time.Now().Add(2 * time.Second))
		if r, err := c.tryRead("GET"); err != nil || r.status != 408 {
			t.Errorf("got (%v, %v), want 408", r.status, err)
		}
	})
	t.Run("idle connection closed silently", func(t *testing.T) {
		s := startServer(t, funcHandler{}, Options{IdleTimeout: 150 * time.Millisecond})
		c := dialRaw(t, s.addr)
		c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		c.read("GET")
		c.expectOpen(50 * time.Millisecond)
		c.expectClosed(2 * time.Second)
	})
	t.Run("idle wait not cut by the read timeout", func(t *testing.T) {
		s := startServer(t, funcHandler{}, Options{ReadTimeout: 100 * time.Millisecond, IdleTimeout: 5 * time.Second})
		c := dialRaw(t, s.addr)
		c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		c.read("GET")
		c.expectOpen(300 * time.Millisecond)
		c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		if r := c.read("GET"); r.status != 200 {
			t.Errorf("got %v, want 200", r.status)
		}
	})
	t.Run("idle wait not cut by the header timeout", func(t *testing.T) {
		s := startServer(t, funcHandler{}, Options{ReadHeaderTimeout: 100 * time.Millisecond})
		c := dialRaw(t, s.addr)
		// A head in two parts arms the header timeout.
		c.send("GET / HTTP/1.1\r\n")
		time.Sleep(10 * time.Millisecond)
		c.send("Host: x\r\n\r\n")
		c.read("GET")
		c.expectOpen(300 * time.Millisecond)
		c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		if r := c.read("GET"); r.status != 200 {
			t.Errorf("got %v, want 200", r.status)
		}
	})
	t.Run("steady body outlives a short idle timeout", func(t *testing.T) {
		// IdleTimeout bounds each wait for body bytes, not the body.
		s := startServer(t, funcHandler{"/body": echoBody}, Options{IdleTimeout: 200 * time.Millisecond})
		c := dialRaw(t, s.addr)
		c.send("POST /body HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
		for i := 0; i < 12; i++ {
			c.send("1\r\nx\r\n")
			time.Sleep(50 * time.Millisecond)
		}
		c.send("0\r\n\r\n")
		if r := c.read("POST"); r.status != 200 || r.body != strings.Repeat("x", 12) {
			t.Errorf("got (%v, %q), want (200, %q)", r.status, r.body, strings.Repeat("x", 12))
		}
	})
	t.Run("write timeout counts from the write", func(t *testing.T) {
		// A kept connection idle for longer than WriteTimeout must not
		// fail its next large response on the old deadline.
		big := strings.Repeat("b", 64<<10)
		s := startServer(t, funcHandler{"/big": func(ex wire.Exchange) { ex.Respond(200, nil, []byte(big)) }},
			Options{WriteTimeout: 100 * time.Millisecond, IdleTimeout: 5 * time.Second})
		c := dialRaw(t, s.addr)
		for i := 0; i < 2; i++ {
			c.send("GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
			if r := c.read("GET"); r.status != 200 || len(r.body) != len(big) {
				t.Fatalf("request %d: got (%v, %d bytes), want (200, %d bytes)", i, r.status, len(r.body), len(big))
			}
			time.Sleep(300 * time.Millisecond)
		}
	})
	t.Run("slow body hits the read timeout", func(t *testing.T) {
		s := startServer(t, funcHandler{"/body": echoBody}, Options{ReadTimeout: 200 * time.Millisecond})
		c := dialRaw(t, s.addr)
		c.send("POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
		r := c.read("POST")
		if r.status != 499 {
			t.Errorf("got %v, want the handler to see a read error (499)", r.status)
		}
		c.expectClosed(2 * time.Second)
	})
}

func TestServerUnreadBody(t *testing.T) {
	tests := []struct {
		name      string
		req       string
		wantClose bool
		// announced: the response says Connection: close (a chunked body's
		// size is not known when the response is written).
		announced bool
	}{
		{"small fixed body drained", "POST /ignore HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n" + strings.Repeat("a", 1000), false, false},
		{"small chunked body drained", "POST /ignore HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", false, false},
		{"large fixed body closes", "POST /ignore HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n" + strings.Repeat("a", 1000), true, true},
		{"large chunked body closes", "POST /ignore HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
			strings.Repeat("8000\r\n"+strings.Repeat("c", 0x8000)+"\r\n", 10), true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startServer(t, funcHandler{}, Options{})
			c := dialRaw(t, s.addr)
			go c.nc.Write([]byte(tt.req)) // may block while the server does not read
			r := c.read("POST")
			if r.status != 200 || r.close != tt.announced {
				t.Fatalf("got (%v, close %v), want (200, close %v)", r.status, r.close, tt.announced)
			}
			if tt.wantClose {
				c.expectClosed(2 * time.Second)
				return
			}
			c.send("GET /next HTTP/1.1\r\nHost: x\r\n\r\n")
			if r := c.read("GET"); r.body != "path=/next" {
				t.Errorf("got %q, want %q", r.body, "path=/next")
			}
		})
	}
}

func TestServerExpectContinue(t *testing.T) {
	t.Run("100 sent when the body is read", func(t *testing.T) {
		s := startServer(t, funcHandler{"/body": echoBody}, Options{})
		c := dialRaw(t, s.addr)
		c.send("PUT /body HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
		if head := c.readHead(); head != "HTTP/1.1 100 Continue\r\n\r\n" {
			t.Fatalf("got %q, want a 100 Continue", head)
		}
		c.send("hello")
		if r := c.read("PUT"); r.status != 200 || r.body != "hello" || r.close {
			t.Errorf("got (%v, %q, close %v), want (200, %q, false)", r.status, r.body, r.close, "hello")
		}
	})
	t.Run("no 100 when the body is not read", func(t *testing.T) {
		s := startServer(t, funcHandler{}, Options{IdleTimeout: 5 * time.Second})
		c := dialRaw(t, s.addr)
		c.send("PUT /nobody HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
		head := c.readHead()
		if !strings.HasPrefix(head, "HTTP/1.1 200 ") {
			t.Fatalf("got %q, want the final response first", head)
		}
		// The client never sends the body: the server must say it closes
		// and not wait for it (RFC 9110 §10.1.1).
		if !strings.Contains(head, "Connection: close\r\n") {
			t.Errorf("got %q, want Connection: close", head)
		}
		c.br.Discard(len("path=/nobody"))
		c.expectClosed(time.Second)
	})
	t.Run("http/1.0 gets no 100", func(t *testing.T) {
		s := startServer(t, funcHandler{"/body": echoBody}, Options{})
		c := dialRaw(t, s.addr)
		c.send("PUT /body HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\nhello")
		if r := c.read("PUT"); r.status != 200 || r.body != "hello" {
			t.Errorf("got (%v, %q), want (200, %q)", r.status, r.body, "hello")
		}
	})
}

func TestServerRespond(t *testing.T) {
	tests := []struct {
		name   string
		method string
		status int
		wantCL string
		body   string
	}{
		{"200", "GET", 200, "3", "abc"},
		{"head", "HEAD", 200, "3", ""},
		{"204 has no length", "GET", 204, "", ""},
		{"304 has no length", "GET", 304, "", ""},
		{"404", "GET", 404, "3", "abc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startServer(t, funcHandler{"/r": func(ex wire.Exchange) { ex.Respond(tt.status, nil, []byte("abc")) }}, Options{})
			c := dialRaw(t, s.addr)
			c.send(tt.method + " /r HTTP/1.1\r\nHost: x\r\n\r\n")
			r := c.read(tt.method)
			if r.status != tt.status || r.body != tt.body || r.header.Get("Content-Length") != tt.wantCL {
				t.Errorf("got (%v, %q, CL %q), want (%v, %q, CL %q)", r.status, r.body, r.header.Get("Content-Length"),
					tt.status, tt.body, tt.wantCL)
			}
			c.send("GET /next HTTP/1.1\r\nHost: x\r\n\r\n")
			if r := c.read("GET"); r.body != "path=/next" {
				t.Errorf("next: got %q, want %q", r.body, "path=/next")
			}
		})
	}
	t.Run("no answer is 502", func(t *testing.T) {
		s := startServer(t, funcHandler{"/none": func(wire.Exchange) {}}, Options{})
		c := dialRaw(t, s.addr)
		c.send("GET /none HTTP/1.1\r\nHost: x\r\n\r\n")
		if r := c.read("GET"); r.status != 502 {
			t.Errorf("got %v, want 502", r.status)
		}
	})
}

func TestServerShutdown(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	s := startServer(t, funcHandler{"/busy": func(ex wire.Exchange) {
		close(entered)
		<-release
		ex.Respond(200, nil, []byte("done"))
	}}, Options{})
	idle := dialRaw(t, s.addr)
	idle.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	idle.read("GET")
	busy := dialRaw(t, s.addr)
	busy.send("GET /busy HTTP/1.1\r\nHost: x\r\n\r\n")
	<-entered

	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		shut <- s.Shutdown(ctx)
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
	if n := s.OpenConns(); n != 0 {
		t.Errorf("got %v open connections, want 0", n)
	}
}

func TestServerShutdownTimeout(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	s := startServer(t, funcHandler{"/busy": func(ex wire.Exchange) {
		close(entered)
		<-release
	}}, Options{})
	busy := dialRaw(t, s.addr)
	busy.send("GET /busy HTTP/1.1\r\nHost: x\r\n\r\n")
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.Shutdown(ctx); err != context.DeadlineExceeded {
		t.Errorf("got %v, want %v", err, context.DeadlineExceeded)
	}
	busy.expectClosed(time.Second)
}

func TestServerServeHTTP(t *testing.T) {
	s := startServer(t, funcHandler{
		"/stream": func(ex wire.Exchange) {
			ex.ServeHTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Req-Host", r.Host)
				io.WriteString(w, "part1,")
				w.(http.Flusher).Flush()
				io.WriteString(w, "part2")
			}))
		},
		"/inject": func(ex wire.Exchange) {
			ex.ServeHTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Evil", "a\r\nX-Injected: 1")
				io.WriteString(w, "ok")
			}))
		},
		"/overflow": func(ex wire.Exchange) {
			ex.ServeHTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Length", "2")
				io.WriteString(w, "okHTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged")
			}))
		},
	}, Options{})
	t.Run("chunked for 1.1", func(t *testing.T) {
		c := dialRaw(t, s.addr)
		c.send("GET /stream HTTP/1.1\r\nHost: h.example:81\r\n\r\n")
		r := c.read("GET")
		if r.body != "part1,part2" || !r.chunked || r.header.Get("X-Req-Host") != "h.example:81" {
			t.Errorf("got (%q, chunked %v, %v), want (%q, chunked, host h.example:81)", r.body, r.chunked, r.header, "part1,part2")
		}
	})
	t.Run("until close for 1.0", func(t *testing.T) {
		c := dialRaw(t, s.addr)
		c.send("GET /stream HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
		r := c.read("GET")
		if r.body != "part1,part2" || r.chunked || !r.close {
			t.Errorf("got (%q, chunked %v, close %v), want (%q, not chunked, close)", r.body, r.chunked, r.close, "part1,part2")
		}
	})
	t.Run("no header injection", func(t *testing.T) {
		c := dialRaw(t, s.addr)
		c.send("GET /inject HTTP/1.1\r\nHost: x\r\n\r\n")
		r := c.read("GET")
		if r.header.Get("X-Injected") != "" {
			t.Errorf("got header %v, want no X-Injected", r.header)
		}
	})
	t.Run("no bytes past Content-Length", func(t *testing.T) {
		c := dialRaw(t, s.addr)
		c.send("GET /overflow HTTP/1.1\r\nHost: x\r\n\r\nGET /next HTTP/1.1\r\nHost: x\r\n\r\n")
		if r := c.read("GET"); r.body != "ok" {
			t.Fatalf("got %q, want %q", r.body, "ok")
		}
		r, err := c.tryRead("GET")
		if err == nil && r.body != "path=/next" {
			t.Errorf("got %q, want %q or a closed connection", r.body, "path=/next")
		}
	})
}

// TestServerHandlerPanic checks a panicking handler costs its own
// connection only, and is reported.
func TestServerHandlerPanic(t *testing.T) {
	tests := []struct {
		name    string
		value   any
		wantLog bool
	}{
		{"panic", "boom", true},
		{"abort handler", http.ErrAbortHandler, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logged atomic.Int32
			s := startServer(t, funcHandler{"/panic": func(wire.Exchange) { panic(tt.value) }}, Options{},
				func(s *Server) { s.SetErrorLog(func(msg string, err error) { logged.Add(1) }) })
			c := dialRaw(t, s.addr)
			c.send("GET /panic HTTP/1.1\r\nHost: x\r\n\r\n")
			c.expectClosed(time.Second)
			c2 := dialRaw(t, s.addr)
			c2.send("GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
			if r := c2.read("GET"); r.body != "path=/ok" {
				t.Errorf("got %q, want %q", r.body, "path=/ok")
			}
			if got := logged.Load() > 0; got != tt.wantLog {
				t.Errorf("logged: got %v, want %v", got, tt.wantLog)
			}
			waitFor(t, "the connection to be forgotten", func() bool { return s.OpenConns() == 1 })
		})
	}
}
