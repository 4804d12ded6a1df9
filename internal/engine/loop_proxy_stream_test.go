package engine

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/netpoll"
)

// Answers that must flow as they come: pipelined answers, upgrades,
// slow readers, answers that end at a read's boundary.

func TestLoopProxyPipelinedResponseNotHeld(t *testing.T) {
	run(t, testLoopProxyPipelinedResponseNotHeld)
}

func testLoopProxyPipelinedResponseNotHeld(t *testing.T, k netpoll.Kind) {
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/fast", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "fast") })
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		<-release
		io.WriteString(w, "slow")
	})
	hb, _ := newHTTPBackend(t, mux)
	p := startLoopProxy(t, k, loopTo(hb.Listener.Addr().String()))
	c := dialRaw(t, p.addr)
	c.send("GET /fast HTTP/1.1\r\nHost: a\r\n\r\nGET /fixed/ HTTP/1.1\r\nHost: a\r\n\r\nGET /slow HTTP/1.1\r\nHost: a\r\n\r\n")
	c.nc.SetReadDeadline(time.Now().Add(2 * time.Second))
	for _, want := range []string{"fast", "fixed"} {
		r, err := c.tryRead("GET")
		if err != nil || r.body != want {
			close(release)
			t.Fatalf("got (%q, %v), want %q while the next is pending", r.body, err, want)
		}
	}
	close(release)
	c.nc.SetReadDeadline(time.Now().Add(testTimeout))
	if r := c.read("GET"); r.body != "slow" {
		t.Errorf("got %q, want %q", r.body, "slow")
	}
}

func TestLoopProxyUpgrade(t *testing.T) { run(t, testLoopProxyUpgrade) }

func testLoopProxyUpgrade(t *testing.T, k netpoll.Kind) {
	be := startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
		readReqHead(br)
		io.WriteString(nc, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nhello;")
		buf := make([]byte, 1024)
		for {
			n, err := br.Read(buf)
			if n > 0 {
				io.WriteString(nc, "echo:"+string(buf[:n])+";")
			}
			if err != nil {
				return
			}
		}
	})
	p := startLoopProxy(t, k, loopTo(be.addr))
	c := dialRaw(t, p.addr)
	c.send("GET /fixed/ HTTP/1.1\r\nHost: a\r\n\r\n")
	c.read("GET")
	c.send("GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\nearly")
	if head := c.readHead(); !strings.HasPrefix(head, "HTTP/1.1 101 ") {
		t.Fatalf("got %q, want a 101", head)
	}
	want := "hello;echo:early;"
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c.br, got); err != nil || string(got) != want {
		t.Fatalf("got (%q, %v), want %q", got, err, want)
	}
	c.send("ping")
	want = "echo:ping;"
	got = make([]byte, len(want))
	if _, err := io.ReadFull(c.br, got); err != nil || string(got) != want {
		t.Fatalf("got (%q, %v), want %q", got, err, want)
	}
	c.tcp().CloseWrite()
	c.expectClosed(2 * time.Second)
}

func TestLoopProxyUpgradeRefused(t *testing.T) { run(t, testLoopProxyUpgradeRefused) }

func testLoopProxyUpgradeRefused(t *testing.T, k netpoll.Kind) {
	be := startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
		readReqHead(br)
		io.WriteString(nc, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n")
	})
	p := startLoopProxy(t, k, loopTo(be.addr))
	c := dialRaw(t, p.addr)
	c.send("GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n")
	if r := c.read("GET"); r.status != 502 {
		t.Errorf("got %v, want 502", r.status)
	}
}

// TestLoopProxySlowReader checks a large answer reaches a client slower
// than the backend with the loop's buffering bounded (backpressure: the
// loop stops reading the backend while the client lags).
func TestLoopProxySlowReader(t *testing.T) { run(t, testLoopProxySlowReader) }

func testLoopProxySlowReader(t *testing.T, k netpoll.Kind) {
	hb, _ := newHTTPBackend(t, httpMux())
	cfg := loopTo(hb.Listener.Addr().String())
	cfg.to.ReadTimeout = 500 * time.Millisecond
	cfg.opts.WriteTimeout = 5 * time.Second
	p := startLoopProxy(t, k, cfg)
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 64<<10) })
		return nil
	}}
	nc, err := d.Dial("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(testTimeout))
	const size = 8 << 20
	fmt.Fprintf(nc, "GET /size/%d HTTP/1.1\r\nHost: a\r\n\r\n", size)
	resp, err := http.ReadResponse(bufio.NewReaderSize(nc, 16<<10), nil)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	var got, maxPending int
	for i := 0; ; i++ {
		n, err := resp.Body.Read(buf)
		got += n
		if err != nil {
			break
		}
		if i%8 == 0 {
			p.eng.loops[0].do(func() {
				for c := p.eng.loops[0].conns.head; c != nil; c = c.next {
					maxPending = max(maxPending, len(c.fw.pending))
				}
			})
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got != size {
		t.Errorf("got %d bytes, want %d", got, size)
	}
	// The backend's next read and its re-chunking may come on top.
	if limit := defaultOutputBufferBytes + 2*readBufSize; maxPending > limit || maxPending == 0 {
		t.Errorf("got at most %d bytes pending, want some and no more than %d", maxPending, limit)
	}
	if rec := p.nextRec(t); rec.Status != 200 || rec.Err != nil || rec.Bytes != size {
		t.Errorf("record: got (%v, %v, %d bytes), want (200, nil, %d)", rec.Status, rec.Err, rec.Bytes, size)
	}
	// Idle again, the connection does not hold on to the room its
	// pending output took.
	l := p.eng.loops[0]
	held := -1
	waitFor(t, "the connection to go idle", func() bool {
		idle := false
		l.do(func() {
			if c := l.conns.head; c != nil && c.state == lsIdle {
				idle, held = true, cap(c.fw.pending)
			}
		})
		return idle
	})
	if held > maxIdlePending {
		t.Errorf("idle connection holds %d bytes of output room, want at most %d", held, maxIdlePending)
	}
}

// TestLoopProxyAnswerEndsAtReadBoundary has the loop read an answer's
// body to its last byte without finding the socket empty (the last read
// asks for exactly what is left), then sends another request on the same
// pooled backend connection. The portable poller waits to be told a
// socket is empty before it watches it again, so that second answer went
// unseen unless the connection was handed back with that said.
func TestLoopProxyAnswerEndsAtReadBoundary(t *testing.T) {
	run(t, testLoopProxyAnswerEndsAtReadBoundary)
}

func testLoopProxyAnswerEndsAtReadBoundary(t *testing.T, k netpoll.Kind) {
	be, _ := newHTTPBackend(t, httpMux())
	p := startLoopProxy(t, k, loopTo(strings.TrimPrefix(be.URL, "http://")))
	body := strings.Repeat("u", 256<<10)
	for i := 0; i < 10; i++ {
		c := dialRaw(t, p.addr)
		c.nc.SetDeadline(time.Now().Add(3 * time.Second))
		c.send("GET /size/1000000 HTTP/1.1\r\nHost: x\r\n\r\n")
		if r, err := c.tryRead("GET"); err != nil || r.status != 200 || len(r.body) != 1000000 {
			t.Fatalf("round %d, large answer: got (%v, %d bytes), want (200, 1000000)", i, err, len(r.body))
		}
		// The upload's answer comes only once the backend has its whole
		// body: nothing reads the backend socket before an event says so.
		c.send(fmt.Sprintf("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(body), body))
		if r, err := c.tryRead("POST"); err != nil || r.status != 200 || len(r.body) != len(body) {
			t.Fatalf("round %d, upload on the pooled backend connection: got (%v, %d bytes), want (200, %d)", i, err, len(r.body), len(body))
		}
		c.nc.Close()
	}
}
