package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/netpoll"
	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/route"
	"github.com/helios-lb/helios/internal/wire"
)

// HTTP/2 backends that fail or misbehave: broken connections, idle
// timeouts, pings, backends that speak first, dial timeouts, buffered
// bodies.

// TestH2UpBackendConnectionBreaks has the backend close its connection
// under a stream: before the answer's head the request fails as the
// backend's (502); in the body the answer is cut (a reset stream for an
// HTTP/2 client, a short body for an HTTP/1.1 one) and recorded as the
// backend's failure. The next request dials a new connection and
// succeeds.
func TestH2UpBackendConnectionBreaks(t *testing.T) { run(t, testH2UpBackendConnectionBreaks) }

func testH2UpBackendConnectionBreaks(t *testing.T, k netpoll.Kind) {
	tests := []struct {
		name string
		cut  func(pc *h2Peer, id uint32)
		head bool // the answer's head went out
	}{
		{name: "before the head", cut: func(pc *h2Peer, id uint32) {}},
		{name: "mid-body of declared length", head: true, cut: func(pc *h2Peer, id uint32) {
			pc.headers(id, false, ":status", "200", "content-length", "100000")
			pc.data(id, false, bytes.Repeat([]byte("x"), 1000))
		}},
		{name: "mid-body without length", head: true, cut: func(pc *h2Peer, id uint32) {
			pc.headers(id, false, ":status", "200")
			pc.data(id, false, bytes.Repeat([]byte("x"), 1000))
		}},
	}
	for _, ck := range upClientKinds {
		for _, tt := range tests {
			t.Run(ck.name+"/"+tt.name, func(t *testing.T) {
				be := startH2Peer(t, nil, func(pc *h2Peer) {
					eachPeerRequest(pc, func(req *h2PeerReq) {
						if pc.n == 1 {
							tt.cut(pc, req.id)
							pc.cut() // and next fails: the loop ends
							return
						}
						pc.answer(req.id, "next")
					})
				})
				p := startH2UpProxy(t, k, h2upTo(be.addr))
				c := newUpClient(t, p.addr, ck.h2)
				r, err := c.do(context.Background(), "GET", "/x", nil, false, nil)
				switch {
				case tt.head && err == nil:
					t.Errorf("got (%d, %d bytes) whole, want the answer cut", r.status, len(r.body))
				case !tt.head && err != nil:
					t.Errorf("got %v, want an answer", err)
				case !tt.head && (r.status != 502 || r.body != string(bodyBadGateway)):
					t.Errorf("got (%d, %q), want (502, %q)", r.status, r.body, bodyBadGateway)
				}
				status := 502
				if tt.head {
					status = 0 // what was sent, or 499 when the client's side ended first
				}
				checkRecord(t, p, status, wire.ErrBackend)
				waitFor(t, "the broken backend connection to be closed", func() bool { return p.backendH2Conns() == 0 })
				c = newUpClient(t, p.addr, ck.h2)
				if r := c.get(t, "/next"); r.status != 200 || r.body != "next" {
					t.Errorf("next request: got (%d, %q), want (200, next)", r.status, r.body)
				}
				checkRecord(t, p, 200, nil)
				if got := be.accepts.Load(); got != 2 {
					t.Errorf("got %d backend connections, want 2 (the broken one replaced)", got)
				}
			})
		}
	}
}

// TestH2UpIdleTimeout has a backend connection without streams outlive
// the transport's IdleTimeout: it is closed, and the next request dials
// a new one.
func TestH2UpIdleTimeout(t *testing.T) { run(t, testH2UpIdleTimeout) }

func testH2UpIdleTimeout(t *testing.T, k netpoll.Kind) {
	be := startH2CBackend(t, 0, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	cfg := h2upTo(be.addr)
	cfg.to.IdleTimeout = 100 * time.Millisecond
	p := startH2UpProxy(t, k, cfg)
	c := newUpClient(t, p.addr, false)
	if r := c.get(t, "/a"); r.status != 200 || r.body != "ok" {
		t.Fatalf("got (%d, %q), want (200, ok)", r.status, r.body)
	}
	checkRecord(t, p, 200, nil)
	// The loops tick backend connections about once a second.
	waitFor(t, "the idle backend connection to be closed", func() bool { return be.closed.Load() == 1 })
	if n := p.backendH2Conns(); n != 0 {
		t.Errorf("got %d backend HTTP/2 connections, want 0", n)
	}
	if r := c.get(t, "/b"); r.status != 200 || r.body != "ok" {
		t.Errorf("got (%d, %q), want (200, ok)", r.status, r.body)
	}
	checkRecord(t, p, 200, nil)
	if got := be.accepts.Load(); got != 2 {
		t.Errorf("got %d backend connections, want 2", got)
	}
}

// TestH2UpPing has a backend connection stay silent, a stream open on
// it, past the client ping interval (h2.DefaultClientPingInterval: the
// engine does not set it, so the test gives the connection the time the
// loop's sweep would, 31 s on): it is pinged. Answered, the connection
// lives and its stream is answered; unanswered past the ping timeout,
// the connection is closed, its stream fails as the backend's (502),
// and the next request dials a new connection.
func TestH2UpPing(t *testing.T) { run(t, testH2UpPing) }

func testH2UpPing(t *testing.T, k netpoll.Kind) {
	for _, answered := range []bool{true, false} {
		name := "answered"
		if !answered {
			name = "unanswered"
		}
		t.Run(name, func(t *testing.T) {
			reached := make(chan struct{}, 1)
			pinged := make(chan struct{}, 1)
			release := make(chan struct{})
			be := startH2Peer(t, nil, func(pc *h2Peer) {
				pc.noPingAck = !answered && pc.n == 1
				var held uint32
				sawReq := false
				rel := release
				evs := make(chan h2PeerEv)
				go func() {
					defer close(evs)
					for {
						ev, err := pc.next()
						if err != nil {
							return
						}
						evs <- ev
					}
				}()
				for {
					select {
					case ev, ok := <-evs:
						switch {
						case !ok:
							return
						case ev.synced && held != 0 && !sawReq:
							// The proxy has read all we sent (its
							// SETTINGS acknowledged): the time may go.
							sawReq = true
							reached <- struct{}{}
						case ev.ping && pc.noPingAck, ev.synced:
							pinged <- struct{}{}
						case ev.req != nil && pc.n == 1 && held == 0:
							held = ev.req.id
							pc.sync()
						case ev.req != nil:
							pc.answer(ev.req.id, "next")
						}
					case <-rel:
						rel = nil
						pc.answer(held, "held")
					}
				}
			})
			p := startH2UpProxy(t, k, h2upTo(be.addr))
			c := newUpClient(t, p.addr, false)
			done := make(chan clientResp, 1)
			go func() {
				r, err := c.do(context.Background(), "GET", "/held", nil, false, nil)
				if err != nil {
					r.body = err.Error()
				}
				done <- r
			}()
			recv(t, reached, "the request at the backend")
			tick := func(d time.Duration) {
				for _, l := range p.eng.loops {
					l.do(func() {
						for _, hu := range slices.Clone(l.h2ups) {
							hu.tick(l.now + int64(d))
						}
					})
				}
			}
			tick(31 * time.Second)
			recv(t, pinged, "a PING at the backend")
			if answered {
				// Acknowledged: still alive when the ping timeout has
				// passed.
				tick(31*time.Second + 16*time.Second)
				p.settle()
				if n := p.backendH2Conns(); n != 1 {
					t.Fatalf("got %d backend connections, want 1 (the pinged one, alive)", n)
				}
				close(release)
				if r := recv(t, done, "the answer"); r.status != 200 || r.body != "held" {
					t.Errorf("got (%d, %q), want (200, held)", r.status, r.body)
				}
				checkRecord(t, p, 200, nil)
			} else {
				tick(31*time.Second + 16*time.Second)
				if r := recv(t, done, "the answer"); r.status != 502 {
					t.Errorf("got (%d, %q), want 502", r.status, r.body)
				}
				checkRecord(t, p, 502, wire.ErrBackend)
			}
			if r := c.get(t, "/next"); r.status != 200 || r.body != "next" {
				t.Errorf("next request: got (%d, %q), want (200, next)", r.status, r.body)
			}
			checkRecord(t, p, 200, nil)
			want := int32(1)
			if !answered {
				want = 2
			}
			if got := be.accepts.Load(); got != want {
				t.Errorf("got %d backend connections, want %d", got, want)
			}
		})
	}
}

// TestH2UpBackendSpeaksFirst connects, again and again on fresh engines,
// to a backend that writes its SETTINGS as soon as it accepts, so that
// its connection may be readable before the loop has seen it writable
// (the portable poller reports the two apart, and each once): the
// request must go every time.
func TestH2UpBackendSpeaksFirst(t *testing.T) { run(t, testH2UpBackendSpeaksFirst) }

func testH2UpBackendSpeaksFirst(t *testing.T, k netpoll.Kind) {
	be := startH2CBackend(t, 0, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ready") }))
	cfg := h2upTo(be.addr)
	// A connect the loop never takes as done, or a connection it never
	// reads again (the readable report spent while connecting), fails the
	// request in this time (502, 504), rather than at the test's timeout.
	cfg.to.DialTimeout = 2 * time.Second
	cfg.to.ResponseHeaderTimeout = 2 * time.Second
	for i := range 10 {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			p := startH2UpProxy(t, k, cfg)
			c := dialRaw(t, p.addr)
			c.send("GET /ready HTTP/1.1\r\nHost: x\r\n\r\n")
			if r := c.read("GET"); r.status != 200 || r.body != "ready" {
				t.Errorf("got (%d, %q), want (200, ready)", r.status, r.body)
			}
			checkRecord(t, p, 200, nil)
		})
	}
	if got := be.accepts.Load(); got != 10 {
		t.Errorf("got %d backend connections, want 10 (one per engine)", got)
	}
}

// TestH2UpDialTimeoutAbandonsConnect has a backend's connect hang (its
// accept queue full, so its SYNs are dropped) past the transport's
// DialTimeout: the request fails (502), and the connect is given up, as
// an HTTP/1.1 backend's is (lupconn.close): no connection is left
// connecting, counted open, or promised streams. So once the backend is
// back, the next request dials it afresh and is served, rather than
// waiting for the old connect's next SYN (1 s, 3 s, ... on) and failing
// again.
func TestH2UpDialTimeoutAbandonsConnect(t *testing.T) { run(t, testH2UpDialTimeoutAbandonsConnect) }

func testH2UpDialTimeoutAbandonsConnect(t *testing.T, k netpoll.Kind) {
	fd, addr := listenLoopback(t)
	lf := os.NewFile(uintptr(fd), "backend")
	t.Cleanup(func() { lf.Close() })
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	// The one place in the accept queue.
	fill, err := net.DialTimeout("tcp", addr, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fill.Close() })
	cfg := h2upTo(addr)
	cfg.to.DialTimeout = 300 * time.Millisecond
	p := startH2UpProxy(t, k, cfg)
	c := dialRaw(t, p.addr)
	c.send("GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
	if r := c.read("GET"); r.status != 502 {
		t.Fatalf("got (%d, %q), want 502 (the connect timed out)", r.status, r.body)
	}
	checkRecord(t, p, 502, wire.ErrConnect)
	if n, s := p.backendH2Conns(), p.backendStreams(); n != 0 || s != 0 {
		t.Errorf("after the dial timeout: got %d backend connections and %d streams promised, want 0 and 0", n, s)
	}
	// The backend is back: it accepts (the queued connection first).
	ln, err := net.FileListener(lf)
	if err != nil {
		t.Fatal(err)
	}
	be := serveH2C(t, ln, 0, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "back") }))
	// Until the queued connection is taken the queue is still full, and
	// the proxy's SYN would be dropped (retried after 1 s, past the dial
	// timeout).
	waitFor(t, "the backend to take the queued connection", func() bool { return be.accepts.Load() >= 1 })
	c.send("GET /b HTTP/1.1\r\nHost: x\r\n\r\n")
	if r := c.read("GET"); r.status != 200 || r.body != "back" {
		t.Errorf("backend back: got (%d, %q), want (200, back)", r.status, r.body)
	}
	checkRecord(t, p, 0, nil)
	if n := be.accepts.Load(); n != 2 {
		t.Errorf("got %d connections accepted, want 2 (the queued one, and the proxy's new one)", n)
	}
}

// bufferRoute makes p's upstream route buffer request bodies under lim.
func bufferRoute(t *testing.T, p *loopProxy, lim wire.BufferLimits) {
	t.Helper()
	tab, err := route.New([]route.Entry[*proxy.Route]{
		{Name: "fixed", PathPrefix: "/fixed/", Value: &proxy.Route{Name: "fixed", Respond: &fixedRoute}},
		{Name: "up", Value: &proxy.Route{Name: "up", Upstream: p.up, Buffer: &lim}},
	})
	if err != nil {
		t.Fatal(err)
	}
	p.pipe.Swap(&proxy.Graph{Routes: tab, Upstreams: []*proxy.Upstream{p.up}, Recorder: p})
}

// fdsUnder counts the process's descriptors of files in dir.
func fdsUnder(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	n := 0
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && strings.HasPrefix(target, dir+string(filepath.Separator)) {
			n++
		}
	}
	return n
}

// TestH2UpBufferedBody has the route buffer request bodies, in memory up
// to 64 KiB and the rest in a file: a body of several MiB, with and
// without a declared length, from HTTP/1.1 and HTTP/2 clients, reaches
// the h2c backend whole (the file part read back as the stream's window
// allows), with the length it was found to have; the file is closed once
// the exchange ends.
func TestH2UpBufferedBody(t *testing.T) { run(t, testH2UpBufferedBody) }

func testH2UpBufferedBody(t *testing.T, k netpoll.Kind) {
	body := randomBody(3<<20+5, 24)
	be := startH2CBackend(t, 0, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(400)
			return
		}
		w.Header().Set("X-Req-CL", strconv.FormatInt(r.ContentLength, 10))
		fmt.Fprintf(w, "%d %x", len(b), sha256.Sum256(b))
	}))
	p := startH2UpProxy(t, k, h2upTo(be.addr))
	dir := t.TempDir()
	bufferRoute(t, p, wire.BufferLimits{Memory: 64 << 10, File: 16 << 20, Dir: dir})
	want := fmt.Sprintf("%d %x", len(body), sha256.Sum256(body))
	for _, ck := range upClientKinds {
		c := newUpClient(t, p.addr, ck.h2)
		for _, chunked := range []bool{false, true} {
			name := ck.name + "/with length"
			if chunked {
				name = ck.name + "/without length"
			}
			t.Run(name, func(t *testing.T) {
				r, err := c.do(context.Background(), "POST", "/up", body, chunked, nil)
				if err != nil {
					t.Fatalf("got %v, want an answer", err)
				}
				if r.status != 200 || r.body != want {
					t.Errorf("got (%d, %q), want (200, %q)", r.status, r.body, want)
				}
				if cl := r.header.Get("X-Req-CL"); cl != strconv.Itoa(len(body)) {
					t.Errorf("backend's content-length: got %s, want %d (the buffered body's)", cl, len(body))
				}
				checkRecord(t, p, 200, nil)
				waitFor(t, "the buffered body's file to be closed", func() bool { return fdsUnder(t, dir) == 0 })
			})
		}
	}
	if got := be.accepts.Load(); got != 1 {
		t.Errorf("got %d backend connections, want 1", got)
	}
}
