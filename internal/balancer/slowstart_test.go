package balancer

import (
	"fmt"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/clock"
	"github.com/helios-lb/helios/internal/upstream"
)

const testSlowStart = 30 * time.Second

// rampingBackends returns backends with the given weights on one fake
// clock, with a slow start window of testSlowStart, and starts the slow
// start of backend ramp now.
func rampingBackends(clk *clock.Fake, ramp int, weights ...int) []*upstream.Backend {
	bs := newBackends(weights...)
	for _, b := range bs {
		b.State = upstream.NewState(clk)
		b.SlowStart = testSlowStart
	}
	bs[ramp].StartRamp(clk.Now())
	return bs
}

// TestSlowStartShare checks, for every strategy, that a backend in slow
// start takes a share of the picks that follows its effective weight,
// weight × elapsed/slow_start, to within ±10% at each tenth of the window:
// nothing at its start, its full share at its end (issue 21). The picks
// are not held in flight: least_conn and p2c see an idle pool, whose ties
// follow the ramp.
func TestSlowStartShare(t *testing.T) {
	type tcase struct {
		strategy string
		weights  []int
	}
	var tests []tcase
	for _, name := range Names() {
		tests = append(tests, tcase{name, []int{1, 1, 1, 1}})
	}
	// The strategies that honour weights, with unequal ones.
	tests = append(tests, tcase{WeightedRoundRobin, []int{2, 1, 3, 2}}, tcase{ConsistentHash, []int{2, 1, 3, 2}})
	const ramp = 1
	const picks = 20000
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%v", tt.strategy, tt.weights), func(t *testing.T) {
			clk := clock.NewFake(time.Unix(1_000_000, 0))
			bs := rampingBackends(clk, ramp, tt.weights...)
			p := mustNew(t, tt.strategy, bs, newRand(5))
			others := 0
			for i, w := range tt.weights {
				if i != ramp {
					others += w
				}
			}
			w := float64(tt.weights[ramp])
			if !honoursWeights(tt.strategy) {
				w, others = 1, len(tt.weights)-1
			}
			for tenth := 0; tenth <= 11; tenth++ {
				f := min(float64(tenth)/10, 1)
				want := f * w / (f*w + float64(others))
				got := countPicks(t, p, len(bs), picks, func(i int) upstream.Key { return hashKey(tenth*picks + i) })
				share := float64(got[ramp]) / picks
				if share < want*0.9 || share > want*1.1 {
					t.Errorf("at %d/10 of the window: share got %.4f, want %.4f ±10%% (counts %v)", tenth, share, want, got)
				}
				clk.Advance(testSlowStart / 10)
			}
		})
	}
}

// honoursWeights reports whether a strategy's shares follow the weights (the
// others share equally, whatever the weights).
func honoursWeights(strategy string) bool {
	return strategy == WeightedRoundRobin || IsHash(strategy)
}

// TestSlowStartLoad holds requests in flight, as a proxy does: least_conn
// and p2c, which pick by load, keep a backend in slow start at a share of
// the in-flight requests that follows its effective weight.
func TestSlowStartLoad(t *testing.T) {
	tests := []struct {
		strategy string
		tol      float64 // relative
	}{
		{strategy: LeastConn, tol: 0.05},
		// p2c compares only two backends per pick: its balance is
		// approximate, loaded or not.
		{strategy: P2C, tol: 0.25},
	}
	for _, tt := range tests {
		t.Run(tt.strategy, func(t *testing.T) {
			for _, f := range []float64{0.2, 0.5, 0.8} {
				clk := clock.NewFake(time.Unix(1_000_000, 0))
				bs := rampingBackends(clk, 0, 1, 1, 1, 1)
				clk.Advance(time.Duration(f * float64(testSlowStart)))
				p := mustNew(t, tt.strategy, bs, newRand(9))
				for range 4000 {
					p.Pick(upstream.Key{}).Begin()
				}
				var others int64
				for _, b := range bs[1:] {
					others += b.Inflight()
				}
				got := float64(bs[0].Inflight()) / (float64(others) / 3)
				if got < f*(1-tt.tol) || got > f*(1+tt.tol) {
					t.Errorf("ramp %.1f: in flight relative to a full backend got %.3f, want %.1f ±%.0f%%", f, got, f, tt.tol*100)
				}
			}
		})
	}
}

// TestSlowStartKeysStay checks that consistent_hash ramps by key: the keys
// a backend in slow start holds at one moment it still holds later, and at
// the end of the window it holds exactly the keys it held before it went
// away.
func TestSlowStartKeysStay(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	bs := rampingBackends(clk, 2, 1, 1, 1, 1)
	p := mustNew(t, ConsistentHash, bs, nil)
	clk.Advance(testSlowStart)
	hs := clients(20000, false)
	full := assign(t, p, hs)
	bs[2].StartRamp(clk.Now())
	prev := make([]bool, len(hs))
	for step := 1; step <= 10; step++ {
		clk.Advance(testSlowStart / 10)
		got := assign(t, p, hs)
		for i := range hs {
			on := got[i] == 2
			switch {
			case prev[i] && !on:
				t.Fatalf("step %d: key %d left the backend in slow start", step, i)
			case on && full[i] != 2:
				t.Fatalf("step %d: key %d moved to the backend in slow start from %d", step, i, full[i])
			case got[i] != 2 && full[i] != 2 && got[i] != full[i]:
				t.Fatalf("step %d: key %d of another backend moved: got %d, want %d", step, i, got[i], full[i])
			}
			prev[i] = on
		}
	}
	for i := range hs {
		if prev[i] != (full[i] == 2) {
			t.Fatalf("after the window: key %d on the backend is %v, want %v", i, prev[i], full[i] == 2)
		}
	}
}

// TestSlowStartEveryBackend checks that slow start never makes a pick fail:
// when every backend is at the start of its ramp, they still take the
// requests.
func TestSlowStartEveryBackend(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			clk := clock.NewFake(time.Unix(1_000_000, 0))
			bs := rampingBackends(clk, 0, 1, 2, 1)
			for _, b := range bs {
				b.StartRamp(clk.Now())
			}
			p := mustNew(t, name, bs, newRand(1))
			countPicks(t, p, len(bs), 1000, hashKey)
		})
	}
}
