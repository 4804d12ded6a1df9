package proxy

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/wire"
)

// serverBudget is the budget internal/server builds for budget_ratio 0.2
// and the default response_header_timeout (30s, so a 60s window).
func serverBudget() *Budget { return NewBudget(0.2, 10, time.Minute) }

// TestBudgetRetriesAStalledBackendInFull guards issue 9 item 4: about 100
// requests stuck on a backend that stopped answering timed out together,
// and a fixed burst of 10 let 41 retry while 59 got 504 (nginx, with no
// budget, gave none). A stall of one backend at normal load must be
// retried in full on the others.
func TestBudgetRetriesAStalledBackendInFull(t *testing.T) {
	timeout := fmt.Errorf("%w: no response head", wire.ErrTimeout)
	tests := []struct {
		name   string
		before int // requests served before the stall
		stuck  int // requests that then time out together
	}{
		{name: "closed-loop clients all stuck", before: 300, stuck: 100},
		{name: "stall right after start", before: 0, stuck: 100},
		{name: "busier upstream", before: 5000, stuck: 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := &fakeTransport{script: map[string]any{"b1": 200, "b2": 200, "b3": 200}}
			pol := defaultPolicy()
			pol.OnTimeout = true
			p, up := pipelineFor(t, tr, pol, serverBudget())
			for i := 0; i < tt.before; i++ {
				serve(p.NewFlow(), tr, &fakeExchange{method: "GET"})
			}
			// The stuck requests: all sent to b1 (the picker takes the
			// first available backend), then b1 stops answering.
			flows := make([]wire.Flow, tt.stuck)
			for i := range flows {
				flows[i] = p.NewFlow()
				if a := flows[i].Begin(&fakeExchange{method: "GET"}); a != wire.ActForward {
					t.Fatalf("got action %v, want ActForward", a)
				}
			}
			retried := 0
			for _, f := range flows {
				if f.Forwarded(0, timeout) == wire.ActForward {
					retried++
					if _, b := f.Target(); b.Addr == "b1" {
						t.Fatalf("got a retry on b1, want another backend")
					}
				}
			}
			if retried != tt.stuck {
				t.Errorf("got %d of %d stuck requests retried, want all", retried, tt.stuck)
			}
			if got := up.Stats.Retries.Load(); got != uint64(retried) {
				t.Errorf("got retries counter %d, want %d", got, retried)
			}
		})
	}
}

// TestBudgetBoundsAFleetWideOutage is the other side of issue 9 item 4:
// when every backend times out, retries stay a fraction of requests (the
// ratio plus a floor) instead of multiplying the load by 1+attempts.
func TestBudgetBoundsAFleetWideOutage(t *testing.T) {
	timeout := fmt.Errorf("%w: no response head", wire.ErrTimeout)
	tr := &fakeTransport{script: map[string]any{"b1": timeout, "b2": timeout, "b3": timeout}}
	pol := defaultPolicy()
	pol.OnTimeout = true
	p, up := pipelineFor(t, tr, pol, serverBudget())
	const requests = 20000
	for i := 0; i < requests; i++ {
		tr.tried = tr.tried[:0]
		ex := &fakeExchange{method: "GET"}
		serve(p.NewFlow(), tr, ex)
		if ex.status != 504 {
			t.Fatalf("got status %d, want 504", ex.status)
		}
	}
	// 0.2 per request plus the floor of a window (600 at most).
	got := up.Stats.Retries.Load()
	if lo, hi := uint64(requests/5), uint64(requests/5+600); got < lo || got > hi {
		t.Errorf("got %d retries for %d requests, want %d to %d (not %d)", got, requests, lo, hi, 2*requests)
	}
}

func TestBudgetWindow(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := NewBudget(0.2, 1, 12*time.Second) // a floor of 12 retries per window
	spend := func(at time.Time, n int) int {
		ok := 0
		for i := 0; i < n; i++ {
			if b.Spend(at) {
				ok++
			}
		}
		return ok
	}
	if got := spend(t0, 20); got != 12 {
		t.Errorf("got %d retries without requests, want the floor, 12", got)
	}
	// Five requests earn one retry at 0.2, four do not.
	for i := 0; i < 4; i++ {
		b.Earn(t0.Add(time.Second))
	}
	if got := spend(t0.Add(time.Second), 1); got != 0 {
		t.Errorf("got %d retries from 4 requests at 0.2, want 0", got)
	}
	b.Earn(t0.Add(time.Second))
	if got := spend(t0.Add(time.Second), 2); got != 1 {
		t.Errorf("got %d retries from 5 requests at 0.2, want 1", got)
	}
	// A window later the old retries no longer count, and neither do the
	// old requests.
	if got := spend(t0.Add(14*time.Second), 20); got != 12 {
		t.Errorf("got %d retries a window later, want the floor, 12", got)
	}
	if got := b.Available(t0.Add(14 * time.Second)); got != 0 {
		t.Errorf("got %d available after spending, want 0", got)
	}
}

// TestBudgetSustainedOutage runs a fleet-wide outage for five simulated
// minutes: 100 requests a second, each asking for two retries. Over every
// window the retries stay within the ratio plus the floor.
func TestBudgetSustainedOutage(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const window = 12 * time.Second
	b := NewBudget(0.2, 1, window)
	perSecond := make([]int, 300)
	for s := range perSecond {
		for i := 0; i < 100; i++ {
			now := t0.Add(time.Duration(s)*time.Second + time.Duration(i)*10*time.Millisecond)
			b.Earn(now)
			for r := 0; r < 2 && b.Spend(now); r++ {
				perSecond[s]++
			}
		}
	}
	for s := 12; s+12 <= len(perSecond); s += 12 {
		got := 0
		for _, n := range perSecond[s : s+12] {
			got += n
		}
		// 1200 requests in 12 s: 240 retries earned, 12 from the floor.
		if got > 252 || got < 228 {
			t.Fatalf("got %d retries in the 12 s from %d s, want about 252 (not 2400)", got, s)
		}
	}
}

func TestBudgetConcurrentSpendsNeverOvershoot(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := NewBudget(0.2, 1, 10*time.Second) // floor 10
	var wg sync.WaitGroup
	var ok atomic.Int64
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 100; j++ {
				b.Earn(now)
				if b.Spend(now) {
					ok.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if got, want := ok.Load(), int64(10+800/5); got > want {
		t.Errorf("got %d retries, want at most %d", got, want)
	}
}
