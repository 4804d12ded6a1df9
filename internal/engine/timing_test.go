package engine

import (
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/netpoll"
)

// TestAttemptTiming: the engine reports each attempt's stages, stamped
// on its loop (issue 24): a request held at the backend has its time to
// the response head; one that waited for a connection at the backend's
// cap has its queue wait, and reusing the connection it got, no connect
// time.
func TestAttemptTiming(t *testing.T) { run(t, testAttemptTiming) }

func testAttemptTiming(t *testing.T, k netpoll.Kind) {
	answer := make(chan struct{})
	be, _, heads := gatedBackend(t, answer)
	cfg := loopTo(be.addr)
	cfg.to.MaxConnsPerBackend = 1
	cfg.to.MaxQueuePerBackend = 16
	cfg.to.QueueTimeout = testTimeout
	p := startLoopProxy(t, k, cfg)

	first := dialRaw(t, p.addr)
	first.send("GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
	waitFor(t, "the first request at the backend", func() bool { return heads.Load() == 1 })
	second := dialRaw(t, p.addr)
	second.send("GET /b HTTP/1.1\r\nHost: x\r\n\r\n")
	// The second waits for the one connection the cap allows.
	time.Sleep(100 * time.Millisecond)
	answer <- struct{}{}
	first.read("GET")
	waitFor(t, "the second request at the backend", func() bool { return heads.Load() == 2 })
	time.Sleep(50 * time.Millisecond)
	answer <- struct{}{}
	second.read("GET")

	a, b := p.nextRec(t).Timing, p.nextRec(t).Timing
	if a.Start == 0 || a.End < a.Start || a.FirstByte < 100*time.Millisecond || a.Queue != 0 {
		t.Errorf("first request: got %+v, want a start, at least 100ms to the head, no queue", a)
	}
	if b.Queue < 20*time.Millisecond || b.Connect != 0 || b.FirstByte < b.Queue+40*time.Millisecond {
		t.Errorf("second request: got %+v, want a queue wait, no connect (the connection is reused), the head 50ms after it", b)
	}
	if got := time.Duration(b.End - b.Start); got != b.FirstByte {
		t.Errorf("second request: reported %v after its start, want at its head (%v)", got, b.FirstByte)
	}
}
