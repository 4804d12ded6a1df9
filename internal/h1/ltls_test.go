package h1

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/netpoll"
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
		before := tp.failed.Load()
		// Plain HTTP to a TLS listener: no handshake, closed.
		c := dialRaw(t, p.addr)
		c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		c.nc.SetReadDeadline(time.Now().Add(testTimeout))
		io.Copy(io.Discard, c.br)
		waitFor(t, "the failed handshake to be counted", func() bool { return tp.failed.Load() > before })
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

// TestLoopTLSHandshakeBounds checks the handshake timeout and the cap on
// handshakes in progress: a client that never finishes its handshake is
// closed after the timeout, and while it holds the only slot another is
// refused at once; neither costs the loop anything.
func TestLoopTLSHandshakeBounds(t *testing.T) { run(t, testLoopTLSHandshakeBounds) }

func testLoopTLSHandshakeBounds(t *testing.T, k netpoll.Kind) {
	tp := newTestTLS(t)
	tp.timeout = 300 * time.Millisecond
	tp.max = 1
	cfg := loopConfig{}
	cfg.opts.TLS = tp
	p := startLoopProxy(t, k, cfg)
	stall, err := net.Dial("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stall.Close()
	stall.Write([]byte{0x16, 0x03, 0x01}) // the start of a ClientHello, and no more
	waitFor(t, "the stalled handshake to start", func() bool { return tp.inProgress.Load() == 1 })
	refused, err := net.Dial("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer refused.Close()
	refused.SetReadDeadline(time.Now().Add(testTimeout))
	if n, err := refused.Read(make([]byte, 1)); err == nil {
		t.Errorf("got %d bytes, want the connection past the cap closed", n)
	}
	stall.SetReadDeadline(time.Now().Add(testTimeout))
	start := time.Now()
	if _, err := io.Copy(io.Discard, stall); err != nil {
		t.Logf("stalled client: %v", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("stalled handshake closed after %v, want about the 300ms timeout", el)
	}
	waitFor(t, "the slot to be free", func() bool { return tp.inProgress.Load() == 0 })
	c := dialTLS(t, p.addr, tp)
	c.send("GET /fixed/ HTTP/1.1\r\nHost: x\r\n\r\n")
	if r := c.read("GET"); r.status != 200 {
		t.Errorf("after the stall: got %d, want 200", r.status)
	}
}
