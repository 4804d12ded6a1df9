package engine

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/helios-lb/helios/internal/netpoll"
)

// Drains (a binary upgrade's, SIGTERM's): what is under way when the
// listener stops is finished, and what the client was told it would get
// reaches it.

// answerGate answers each request with "slow" once released, and says
// when each answer is written.
type answerGate struct {
	*rawBackend
	reached chan struct{}
	written chan struct{}
	release chan struct{}
	once    sync.Once
}

func startAnswerGate(t *testing.T, n int) *answerGate {
	b := &answerGate{reached: make(chan struct{}, n), written: make(chan struct{}, n), release: make(chan struct{})}
	b.rawBackend = startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
		for h := readReqHead(br); h != ""; h = readReqHead(br) {
			b.reached <- struct{}{}
			<-b.release
			io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nslow")
			b.written <- struct{}{}
		}
	})
	t.Cleanup(b.open)
	return b
}

func (b *answerGate) open() { b.once.Do(func() { close(b.release) }) }

// wait takes n signals from ch, or fails the test.
func waitN(t *testing.T, what string, ch <-chan struct{}, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		select {
		case <-ch:
		case <-time.After(testTimeout):
			t.Fatalf("%s: %d of %d", what, i, n)
		}
	}
}

// sync makes sure the server has read everything c sent: it takes the
// server's SETTINGS (acknowledging them), then sends a PING and waits for
// its answer. Nothing c sent is then left to come in a later batch of
// the server's events.
func (c *h2Raw) sync() {
	c.t.Helper()
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			c.t.Fatalf("reading a frame: %v", err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				c.fr.WriteSettingsAck()
				c.pingSync()
				return
			}
		case *http2.WindowUpdateFrame:
		default:
			c.t.Fatalf("got a %v frame, want SETTINGS", f.Header().Type)
		}
	}
}

// startH2Drain stops p's listener and starts shutdown on a goroutine
// (bounded by testTimeout), with c, an HTTP/2 connection to p, turned to
// return PINGs (autoPing off). It reads the drain's first GOAWAY, NO_ERROR
// naming every stream, and its PING, and returns the PING's data and the
// channel shutdown's result comes on.
func startH2Drain(t *testing.T, p *loopProxy, c *h2Raw, shutdown func(p *loopProxy, ctx context.Context) error) ([8]byte, <-chan error) {
	t.Helper()
	c.autoPing = false
	p.ll.Stop()
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		shut <- shutdown(p, ctx)
	}()
	ev := c.mustNext()
	if ev.typ != http2.FrameGoAway || ev.code != http2.ErrCodeNo || ev.last != 1<<31-1 {
		t.Fatalf("got (%v, %v, last %d), want GOAWAY NO_ERROR naming every stream", ev.typ, ev.code, ev.last)
	}
	ev = c.mustNext()
	if ev.typ != http2.FramePing {
		t.Fatalf("got %v, want the drain's PING", ev.typ)
	}
	return ev.ping, shut
}

// drainReturned waits for the shutdown startH2Drain started, which must
// return nil (everything drained).
func drainReturned(t *testing.T, shut <-chan error) {
	t.Helper()
	select {
	case err := <-shut:
		if err != nil {
			t.Errorf("Shutdown: got %v, want nil", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("Shutdown did not return")
	}
}

// blockLoops holds every loop of p in a posted function until the
// returned function is called: what happens meanwhile (answers from
// backends, frames from clients) is handled in one batch of events after.
func blockLoops(t *testing.T, p *loopProxy) func() {
	t.Helper()
	unblock := make(chan struct{})
	for _, l := range p.eng.loops {
		blocked := make(chan struct{})
		if !l.post(func() { close(blocked); <-unblock }) {
			t.Fatal("loop stopped")
		}
		<-blocked
	}
	var once sync.Once
	open := func() { once.Do(func() { close(unblock) }) }
	t.Cleanup(open)
	return open
}

// TestLoopH2DrainAnswersHeldStreams drains (as a binary upgrade or
// SIGTERM does) while an HTTP/2 connection has streams at a backend, and
// lets the backend's answers arrive in one batch of the loop's events
// with what ends the session: the answers are gathered for one write at
// the end of the batch (loop.hold), and the session ends in the same
// batch, its last stream answered. The client must get every answer and
// the final GOAWAY naming the last stream before the connection closes,
// and no request may be recorded as answered that the client did not
// get. What ends the session in the batch:
//   - "PING answer": the client's answer to the drain's PING (the final
//     GOAWAY goes out then, and no stream is left), on a listener's
//     drain;
//   - "tick": the connection's once-a-second tick, after the final
//     GOAWAY went out earlier, on the engine's drain.
//
// (Issue 26: over TLS during binary upgrades the connection was shut
// after the first GOAWAY, without the final one and the answers, which
// the access log counted as 200.)
func TestLoopH2DrainAnswersHeldStreams(t *testing.T) {
	const streams = 10
	tests := []struct {
		name string
		// tick: the client answers the drain's PING at once, and the
		// loop is held past the connection's tick (1s).
		tick     bool
		shutdown func(p *loopProxy, ctx context.Context) error
	}{
		{"PING answer", false, func(p *loopProxy, ctx context.Context) error { return p.ll.Shutdown(ctx) }},
		{"tick", true, func(p *loopProxy, ctx context.Context) error { return p.eng.Shutdown(ctx) }},
	}
	// In parallel: the ticks' cases wait a second each.
	modes(t, func(t *testing.T, m mode, _ matrixOpts) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				be := startAnswerGate(t, streams)
				p, tp := startFrontTLS(t, m, loopTo(be.addr))
				c := dialH2Raw(t, p.addr, tp, 0)
				last := uint32(0)
				for i := 0; i < streams; i++ {
					last = uint32(2*i + 1)
					c.request(last, "GET", "/slow", true)
				}
				waitN(t, "requests at the backend", be.reached, streams)
				c.sync()
				ping, shut := startH2Drain(t, p, c, tt.shutdown)
				var final *h2Ev
				if tt.tick {
					c.fr.WritePing(true, ping)
					ev := c.mustNext()
					if ev.typ != http2.FrameGoAway || ev.last != last {
						t.Fatalf("got (%v, last %d), want the final GOAWAY naming stream %d", ev.typ, ev.last, last)
					}
					final = &ev
				}
				unblock := blockLoops(t, p)
				be.open()
				waitN(t, "answers written by the backend", be.written, streams)
				time.Sleep(50 * time.Millisecond) // the portable poller's watchers report them
				if tt.tick {
					time.Sleep(time.Second) // the connection's tick is due
				} else {
					c.fr.WritePing(true, ping)
					time.Sleep(50 * time.Millisecond)
				}
				unblock()

				bodies := map[uint32]string{}
				answered := 0
				for {
					ev, err := c.next()
					if err != nil {
						if !errors.Is(err, io.EOF) {
							t.Fatalf("reading: got %v, want frames, then the connection closed", err)
						}
						break
					}
					switch ev.typ {
					case http2.FrameGoAway:
						final = &ev
					case http2.FrameData:
						bodies[ev.stream] += string(ev.data)
						if ev.end && bodies[ev.stream] == "slow" {
							answered++
						}
					case http2.FrameRSTStream:
						t.Errorf("stream %d reset (%v), want its answer", ev.stream, ev.code)
					}
				}
				if final == nil {
					t.Errorf("connection closed without the final GOAWAY")
				} else if final.code != http2.ErrCodeNo || final.last != last {
					t.Errorf("final GOAWAY: got (%v, last %d), want (NO_ERROR, last %d)", final.code, final.last, last)
				}
				if answered != streams {
					t.Errorf("got %d answers before the connection closed, want %d", answered, streams)
				}
				sent := 0
				for i := 0; i < streams; i++ {
					if r := p.nextRec(t); r.Status == 200 && r.Err == nil {
						sent++
					}
				}
				if sent > answered {
					t.Errorf("got %d requests recorded as answered, want at most the %d the client got", sent, answered)
				}
				c.nc.Close()
				drainReturned(t, shut)
			})
		}
	}, onlyClients(clientH2, clientH2C), onlyBackends(backendH1), inParallel())
}

// TestLoopWebSocketDrainGoingAway drains with a WebSocket tunnel open
// until the drain's deadline: the tunnel is closed then, and each side is
// first sent a close frame with status 1001 going away (RFC 6455 §7.4.1),
// the client's as a server sends it, the backend's masked as a client
// sends it, between two of the frames passing its way. A side in the
// middle of a frame, or past its close frame, gets none (a frame of ours
// inside one would corrupt it); the tunnel is recorded (101) either way.
// (Issue 26: a binary upgrade closed WebSockets at its deadline with no
// close frame.)
func TestLoopWebSocketDrainGoingAway(t *testing.T) { run(t, testLoopWebSocketDrainGoingAway) }

func testLoopWebSocketDrainGoingAway(t *testing.T, k netpoll.Kind) {
	const (
		hi       = "\x81\x02hi"                       // a text frame "hi", from the backend
		partial  = "\x81\x0ahello"                    // the first half of a 10-byte one
		yo       = "\x81\x82\x01\x02\x03\x04\x78\x6d" // "yo" masked with 01 02 03 04, from the client
		bye      = "\x88\x82\x01\x02\x03\x04\x02\xea" // a close frame, status 1000, masked
		goAway   = "\x88\x02\x03\xe9"                 // a close frame, status 1001
		deadline = 300 * time.Millisecond
	)
	tests := []struct {
		name        string
		fromBackend string // what the backend sends behind its 101
		fromClient  string // what the client sends once upgraded
		// want: what each side gets before the connection closes; the
		// backend's close frame is masked with a key of the proxy's, and
		// toBackendClose says whether it gets one.
		wantClient     string
		toBackendClose bool
		shutdown       func(p *loopProxy, ctx context.Context) error
	}{
		{"between frames", hi, yo, hi + goAway, true,
			func(p *loopProxy, ctx context.Context) error { return p.ll.Shutdown(ctx) }},
		{"engine", hi, yo, hi + goAway, true,
			func(p *loopProxy, ctx context.Context) error { return p.eng.Shutdown(ctx) }},
		{"mid-frame to the client", partial, yo, partial, true,
			func(p *loopProxy, ctx context.Context) error { return p.ll.Shutdown(ctx) }},
		{"client closed first", hi, yo + bye, hi + goAway, false,
			func(p *loopProxy, ctx context.Context) error { return p.ll.Shutdown(ctx) }},
	}
	for _, tt := range tests {
		for _, tlsOn := range []bool{false, true} {
			name := tt.name + "/plain"
			if tlsOn {
				name = tt.name + "/tls"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel() // each waits for its drain's deadline
				got := make(chan string, 1)
				be := startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
					readReqHead(br)
					io.WriteString(nc, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"+tt.fromBackend)
					b, _ := io.ReadAll(br)
					got <- string(b)
				})
				cfg := loopTo(be.addr)
				var tp *testTLS
				if tlsOn {
					tp = newTestTLS(t)
					cfg.opts.TLS = tp
				}
				p := startLoopProxy(t, k, cfg)
				var c *rawClient
				if tlsOn {
					c = dialTLS(t, p.addr, tp)
				} else {
					c = dialRaw(t, p.addr)
				}
				c.send("GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n" +
					"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
				if head := c.readHead(); !strings.HasPrefix(head, "HTTP/1.1 101 ") {
					t.Fatalf("got %q, want a 101", head)
				}
				c.send(tt.fromClient)
				p.ll.Stop()
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				defer cancel()
				due, _ := ctx.Deadline()
				shut := make(chan error, 1)
				go func() { shut <- tt.shutdown(p, ctx) }()

				b, err := io.ReadAll(c.br)
				if err != nil {
					t.Errorf("client: got %v, want the connection closed", err)
				}
				if string(b) != tt.wantClient {
					t.Errorf("client got %q, want %q", b, tt.wantClient)
				}
				if now := time.Now(); now.Before(due) {
					t.Errorf("client's tunnel closed %v before the drain's deadline", due.Sub(now))
				}
				var toBackend string
				select {
				case toBackend = <-got:
				case <-time.After(testTimeout):
					t.Fatal("the backend's connection was not closed")
				}
				rest, ok := strings.CutPrefix(toBackend, tt.fromClient)
				switch {
				case !ok:
					t.Errorf("backend got %q, want %q first", toBackend, tt.fromClient)
				case !tt.toBackendClose && rest != "":
					t.Errorf("backend got %q after the client's close frame, want nothing", rest)
				case tt.toBackendClose && (len(rest) != 8 || rest[:2] != "\x88\x82" ||
					rest[6]^rest[2] != 0x03 || rest[7]^rest[3] != 0xe9):
					t.Errorf("backend got %q after the client's frames, want a masked close frame with status 1001", rest)
				}
				if err := <-shut; !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Shutdown: got %v, want %v", err, context.DeadlineExceeded)
				}
				if r := p.nextRec(t); r.Status != 101 {
					t.Errorf("record: got status %d, want 101", r.Status)
				}
			})
		}
	}
}

// TestWSFrames feeds wsFrames WebSocket frames of every header form
// (7-bit, 16-bit and 64-bit lengths, masked or not) cut at every byte
// and at random points: it must say it is between frames exactly at the
// frames' ends, until a close frame has passed.
func TestWSFrames(t *testing.T) {
	frame := func(op byte, n int, masked bool) []byte {
		b := []byte{0x80 | op}
		m := byte(0)
		if masked {
			m = 0x80
		}
		switch {
		case n < 126:
			b = append(b, m|byte(n))
		case n < 1<<16:
			b = append(b, m|126, byte(n>>8), byte(n))
		default:
			b = append(b, m|127, 0, 0, 0, 0, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
		}
		if masked {
			b = append(b, 1, 2, 3, 4)
		}
		return append(b, bytes.Repeat([]byte{'x'}, n)...)
	}
	var stream []byte
	ends := map[int]bool{0: true}
	for _, f := range [][]byte{
		frame(1, 0, false), frame(2, 5, true), frame(1, 125, false), frame(2, 126, true),
		frame(0, 300, false), frame(9, 4, true), frame(2, 70000, false), frame(1, 1, true),
	} {
		stream = append(stream, f...)
		ends[len(stream)] = true
	}
	closeAt := len(stream)
	stream = append(stream, frame(wsOpClose, 2, false)...)
	stream = append(stream, frame(1, 3, false)...)
	// Between frames, up to the close frame's start (after it, never).
	between := func(at int) bool { return ends[at] && at <= closeAt }

	// Every byte on its own.
	var f wsFrames
	for i, b := range stream {
		f.feed([]byte{b})
		if got, want := f.between(), between(i+1); got != want {
			t.Fatalf("after %d bytes one at a time: between() = %v, want %v", i+1, got, want)
		}
	}
	// Random cuts.
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 200; round++ {
		var f wsFrames
		for at := 0; at < len(stream); {
			n := min(len(stream)-at, 1+rng.IntN(200))
			if rng.IntN(10) == 0 {
				n = min(len(stream)-at, 1+rng.IntN(80000))
			}
			f.feed(stream[at : at+n])
			at += n
			if got, want := f.between(), between(at); got != want {
				t.Fatalf("round %d, after %d bytes: between() = %v, want %v", round, at, got, want)
			}
		}
	}
}
