package engine

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/netpoll"
	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/wire"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// HTTP/2 clients' connections over their life: shutdown, idle timeout,
// panics, the listeners that serve HTTP/1.1 beside HTTP/2, deadlines.

// TestLoopH2Shutdown drains the listener, and the engine, with a stream at
// a slow backend: the client gets GOAWAY for every stream and a PING, a
// stream it opened before it answered the PING is still served, the
// final GOAWAY names the last stream served, the streams in flight finish,
// and the connection then closes and Shutdown returns.
func TestLoopH2Shutdown(t *testing.T) {
	tests := []struct {
		name     string
		shutdown func(p *loopProxy, ctx context.Context) error
	}{
		{"listener", func(p *loopProxy, ctx context.Context) error { return p.ll.Shutdown(ctx) }},
		{"engine", func(p *loopProxy, ctx context.Context) error { return p.eng.Shutdown(ctx) }},
	}
	modes(t, func(t *testing.T, m mode, _ matrixOpts) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				be := startSlowBackend(t)
				p, tp := startFrontTLS(t, m, loopTo(be.addr))
				c := dialH2Raw(t, p.addr, tp, 0)
				c.request(1, "GET", "/slow", true)
				be.waitReached(t)
				p.checkInvariants()
				ping, shut := startH2Drain(t, p, c, tt.shutdown)
				// A request already on its way is served.
				c.request(3, "GET", "/fixed/late", true)
				if r := c.response(3); r.status != "200" || string(r.body) != "fixed" {
					t.Errorf("stream opened before the PING's answer: got (%q, %q), want (200, fixed)", r.status, r.body)
				}
				c.fr.WritePing(true, ping)
				ev := c.mustNext()
				if ev.typ != http2.FrameGoAway || ev.code != http2.ErrCodeNo || ev.last != 3 {
					t.Fatalf("got (%v, %v, last %d), want the final GOAWAY NO_ERROR naming stream 3", ev.typ, ev.code, ev.last)
				}
				select {
				case err := <-shut:
					t.Fatalf("Shutdown returned %v with a stream at the backend", err)
				default:
				}
				close(be.release)
				if r := c.response(1); r.status != "200" || string(r.body) != "slow" {
					t.Errorf("stream in flight: got (%q, %q, reset %v), want (200, slow)", r.status, r.body, r.reset)
				}
				c.expectEOF()
				c.nc.Close()
				drainReturned(t, shut)
				if n := p.eng.OpenConns(); n != 0 {
					t.Errorf("got %d open connections, want 0", n)
				}
			})
		}
	}, onlyClients(clientH2, clientH2C), onlyBackends(backendH1))
}

// TestLoopH2IdleTimeout closes an HTTP/2 connection that has had no
// stream for the listener's idle timeout (HTTP2.IdleTimeout left zero
// takes it): GOAWAY NO_ERROR naming the last stream, then the close.
func TestLoopH2IdleTimeout(t *testing.T) {
	// In parallel: each cell waits for a tick of the connection's clock.
	modes(t, func(t *testing.T, m mode, _ matrixOpts) {
		cfg := loopConfig{}
		cfg.opts.IdleTimeout = 200 * time.Millisecond
		p, tp := startFrontTLS(t, m, cfg)
		c := dialH2Raw(t, p.addr, tp, 0)
		c.request(1, "GET", "/fixed/x", true)
		if r := c.response(1); r.status != "200" {
			t.Fatalf("got %q, want 200", r.status)
		}
		start := time.Now()
		ev := c.mustNext()
		if ev.typ != http2.FrameGoAway || ev.code != http2.ErrCodeNo || ev.last != 1 {
			t.Fatalf("got (%v, %v, last %d), want GOAWAY NO_ERROR naming stream 1", ev.typ, ev.code, ev.last)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("idle connection told to go after %v, want about the 200ms timeout (ticks are 1s)", d)
		}
		c.expectEOF()
		c.nc.Close()
		waitFor(t, "the connection to close", func() bool { return p.eng.OpenConns() == 0 })
	}, onlyClients(clientH2, clientH2C), onlyBackends(backendH1), inParallel())
}

// TestLoopH2PanicCostsOneStream has the recorder panic for one stream's
// request (a fixed answer) while another stream of the connection waits
// for a slow backend: the panic is counted, and the other stream, the
// connection and its next streams go on.
func TestLoopH2PanicCostsOneStream(t *testing.T) {
	modes(t, func(t *testing.T, m mode, _ matrixOpts) { testH2Panic(t, m, "/fixed/panic") },
		onlyClients(clientH2, clientH2C), onlyBackends(backendH1))
}

// TestLoopH2PanicInForwardedAnswer is TestLoopH2PanicCostsOneStream with
// the panic in the record of a forwarded answer, which runs on the
// backend connection's event after that connection went back to the
// pool.
func TestLoopH2PanicInForwardedAnswer(t *testing.T) {
	modes(t, func(t *testing.T, m mode, _ matrixOpts) { testH2Panic(t, m, "/panic") },
		onlyClients(clientH2, clientH2C), onlyBackends(backendH1))
}

// testH2Panic is the body of the panic tests: the recorder panics for
// requests to path.
func testH2Panic(t *testing.T, m mode, path string) {
	var slowSeen atomic.Bool
	release := make(chan struct{})
	be := headBackend(t, func(nc net.Conn, head string) {
		if strings.HasPrefix(head, "GET /slow ") {
			slowSeen.Store(true)
			<-release
		}
		io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nbody")
	})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	cfg := loopTo(be.addr)
	cfg.panicPath = path
	p, tp := startFrontTLS(t, m, cfg)
	c := newH2Client(t, p.addr, tp)
	c.get("/fixed/warm")
	<-p.recs
	slow := make(chan clientResp, 1)
	go func() {
		r, err := c.do(context.Background(), "GET", "/slow", nil, nil, nil)
		if err != nil {
			r.status, r.body = -1, err.Error()
		}
		slow <- r
	}()
	waitFor(t, "the slow request to reach the backend", slowSeen.Load)
	p.checkInvariants()
	// The panicking stream's own outcome is not the point: its answer
	// may have gone before the recorder ran.
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	c.do(ctx, "GET", path, nil, nil, nil)
	cancel()
	waitFor(t, "the panic", func() bool { return p.eng.Panics() == 1 })
	close(release)
	select {
	case r := <-slow:
		if r.status != 200 || r.body != "body" {
			t.Errorf("the other stream: got (%d, %q), want (200, body)", r.status, r.body)
		}
	case <-time.After(testTimeout):
		t.Fatal("the other stream got no answer")
	}
	if r := c.get("/fixed/after"); r.status != 200 || r.body != "fixed" {
		t.Errorf("next stream: got (%d, %q), want (200, fixed)", r.status, r.body)
	}
	if n := c.dials.Load(); n != 1 {
		t.Errorf("got %d client connections, want 1 (the panic costs its stream only)", n)
	}
	if got := p.eng.Panics(); got != 1 {
		t.Errorf("got %d panics counted, want 1", got)
	}
	// With the client's connection still open, every stream has ended:
	// none was left behind by the panic.
	deadline := time.Now().Add(2 * time.Second)
	for p.openStreams() != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := p.openStreams(); n != 0 {
		// Forget them, and the closed connections left in the pools, so
		// that the proxy's shutdown reports instead of panicking the loop
		// (it would end their exchanges a second time, and close fd -1).
		for _, l := range p.eng.loops {
			l.do(func() {
				for l.streams.head != nil {
					l.streams.remove(l.streams.head)
				}
				for _, pl := range l.pools {
					pl.idle = slices.DeleteFunc(pl.idle, func(u *lupconn) bool { return u.fd < 0 })
				}
			})
		}
		t.Fatalf("got %d streams left after the panic, want 0", n)
	}
}

// TestLoopH2CleartextAfterTLSHasNoTLSVersion serves a TLS connection and
// then, on another listener of the same loop, a cleartext one, over
// HTTP/1.1 and over h2c: the cleartext requests have no TLS version for
// the recorders (the access log's tls field), whatever connection the
// loop served before with the same lconn.
func TestLoopH2CleartextAfterTLSHasNoTLSVersion(t *testing.T) {
	run(t, testLoopH2CleartextAfterTLSHasNoTLSVersion)
}

func testLoopH2CleartextAfterTLSHasNoTLSVersion(t *testing.T, k netpoll.Kind) {
	for _, proto := range []string{"HTTP/1.1", "h2c"} {
		t.Run(proto, func(t *testing.T) {
			p, _ := startH2Proxy(t, k, loopConfig{}, false)
			tp := h2TLS(t)
			fd, addr := listenLoopback(t)
			tll, err := p.eng.Attach("tls", []int{fd}, Options{TLS: tp}, p.admit, p.release)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				tll.Stop()
				syscall.Close(fd)
			})
			vers := make(chan string, 16)
			g := p.pipe.Graph()
			p.pipe.Swap(&proxy.Graph{Routes: g.Routes, Upstreams: g.Upstreams, Recorder: versionRecorder{p, vers}})
			nextVersion := func() string {
				t.Helper()
				return recv(t, vers, "a request recorded")
			}

			c := dialTLS(t, addr, tp)
			c.send("GET /fixed/tls HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
			if r := c.read("GET"); r.status != 200 {
				t.Fatalf("over TLS: got %d, want 200", r.status)
			}
			if v := nextVersion(); v != "1.3" {
				t.Fatalf("TLS version of the TLS request: got %q, want 1.3", v)
			}
			c.expectClosed(time.Second)
			waitFor(t, "the TLS connection to be closed", func() bool { return p.eng.OpenConns() == 0 })

			switch proto {
			case "HTTP/1.1":
				c := dialRaw(t, p.addr)
				c.send("GET /fixed/clear HTTP/1.1\r\nHost: x\r\n\r\n")
				c.read("GET")
			case "h2c":
				newH2Client(t, p.addr, nil).get("/fixed/clear")
			}
			if v := nextVersion(); v != "" {
				t.Errorf("TLS version of a cleartext %s request: got %q, want none", proto, v)
			}
		})
	}
}

// versionRecorder hands each request's TLS version to vers, then records
// it as p does.
type versionRecorder struct {
	p    *loopProxy
	vers chan<- string
}

func (r versionRecorder) Record(ex wire.Exchange, rec proxy.Record) {
	r.vers <- string(ex.TLSVersion())
	r.p.Record(ex, rec)
}

// TestLoopH2CListenerServesHTTP1 checks an h2c listener still serves
// HTTP/1.1: requests whose first bytes could begin the preface (POST,
// PUT, a lone "P") are HTTP/1.1 once they part from it, keep-alive
// works, and the preface counts only at a connection's start.
func TestLoopH2CListenerServesHTTP1(t *testing.T) { run(t, testLoopH2CListenerServesHTTP1) }

func testLoopH2CListenerServesHTTP1(t *testing.T, k netpoll.Kind) {
	hb, _ := newHTTPBackend(t, httpMux())
	p, _ := startH2Proxy(t, k, loopTo(hb.Listener.Addr().String()), false)
	tests := []struct {
		name   string
		pieces []string
		method string
		status int
		body   string
	}{
		{"GET", []string{"GET /fixed/a HTTP/1.1\r\nHost: x\r\n\r\n"}, "GET", 200, "fixed"},
		{"POST", []string{"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"}, "POST", 200, "hello"},
		{"PUT in pieces", []string{"P", "UT /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"}, "PUT", 200, "abc"},
		{"PRI of HTTP/1.1", []string{"PRI", " /fixed/a HTTP/1.1\r\nHost: x\r\n\r\n"}, "PRI", 200, "fixed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dialRaw(t, p.addr)
			for i, piece := range tt.pieces {
				if i > 0 {
					c.expectOpen(50 * time.Millisecond)
				}
				c.send(piece)
			}
			if r := c.read(tt.method); r.status != tt.status || r.body != tt.body {
				t.Fatalf("got (%d, %q), want (%d, %q)", r.status, r.body, tt.status, tt.body)
			}
			// Keep-alive: the next request, even the preface, is HTTP/1.1.
			c.send("GET /fixed/b HTTP/1.1\r\nHost: x\r\n\r\n")
			if r := c.read("GET"); r.status != 200 || r.body != "fixed" {
				t.Errorf("next request: got (%d, %q), want (200, fixed)", r.status, r.body)
			}
			c.send(http2.ClientPreface)
			if r := c.read("PRI"); r.status != 505 {
				t.Errorf("preface after a request: got %d, want 505", r.status)
			}
			c.expectClosed(time.Second)
		})
	}
	t.Run("preface in pieces", func(t *testing.T) {
		nc, err := net.DialTimeout("tcp", p.addr, testTimeout)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(testTimeout))
		io.WriteString(nc, http2.ClientPreface[:1])
		rc := &rawClient{t: t, nc: nc, br: bufio.NewReader(nc)}
		rc.expectOpen(50 * time.Millisecond)
		io.WriteString(nc, http2.ClientPreface[1:16])
		rc.expectOpen(50 * time.Millisecond)
		// The rest of the preface, SETTINGS and a request in one write.
		var buf bytes.Buffer
		buf.WriteString(http2.ClientPreface[16:])
		fr := http2.NewFramer(&buf, rc.br)
		fr.WriteSettings()
		var hb bytes.Buffer
		enc := hpack.NewEncoder(&hb)
		for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":path", "/fixed/p"}, {":authority", "x"}} {
			enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true})
		nc.Write(buf.Bytes())
		c := &h2Raw{t: t, nc: nc, fr: http2.NewFramer(nc, rc.br), autoPing: true, connWin: 65535, streamWin: map[uint32]int64{}, initial: 65535,
			dec: hpack.NewDecoder(4096, nil)}
		if r := c.response(1); r.status != "200" || string(r.body) != "fixed" {
			t.Errorf("got (%q, %q), want (200, fixed)", r.status, r.body)
		}
	})
	t.Run("broken preface", func(t *testing.T) {
		c := dialRaw(t, p.addr)
		c.send("PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n")
		c.expectClosed(time.Second)
	})
}

// TestLoopH2PrefaceWithoutH2C checks HTTP/2 is only served where it is
// offered: a cleartext listener without H2C answers the preface as the
// HTTP/1.1 request it reads as (505) and closes; a TLS listener whose
// ALPN does not offer h2 goes on with HTTP/1.1 when a client asks for h2.
func TestLoopH2PrefaceWithoutH2C(t *testing.T) { run(t, testLoopH2PrefaceWithoutH2C) }

func testLoopH2PrefaceWithoutH2C(t *testing.T, k netpoll.Kind) {
	t.Run("cleartext", func(t *testing.T) {
		p := startLoopProxy(t, k, loopConfig{})
		c := dialRaw(t, p.addr)
		c.send(http2.ClientPreface)
		r, err := c.tryRead("PRI")
		if err != nil || r.status != 505 {
			t.Fatalf("got (%v, %d), want an HTTP/1.1 505", err, r.status)
		}
		c.expectClosed(time.Second)
		if n := p.openStreams(); n != 0 {
			t.Errorf("got %d streams, want 0", n)
		}
	})
	t.Run("tls without h2", func(t *testing.T) {
		tp := newTestTLS(t) // ALPN: http/1.1 alone
		cfg := loopConfig{}
		cfg.opts.TLS = tp
		p := startLoopProxy(t, k, cfg)
		nc, err := tls.DialWithDialer(&net.Dialer{Timeout: testTimeout}, "tcp", p.addr,
			&tls.Config{RootCAs: tp.pool, ServerName: "localhost", NextProtos: []string{"h2", "http/1.1"}})
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(testTimeout))
		if got := nc.ConnectionState().NegotiatedProtocol; got != "http/1.1" {
			t.Errorf("ALPN: got %q, want http/1.1", got)
		}
		c := &rawClient{t: t, nc: nc, br: bufio.NewReader(nc)}
		c.send("GET /fixed/ HTTP/1.1\r\nHost: x\r\n\r\n")
		if r := c.read("GET"); r.status != 200 || r.body != "fixed" {
			t.Errorf("got (%d, %q), want (200, fixed)", r.status, r.body)
		}
	})
}

// TestLoopH2TLSServesHTTP1 checks a TLS listener that offers h2 still
// serves a client that asks for http/1.1, or for nothing, with HTTP/1.1.
func TestLoopH2TLSServesHTTP1(t *testing.T) { run(t, testLoopH2TLSServesHTTP1) }

func testLoopH2TLSServesHTTP1(t *testing.T, k netpoll.Kind) {
	p, tp := startH2Proxy(t, k, loopConfig{}, true)
	for _, protos := range [][]string{{"http/1.1"}, nil} {
		t.Run(fmt.Sprint(protos), func(t *testing.T) {
			nc, err := tls.DialWithDialer(&net.Dialer{Timeout: testTimeout}, "tcp", p.addr,
				&tls.Config{RootCAs: tp.pool, ServerName: "localhost", NextProtos: protos})
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			nc.SetDeadline(time.Now().Add(testTimeout))
			if got, want := nc.ConnectionState().NegotiatedProtocol, strings.Join(protos, ""); got != want {
				t.Errorf("ALPN: got %q, want %q", got, want)
			}
			c := &rawClient{t: t, nc: nc, br: bufio.NewReader(nc)}
			for i := 0; i < 2; i++ {
				c.send("GET /fixed/ HTTP/1.1\r\nHost: x\r\n\r\n")
				if r := c.read("GET"); r.status != 200 || r.body != "fixed" {
					t.Errorf("request %d: got (%d, %q), want (200, fixed)", i, r.status, r.body)
				}
			}
		})
	}
}

// TestLoopH2TickDeadlineNotInherited: an lconn that served an HTTP/2
// connection (its tick deadline set) and went back to the free list must
// not carry that deadline into the next connection it serves. A TLS
// connection sets no deadline until its handshake is done, so the stale
// tick fired on a connection still handshaking and panicked (no HTTP/2
// session to tick); seen under h2load's connection churn.
func TestLoopH2TickDeadlineNotInherited(t *testing.T) {
	run(t, func(t *testing.T, k netpoll.Kind) {
		p, tp := startH2Proxy(t, k, loopConfig{}, true)
		c := newH2Client(t, p.addr, tp)
		if r := c.get("/fixed/a"); r.status != 200 {
			t.Fatalf("first request: got %d, want 200", r.status)
		}
		c.close() // its lconn goes back to the loop's free list, tick deadline set
		// The next connection takes that lconn; it only connects, so it
		// stays in its handshake past the old tick deadline.
		nc, err := net.DialTimeout("tcp", p.addr, testTimeout)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		time.Sleep(1500 * time.Millisecond) // past the tick the last use had due, and a sweep
		tc := tls.Client(nc, &tls.Config{RootCAs: tp.pool, ServerName: "localhost", NextProtos: []string{"http/1.1"}})
		tc.SetDeadline(time.Now().Add(testTimeout))
		if _, err := io.WriteString(tc, "GET /fixed/a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
			t.Fatalf("the connection that reused the lconn: got %v, want it served", err)
		}
		out, _ := io.ReadAll(tc)
		if !strings.HasPrefix(string(out), "HTTP/1.1 200") {
			t.Errorf("answer: got %q, want a 200", out)
		}
		if got := p.eng.Panics(); got != 0 {
			t.Errorf("panics: got %d, want 0", got)
		}
	})
}
