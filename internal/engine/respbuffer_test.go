package engine

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/helios-lb/helios/internal/bodybuf"
	"github.com/helios-lb/helios/internal/netpoll"
	"github.com/helios-lb/helios/internal/wire"
)

// spoolBackend answers GET /len/N/SEED with randomBody(N, SEED) under a
// Content-Length, and GET /chunk/N/SEED with the same bytes in 8 KiB
// chunks and a trailer X-Len: N. Its sockets have a small send buffer,
// so an answer nobody reads from holds its connection; held counts the
// answers being written now, that is the connections a slow reader
// holds, as the backend sees them.
type spoolBackend struct {
	*rawBackend
	held, reached atomic.Int32
}

// streamFields are the head fields with which spoolBackend says its
// answer is a stream, by the kind of answer asked for (the path's first
// segment).
var streamFields = map[string]string{
	"sse":   "Content-Type: text/event-stream\r\n",
	"grpc":  "Content-Type: application/grpc+proto\r\n",
	"noacc": "X-Accel-Buffering: no\r\n",
}

func startSpoolBackend(t *testing.T) *spoolBackend {
	b := &spoolBackend{}
	b.rawBackend = startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
		nc.(*net.TCPConn).SetWriteBuffer(16 << 10)
		for {
			head := readReqHead(br)
			if head == "" {
				return
			}
			b.reached.Add(1)
			var kind string
			var n int
			var seed uint64
			target := strings.Fields(head)[1]
			fmt.Sscanf(strings.ReplaceAll(target, "/", " "), "%s %d %d", &kind, &n, &seed)
			body := randomBody(n, seed)
			b.held.Add(1)
			var err error
			if kind == "chunk" {
				_, err = io.WriteString(nc, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Len\r\n\r\n")
				for len(body) > 0 && err == nil {
					p := body[:min(len(body), 8<<10)]
					body = body[len(p):]
					_, err = fmt.Fprintf(nc, "%x\r\n%s\r\n", len(p), p)
				}
				if err == nil {
					_, err = fmt.Fprintf(nc, "0\r\nX-Len: %d\r\n\r\n", n)
				}
			} else {
				_, err = fmt.Fprintf(nc, "HTTP/1.1 200 OK\r\n%sContent-Length: %d\r\n\r\n%s", streamFields[kind], n, body)
			}
			b.held.Add(-1)
			if err != nil {
				return
			}
		}
	})
	return b
}

// slowDial connects to addr with a small receive buffer, over TLS
// trusting tp when it is set; the test reads from it when it chooses.
func slowDial(t *testing.T, addr string, tp *testTLS) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: testTimeout, Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(3 * testTimeout))
	if tp != nil {
		tc := tls.Client(nc, &tls.Config{RootCAs: tp.pool, ServerName: "localhost"})
		if err := tc.Handshake(); err != nil {
			t.Fatal(err)
		}
		nc = tc
	}
	return nc
}

// respBufConfig is a loopProxy forwarding to be with response buffering
// rb, whose sockets have small buffers: to the backend a small receive
// buffer (what the proxy does not read stays with the backend), to the
// client a small send buffer (on loopback the kernel would let one grow
// past a megabyte, and take whole answers off the proxy's hands).
func respBufConfig(be *spoolBackend, rb *wire.ResponseBuffer) loopConfig {
	cfg := loopTo(be.addr)
	cfg.to.MaxIdlePerBackend = 64
	cfg.respBuf = rb
	cfg.dialControl = func(fd int) { syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVBUF, 16<<10) }
	cfg.acceptControl = func(fd int) { syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_SNDBUF, 16<<10) }
	return cfg
}

// checkSpoolAnswer reads an answer to GET path from br and checks it
// whole: status, the body randomBody(n, seed), and for a chunked answer
// its trailer.
func checkSpoolAnswer(t *testing.T, br *bufio.Reader, path string) {
	t.Helper()
	var kind string
	var n int
	var seed uint64
	fmt.Sscanf(strings.ReplaceAll(path, "/", " "), "%s %d %d", &kind, &n, &seed)
	resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
	if err != nil {
		t.Errorf("%s: reading the answer: %v", path, err)
		return
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 || !bytes.Equal(body, randomBody(n, seed)) {
		t.Errorf("%s: got (%d, %d bytes, %v), want (200, the %d bytes sent)", path, resp.StatusCode, len(body), err, n)
	}
	if kind == "chunk" && resp.Trailer.Get("X-Len") != strconv.Itoa(n) {
		t.Errorf("%s: got trailer %v, want X-Len: %d", path, resp.Trailer, n)
	}
}

// Issue 26, weakness 5: 1,000 slow HTTP/1.1 readers of a 1 MB answer held
// 1,000 backend connections for up to 60 s. With response buffering the
// answers of clients that do not read are read into memory and temporary
// files, the backend connections go back to the pool, and every client
// then gets its whole answer; off, each slow reader holds its backend
// connection, as before, and so does an answer that says it is a stream
// (an event stream, gRPC, X-Accel-Buffering: no), which is never held
// back.
func TestLoopResponseBuffering(t *testing.T) { run(t, testLoopResponseBuffering) }

func testLoopResponseBuffering(t *testing.T, k netpoll.Kind) {
	const clients, size = 12, 1 << 20
	tests := []struct {
		name string
		off  bool // not buffered: the route is off, or the answer a stream
		kind string
		tls  bool
	}{
		{"auto, length", false, "len", false},
		{"auto, chunked", false, "chunk", false},
		{"auto, TLS", false, "len", true},
		{"off", true, "len", false},
		{"event stream", true, "sse", false},
		{"gRPC", true, "grpc", false},
		{"X-Accel-Buffering: no", true, "noacc", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			be := startSpoolBackend(t)
			budget := bodybuf.NewBudget(64<<20, 64<<20)
			rb := &wire.ResponseBuffer{Memory: 64 << 10, File: 2 << 20, Budget: budget}
			if tt.name == "off" {
				rb = nil
			}
			cfg := respBufConfig(be, rb)
			var tp *testTLS
			if tt.tls {
				tp = newTestTLS(t)
				cfg.opts.TLS = tp
			}
			p := startLoopProxy(t, k, cfg)
			var conns []net.Conn
			var paths []string
			for i := range clients {
				nc := slowDial(t, p.addr, tp)
				path := fmt.Sprintf("/%s/%d/%d", tt.kind, size, i+1)
				if _, err := io.WriteString(nc, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
					t.Fatal(err)
				}
				conns, paths = append(conns, nc), append(paths, path)
			}
			waitFor(t, "every request to reach the backend", func() bool { return be.reached.Load() == clients })
			if tt.off {
				waitFor(t, "the answers to back up", func() bool { return be.held.Load() == clients })
				time.Sleep(300 * time.Millisecond)
				if got := be.held.Load(); got != clients {
					t.Errorf("got %d backend connections held by slow readers, want %d (one each)", got, clients)
				}
				if st := budget.Stats(); st.Buffered != 0 {
					t.Errorf("got %d answers buffered, want none", st.Buffered)
				}
			} else {
				waitFor(t, "the backend connections to be let go while no client reads", func() bool { return be.held.Load() == 0 })
				if st := budget.Stats(); st.Buffered != clients || st.Spilled == 0 || st.Full != 0 {
					t.Errorf("got %+v, want %d answers buffered, some bytes spilled to a file, none stopped by a cap", st, clients)
				}
			}
			for i, nc := range conns {
				checkSpoolAnswer(t, bufio.NewReader(nc), paths[i])
			}
			if !tt.off {
				waitFor(t, "the buffers to be let go", func() bool { st := budget.Stats(); return st.Memory == 0 && st.File == 0 })
			}
		})
	}
}

// Over its caps an answer is not failed: it goes on with backpressure, as
// without response buffering. The process's budget lets only some of the
// answers of known length be buffered, and the others hold their backend
// connections; an answer of unknown length is buffered up to its own cap
// and then waits for its client. Every client gets its whole answer, and
// what is held never passes the caps.
func TestLoopResponseBufferingCaps(t *testing.T) { run(t, testLoopResponseBufferingCaps) }

func testLoopResponseBufferingCaps(t *testing.T, k netpoll.Kind) {
	const clients, size = 6, 512 << 10
	tests := []struct {
		name            string
		kind            string
		memCap, fileCap int64 // the budget's
		memory          int   // the answer's
		file            int64
	}{
		// About two answers' rest fits the budget's file cap.
		{"process cap, length", "len", 1 << 20, 1 << 20, 16 << 10, 1 << 20},
		// 128 KiB in a file at most per answer, a 512 KiB answer.
		{"answer cap, chunked", "chunk", 1 << 20, 64 << 20, 16 << 10, 128 << 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			be := startSpoolBackend(t)
			budget := bodybuf.NewBudget(tt.memCap, tt.fileCap)
			p := startLoopProxy(t, k, respBufConfig(be, &wire.ResponseBuffer{Memory: tt.memory, File: tt.file, Budget: budget}))
			var conns []net.Conn
			var paths []string
			for i := range clients {
				nc := slowDial(t, p.addr, nil)
				path := fmt.Sprintf("/%s/%d/%d", tt.kind, size, i+1)
				io.WriteString(nc, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n")
				conns, paths = append(conns, nc), append(paths, path)
			}
			waitFor(t, "every request to reach the backend", func() bool { return be.reached.Load() == clients })
			// Answers of known length are buffered whole or not at all:
			// those buffered let their backend go, the others wait for
			// their clients. Answers of unknown length are all buffered
			// up to their cap, and then wait.
			settled := func(held int32, st bodybuf.BudgetStats) bool {
				if tt.kind == "chunk" {
					return held == clients && st.Buffered == clients && st.Full == clients
				}
				return held+int32(st.Buffered) == clients && st.Full > 0
			}
			waitFor(t, "the answers to settle", func() bool { return settled(be.held.Load(), budget.Stats()) })
			time.Sleep(200 * time.Millisecond)
			st := budget.Stats()
			if held := be.held.Load(); !settled(held, st) {
				t.Errorf("got %d backend connections held and %+v, want them settled", held, st)
			}
			if tt.kind == "len" && (st.Buffered == 0 || st.Buffered == clients) {
				t.Errorf("got %d answers buffered, want some but not all (the budget holds about two)", st.Buffered)
			}
			if st.Memory > tt.memCap || st.File > tt.fileCap || st.File > int64(clients)*tt.file {
				t.Errorf("got %d bytes held in memory and %d in files, want at most the caps (%d, %d; %d per answer)", st.Memory, st.File, tt.memCap, tt.fileCap, tt.file)
			}
			for i, nc := range conns {
				checkSpoolAnswer(t, bufio.NewReader(nc), paths[i])
			}
			waitFor(t, "the buffers to be let go", func() bool { st := budget.Stats(); return st.Memory == 0 && st.File == 0 })
		})
	}
}

// An HTTP/2 client that does not read (its windows stay shut) costs the
// backend nothing either: its streams' answers are buffered, the backend
// connections go back to the pool, and the streams get their whole
// answers once the client opens its windows.
func TestLoopH2ResponseBuffering(t *testing.T) {
	const streams, size = 6, 512 << 10
	modes(t, func(t *testing.T, m mode, _ matrixOpts) {
		be := startSpoolBackend(t)
		budget := bodybuf.NewBudget(64<<20, 64<<20)
		p, tp := startFrontTLS(t, m, respBufConfig(be, &wire.ResponseBuffer{Memory: 64 << 10, File: 2 << 20, Budget: budget}))
		c := dialH2Raw(t, p.addr, tp, 16384)
		c.credit = false
		c.nc.SetDeadline(time.Now().Add(3 * testTimeout))
		want := map[uint32][]byte{}
		for i := range streams {
			id := uint32(2*i + 1)
			kind := "len"
			if i%2 == 1 {
				kind = "chunk"
			}
			c.request(id, "GET", fmt.Sprintf("/%s/%d/%d", kind, size, id), true)
			want[id] = randomBody(size, uint64(id))
		}
		waitFor(t, "every request to reach the backend", func() bool { return be.reached.Load() == streams })
		waitFor(t, "the backend connections to be let go while the client's windows are shut", func() bool { return be.held.Load() == 0 })
		if st := budget.Stats(); st.Buffered != streams {
			t.Errorf("got %d answers buffered, want %d", st.Buffered, streams)
		}
		// Open every window wide, then read the answers.
		const wide = 1 << 30
		c.fr.WriteWindowUpdate(0, wide)
		c.connWin += wide
		for id := range want {
			c.fr.WriteWindowUpdate(id, wide)
			c.streamWin[id] = c.initial + wide
		}
		got := map[uint32][]byte{}
		status := map[uint32]string{}
		ended := 0
		for ended < streams {
			ev := c.mustNext()
			switch ev.typ {
			case http2.FrameHeaders:
				for _, f := range ev.fields {
					if f.Name == ":status" {
						status[ev.stream] = f.Value
					}
				}
			case http2.FrameData:
				got[ev.stream] = append(got[ev.stream], ev.data...)
			case http2.FrameRSTStream, http2.FrameGoAway:
				t.Fatalf("stream %d: got %v (%v), want its answer", ev.stream, ev.typ, ev.code)
			}
			if ev.end {
				ended++
			}
		}
		for id, w := range want {
			if status[id] != "200" || !bytes.Equal(got[id], w) {
				t.Errorf("stream %d: got (%q, %d bytes), want (200, the %d bytes sent)", id, status[id], len(got[id]), len(w))
			}
		}
		waitFor(t, "the buffers to be let go", func() bool { st := budget.Stats(); return st.Memory == 0 && st.File == 0 })
	}, onlyClients(clientH2, clientH2C), onlyBackends(backendH1))
}
