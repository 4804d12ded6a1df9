package engine

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/netpoll"
	"github.com/helios-lb/helios/internal/tlsconf/tlstest"
)

// TestLoopTLS serves HTTP/1.1 over TLS on the loops: keep-alive and
// pipelined requests (plaintext the tls.Conn holds, with no event to come
// for it), a large answer and a large upload with backpressure, and a
// WebSocket-style upgrade, all through the one machine.
func TestLoopTLS(t *testing.T) { run(t, testLoopTLS) }

func testLoopTLS(t *testing.T, k netpoll.Kind) {
	be, _ := newHTTPBackend(t, httpMux())
	tp := newTestTLS(t)
	cfg := loopTo(strings.TrimPrefix(be.URL, "http://"))
	cfg.opts.TLS = tp
	p := startLoopProxy(t, k, cfg)

	t.Run("keep-alive and pipelining", func(t *testing.T) {
		c := dialTLS(t, p.addr, tp)
		for i := 0; i < 3; i++ {
			c.send("GET /fixed/a HTTP/1.1\r\nHost: x\r\n\r\n")
			if r := c.read("GET"); r.status != 200 || r.body != "fixed" {
				t.Fatalf("request %d: got (%d, %q), want (200, fixed)", i, r.status, r.body)
			}
		}
		c.send(strings.Repeat("GET /fixed/b HTTP/1.1\r\nHost: x\r\n\r\n", 20))
		for i := 0; i < 20; i++ {
			if r := c.read("GET"); r.status != 200 {
				t.Fatalf("pipelined %d: got %d, want 200", i, r.status)
			}
		}
	})
	t.Run("large answer", func(t *testing.T) {
		c := dialTLS(t, p.addr, tp)
		c.send("GET /size/3000000 HTTP/1.1\r\nHost: x\r\n\r\n")
		if r := c.read("GET"); r.status != 200 || len(r.body) != 3000000 {
			t.Fatalf("got (%d, %d bytes), want (200, 3000000)", r.status, len(r.body))
		}
	})
	t.Run("large upload", func(t *testing.T) {
		c := dialTLS(t, p.addr, tp)
		body := strings.Repeat("u", 2<<20)
		go fmt.Fprintf(c.nc, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		r := c.read("POST")
		sum := sha256.Sum256([]byte(body))
		if r.status != 200 || len(r.body) != len(body) || r.header.Get("X-Req-Sum") != fmt.Sprintf("%x", sum) {
			t.Fatalf("got (%d, %d bytes, sum %s), want the body echoed", r.status, len(r.body), r.header.Get("X-Req-Sum"))
		}
	})
	t.Run("handshake failures", func(t *testing.T) {
		before := tp.count("failed")
		// Plain HTTP to a TLS listener: no handshake, closed.
		c := dialRaw(t, p.addr)
		c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		c.nc.SetReadDeadline(time.Now().Add(testTimeout))
		io.Copy(io.Discard, c.br)
		waitFor(t, "the failed handshake to be counted", func() bool { return tp.count("failed") > before })
	})
}

// TestLoopTLSUpgrade tunnels an upgraded connection over TLS.
func TestLoopTLSUpgrade(t *testing.T) { run(t, testLoopTLSUpgrade) }

func testLoopTLSUpgrade(t *testing.T, k netpoll.Kind) {
	be := startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
		readReqHead(br)
		io.WriteString(nc, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		io.Copy(nc, br)
	})
	tp := newTestTLS(t)
	cfg := loopTo(be.addr)
	cfg.opts.TLS = tp
	p := startLoopProxy(t, k, cfg)
	c := dialTLS(t, p.addr, tp)
	c.send("GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
	if head := c.readHead(); !strings.HasPrefix(head, "HTTP/1.1 101 ") {
		t.Fatalf("got %q, want a 101", head)
	}
	for _, msg := range []string{"hello", strings.Repeat("w", 300000)} {
		go io.WriteString(c.nc, msg)
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(c.br, got); err != nil || string(got) != msg {
			t.Fatalf("echo of %d bytes: got %d bytes (%v)", len(msg), len(got), err)
		}
	}
}

// TestLoopTLSHandshakeBounds checks the bounds on handshakes (issue 26):
// a connection holds a place among the handshakes in progress only once
// its ClientHello is whole, so silent connections and partial
// ClientHellos cost no place and are closed at the client hello timeout,
// while new clients are served beside them; a ClientHello followed by
// silence gets the handshake timeout; and at the cap the oldest handshake
// waiting for its client is shed rather than the new one refused. None
// costs the loop anything.
func TestLoopTLSHandshakeBounds(t *testing.T) { run(t, testLoopTLSHandshakeBounds) }

func testLoopTLSHandshakeBounds(t *testing.T, k netpoll.Kind) {
	var (
		tp    *testTLS
		p     *loopProxy
		hello []byte
	)
	// start serves TLS with a cap of 2 handshakes and these timeouts.
	start := func(t *testing.T, helloTimeout, timeout time.Duration) {
		tp = newTestTLS(t)
		tp.max, tp.helloTimeout, tp.timeout = 2, helloTimeout, timeout
		cfg := loopConfig{}
		cfg.opts.TLS = tp
		p = startLoopProxy(t, k, cfg)
		hello = clientHello(t, tp)
	}
	served := func(t *testing.T) {
		t.Helper()
		c := dialTLS(t, p.addr, tp)
		c.send("GET /fixed/ HTTP/1.1\r\nHost: x\r\n\r\n")
		if r := c.read("GET"); r.status != 200 {
			t.Errorf("got %d, want 200", r.status)
		}
		c.nc.Close()
	}
	// stalled opens a connection that sends b and no more.
	stalled := func(t *testing.T, b []byte) *rawClient {
		t.Helper()
		c := dialRaw(t, p.addr)
		if _, err := c.nc.Write(b); err != nil {
			t.Fatal(err)
		}
		return c
	}

	t.Run("silent and partial ClientHellos hold no place", func(t *testing.T) {
		start(t, testTimeout, testTimeout)
		before := p.eng.OpenConns()
		var quiet []*rawClient
		for i := 0; i < 10; i++ {
			quiet = append(quiet, dialRaw(t, p.addr), stalled(t, hello[:1+i*7%(len(hello)-1)]))
		}
		waitFor(t, "the connections to be accepted", func() bool { return p.eng.OpenConns() >= before+len(quiet) })
		for i := 0; i < 2*tp.max+1; i++ {
			served(t)
		}
		if got := tp.gate.InProgress(); got != 0 {
			t.Errorf("handshakes in progress: got %d, want 0", got)
		}
		if got := tp.count("refused") + tp.count("shed"); got != 0 {
			t.Errorf("refused or shed: got %d, want 0", got)
		}
		noHello := tp.count("no_hello")
		for _, c := range quiet {
			c.expectOpen(10 * time.Millisecond)
			c.nc.Close()
		}
		waitFor(t, "the closed connections to be counted", func() bool { return tp.count("no_hello") == noHello+uint64(len(quiet)) })
	})

	t.Run("client hello timeout", func(t *testing.T) {
		start(t, 200*time.Millisecond, testTimeout)
		before := tp.count("no_hello")
		start := time.Now()
		silent, partial := dialRaw(t, p.addr), stalled(t, hello[:len(hello)-1])
		silent.expectClosed(testTimeout / 2)
		partial.expectClosed(testTimeout / 2)
		if el := time.Since(start); el >= testTimeout/2 {
			t.Errorf("closed after %v, want the 200ms client hello timeout, not the %v handshake timeout", el, testTimeout)
		}
		waitFor(t, "no_hello to be counted", func() bool { return tp.count("no_hello") == before+2 })
	})

	t.Run("a ClientHello gets the handshake timeout", func(t *testing.T) {
		start(t, 100*time.Millisecond, time.Second)
		before := tp.count("timeout")
		c := stalled(t, hello)
		expectAlive(t, c, 500*time.Millisecond)
		waitFor(t, "the handshake timeout", func() bool { return tp.count("timeout") == before+1 })
		waitFor(t, "the place to be free", func() bool { return tp.gate.InProgress() == 0 })
	})

	t.Run("the oldest stalled handshake is shed", func(t *testing.T) {
		start(t, testTimeout, testTimeout)
		before := tp.count("shed")
		var cs []*rawClient
		for i := 0; i < tp.max+2; i++ {
			cs = append(cs, stalled(t, hello))
			// Each is admitted (shedding one past the cap) and waits for
			// its client before the next comes.
			waiting, shed := min(i+1, tp.max), before+uint64(max(i+1-tp.max, 0))
			waitFor(t, "the stalled handshake", func() bool { return tp.gate.Waiting() == waiting && tp.count("shed") == shed })
		}
		// The first two were shed, oldest first, for the last two.
		for i, c := range cs {
			if i < 2 {
				readClosed(t, c)
			}
		}
		for _, c := range cs[2:] {
			expectAlive(t, c, 50*time.Millisecond)
		}
		if got := tp.count("shed"); got != before+2 {
			t.Errorf("shed: got %d, want %d", got, before+2)
		}
		// A client that completes its handshake is served beside them,
		// shedding the next.
		served(t)
		readClosed(t, cs[2])
		expectAlive(t, cs[3], 50*time.Millisecond)
		if got := tp.count("refused"); got != 0 {
			t.Errorf("refused: got %d, want 0", got)
		}
	})
}

// clientHello returns the ClientHello of a TLS client trusting p's
// certificate.
func clientHello(t testing.TB, p *testTLS) []byte {
	t.Helper()
	rec, err := tlstest.ClientHello(&tls.Config{RootCAs: p.pool, ServerName: "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// readClosed reads what the server sent c (its handshake flight, if any)
// and checks the server closed the connection.
func readClosed(t testing.TB, c *rawClient) {
	t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(testTimeout))
	if _, err := io.Copy(io.Discard, c.br); err != nil {
		t.Errorf("got %v, want the connection closed", err)
	}
}

// expectAlive checks the server keeps c open for d: what it sent (its
// handshake flight) aside, nothing more comes.
func expectAlive(t testing.TB, c *rawClient, d time.Duration) {
	t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c.br)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("got %v, want the connection open", err)
	}
}

// TestLoopTLSDrainWaitsForClientHellos: a drain treats a TLS connection
// waiting for its ClientHello as a connection waiting for its first
// request: one that sends it within the grace is served (its first
// answer says Connection: close), one that sends nothing is closed after
// the grace, not at the client hello timeout.
func TestLoopTLSDrainWaitsForClientHellos(t *testing.T) { run(t, testLoopTLSDrainWaitsForClientHellos) }

func testLoopTLSDrainWaitsForClientHellos(t *testing.T, k netpoll.Kind) {
	tp := newTestTLS(t)
	tp.helloTimeout = testTimeout
	cfg := loopConfig{loops: 1}
	cfg.opts.TLS = tp
	p := startLoopProxy(t, k, cfg)
	late := dialRaw(t, p.addr)
	dialed := time.Now() // silent is accepted after this
	silent := dialRaw(t, p.addr)
	waitFor(t, "two connections", func() bool { return p.eng.OpenConns() == 2 })

	p.ll.Stop()
	p.ll.draining.Store(true)
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		shut <- p.ll.Shutdown(ctx)
	}()
	time.Sleep(freshGrace / 5)
	tc := tls.Client(late.nc, &tls.Config{RootCAs: tp.pool, ServerName: "localhost"})
	if err := tc.Handshake(); err != nil {
		t.Fatalf("handshake during the drain: got %v, want nil", err)
	}
	c := &rawClient{t: t, nc: tc, br: bufio.NewReader(tc)}
	c.send("GET /fixed/ HTTP/1.1\r\nHost: x\r\n\r\n")
	if r := c.read("GET"); r.status != 200 || !r.close {
		t.Errorf("first request during the drain: got (%v, close %v), want (200, close)", r.status, r.close)
	}
	silent.expectClosed(2 * freshGrace)
	if d := time.Since(dialed); d < freshGrace {
		t.Errorf("a connection that sent nothing was closed %v after it was accepted, before its grace (%v)", d, freshGrace)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: got %v, want nil", err)
	}
	if got := tp.count("no_hello"); got != 1 {
		t.Errorf("no_hello: got %d, want 1", got)
	}
}
