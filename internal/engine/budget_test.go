package engine

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/helios-lb/helios/internal/bodybuf"
	"github.com/helios-lb/helios/internal/h2"
	"github.com/helios-lb/helios/internal/netpoll"
	"github.com/helios-lb/helios/internal/wire"
)

// Request buffering within budgets: what the engine holds of request
// bodies, per client connection (an HTTP/2 connection's streams
// together) and per process, in memory and in temporary files, is
// accounted (bodybuf.Account, bodybuf.Budget) and bounded; a stream's
// input holds about its flow-control window at most, never the body it
// passed on; a stalled body gets 408 within the listener's timeouts, as
// over HTTP/1.1; and what was held is all given back.

// budgetHeld returns what the loops' HTTP/2 connections' accounts hold.
func (p *loopProxy) budgetHeld() int64 {
	var n int64
	for _, l := range p.eng.loops {
		l.do(func() {
			for c := l.conns.head; c != nil; c = c.next {
				if c.h2 != nil && c.h2.acct != nil {
					n += c.h2.acct.Held()
				}
			}
		})
	}
	return n
}

// streamInputs returns, for each stream on the loops, the memory its
// rendered input holds, and the body bytes its exchange has read.
func (p *loopProxy) streamInputs() (held []int, read int64) {
	for _, l := range p.eng.loops {
		l.do(func() {
			for c := l.streams.head; c != nil; c = c.next {
				held = append(held, c.h2s.buffered())
				read += c.reqBody.read
			}
		})
	}
	return held, read
}

// withBudget gives cfg's listener request buffers of memory and file
// bytes across the process and conn per connection, and returns them.
func withBudget(cfg *loopConfig, memory, file, conn int64) *bodybuf.Budget {
	b := bodybuf.NewBudget(memory, file)
	cfg.opts.RequestBuffers, cfg.opts.RequestBufferConnBytes = b, conn
	return b
}

// heldBy returns what b holds in memory and in files.
func heldBy(b *bodybuf.Budget) (memory, file int64) {
	st := b.Stats()
	return st.Memory, st.File
}

// silentBackend is a backend that reads whatever comes and never answers.
func silentBackend(t testing.TB) *rawBackend {
	return startRawBackend(t, func(nc net.Conn, br *bufio.Reader) { io.Copy(io.Discard, br) })
}

// stallingBody is a request body that sends n bytes and then nothing
// more, until the test ends.
func stallingBody(t *testing.T, n int) io.Reader {
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.CloseWithError(io.ErrUnexpectedEOF) })
	go func() {
		chunk := make([]byte, 32<<10)
		for sent := 0; sent < n; sent += len(chunk) {
			if _, err := pw.Write(chunk[:min(len(chunk), n-sent)]); err != nil {
				return
			}
		}
	}()
	return pr
}

// TestLoopH2StalledUploadsBounded has one HTTP/2 connection open streams
// that each send several MiB of a larger body and stall (issue 26: they
// cost tens of MiB each, held until a 408 at 60 s). The connection's
// buffering is held to its account's cap, the process budget holds what
// the account does, each stream's input about its window at most; the
// streams that found no room stream to the backend instead (auto); every
// stream gets 408 once its body has stopped for the listener's wait for
// body bytes; then nothing is held, no
// temporary file is open.
func TestLoopH2StalledUploadsBounded(t *testing.T) {
	be := silentBackend(t)
	const (
		streams = 4
		sent    = 8 << 20 // per stream, of a larger body
		connCap = 4 << 20
	)
	modes(t, func(t *testing.T, m mode, _ matrixOpts) {
		cfg := loopTo(be.addr)
		budget := withBudget(&cfg, 1<<30, 1<<30, connCap)
		// A body that stops arriving for this long gets 408, as
		// over HTTP/1.1.
		cfg.opts.IdleTimeout = 2 * time.Second
		p, tp := startFrontTLS(t, m, cfg)
		dir := t.TempDir()
		bufferRoute(t, p, wire.BufferLimits{Memory: 64 << 10, File: 16 << 20, Dir: dir, Stream: true})
		c := newH2Client(t, p.addr, tp)
		got := make(chan clientResp, streams)
		for i := 0; i < streams; i++ {
			go func() {
				r, _ := c.do(context.Background(), "POST", "/up", stallingBody(t, sent), nil, nil)
				got <- r
			}()
		}
		// What is held is looked at as soon as every sent byte has
		// been read, before the stall is answered.
		var held []int
		var acct, mem, file int64
		waitFor(t, "every stream's sent bytes to be read", func() bool {
			var read int64
			held, read = p.streamInputs()
			acct = p.budgetHeld()
			mem, file = heldBy(budget)
			return read >= streams*sent
		})
		stalled := time.Now()
		for i, h := range held {
			if h > 2*h2.DefaultStreamWindow {
				t.Errorf("stream %d: its input holds %d bytes, want about its window (%d) at most", i, h, h2.DefaultStreamWindow)
			}
		}
		if acct > connCap || acct == 0 || mem+file != acct {
			t.Errorf("got %d held by the connection's account, %d+%d by the process budget, want at most %d, and the same", acct, mem, file, connCap)
		}
		for i := 0; i < streams; i++ {
			select {
			case r := <-got:
				if r.status != 408 {
					t.Errorf("got %d, want 408 for a stalled body", r.status)
				}
			case <-time.After(testTimeout):
				t.Fatal("a stalled stream got no answer")
			}
		}
		if el := time.Since(stalled); el > cfg.opts.IdleTimeout+2*time.Second {
			t.Errorf("answered %v after the bodies stalled, want the 2s wait for body bytes", el)
		}
		for i := 0; i < streams; i++ {
			if rec := p.nextRec(t); rec.Status != 408 {
				t.Errorf("record: got %d (%v), want 408", rec.Status, rec.Err)
			}
		}
		waitFor(t, "the buffers to be given back", func() bool {
			mem, file := heldBy(budget)
			return mem == 0 && file == 0 && p.budgetHeld() == 0 && fdsUnder(t, dir) == 0
		})
	}, onlyClients(clientH2, clientH2C), onlyBackends(backendH1))
}

// TestLoopBufferBudgets has request buffering run out of budget, the
// connection's or the process's, from HTTP/1.1 and HTTP/2 clients: a
// route that buffers what it can (auto) streams the rest of the body and
// the backend gets it whole; one that buffers whole bodies (on) answers
// 503, not the backend's failure; a body within the budget is buffered
// and forwarded whole; nothing is held afterwards.
func TestLoopBufferBudgets(t *testing.T) { run(t, testLoopBufferBudgets) }

func testLoopBufferBudgets(t *testing.T, k netpoll.Kind) {
	be := requestBackend(t, func(nc net.Conn, r h1Request) {
		n := len(r.body)
		if strings.Contains(strings.ToLower(r.head), "transfer-encoding: chunked") {
			req, _ := http.ReadRequest(bufio.NewReader(strings.NewReader(r.head + r.body)))
			b, _ := io.ReadAll(req.Body)
			n = len(b)
		}
		fmt.Fprintf(nc, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%d", len(fmt.Sprint(n)), n)
	})
	const body = 1 << 20
	tests := []struct {
		name            string
		stream          bool
		connCap         int64
		memCap, fileCap int64
		status          int
	}{
		{"within the budgets", false, 4 << 20, 1 << 30, 1 << 30, 200},
		{"connection spent, auto", true, 256 << 10, 1 << 30, 1 << 30, 200},
		{"connection spent, on", false, 256 << 10, 1 << 30, 1 << 30, 503},
		{"process files spent, auto", true, 4 << 20, 1 << 30, 128 << 10, 200},
		{"process files spent, on", false, 4 << 20, 1 << 30, 128 << 10, 503},
		{"process memory spent: files take it", false, 4 << 20, 0, 1 << 30, 200},
	}
	for _, ck := range upClientKinds {
		for _, tt := range tests {
			t.Run(ck.name+"/"+tt.name, func(t *testing.T) {
				cfg := loopTo(be.addr)
				budget := withBudget(&cfg, tt.memCap, tt.fileCap, tt.connCap)
				cfg.opts.H2C = true
				p := startLoopProxy(t, k, cfg)
				dir := t.TempDir()
				bufferRoute(t, p, wire.BufferLimits{Memory: 64 << 10, File: 16 << 20, Dir: dir, Stream: tt.stream})
				status, got := 0, ""
				if ck.h2 {
					r, err := newUpClient(t, p.addr, true).do(context.Background(), "POST", "/up", make([]byte, body), false, nil)
					if err != nil {
						t.Fatalf("got %v, want an answer", err)
					}
					status, got = r.status, r.body
				} else {
					// The body is written beside the read: an answer that
					// comes before the body is all sent (503) is read
					// whatever becomes of the rest, which the connection,
					// closing, no longer takes.
					c := dialRaw(t, p.addr)
					go c.nc.Write(append([]byte(fmt.Sprintf("POST /up HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n", body)), make([]byte, body)...))
					r := c.read("POST")
					status, got = r.status, r.body
				}
				if status != tt.status || status == 200 && got != fmt.Sprint(body) {
					t.Errorf("got (%d, %q), want %d (and the backend to get %d bytes)", status, got, tt.status, body)
				}
				rec := p.nextRec(t)
				if rec.Status != tt.status || tt.status == 503 && !errors.Is(rec.Err, wire.ErrBuffersFull) {
					t.Errorf("record: got (%d, %v), want %d", rec.Status, rec.Err, tt.status)
				}
				waitFor(t, "the buffers to be given back", func() bool {
					mem, file := heldBy(budget)
					return mem == 0 && file == 0 && fdsUnder(t, dir) == 0
				})
			})
		}
	}
}

// TestLoopH2StalledSmallBodiesCharged has one HTTP/2 connection's streams
// each send most of a small body (under 64 KiB, which a stream reads
// whole behind its head) and stall: the bodies held whole count against
// the connection's request buffers, so no more of them are held than its
// cap allows (the others go the way of larger bodies, within the same
// cap); every stream gets 408; nothing is held afterwards.
func TestLoopH2StalledSmallBodiesCharged(t *testing.T) {
	be := silentBackend(t)
	const (
		streams = 8
		length  = 60000
		connCap = 256 << 10 // room for four bodies
	)
	modes(t, func(t *testing.T, m mode, _ matrixOpts) {
		cfg := loopTo(be.addr)
		budget := withBudget(&cfg, 1<<30, 1<<30, connCap)
		cfg.opts.IdleTimeout = time.Second
		p, tp := startFrontTLS(t, m, cfg)
		bufferRoute(t, p, wire.BufferLimits{Memory: 64 << 10, File: 16 << 20, Dir: t.TempDir(), Stream: true})
		c := dialH2Raw(t, p.addr, tp, 0)
		for i := 0; i < streams; i++ {
			id := uint32(2*i + 1)
			c.request(id, "POST", "/up", false, "content-length", fmt.Sprint(length))
			for sent := 0; sent < length-1000; sent += 16384 {
				c.fr.WriteData(id, false, make([]byte, min(16384, length-1000-sent)))
			}
		}
		var whole int
		var acct int64
		waitFor(t, "every stream's bytes to be read", func() bool {
			whole = 0
			var read int64
			for _, l := range p.eng.loops {
				l.do(func() {
					for s := l.streams.head; s != nil; s = s.next {
						if s.state == lsBody {
							whole++ // waits to read its body whole
							read += int64(len(s.rd.buffered()))
						} else {
							read += s.reqBody.read
						}
					}
				})
			}
			acct = p.budgetHeld()
			return read >= streams*(length-1000)
		})
		if whole > connCap/length || acct > connCap {
			t.Errorf("got %d bodies held whole and %d bytes charged, want at most %d and %d", whole, acct, connCap/length, connCap)
		}
		status := map[uint32]string{}
		for len(status) < streams {
			ev := c.mustNext()
			for _, f := range ev.fields {
				if ev.typ == http2.FrameHeaders && f.Name == ":status" {
					status[ev.stream] = f.Value
				}
			}
		}
		for id, st := range status {
			if st != "408" {
				t.Errorf("stream %d: got %s, want 408", id, st)
			}
		}
		waitFor(t, "the buffers to be given back", func() bool {
			mem, file := heldBy(budget)
			return mem == 0 && file == 0 && p.budgetHeld() == 0
		})
	}, onlyClients(clientH2, clientH2C), onlyBackends(backendH1))
}
