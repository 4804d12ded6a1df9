package engine

import (
	"bufio"
	"context"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/netpoll"
)

// Panics and connection caps on the loops.

// A panic while a loop serves a request costs that connection only: it
// is closed, counted and logged, and the loop and its other connections
// go on (issue 10).
func TestLoopPanicCostsOneConnection(t *testing.T) { run(t, testLoopPanicCostsOneConnection) }

func testLoopPanicCostsOneConnection(t *testing.T, k netpoll.Kind) {
	p := startLoopProxy(t, k, loopConfig{panicPath: "/fixed/panic"})
	other := dialRaw(t, p.addr)
	other.send("GET /fixed/a HTTP/1.1\r\nHost: x\r\n\r\n")
	other.read("GET")
	<-p.recs
	c := dialRaw(t, p.addr)
	c.send("GET /fixed/panic HTTP/1.1\r\nHost: x\r\n\r\n")
	c.expectClosed(testTimeout)
	if got := p.eng.Panics(); got != 1 {
		t.Errorf("got %d panics counted, want 1", got)
	}
	logged := false
	for len(p.logs) > 0 {
		if strings.Contains(<-p.logs, "panic on an event loop") {
			logged = true
		}
	}
	if !logged {
		t.Error("the panic was not logged")
	}
	for i := 0; i < 3; i++ {
		other.send("GET /fixed/b HTTP/1.1\r\nHost: x\r\n\r\n")
		if r := other.read("GET"); r.status != 200 {
			t.Errorf("after the panic: got %d, want 200 on another connection", r.status)
		}
		<-p.recs
	}
	c2 := dialRaw(t, p.addr)
	c2.send("GET /fixed/c HTTP/1.1\r\nHost: x\r\n\r\n")
	if r := c2.read("GET"); r.status != 200 {
		t.Errorf("after the panic: got %d, want 200 on a new connection", r.status)
	}
}

// TestLoopConnectionCap checks transport.max_conns_per_backend: requests
// over the cap wait in order for a connection, up to the queue, and get
// 503 past it or past the queue timeout, without counting against the
// backend (issue 10).
func TestLoopConnectionCap(t *testing.T) { run(t, testLoopConnectionCap) }

func testLoopConnectionCap(t *testing.T, k netpoll.Kind) {
	// The backend answers each request when told to, one at a time, so
	// the test decides when a connection comes free.
	answer := make(chan struct{})
	be, most, heads := gatedBackend(t, answer)
	cfg := loopTo(be.addr)
	cfg.to.MaxConnsPerBackend = 2
	cfg.to.MaxQueuePerBackend = 1
	cfg.to.QueueTimeout = testTimeout
	p := startLoopProxy(t, k, cfg)
	var cs []*rawClient
	for i := 0; i < 3; i++ {
		c := dialRaw(t, p.addr)
		c.send("GET /r HTTP/1.1\r\nHost: x\r\n\r\n")
		cs = append(cs, c)
	}
	waitFor(t, "two connections at the backend", func() bool { return most.Load() == 2 })
	// The fourth finds the queue full: 503 at once.
	c4 := dialRaw(t, p.addr)
	c4.send("GET /r HTTP/1.1\r\nHost: x\r\n\r\n")
	if r := c4.read("GET"); r.status != 503 {
		t.Errorf("past the queue: got %d, want 503", r.status)
	}
	// Which two went first is the poller's business: answer three, in
	// whatever order the backend reads them.
	go func() {
		for range cs {
			answer <- struct{}{}
		}
	}()
	for i, c := range cs {
		if r := c.read("GET"); r.status != 200 {
			t.Errorf("request %d: got %d, want 200 (the third waits for a free connection)", i, r.status)
		}
	}
	if m := most.Load(); m != 2 {
		t.Errorf("got %d connections at the backend at once, want the cap, 2", m)
	}
	if f := p.up.Backends[0].Failures(); f != 0 {
		t.Errorf("got %d failures counted against the backend, want 0", f)
	}

	// A request that waits longer than the queue timeout gets 503.
	cfg.to.MaxConnsPerBackend = 1
	cfg.to.QueueTimeout = 100 * time.Millisecond
	p2 := startLoopProxy(t, k, cfg)
	before := heads.Load()
	held := dialRaw(t, p2.addr)
	held.send("GET /r HTTP/1.1\r\nHost: x\r\n\r\n")
	// (The first proxy's idle connections stay open: count requests.)
	waitFor(t, "the held request at the backend", func() bool { return heads.Load() == before+1 })
	late := dialRaw(t, p2.addr)
	start := time.Now()
	late.send("GET /r HTTP/1.1\r\nHost: x\r\n\r\n")
	if r := late.read("GET"); r.status != 503 || time.Since(start) < 100*time.Millisecond {
		t.Errorf("got %d after %v, want 503 after the 100ms queue timeout", r.status, time.Since(start))
	}
	answer <- struct{}{}
	held.read("GET")
}

// TestLoopConnectionCapAcrossLoops: with two loops the cap is shared out
// so that the backend never sees more than it (3 here: shares of 2 and
// 1, not 2 each), however the clients land on the loops; every request
// over a loop's share waits and is answered.
func TestLoopConnectionCapAcrossLoops(t *testing.T) { run(t, testLoopConnectionCapAcrossLoops) }

func testLoopConnectionCapAcrossLoops(t *testing.T, k netpoll.Kind) {
	release := make(chan struct{})
	be, most, heads := gatedBackend(t, release)
	cfg := loopTo(be.addr)
	cfg.loops = 2
	cfg.to.MaxConnsPerBackend = 3
	cfg.to.MaxQueuePerBackend = 16
	cfg.to.QueueTimeout = testTimeout
	p := startLoopProxy(t, k, cfg)
	// A second listener with a socket on each loop: four clients for
	// each loop, whatever the kernel would have chosen.
	fd0, addr0 := listenLoopback(t)
	fd1, addr1 := listenLoopback(t)
	ll, err := p.eng.Attach("each loop", []int{fd0, fd1}, cfg.opts, p.admit, p.release)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ll.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		ll.Shutdown(ctx)
		syscall.Close(fd0)
		syscall.Close(fd1)
	})
	var cs []*rawClient
	for _, addr := range []string{addr0, addr1} {
		for i := 0; i < 4; i++ {
			c := dialRaw(t, addr)
			c.send("GET /r HTTP/1.1\r\nHost: x\r\n\r\n")
			cs = append(cs, c)
		}
	}
	// Every loop's share at the backend (a request over it, if one got
	// through, would have 50ms to arrive too).
	waitFor(t, "requests at the backend", func() bool { return heads.Load() >= 3 })
	time.Sleep(50 * time.Millisecond)
	p.settle()
	if m := most.Load(); m > 3 {
		t.Errorf("got %d connections at the backend at once, want the cap, 3, at most", m)
	}
	close(release)
	for i, c := range cs {
		if r := c.read("GET"); r.status != 200 {
			t.Errorf("request %d: got %d, want 200", i, r.status)
		}
	}
	if m := most.Load(); m > 3 {
		t.Errorf("got %d connections at the backend at once, want 3 at most", m)
	}
}

// gatedBackend is a backend that answers a request each time answer
// yields (or is closed). most is the most connections it had open at
// once; heads counts the requests it read.
func gatedBackend(t *testing.T, answer <-chan struct{}) (be *rawBackend, most, heads *atomic.Int32) {
	var open atomic.Int32
	most, heads = new(atomic.Int32), new(atomic.Int32)
	be = startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
		n := open.Add(1)
		defer open.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		for h := readReqHead(br); h != ""; h = readReqHead(br) {
			heads.Add(1)
			select {
			case <-answer:
			case <-time.After(testTimeout):
				return
			}
			io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	return be, most, heads
}

func TestShareOf(t *testing.T) {
	for n := 0; n <= 20; n++ {
		for loops := 1; loops <= 8; loops++ {
			sum, lo, hi := 0, n, 0
			for id := 0; id < loops; id++ {
				s := shareOf(n, loops, id)
				sum += s
				lo, hi = min(lo, s), max(hi, s)
			}
			if sum != n || hi-lo > 1 {
				t.Errorf("shareOf(%d, %d, ·): sum %d, spread %d..%d; want sum %d, spread 1 at most", n, loops, sum, lo, hi, n)
			}
		}
	}
}
