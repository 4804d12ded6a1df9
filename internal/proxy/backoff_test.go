package proxy

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/wire"
)

// TestBackoffDelay checks full jitter: the n-th retry waits a uniform time
// in [0, min(max, base·2^(n-1))].
func TestBackoffDelay(t *testing.T) {
	top := func() uint64 { return ^uint64(0) }
	b := Backoff{Base: 25 * time.Millisecond, Max: 250 * time.Millisecond, Rand: top}
	for n, want := range map[int]time.Duration{1: 25, 2: 50, 3: 100, 4: 200, 5: 250, 6: 250, 40: 250} {
		if got := b.delay(n); got != want*time.Millisecond {
			t.Errorf("retry %d at the top of its range: got %v, want %v", n, got, want*time.Millisecond)
		}
	}
	b.Rand = func() uint64 { return 0 }
	if got := b.delay(3); got != 0 {
		t.Errorf("at the bottom of its range: got %v, want 0", got)
	}
	r := rand.New(rand.NewPCG(1, 2))
	b.Rand = r.Uint64
	var sum time.Duration
	const n = 10000
	for range n {
		d := b.delay(3)
		if d < 0 || d > 100*time.Millisecond {
			t.Fatalf("retry 3: got %v, want within [0, 100ms]", d)
		}
		sum += d
	}
	if mean := sum / n; mean < 48*time.Millisecond || mean > 52*time.Millisecond {
		t.Errorf("retry 3, mean of %d draws: got %v, want about 50ms (uniform)", n, mean)
	}
	if got := (&Backoff{}).delay(1); got != 0 {
		t.Errorf("zero Backoff: got %v, want 0", got)
	}
}

// TestRetryWaitsItsBackoff drives a flow as an engine does: a retry asks
// for ActWait with the backoff's delay and, resumed, forwards to the next
// backend; a backend at its connection cap is retried at once; a client
// that leaves during the wait ends the request with nothing in flight.
func TestRetryWaitsItsBackoff(t *testing.T) {
	refused := fmt.Errorf("%w: refused", wire.ErrConnect)
	busy := fmt.Errorf("%w: at its cap", wire.ErrBackendBusy)
	pol := defaultPolicy()
	pol.Backoff = Backoff{Base: 100 * time.Millisecond, Max: time.Second, Rand: func() uint64 { return ^uint64(0) }}
	p, up := pipelineFor(t, &fakeTransport{}, pol, nil)

	f := p.NewFlow()
	ex := &fakeExchange{method: "GET"}
	if a := f.Begin(ex); a != wire.ActForward {
		t.Fatalf("Begin: got %v, want ActForward", a)
	}
	if a := f.Forwarded(0, refused); a != wire.ActWait || f.Delay() != 100*time.Millisecond {
		t.Fatalf("first failure: got %v after %v, want ActWait after 100ms", a, f.Delay())
	}
	if a := f.Resume(); a != wire.ActForward {
		t.Fatalf("Resume: got %v, want ActForward", a)
	}
	if _, b := f.Target(); b.Addr != "b2" {
		t.Errorf("retry to: got %s, want b2", b.Addr)
	}
	if a := f.Forwarded(0, busy); a != wire.ActForward {
		t.Errorf("backend at its cap: got %v, want ActForward at once", a)
	}
	if a := f.Forwarded(0, refused); a != wire.ActRespond {
		t.Errorf("attempts spent: got %v, want ActRespond", a)
	}

	f = p.NewFlow()
	f.Begin(ex)
	if a := f.Forwarded(0, refused); a != wire.ActWait {
		t.Fatalf("got %v, want ActWait", a)
	}
	if a := f.Forwarded(0, fmt.Errorf("%w: closed", wire.ErrClientGone)); a != wire.ActClose {
		t.Errorf("client gone during the wait: got %v, want ActClose", a)
	}
	f.Finish()
	for _, b := range up.Backends {
		if n := b.Inflight(); n != 0 {
			t.Errorf("backend %s in flight after the request: got %d, want 0", b.Addr, n)
		}
	}
}
