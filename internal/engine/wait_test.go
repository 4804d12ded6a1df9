package engine

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/netpoll"
	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/wire"
	"golang.org/x/sys/unix"
)

// deadAddr returns a loopback address nothing listens on, for the rest
// of the test: a socket bound to it and never listening holds the port,
// so that connecting is refused. (A port let go at once is in the
// ephemeral range: under load an outgoing connection could take it as
// its own and connect to itself, which is not refused.)
func deadAddr(t testing.TB) string {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", sa.(*unix.SockaddrInet4).Port)
}

// waitAtLeast is a backoff whose every draw is its ceiling, so that a
// test knows the wait.
func waitAtLeast(d time.Duration) proxy.Backoff {
	return proxy.Backoff{Base: d, Max: d, Rand: func() uint64 { return ^uint64(0) }}
}

// TestLoopRetryBackoff has a retry wait its backoff (wire.ActWait) on the
// loop's timers: the retry goes out after the wait, and meanwhile the same
// (single) loop serves another client.
func TestLoopRetryBackoff(t *testing.T) { run(t, testLoopRetryBackoff) }

func testLoopRetryBackoff(t *testing.T, k netpoll.Kind) {
	heads := make(chan string, 4)
	be := okBackend(t, heads)
	cfg := loopConfig{backends: []string{deadAddr(t), be.addr}, to: defaultTransport}
	cfg.retry = proxy.RetryPolicy{Attempts: 1, OnConnectError: true, Backoff: waitAtLeast(400 * time.Millisecond)}
	p := startLoopProxy(t, k, cfg)

	start := time.Now()
	c := dialRaw(t, p.addr)
	c.send("GET /a HTTP/1.1\r\nHost: a\r\n\r\n")
	other := dialRaw(t, p.addr)
	other.send("GET /fixed/x HTTP/1.1\r\nHost: a\r\n\r\n")
	if r := other.read("GET"); r.status != 200 || r.body != string(fixedBody) {
		t.Fatalf("another client during the wait: got (%v, %q), want (200, %q)", r.status, r.body, fixedBody)
	}
	select {
	case h := <-heads:
		t.Fatalf("the retry reached the backend before the other client's answer: %q", h)
	default:
	}
	if r := c.read("GET"); r.status != 200 || r.body != "ok" {
		t.Errorf("after the backoff: got (%v, %q), want (200, ok)", r.status, r.body)
	}
	if waited := time.Since(start); waited < 400*time.Millisecond {
		t.Errorf("answered after %v, want at least the 400ms backoff", waited)
	}
	for range 2 { // the fixed answer's record and the retried request's
		if rec := p.nextRec(t); rec.Route.Name == "up" && rec.Attempts != 2 {
			t.Errorf("attempts: got %d, want 2", rec.Attempts)
		}
	}
}

// TestLoopClientGoneDuringBackoff has the client leave while its retry
// waits: the request ends as 499, the retry is never sent, and the loop's
// bookkeeping is clean (checked when the proxy stops).
func TestLoopClientGoneDuringBackoff(t *testing.T) { run(t, testLoopClientGoneDuringBackoff) }

func testLoopClientGoneDuringBackoff(t *testing.T, k netpoll.Kind) {
	be := okBackend(t, nil)
	cfg := loopConfig{backends: []string{deadAddr(t), be.addr}, to: defaultTransport}
	cfg.retry = proxy.RetryPolicy{Attempts: 1, OnConnectError: true, Backoff: waitAtLeast(5 * time.Second)}
	p := startLoopProxy(t, k, cfg)
	c := dialRaw(t, p.addr)
	c.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	waitFor(t, "the first attempt", func() bool { return p.up.Backends[0].Requests() == 1 })
	c.nc.Close()
	rec := p.nextRec(t)
	if rec.Status != proxy.StatusClientClosed || !errors.Is(rec.Err, wire.ErrClientGone) || rec.Attempts != 1 {
		t.Errorf("got (%v, %v, %d attempts), want (%v, %v, 1)", rec.Status, rec.Err, rec.Attempts, proxy.StatusClientClosed, wire.ErrClientGone)
	}
	if n := be.accepts.Load(); n != 0 {
		t.Errorf("connections to the second backend: got %d, want 0", n)
	}
}

// TestLoopTryTimeout bounds an attempt at a backend that never answers
// with the transport's TryTimeout, well inside its response header
// timeout: the attempt fails as a timeout and, listed for retries, goes
// to the next backend.
func TestLoopTryTimeout(t *testing.T) { run(t, testLoopTryTimeout) }

func testLoopTryTimeout(t *testing.T, k netpoll.Kind) {
	silent := startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
		readReqHead(br)
		br.ReadByte() // until the proxy gives up and closes
	})
	be := okBackend(t, nil)
	to := defaultTransport
	to.TryTimeout = 200 * time.Millisecond
	to.ResponseHeaderTimeout = time.Hour

	t.Run("504", func(t *testing.T) {
		p := startLoopProxy(t, k, loopConfig{backends: []string{silent.addr}, to: to})
		c := dialRaw(t, p.addr)
		c.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
		if r := c.read("GET"); r.status != 504 {
			t.Errorf("got %v, want 504", r.status)
		}
		if rec := p.nextRec(t); !errors.Is(rec.Err, wire.ErrTimeout) {
			t.Errorf("got %v, want %v", rec.Err, wire.ErrTimeout)
		}
	})
	t.Run("retried", func(t *testing.T) {
		cfg := loopConfig{backends: []string{silent.addr, be.addr}, to: to}
		cfg.retry = proxy.RetryPolicy{Attempts: 1, OnTimeout: true}
		p := startLoopProxy(t, k, cfg)
		c := dialRaw(t, p.addr)
		c.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
		if r := c.read("GET"); r.status != 200 || r.body != "ok" {
			t.Errorf("got (%v, %q), want (200, ok)", r.status, r.body)
		}
		if rec := p.nextRec(t); rec.Attempts != 2 {
			t.Errorf("attempts: got %d, want 2", rec.Attempts)
		}
	})
}
