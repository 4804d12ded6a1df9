package engine

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/wire"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// HTTP/2 clients and backends that fail: resets, backend failures,
// stream timeouts, stalled bodies, clients that close, early answers.

// Clients that reset their streams: TestMatrixClientGone; backends that
// fail: TestMatrixScriptedBackendFailures.

// TestLoopH2AnswerBeforeBody answers a request whose body the client has
// not sent (a fixed answer reads none): the answer goes out whole, then
// RST_STREAM NO_ERROR tells the client to stop sending (RFC 9113 §8.1),
// and the connection goes on.
func TestLoopH2AnswerBeforeBody(t *testing.T) {
	modes(t, func(t *testing.T, m mode, _ matrixOpts) {
		p, tp := startFrontTLS(t, m, loopConfig{})
		c := dialH2Raw(t, p.addr, tp, 0)
		c.request(1, "POST", "/fixed/post", false, "content-length", "100000")
		c.fr.WriteData(1, false, []byte("only the start"))
		var r h2RawResp
		for done := false; !done; {
			ev := c.mustNext()
			if ev.stream != 1 {
				t.Fatalf("got a %v frame on stream %d, want stream 1's", ev.typ, ev.stream)
			}
			switch ev.typ {
			case http2.FrameHeaders:
				r.fields = ev.fields
			case http2.FrameData:
				r.body = append(r.body, ev.data...)
				if ev.end {
					r.status = "ended"
				}
			case http2.FrameRSTStream:
				r.reset, r.code = true, ev.code
				done = true
			}
		}
		if string(r.body) != "fixed" || r.status != "ended" || r.code != http2.ErrCodeNo {
			t.Errorf("got (%q, end of stream %v, reset %v), want (fixed, the answer ended, then RST_STREAM NO_ERROR)", r.body, r.status == "ended", r.code)
		}
		c.request(3, "GET", "/fixed/next", true)
		if r := c.response(3); r.status != "200" || string(r.body) != "fixed" {
			t.Errorf("next stream: got (%q, %q), want (200, fixed)", r.status, r.body)
		}
	}, onlyClients(clientH2, clientH2C), onlyBackends(backendH1))
}

// TestLoopH2RequestFrames sends requests frame by frame, as x/net's
// client does not: a declared length with trailers (which HTTP/1.1 has no
// place for with a length: dropped), DATA in pieces ended by an empty
// frame, trailers with no DATA at all, cookies in several fields (one
// field again, RFC 9113 §8.2.3), and Expect, which means nothing across
// the hop.
func TestLoopH2RequestFrames(t *testing.T) {
	tests := []struct {
		name     string
		method   string
		fields   []string // name, value pairs after the pseudo-fields
		data     []string // DATA frames; the last ends the stream unless trailers follow
		trailers []string
		wantTE   string
		wantCL   string
		wantBody string
		wantTr   map[string]string
		want     map[string][]string // fields of the head the backend reads
		absent   []string
	}{
		{name: "length, then trailers", method: "POST", fields: []string{"content-length", "5"},
			data: []string{"he", "llo"}, trailers: []string{"x-sum", "99"},
			wantCL: "5", wantBody: "hello", absent: []string{"x-sum", "trailer"}},
		{name: "no length, pieces, empty DATA ends it", method: "POST", data: []string{"abc", "de", ""},
			wantTE: "chunked", wantBody: "abcde"},
		{name: "no length, trailers and no DATA", method: "PUT", trailers: []string{"x-sum", "99", "x-more", "a b"},
			wantTE: "chunked", wantTr: map[string]string{"X-Sum": "99", "X-More": "a b"}},
		{name: "cookies in several fields", method: "GET", fields: []string{"cookie", "a=1", "x-other", "o", "cookie", "b=2"},
			want: map[string][]string{"cookie": {"a=1; b=2"}, "x-other": {"o"}}},
		{name: "expect dropped", method: "POST", fields: []string{"content-length", "3", "expect", "100-continue"},
			data: []string{"abc"}, wantCL: "3", wantBody: "abc", absent: []string{"expect"}},
		{name: "large head", method: "GET", fields: []string{"x-big", strings.Repeat("v", 40<<10), "x-after", "a"},
			want: map[string][]string{"x-big": {strings.Repeat("v", 40<<10)}, "x-after": {"a"}}},
	}
	modes(t, func(t *testing.T, m mode, _ matrixOpts) {
		got := make(chan h1Request, 1)
		be := recordingBackend(t, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", got)
		p, tp := startFrontTLS(t, m, loopTo(be.addr))
		c := dialH2Raw(t, p.addr, tp, 0)
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				c.t = t
				id := uint32(2*i + 1)
				c.request(id, tt.method, "/r", len(tt.data) == 0 && len(tt.trailers) == 0, tt.fields...)
				for j, d := range tt.data {
					c.fr.WriteData(id, j == len(tt.data)-1 && len(tt.trailers) == 0, []byte(d))
				}
				if len(tt.trailers) > 0 {
					c.hb.Reset()
					for j := 0; j+1 < len(tt.trailers); j += 2 {
						c.enc.WriteField(hpack.HeaderField{Name: tt.trailers[j], Value: tt.trailers[j+1]})
					}
					c.writeBlock(id, true)
				}
				if r := c.response(id); r.reset || r.status != "200" || string(r.body) != "ok" {
					t.Fatalf("got (%q, %q, reset %v %v), want (200, ok)", r.status, r.body, r.reset, r.code)
				}
				br := nextRequest(t, got)
				req, body := br.parsed(t)
				if body != tt.wantBody {
					t.Errorf("body: got %q, want %q", body, tt.wantBody)
				}
				if te := strings.Join(req.TransferEncoding, ","); te != tt.wantTE {
					t.Errorf("transfer-encoding: got %q, want %q", te, tt.wantTE)
				}
				if cl := req.Header.Get("Content-Length"); cl != tt.wantCL {
					t.Errorf("content-length: got %q, want %q", cl, tt.wantCL)
				}
				gotTr := map[string]string{}
				for name, vs := range req.Trailer {
					gotTr[name] = strings.Join(vs, ",")
				}
				if fmt.Sprint(gotTr) != fmt.Sprint(tt.wantTr) && len(gotTr)+len(tt.wantTr) > 0 {
					t.Errorf("trailers: got %v, want %v", gotTr, tt.wantTr)
				}
				f := headFields(br.head)
				for name, want := range tt.want {
					if !equalStrings(f[name], want) {
						t.Errorf("%s: got %q, want %q", name, f[name], want)
					}
				}
				for _, name := range tt.absent {
					if v, ok := f[name]; ok {
						t.Errorf("%s: got %q, want it absent", name, v)
					}
				}
			})
		}
	}, onlyClients(clientH2, clientH2C), onlyBackends(backendH1))
}

// TestLoopH2BackendFailureMidBodyIsInternalError has the backend close
// its connection in the middle of an answer's body: the stream, whose
// answer cannot be completed, is reset with INTERNAL_ERROR, as
// streamDone means to (a CANCEL would tell the client the server merely
// lost interest, RFC 9113 §7).
func TestLoopH2BackendFailureMidBodyIsInternalError(t *testing.T) {
	be := startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
		if readReqHead(br) != "" {
			io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b")
		}
	})
	modes(t, func(t *testing.T, m mode, _ matrixOpts) {
		p, tp := startFrontTLS(t, m, loopTo(be.addr))
		c := dialH2Raw(t, p.addr, tp, 0)
		c.request(1, "GET", "/", true)
		r := c.response(1)
		if r.status != "200" || !r.reset || r.code != http2.ErrCodeInternal {
			t.Errorf("got (%q, %q, reset %v with %v), want (200, the stream reset with INTERNAL_ERROR)", r.status, r.body, r.reset, r.code)
		}
		if rec := p.nextRec(t); !errors.Is(rec.Err, wire.ErrBackend) {
			t.Errorf("record: got %v, want %v", rec.Err, wire.ErrBackend)
		}
	}, onlyClients(clientH2, clientH2C), onlyBackends(backendH1))
}

// TestLoopH2StreamTimeouts has a stream's client stop sending its body:
// the stream's own deadline (swept with the loop's streams) answers it
// 408, whether the body was to be read whole first or streamed to a
// backend, and the connection goes on serving its other streams.
func TestLoopH2StreamTimeouts(t *testing.T) {
	closed := make(chan struct{}, 4)
	be := startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
		if readReqHead(br) == "" {
			return
		}
		io.Copy(io.Discard, br)
		closed <- struct{}{}
	})
	tests := []struct {
		name, path string
		length     string
		toBackend  bool
	}{
		{"small body read first", "/fixed/post", "10", false},
		{"body streamed to the backend", "/up", "1000000", true},
	}
	modes(t, func(t *testing.T, m mode, _ matrixOpts) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				cfg := loopTo(be.addr)
				cfg.opts.ReadTimeout = 200 * time.Millisecond
				cfg.opts.IdleTimeout = 10 * time.Second
				p, tp := startFrontTLS(t, m, cfg)
				c := dialH2Raw(t, p.addr, tp, 0)
				start := time.Now()
				c.request(1, "POST", tt.path, false, "content-length", tt.length)
				c.fr.WriteData(1, false, []byte("abc"))
				r := c.response(1)
				if r.status != "408" || time.Since(start) > 5*time.Second {
					t.Errorf("got (%q, %q, reset %v %v) after %v, want 408 after the 200ms read timeout", r.status, r.body, r.reset, r.code, time.Since(start))
				}
				if el := time.Since(start); el < 150*time.Millisecond {
					t.Errorf("answered after %v, want at least the read timeout", el)
				}
				rec := p.nextRec(t)
				if rec.Status != 408 {
					t.Errorf("record: got %v (%v), want 408", rec.Status, rec.Err)
				}
				if tt.toBackend {
					if !errors.Is(rec.Err, wire.ErrClientTimeout) {
						t.Errorf("record: got %v, want %v", rec.Err, wire.ErrClientTimeout)
					}
					select {
					case <-closed:
					case <-time.After(testTimeout):
						t.Fatal("the backend connection, its request body cut short, was not closed")
					}
				}
				c.request(3, "GET", "/fixed/next", true)
				for {
					// The first stream may still be reset (NO_ERROR: its
					// body is not wanted) before the next one's answer.
					ev := c.mustNext()
					if ev.stream == 1 && ev.typ == http2.FrameRSTStream {
						continue
					}
					if ev.stream != 3 || ev.typ != http2.FrameHeaders {
						t.Fatalf("got a %v frame on stream %d, want stream 3's answer", ev.typ, ev.stream)
					}
					break
				}
			})
		}
	}, onlyClients(clientH2, clientH2C), onlyBackends(backendH1))
}

// TestLoopH2StalledBodyResetCodes has a stream's client stop sending its
// body: a stream answered whole (the proxy's 408) is then reset with
// NO_ERROR, its body no longer wanted (RFC 9113 §8.1); one whose answer
// was under way (the backend answered before the body was in) is cut and
// reset with CANCEL: the client's stall ended it, not an error of the
// proxy's (INTERNAL_ERROR), and the record says 408.
func TestLoopH2StalledBodyResetCodes(t *testing.T) {
	be := startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
		head := readReqHead(br)
		if strings.HasPrefix(head, "POST /early") {
			io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nfirst")
		}
		io.Copy(io.Discard, br)
	})
	tests := []struct {
		name, path string
		status     string
		body       string
		code       http2.ErrCode
	}{
		{"answered whole", "/late", "408", "", http2.ErrCodeNo},
		{"answer under way", "/early", "200", "first", http2.ErrCodeCancel},
	}
	modes(t, func(t *testing.T, m mode, _ matrixOpts) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				cfg := loopTo(be.addr)
				cfg.opts.ReadTimeout = 200 * time.Millisecond
				p, tp := startFrontTLS(t, m, cfg)
				c := dialH2Raw(t, p.addr, tp, 0)
				c.request(1, "POST", tt.path, false, "content-length", "100000")
				c.fr.WriteData(1, false, []byte("abc"))
				r := c.response(1)
				if r.status != tt.status || tt.body != "" && string(r.body) != tt.body {
					t.Fatalf("got (%q, %q), want (%s, %q)", r.status, r.body, tt.status, tt.body)
				}
				if !r.reset {
					// Answered whole: the reset follows.
					ev := c.mustNext()
					r.reset, r.code = ev.typ == http2.FrameRSTStream && ev.stream == 1, ev.code
				}
				if !r.reset || r.code != tt.code {
					t.Errorf("got the stream reset %v with %v, want reset with %v", r.reset, r.code, tt.code)
				}
				if rec := p.nextRec(t); rec.Status != 408 || !errors.Is(rec.Err, wire.ErrClientTimeout) {
					t.Errorf("record: got (%d, %v), want (408, %v)", rec.Status, rec.Err, wire.ErrClientTimeout)
				}
			})
		}
	}, onlyClients(clientH2, clientH2C), onlyBackends(backendH1))
}

// TestLoopH2ClientCloses has the client close its connection, or reset
// it, with streams at a slow backend: every stream's request ends as 499,
// no backend connection is kept, and no stream is left on the loop.
func TestLoopH2ClientCloses(t *testing.T) {
	tests := []struct {
		name  string
		leave func(nc net.Conn)
	}{
		{"close", func(nc net.Conn) { nc.Close() }},
		{"reset", func(nc net.Conn) {
			if tc, ok := nc.(*net.TCPConn); ok {
				tc.SetLinger(0)
			} else if tc, ok := nc.(*tls.Conn); ok {
				tc.NetConn().(*net.TCPConn).SetLinger(0)
			}
			nc.Close()
		}},
	}
	modes(t, func(t *testing.T, m mode, _ matrixOpts) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				be := startSlowBackend(t)
				p, tp := startFrontTLS(t, m, loopTo(be.addr))
				c := dialH2Raw(t, p.addr, tp, 0)
				const n = 3
				for i := 0; i < n; i++ {
					c.request(uint32(2*i+1), "GET", fmt.Sprintf("/slow/%d", i), true)
				}
				for i := 0; i < n; i++ {
					be.waitReached(t)
				}
				if got := p.openStreams(); got != n {
					t.Errorf("got %d streams on the loop, want %d", got, n)
				}
				p.checkInvariants()
				tt.leave(c.nc)
				for i := 0; i < n; i++ {
					if rec := p.nextRec(t); rec.Status != proxy.StatusClientClosed || !errors.Is(rec.Err, wire.ErrClientGone) {
						t.Errorf("got (%v, %v), want (%v, %v)", rec.Status, rec.Err, proxy.StatusClientClosed, wire.ErrClientGone)
					}
				}
				for i := 0; i < n; i++ {
					select {
					case <-be.closed:
					case <-time.After(testTimeout):
						t.Fatalf("%d of %d backend connections closed, want all", i, n)
					}
				}
				waitFor(t, "the connection and its streams to end", func() bool { return p.eng.OpenConns() == 0 && p.openStreams() == 0 })
				if n := p.idleBackendConns(); n != 0 {
					t.Errorf("got %d idle backend connections, want 0", n)
				}
			})
		}
	}, onlyClients(clientH2, clientH2C), onlyBackends(backendH1))
}

// TestLoopH2EarlyAnswer has the backend answer an upload, larger than the
// stream's window, before it has read it: the answer reaches the client,
// the upload is stopped, the backend connection is not reused, and the
// client's connection goes on.
func TestLoopH2EarlyAnswer(t *testing.T) {
	be := startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
		for h := readReqHead(br); h != ""; h = readReqHead(br) {
			if strings.HasPrefix(h, "POST") {
				io.WriteString(nc, "HTTP/1.1 413 Too Large\r\nContent-Length: 3\r\n\r\nbig")
				io.Copy(io.Discard, br)
				return
			}
			io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	modes(t, func(t *testing.T, m mode, _ matrixOpts) {
		p, tp := startFrontTLS(t, m, loopTo(be.addr))
		c := newH2Client(t, p.addr, tp)
		accepts := be.accepts.Load()
		r, err := c.do(context.Background(), "POST", "/up", bytes.NewReader(make([]byte, 8<<20)), nil, nil)
		if err != nil || r.status != 413 || r.body != "big" {
			t.Errorf("got (%v, %d, %q), want (nil, 413, big)", err, r.status, r.body)
		}
		if rec := p.nextRec(t); rec.Status != 413 {
			t.Errorf("record: got (%v, %v), want 413", rec.Status, rec.Err)
		}
		if r := c.get("/after"); r.status != 200 || r.body != "ok" {
			t.Errorf("next stream: got (%d, %q), want (200, ok)", r.status, r.body)
		}
		if got := be.accepts.Load() - accepts; got != 2 {
			t.Errorf("got %d backend connections, want 2 (the one whose upload was cut short not reused)", got)
		}
		if n := c.dials.Load(); n != 1 {
			t.Errorf("got %d client connections, want 1", n)
		}
	}, onlyClients(clientH2, clientH2C), onlyBackends(backendH1))
}

// TestLoopH2ResetWhileWindowShut has the client give no window back, so
// that an answer waits for it, then reset the stream: the exchange ends
// as 499, a file answer gives its file back (closed once the planner's
// cache lets go too), a forwarded one its backend connection, and the
// connection goes on.
func TestLoopH2ResetWhileWindowShut(t *testing.T) {
	hb, _ := newHTTPBackend(t, httpMux())
	modes(t, func(t *testing.T, m mode, _ matrixOpts) {
		for _, path := range []string{"/files/big.bin", "/size/3000000"} {
			t.Run(path, func(t *testing.T) {
				p, tp := startFrontTLS(t, m, loopTo(hb.Listener.Addr().String()))
				h := addFileRoute(t, p, map[string][]byte{"big.bin": randomBody(3<<20, 5)})
				c := dialH2Raw(t, p.addr, tp, 16384)
				c.credit = false
				c.request(1, "GET", path, true)
				got := 0
				for got < 16384 {
					ev := c.mustNext()
					if ev.stream != 1 || ev.typ == http2.FrameRSTStream {
						t.Fatalf("got a %v frame on stream %d, want stream 1's answer", ev.typ, ev.stream)
					}
					got += len(ev.data)
				}
				c.fr.WriteRSTStream(1, http2.ErrCodeCancel)
				// A file answer's record keeps its status, as over
				// HTTP/1.1 (TestLoopFiles): the pipeline logs 499 for
				// forwarded and fixed answers only.
				wantStatus := proxy.StatusClientClosed
				if strings.HasPrefix(path, "/files/") {
					wantStatus = 200
				}
				rec := p.nextRec(t)
				if rec.Status != wantStatus || !errors.Is(rec.Err, wire.ErrClientGone) {
					t.Errorf("got (%v, %v), want (%v, %v)", rec.Status, rec.Err, wantStatus, wire.ErrClientGone)
				}
				waitFor(t, "the stream to end", func() bool { return p.openStreams() == 0 })
				c.credit = true
				c.fr.WriteWindowUpdate(0, uint32(65535-c.connWin))
				c.connWin = 65535
				c.request(3, "GET", "/fixed/next", true)
				for {
					ev := c.mustNext()
					if ev.stream == 1 {
						continue // what was on its way before the reset
					}
					if ev.stream != 3 || ev.typ != http2.FrameHeaders {
						t.Fatalf("got a %v frame on stream %d, want stream 3's answer", ev.typ, ev.stream)
					}
					break
				}
				if n := p.idleBackendConns(); path != "/files/big.bin" && n != 0 {
					t.Errorf("got %d idle backend connections, want 0 (the one with an answer cut short closed)", n)
				}
				if strings.HasPrefix(path, "/files/") {
					h.Close()
					waitFor(t, "the file to be closed", func() bool { return !fileOpen(t, "big.bin") })
				}
			})
		}
	}, onlyClients(clientH2, clientH2C), onlyBackends(backendH1))
}

// fileOpen reports whether the process holds a descriptor of a file
// with this base name in a test's temporary directory.
func fileOpen(t *testing.T, name string) bool {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && filepath.Base(target) == name && strings.Contains(target, t.Name()[:min(len(t.Name()), 20)]) {
			return true
		}
	}
	return false
}
