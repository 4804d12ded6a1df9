package engine

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/httpmsg"
	"github.com/helios-lb/helios/internal/listener"
	"github.com/helios-lb/helios/internal/netpoll"
	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/wire"
)

// Cases only an event loop has: edges, batches, hand-offs between
// states, and the bookkeeping of connections the loop owns.

// TestLoopPipelinedAtBufferEnd sends a proxied request that ends exactly
// where the first read ends, with another request behind it still in
// the socket: the loop must read on after the answer, although no new
// edge will come for bytes that were already there.
func TestLoopPipelinedAtBufferEnd(t *testing.T) { run(t, testLoopPipelinedAtBufferEnd) }

func testLoopPipelinedAtBufferEnd(t *testing.T, k netpoll.Kind) {
	pad := func(head string, size int) string {
		// head ends in "X-Pad: "; pad so the request is size bytes.
		return head + strings.Repeat("p", size-len(head)-4) + "\r\n\r\n"
	}
	tests := []struct {
		name string
		reqs []string
	}{
		{"one request fills the buffer", []string{pad("GET /a HTTP/1.1\r\nHost: x\r\nX-Pad: ", headBufSize)}},
		{"the second ends at the buffer end", []string{
			pad("GET /fixed/a HTTP/1.1\r\nHost: x\r\nX-Pad: ", headBufSize/2),
			pad("GET /b HTTP/1.1\r\nHost: x\r\nX-Pad: ", headBufSize/2),
		}},
		{"a body ends at the buffer end", []string{postOf(headBufSize)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			be := startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
				for h := readReqHead(br); h != ""; h = readReqHead(br) {
					if strings.HasPrefix(h, "POST") {
						br.Discard(int(parseCL(h)))
					}
					io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				}
			})
			p := startLoopProxy(t, k, loopTo(be.addr))
			c := dialRaw(t, p.addr)
			all := strings.Join(tt.reqs, "")
			if len(all) != headBufSize {
				t.Fatalf("requests take %d bytes, want %d", len(all), headBufSize)
			}
			c.send(all + "GET /fixed/last HTTP/1.1\r\nHost: x\r\n\r\n")
			c.nc.SetReadDeadline(time.Now().Add(2 * time.Second))
			for i := range len(tt.reqs) + 1 {
				if r, err := c.tryRead("GET"); err != nil || r.status != 200 {
					t.Fatalf("response %d: got (%v, %v), want 200", i, r.status, err)
				}
			}
		})
	}
}

// postOf returns a POST with a body that is size bytes in all.
func postOf(size int) string {
	for n := size; ; n-- {
		h := fmt.Sprintf("POST /c HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", n)
		if len(h)+n == size {
			return h + strings.Repeat("b", n)
		}
	}
}

// parseCL returns the Content-Length of a raw request head (0 if none).
func parseCL(head string) int64 {
	f := headFields(head)
	if v := f["content-length"]; len(v) == 1 {
		n, _ := httpmsg.ParseContentLength([]byte(v[0]))
		return n
	}
	return 0
}

// TestLoopEngineClose checks Close ends the connections the loops hold.
func TestLoopEngineClose(t *testing.T) { run(t, testLoopEngineClose) }

func testLoopEngineClose(t *testing.T, k netpoll.Kind) {
	p := startLoopProxy(t, k, loopConfig{})
	c := dialRaw(t, p.addr)
	c.send("GET /fixed/ HTTP/1.1\r\nHost: x\r\n\r\n")
	c.read("GET")
	p.eng.Close()
	c.expectClosed(time.Second)
	if n := p.eng.OpenConns(); n != 0 {
		t.Errorf("got %d open connections, want 0", n)
	}
	if _, err := p.eng.Attach("late", []int{p.fd}, Options{}, p.admit, p.release); !errors.Is(err, errEngineClosed) {
		t.Errorf("Attach after Close: got %v, want %v", err, errEngineClosed)
	}
}

// slowBackend answers each request when release is closed; reached
// receives each request head; closed is told when a connection ends
// before its answer.
type slowBackend struct {
	*rawBackend
	reached chan string
	closed  chan struct{}
	release chan struct{}
}

func startSlowBackend(t *testing.T) *slowBackend {
	s := &slowBackend{reached: make(chan string, 16), closed: make(chan struct{}, 16), release: make(chan struct{})}
	s.rawBackend = startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
		for h := readReqHead(br); h != ""; h = readReqHead(br) {
			s.reached <- h
			eof := make(chan struct{})
			go func() {
				// The proxy sends nothing more on this connection until
				// the answer, so a read returns only when it closes.
				var b [1]byte
				nc.Read(b[:])
				close(eof)
			}()
			select {
			case <-s.release:
				io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nslow")
				return // one request per connection
			case <-eof:
				s.closed <- struct{}{}
				return
			}
		}
	})
	t.Cleanup(func() {
		select {
		case <-s.release:
		default:
			close(s.release)
		}
	})
	return s
}

func (s *slowBackend) waitReached(t *testing.T) {
	t.Helper()
	select {
	case <-s.reached:
	case <-time.After(testTimeout):
		t.Fatal("the request did not reach the backend")
	}
}

// TestLoopClientGoneAtBackend has the client leave while its request is
// at a slow backend: the request ends as 499 (not the backend's fault)
// and the backend connection, whose answer is still to come, is closed
// rather than pooled.
func TestLoopClientGoneAtBackend(t *testing.T) { run(t, testLoopClientGoneAtBackend) }

func testLoopClientGoneAtBackend(t *testing.T, k netpoll.Kind) {
	tests := []struct {
		name  string
		leave func(c *rawClient)
	}{
		{"close", func(c *rawClient) { c.nc.Close() }},
		{"reset", func(c *rawClient) { c.tcp().SetLinger(0); c.nc.Close() }},
		{"half close", func(c *rawClient) { c.tcp().CloseWrite() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			be := startSlowBackend(t)
			p := startLoopProxy(t, k, loopTo(be.addr))
			c := dialRaw(t, p.addr)
			c.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
			be.waitReached(t)
			tt.leave(c)
			rec := p.nextRec(t)
			if rec.Status != proxy.StatusClientClosed || !errors.Is(rec.Err, wire.ErrClientGone) {
				t.Errorf("got (%v, %v), want (%v, %v)", rec.Status, rec.Err, proxy.StatusClientClosed, wire.ErrClientGone)
			}
			select {
			case <-be.closed:
			case <-time.After(testTimeout):
				t.Fatal("the backend connection was not closed")
			}
			if got := p.guard.outcomes(); len(got) != 1 || got[0] != proxy.Ignored {
				t.Errorf("got outcomes %v, want [Ignored]", got)
			}
			if n := p.idleBackendConns(); n != 0 {
				t.Errorf("got %d idle backend connections, want 0", n)
			}
		})
	}
}

// TestLoopShutdownForced closes connections while a request is at a
// backend (Shutdown's deadline passes, or the engine is closed): the
// connection is closed and the request still finishes (recorded, its
// attempt reported, the backend's in-flight count back).
func TestLoopShutdownForced(t *testing.T) { run(t, testLoopShutdownForced) }

func testLoopShutdownForced(t *testing.T, k netpoll.Kind) {
	tests := []struct {
		name  string
		close func(t *testing.T, p *loopProxy)
	}{
		{"shutdown deadline", func(t *testing.T, p *loopProxy) {
			p.ll.Stop()
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			if err := p.ll.Shutdown(ctx); err != context.DeadlineExceeded {
				t.Errorf("got %v, want %v", err, context.DeadlineExceeded)
			}
		}},
		{"engine closed", func(t *testing.T, p *loopProxy) { p.eng.Close() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			be := startSlowBackend(t)
			p := startLoopProxy(t, k, loopTo(be.addr))
			c := dialRaw(t, p.addr)
			c.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
			be.waitReached(t)
			tt.close(t, p)
			c.expectClosed(time.Second)
			if rec := p.nextRec(t); rec.Status != proxy.StatusClientClosed {
				t.Errorf("got status %v, want %v", rec.Status, proxy.StatusClientClosed)
			}
			if n := p.guard.open.Load(); n != 0 {
				t.Errorf("got %d attempts open, want 0", n)
			}
			if n := p.up.Backends[0].Inflight(); n != 0 {
				t.Errorf("got %d in flight, want 0", n)
			}
		})
	}
}

// TestLoopMaxConnections checks admit's refusal closes a connection at
// once, and that a released slot is used again.
func TestLoopMaxConnections(t *testing.T) { run(t, testLoopMaxConnections) }

func testLoopMaxConnections(t *testing.T, k netpoll.Kind) {
	p := startLoopProxy(t, k, loopConfig{maxConns: 1})
	c1 := dialRaw(t, p.addr)
	c1.send("GET /fixed/ HTTP/1.1\r\nHost: x\r\n\r\n")
	c1.read("GET")
	c2 := dialRaw(t, p.addr)
	c2.expectClosed(time.Second)
	if n := p.refused.Load(); n != 1 {
		t.Errorf("got %d refused, want 1", n)
	}
	c1.nc.Close()
	waitFor(t, "the slot to be released", func() bool { return p.admitted.Load() == p.released.Load() })
	c3 := dialRaw(t, p.addr)
	c3.send("GET /fixed/ HTTP/1.1\r\nHost: x\r\n\r\n")
	if r := c3.read("GET"); r.body != "fixed" {
		t.Errorf("got %q, want %q", r.body, "fixed")
	}
}

// TestLoopStalePooledPost has a pooled connection reset by the backend
// just as a POST arrives (both in one batch of events, the POST first):
// nothing of the POST reached the backend, so it goes again on a new
// connection instead of failing.
func TestLoopStalePooledPost(t *testing.T) { run(t, testLoopStalePooledPost) }

func testLoopStalePooledPost(t *testing.T, k netpoll.Kind) {
	conns := make(chan net.Conn, 4)
	be := startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
		conns <- nc
		for h := readReqHead(br); h != ""; h = readReqHead(br) {
			br.Discard(int(parseCL(h)))
			io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	p := startLoopProxy(t, k, loopTo(be.addr))
	c := dialRaw(t, p.addr)
	c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	c.read("GET")
	first := <-conns
	unblock := p.blockLoop(0)
	c.send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi")
	time.Sleep(20 * time.Millisecond)
	first.(*net.TCPConn).SetLinger(0)
	first.Close()
	time.Sleep(20 * time.Millisecond)
	unblock()
	if r := c.read("POST"); r.status != 200 || r.body != "ok" {
		t.Errorf("got (%v, %q), want (200, ok)", r.status, r.body)
	}
	if n := be.accepts.Load(); n != 2 {
		t.Errorf("got %d backend connections, want 2", n)
	}
}

// TestLoopBackendClosesAfterAnswer has a backend answer (keep-alive by
// its headers) and close at once, the close arriving with the answer:
// the connection must not be pooled, or the next request, a POST that
// cannot be sent twice, fails on it.
func TestLoopBackendClosesAfterAnswer(t *testing.T) { run(t, testLoopBackendClosesAfterAnswer) }

func testLoopBackendClosesAfterAnswer(t *testing.T, k netpoll.Kind) {
	answer := make(chan struct{})
	reached := make(chan struct{}, 4)
	be := startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
		h := readReqHead(br)
		br.Discard(int(parseCL(h)))
		if strings.HasPrefix(h, "GET") {
			reached <- struct{}{}
			<-answer
		}
		io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		// Then close: one request per connection.
	})
	p := startLoopProxy(t, k, loopTo(be.addr))
	c := dialRaw(t, p.addr)
	c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	<-reached
	unblock := p.blockLoop(0)
	close(answer)
	time.Sleep(50 * time.Millisecond) // answer and close are in
	unblock()
	if r := c.read("GET"); r.status != 200 {
		t.Fatalf("got %v, want 200", r.status)
	}
	c.send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi")
	if r := c.read("POST"); r.status != 200 || r.body != "ok" {
		t.Errorf("got (%v, %q), want (200, ok)", r.status, r.body)
	}
}

// TestLoopStaleEventAfterFDReuse has, in one batch of events, a pooled
// backend connection fail and be closed, a new one take its fd number,
// and then the old connection's event (a reset: in, hang-up, error,
// peer shut down) come up: it must not reach the new connection, which
// would take the old peer's shutdown for its own and never be pooled.
func TestLoopStaleEventAfterFDReuse(t *testing.T) { run(t, testLoopStaleEventAfterFDReuse) }

func testLoopStaleEventAfterFDReuse(t *testing.T, k netpoll.Kind) {
	conns := make(chan net.Conn, 4)
	be := startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
		conns <- nc
		for h := readReqHead(br); h != ""; h = readReqHead(br) {
			io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	p := startLoopProxy(t, k, loopTo(be.addr))
	c := dialRaw(t, p.addr)
	c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	c.read("GET")
	first := <-conns
	// Fill every free fd number below the pooled connection's, so that
	// the next socket opened gets its number once it is closed.
	ufd := -1
	l := p.eng.loops[0]
	l.do(func() { ufd = l.pool(p.tr, be.addr, nil).idle[0].fd })
	for {
		fd, err := syscall.Dup(0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Close(fd) })
		if fd > ufd {
			break
		}
	}
	unblock := p.blockLoop(0)
	c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	time.Sleep(20 * time.Millisecond)
	first.(*net.TCPConn).SetLinger(0)
	first.Close()
	time.Sleep(20 * time.Millisecond)
	unblock()
	if r := c.read("GET"); r.status != 200 {
		t.Fatalf("got %v, want 200", r.status)
	}
	if n := p.idleBackendConns(); n != 1 {
		t.Errorf("got %d idle backend connections, want 1", n)
	}
	c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if r := c.read("GET"); r.status != 200 {
		t.Errorf("got %v, want 200", r.status)
	}
	if n := be.accepts.Load(); n != 2 {
		t.Errorf("got %d backend connections, want 2", n)
	}
}

// TestLoopInterruptedWait signals the process while the loop sleeps in
// epoll_wait, which then fails with EINTR (and a count of -1).
func TestLoopInterruptedWait(t *testing.T) { run(t, testLoopInterruptedWait) }

func testLoopInterruptedWait(t *testing.T, k netpoll.Kind) {
	p := startLoopProxy(t, k, loopConfig{})
	for i := 0; i < 300; i++ {
		// SIGURG: the Go runtime's own preemption signal, ignored by
		// everything else.
		syscall.Kill(syscall.Getpid(), syscall.SIGURG)
		time.Sleep(time.Millisecond)
	}
	c := dialRaw(t, p.addr)
	c.send("GET /fixed/ HTTP/1.1\r\nHost: x\r\n\r\n")
	if r := c.read("GET"); r.body != "fixed" {
		t.Errorf("got %q, want %q", r.body, "fixed")
	}
}

// TestLoopEarlyAnswerWhileSending has a backend answer a POST before it
// took the whole request (the loop is still writing it): the answer goes
// to the client at once, whether or not the backend reads the rest, and
// even on a pooled connection whose last read drained it.
func TestLoopEarlyAnswerWhileSending(t *testing.T) { run(t, testLoopEarlyAnswerWhileSending) }

func testLoopEarlyAnswerWhileSending(t *testing.T, k netpoll.Kind) {
	tests := []struct {
		name     string
		readRest bool
	}{
		{"backend never reads the rest", false},
		{"backend reads the rest after answering", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Small socket buffers on both sides, so that the request
			// cannot all be written while the backend does not read.
			lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
				rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
				return nil
			}}
			ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			stop := make(chan struct{})
			served := make(chan struct{})
			go func() {
				defer close(served)
				nc, err := ln.Accept()
				if err != nil {
					return
				}
				defer nc.Close()
				br := bufio.NewReader(nc)
				for h := readReqHead(br); h != ""; h = readReqHead(br) {
					if !strings.HasPrefix(h, "POST") {
						io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
						continue
					}
					io.WriteString(nc, "HTTP/1.1 413 Too Large\r\nContent-Length: 3\r\n\r\nbig")
					if tt.readRest {
						io.CopyN(io.Discard, br, parseCL(h))
					}
					<-stop
					return
				}
			}()
			t.Cleanup(func() {
				close(stop)
				ln.Close()
				<-served
			})
			cfg := loopTo(ln.Addr().String())
			cfg.to.ResponseHeaderTimeout = 3 * time.Second
			cfg.dialControl = func(fd int) { syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_SNDBUF, 4096) }
			p := startLoopProxy(t, k, cfg)
			c := dialRaw(t, p.addr)
			c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			c.read("GET")
			start := time.Now()
			c.send(postOf(maxLoopBody))
			if r := c.read("POST"); r.status != 413 || r.body != "big" {
				t.Errorf("got (%v, %q), want (413, big)", r.status, r.body)
			}
			if el := time.Since(start); el > time.Second {
				t.Errorf("answered after %v, want at once", el)
			}
			// The client's connection is fine: its body was all read.
			c.send("GET /fixed/ HTTP/1.1\r\nHost: x\r\n\r\n")
			if r := c.read("GET"); r.body != "fixed" {
				t.Errorf("next: got %q, want %q", r.body, "fixed")
			}
		})
	}
}

// TestLoopAcceptOutOfDescriptors runs out of file descriptors with
// connections queued on the listener: once descriptors are free again
// the queued connections are served, although no new edge comes for
// them.
func TestLoopAcceptOutOfDescriptors(t *testing.T) { run(t, testLoopAcceptOutOfDescriptors) }

func testLoopAcceptOutOfDescriptors(t *testing.T, k netpoll.Kind) {
	p := startLoopProxy(t, k, loopConfig{})
	unblock := p.blockLoop(0)
	var cs []*rawClient
	for i := 0; i < 3; i++ {
		cs = append(cs, dialRaw(t, p.addr)) // queued: the loop is busy
	}
	rl := listener.SystemRlimit()
	soft, hard, err := rl.Get()
	if err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip(err)
	}
	// No room for another descriptor (ReadDir's own is closed again).
	if err := rl.Set(uint64(len(ents)-1), hard); err != nil {
		t.Skip(err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			rl.Set(soft, hard)
		}
	}
	t.Cleanup(restore)
	unblock()
	p.settle()
	restore()
	if n := p.admitted.Load(); n == 3 {
		t.Skip("the descriptors did not run out")
	}
	for i, c := range cs {
		c.nc.SetDeadline(time.Now().Add(2 * time.Second))
		c.send("GET /fixed/ HTTP/1.1\r\nHost: x\r\n\r\n")
		if r, err := c.tryRead("GET"); err != nil || r.body != "fixed" {
			t.Errorf("client %d: got (%q, %v), want %q", i, r.body, err, "fixed")
		}
	}
}

// TestLoopClientGoneAtFlush has a client reset its connection with
// pipelined requests sent: the first answer finds the client gone, and
// the rest are not served.
func TestLoopClientGoneAtFlush(t *testing.T) { run(t, testLoopClientGoneAtFlush) }

func testLoopClientGoneAtFlush(t *testing.T, k netpoll.Kind) {
	p := startLoopProxy(t, k, loopConfig{})
	c := dialRaw(t, p.addr)
	c.send("GET /fixed/ HTTP/1.1\r\nHost: x\r\n\r\n")
	c.read("GET")
	p.nextRec(t)
	unblock := p.blockLoop(0)
	c.send(strings.Repeat("GET /fixed/ HTTP/1.1\r\nHost: x\r\n\r\n", 3))
	time.Sleep(20 * time.Millisecond)
	c.tcp().SetLinger(0)
	c.nc.Close() // a reset
	time.Sleep(20 * time.Millisecond)
	unblock()
	p.nextRec(t) // the answer that found the client gone
	p.noRec(t, 200*time.Millisecond)
	waitFor(t, "the connection to close", func() bool { return p.eng.OpenConns() == 0 })
}

// TestLoopClientGoneMidStream has the client leave while its answer
// streams from a backend that sends slowly (an event stream): the loop
// notices at once, not at the backend's next bytes, and lets the backend
// connection go.
func TestLoopClientGoneMidStream(t *testing.T) { run(t, testLoopClientGoneMidStream) }

func testLoopClientGoneMidStream(t *testing.T, k netpoll.Kind) {
	tests := []struct {
		name  string
		leave func(c *rawClient)
	}{
		{"close", func(c *rawClient) { c.nc.Close() }},
		{"reset", func(c *rawClient) { c.tcp().SetLinger(0); c.nc.Close() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			closed := make(chan struct{}, 1)
			be := startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
				readReqHead(br)
				io.WriteString(nc, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nevent1\r\n")
				var b [1]byte
				nc.SetReadDeadline(time.Now().Add(testTimeout))
				if _, err := nc.Read(b[:]); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
					closed <- struct{}{}
				}
			})
			p := startLoopProxy(t, k, loopTo(be.addr))
			c := dialRaw(t, p.addr)
			c.send("GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
			c.readHead()
			if line, err := c.br.ReadString('\n'); err != nil || line != "6\r\n" {
				t.Fatalf("got (%q, %v), want the first chunk", line, err)
			}
			tt.leave(c)
			select {
			case <-closed:
			case <-time.After(2 * time.Second):
				t.Fatal("the backend connection was not closed")
			}
			if rec := p.nextRec(t); rec.Status != proxy.StatusClientClosed || !errors.Is(rec.Err, wire.ErrClientGone) {
				t.Errorf("got (%v, %v), want (%v, %v)", rec.Status, rec.Err, proxy.StatusClientClosed, wire.ErrClientGone)
			}
		})
	}
}

// Issue 9, item 6: 1,000 slow readers of a 1 MB answer took 459 MB, 450
// KB each, because up to 256 KiB (and the growth of its buffer) waited for
// each. What waits for a slow client is bounded by
// Options.OutputBufferBytes; past it the loop stops reading from the
// backend, whose own socket buffers then fill.
func TestLoopSlowReaderOutputBounded(t *testing.T) { run(t, testLoopSlowReaderOutputBounded) }

func testLoopSlowReaderOutputBounded(t *testing.T, k netpoll.Kind) {
	const size = 8 << 20
	be := startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
		readReqHead(br)
		fmt.Fprintf(nc, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", size)
		block := bytes.Repeat([]byte("x"), 64<<10)
		for sent := 0; sent < size; sent += len(block) {
			if _, err := nc.Write(block); err != nil {
				return
			}
		}
	})
	for _, limit := range []int{0, 16 << 10} {
		t.Run(fmt.Sprintf("limit %d", limit), func(t *testing.T) {
			cfg := loopTo(be.addr)
			cfg.opts.OutputBufferBytes = limit
			cfg.dialControl = func(fd int) { syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVBUF, 64<<10) }
			p := startLoopProxy(t, k, cfg)
			d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
				return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
			}}
			nc, err := d.Dial("tcp", p.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			io.WriteString(nc, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
			// Let the answer back up while the client reads nothing.
			time.Sleep(300 * time.Millisecond)
			want := limit
			if want == 0 {
				want = defaultOutputBufferBytes
			}
			// Slack: one backend read and the writer's buffer (with the
			// head) may go on top of the limit before the loop stops, and
			// the room grows by a writer buffer at a time.
			if most := want + readBufSize + 2*writeBufSize; p.maxPendingCap() > most || p.maxPendingCap() == 0 {
				t.Errorf("got %d bytes of room for pending output, want some and at most %d", p.maxPendingCap(), most)
			}
			nc.SetReadDeadline(time.Now().Add(testTimeout))
			br := bufio.NewReader(nc)
			if head := readReqHead(br); !strings.HasPrefix(head, "HTTP/1.1 200") {
				t.Fatalf("got %q, want a 200", head)
			}
			if n, err := io.CopyN(io.Discard, br, size); n != size {
				t.Errorf("got %d body bytes (%v), want %d", n, err, size)
			}
		})
	}
}

// maxPendingCap returns the largest room for pending output any client
// connection of the loops holds.
func (p *loopProxy) maxPendingCap() int {
	most := 0
	for _, l := range p.eng.loops {
		l.do(func() {
			for c := l.conns.head; c != nil; c = c.next {
				most = max(most, cap(c.fw.pending))
			}
		})
	}
	return most
}
