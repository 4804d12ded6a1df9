package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/netpoll"
	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/wire"
)

// Backends named by a host name: their lookups run off the loop, which
// does not wait for them.

// TestLoopBackendHostName forwards to a backend named by a host name: the
// loop does not wait for DNS (other requests go on meanwhile), and a
// failed lookup fails requests (502) only until a lookup succeeds.
func TestLoopBackendHostName(t *testing.T) { run(t, testLoopBackendHostName) }

func testLoopBackendHostName(t *testing.T, k netpoll.Kind) {
	be := okBackend(t, nil)
	_, port, _ := net.SplitHostPort(be.addr)
	answers := make(chan error)
	var lookups atomic.Int32
	cfg := loopTo("backend.test:" + port)
	cfg.lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
		lookups.Add(1)
		if host != "backend.test" {
			return nil, fmt.Errorf("unexpected lookup of %q", host)
		}
		select {
		case err := <-answers:
			if err != nil {
				return nil, err
			}
			return []netip.Addr{netip.MustParseAddr("::1"), netip.MustParseAddr("127.0.0.1")}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	p := startLoopProxy(t, k, cfg)

	// The first lookup fails: the waiting request gets a 502.
	c := dialRaw(t, p.addr)
	c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	waitFor(t, "a lookup", func() bool { return lookups.Load() == 1 })
	answers <- errors.New("no such host")
	if r := c.read("GET"); r.status != 502 {
		t.Errorf("got %v, want 502", r.status)
	}
	if rec := p.nextRec(t); !errors.Is(rec.Err, wire.ErrConnect) {
		t.Errorf("got %v, want %v", rec.Err, wire.ErrConnect)
	}

	// The next request looks again; while the lookup hangs, the loop
	// serves other requests.
	c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	waitFor(t, "a second lookup", func() bool { return lookups.Load() == 2 })
	c2 := dialRaw(t, p.addr)
	c2.nc.SetReadDeadline(time.Now().Add(time.Second))
	c2.send("GET /fixed/ HTTP/1.1\r\nHost: x\r\n\r\n")
	if r, err := c2.tryRead("GET"); err != nil || r.body != "fixed" {
		t.Errorf("during a lookup: got (%q, %v), want %q", r.body, err, "fixed")
	}
	p.nextRec(t)
	answers <- nil
	if r := c.read("GET"); r.status != 200 || r.body != "ok" {
		t.Errorf("got (%v, %q), want (200, ok)", r.status, r.body)
	}
	// Known now: no more lookups for a while.
	c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if r := c.read("GET"); r.status != 200 {
		t.Errorf("got %v, want 200", r.status)
	}
	if n := lookups.Load(); n != 2 {
		t.Errorf("got %d lookups, want 2", n)
	}
}

// TestLoopBackendHostNameWaits covers the ends of a wait for a lookup:
// the dial timeout, the client leaving, and the system's resolver.
func TestLoopBackendHostNameWaits(t *testing.T) { run(t, testLoopBackendHostNameWaits) }

func testLoopBackendHostNameWaits(t *testing.T, k netpoll.Kind) {
	be := okBackend(t, nil)
	_, port, _ := net.SplitHostPort(be.addr)
	hang := func(ctx context.Context, host string) ([]netip.Addr, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	t.Run("dial timeout", func(t *testing.T) {
		cfg := loopTo("backend.test:" + port)
		cfg.lookup = hang
		cfg.to.DialTimeout = 100 * time.Millisecond
		p := startLoopProxy(t, k, cfg)
		c := dialRaw(t, p.addr)
		c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		if r := c.read("GET"); r.status != 502 {
			t.Errorf("got %v, want 502", r.status)
		}
		if rec := p.nextRec(t); !errors.Is(rec.Err, wire.ErrConnect) {
			t.Errorf("got %v, want %v", rec.Err, wire.ErrConnect)
		}
	})
	t.Run("client gone", func(t *testing.T) {
		cfg := loopTo("backend.test:" + port)
		cfg.lookup = hang
		p := startLoopProxy(t, k, cfg)
		c := dialRaw(t, p.addr)
		c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		time.Sleep(20 * time.Millisecond)
		c.nc.Close()
		if rec := p.nextRec(t); rec.Status != proxy.StatusClientClosed {
			t.Errorf("got %v, want %v", rec.Status, proxy.StatusClientClosed)
		}
	})
	t.Run("system resolver", func(t *testing.T) {
		p := startLoopProxy(t, k, loopTo("localhost:"+port))
		c := dialRaw(t, p.addr)
		for i := 0; i < 2; i++ {
			c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			if r := c.read("GET"); r.status != 200 || r.body != "ok" {
				t.Errorf("got (%v, %q), want (200, ok)", r.status, r.body)
			}
		}
	})
}
