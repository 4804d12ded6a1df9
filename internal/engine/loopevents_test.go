package engine

import (
	"bufio"
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/netpoll"
)

// The loop's ready list under load: what a loop can do for a connection
// without waiting for the connection's own event (or, for posted work,
// the wake-up's), which under load comes behind every socket that was
// ready before it. A holdPoller holds chosen events back while the test
// looks at what the loop did without them.

// holdPoller stands between a loop and its poller and holds back the
// events pick chooses while holding is on; release hands them to the
// loop after all (they are edges: dropped, the sockets would stall).
type holdPoller struct {
	netpoll.Poller
	pick func(ev netpoll.Event) bool

	mu      sync.Mutex
	holding bool
	held    []netpoll.Event
}

// Poll filters what the poller reports now.
func (h *holdPoller) Poll(events []netpoll.Event) (int, error) {
	n, err := h.Poller.Poll(events)
	return h.filter(events, n), err
}

// Wait filters what the poller reports after waiting.
func (h *holdPoller) Wait(events []netpoll.Event, d time.Duration) (int, error) {
	n, err := h.Poller.Wait(events, d)
	return h.filter(events, n), err
}

// filter takes the picked events out of events[:n] while holding, and
// hands back what was held once it is not.
func (h *holdPoller) filter(events []netpoll.Event, n int) int {
	if n < 0 {
		return n
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.holding {
		for len(h.held) > 0 && n < len(events) {
			events[n] = h.held[0]
			h.held = h.held[1:]
			n++
		}
		return n
	}
	kept := 0
	for _, ev := range events[:n] {
		if h.pick(ev) {
			h.held = append(h.held, ev)
			continue
		}
		events[kept] = ev
		kept++
	}
	return kept
}

// hold starts holding.
func (h *holdPoller) hold() {
	h.mu.Lock()
	h.holding = true
	h.mu.Unlock()
}

// release stops holding and wakes the loop to take what was held.
func (h *holdPoller) release() {
	h.mu.Lock()
	h.holding = false
	h.mu.Unlock()
	h.Poller.Wake()
}

// startHolding starts a one-loop proxy whose poller holds the events pick
// chooses once it is up; the test's end releases them.
func startHolding(t *testing.T, k netpoll.Kind, cfg loopConfig, pick func(ev netpoll.Event) bool) (*loopProxy, *holdPoller) {
	h := &holdPoller{pick: pick}
	cfg.wrapPoller = func(p netpoll.Poller) netpoll.Poller {
		h.Poller = p
		return h
	}
	p := startLoopProxy(t, k, cfg)
	h.hold()
	t.Cleanup(h.release) // before the proxy stops (cleanups run last first)
	return p, h
}

// clientFDs records the client sockets the loops accept, and picks their
// events.
type clientFDs struct {
	mu  sync.Mutex
	fds map[int32]bool
}

func (c *clientFDs) accepted(fd int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fds == nil {
		c.fds = map[int32]bool{}
	}
	c.fds[int32(fd)] = true
}

func (c *clientFDs) pick(ev netpoll.Event) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fds[ev.FD]
}

// connectWhileBlocked connects to p while its loop is blocked, has send
// write what the client sends first, and lets the loop go once the bytes
// have had time to arrive: the loop accepts a connection whose first
// bytes are there.
func connectWhileBlocked(t *testing.T, p *loopProxy, send func(nc net.Conn)) net.Conn {
	t.Helper()
	unblock := p.blockLoop(0)
	nc, err := net.DialTimeout("tcp", p.addr, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	send(nc)
	time.Sleep(20 * time.Millisecond)
	unblock()
	return nc
}

// countingConn counts the bytes read from its connection.
type countingConn struct {
	net.Conn
	n atomic.Int64
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.n.Add(int64(n))
	return n, err
}

// TestLoopTLSHelloAtAccept: a ClientHello that came with its connection
// is read at the accept, and the handshake answers it, with no event of
// the connection.
func TestLoopTLSHelloAtAccept(t *testing.T) { run(t, testLoopTLSHelloAtAccept) }

func testLoopTLSHelloAtAccept(t *testing.T, k netpoll.Kind) {
	var clients clientFDs
	tp := newTestTLS(t)
	cfg := loopConfig{acceptControl: clients.accepted}
	cfg.opts.TLS = tp
	p, h := startHolding(t, k, cfg, clients.pick)
	var cc *countingConn
	var tc *tls.Conn
	handshook := make(chan error, 1)
	connectWhileBlocked(t, p, func(nc net.Conn) {
		nc.SetDeadline(time.Now().Add(testTimeout))
		cc = &countingConn{Conn: nc}
		tc = tls.Client(cc, &tls.Config{RootCAs: tp.pool, ServerName: "localhost"})
		go func() { handshook <- tc.Handshake() }()
	})
	// With the connection's events held back, only a ClientHello read at
	// the accept brings the ServerHello.
	waitFor(t, "the ServerHello with the connection's events held back", func() bool { return cc.n.Load() > 0 })
	h.release()
	if err := <-handshook; err != nil {
		t.Fatalf("handshake: %v", err)
	}
	c := &rawClient{t: t, nc: tc, br: bufio.NewReader(tc)}
	c.send("GET /fixed/a HTTP/1.1\r\nHost: x\r\n\r\n")
	if r := c.read("GET"); r.status != 200 || r.body != "fixed" {
		t.Fatalf("got (%d, %q), want (200, fixed)", r.status, r.body)
	}
}

// TestLoopPostedWorkWithoutWake: work posted to a loop (a finished
// handshake, a stop) runs after the loop's next batch of events, whether
// or not the wake-up's own event has come.
func TestLoopPostedWorkWithoutWake(t *testing.T) { run(t, testLoopPostedWorkWithoutWake) }

func testLoopPostedWorkWithoutWake(t *testing.T, k netpoll.Kind) {
	p, h := startHolding(t, k, loopConfig{}, func(ev netpoll.Event) bool { return ev.FD == netpoll.WakeFD })
	ran := make(chan struct{})
	if !p.eng.loops[0].post(func() { close(ran) }) {
		t.Fatal("loop stopped")
	}
	// A request makes a batch of events on the loop.
	c := dialRaw(t, p.addr)
	c.send("GET /fixed/a HTTP/1.1\r\nHost: x\r\n\r\n")
	if r := c.read("GET"); r.status != 200 {
		t.Fatalf("got %d, want 200", r.status)
	}
	select {
	case <-ran:
	case <-time.After(3 * time.Second):
		t.Fatal("with the wake-up's events held back, posted work did not run")
	}
	h.release()
}
