package balancer

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/clock"
	"github.com/helios-lb/helios/internal/upstream"
)

func TestNames(t *testing.T) {
	want := []string{"round_robin", "weighted_round_robin", "least_conn", "consistent_hash", "ip_hash", "random", "p2c"}
	if got := Names(); !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	Names()[0] = "changed"
	if got := Names()[0]; got != RoundRobin {
		t.Errorf("after modifying a returned slice: got %v, want %v", got, RoundRobin)
	}
	for _, name := range Names() {
		if _, err := New(name, equalWeights(3), Options{}); err != nil {
			t.Errorf("New(%q): got %v, want nil", name, err)
		}
	}
}

func TestNewErrors(t *testing.T) {
	nilState := newBackends(1, 1)
	nilState[1].State = nil
	zeroWeight := newBackends(1, 0)
	heavy := newBackends(1, MaxWeight+1)
	badIndex := newBackends(1, 1)
	badIndex[1].Index = 0
	tests := []struct {
		name     string
		strategy string
		backends []*upstream.Backend
		want     error
	}{
		{name: "unknown strategy", strategy: "least_time", backends: equalWeights(2), want: ErrUnknownStrategy},
		{name: "empty strategy", strategy: "", backends: equalWeights(2), want: ErrUnknownStrategy},
		{name: "unknown strategy, empty pool", strategy: "nope", backends: nil, want: ErrUnknownStrategy},
		{name: "nil backend", strategy: RoundRobin, backends: []*upstream.Backend{nil}, want: ErrInvalidBackend},
		{name: "nil state", strategy: RoundRobin, backends: nilState, want: ErrInvalidBackend},
		{name: "zero weight", strategy: WeightedRoundRobin, backends: zeroWeight, want: ErrInvalidBackend},
		{name: "weight above MaxWeight", strategy: LeastConn, backends: heavy, want: ErrInvalidBackend},
		{name: "index not position", strategy: P2C, backends: badIndex, want: ErrInvalidBackend},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(tt.strategy, tt.backends, Options{})
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want an error wrapping %v", err, tt.want)
			}
			if p != nil {
				t.Errorf("picker: got %v, want nil", p)
			}
		})
	}
}

// TestNewCopiesBackends guards against a picker reading a slice that its
// caller reuses for the next configuration generation.
func TestNewCopiesBackends(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			bs := equalWeights(1)
			orig := bs[0]
			p := mustNew(t, name, bs, newRand(1))
			bs[0] = newBackends(1)[0]
			if got := p.Pick(upstream.Key{}); got != orig {
				t.Errorf("got %v, want %v", got, orig)
			}
		})
	}
}

// TestUsability checks, for every strategy, the rules every Pick shares:
// unusable and excluded backends are never picked, nil means none usable,
// and a sole usable backend is always picked.
func TestUsability(t *testing.T) {
	tests := []struct {
		name    string
		down    []int // backends marked down
		exclude []int // backends in Key.Exclude
		want    []int // indexes that may be picked; empty means nil only
		wantAll bool  // every index in want must be picked at least once
	}{
		{name: "all usable", want: []int{0, 1, 2, 3}, wantAll: true},
		{name: "skips down", down: []int{1}, want: []int{0, 2, 3}, wantAll: true},
		{name: "skips excluded", exclude: []int{2}, want: []int{0, 1, 3}, wantAll: true},
		{name: "skips down and excluded", down: []int{0}, exclude: []int{3}, want: []int{1, 2}, wantAll: true},
		{name: "only one usable", down: []int{0, 1}, exclude: []int{3}, want: []int{2}, wantAll: true},
		{name: "only the last usable", down: []int{0, 1, 2}, want: []int{3}, wantAll: true},
		{name: "none usable: all down", down: []int{0, 1, 2, 3}},
		{name: "none usable: all excluded", exclude: []int{0, 1, 2, 3}},
		{name: "none usable: down and excluded", down: []int{1, 3}, exclude: []int{0, 2}},
	}
	for _, name := range Names() {
		for _, tt := range tests {
			t.Run(name+"/"+tt.name, func(t *testing.T) {
				bs := newBackends(3, 1, 2, 1)
				for _, i := range tt.down {
					bs[i].SetDown(true)
				}
				var ex upstream.Set
				for _, i := range tt.exclude {
					ex.Add(i)
				}
				p := mustNew(t, name, bs, newRand(7))
				seen := make([]int, len(bs))
				for i := range 2000 {
					k := hashKey(i)
					k.Exclude = ex
					b := p.Pick(k)
					if len(tt.want) == 0 {
						if b != nil {
							t.Fatalf("pick %d: got %v, want nil", i, b.Addr)
						}
						continue
					}
					if b == nil {
						t.Fatalf("pick %d: got nil, want one of %v", i, tt.want)
					}
					if !slices.Contains(tt.want, b.Index) {
						t.Fatalf("pick %d: got backend %v, want one of %v", i, b.Index, tt.want)
					}
					seen[b.Index]++
				}
				if tt.wantAll {
					for _, i := range tt.want {
						if seen[i] == 0 {
							t.Errorf("backend %d picked: got %v times, want at least once (counts %v)", i, seen[i], seen)
						}
					}
				}
			})
		}
	}
}

func TestEmptyPool(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			p := mustNew(t, name, nil, nil)
			if got := p.Pick(upstream.Key{Hash: 42}); got != nil {
				t.Errorf("got %v, want nil", got)
			}
		})
	}
}

// TestPickAllocs proves the zero-allocation promise of upstream.Picker on the
// common path and on the fallback paths (skipping unusable backends).
func TestPickAllocs(t *testing.T) {
	tests := []struct {
		name    string
		weights []int
		down    []int
		exclude []int
		rnd     func() uint64
	}{
		{name: "3 usable, default rand", weights: []int{5, 1, 1}},
		{name: "30 usable, test rand", weights: weightsUpTo(30), rnd: newRand(3)},
		{name: "some down and excluded", weights: weightsUpTo(30), down: []int{0, 2, 4, 6, 8}, exclude: []int{1, 3}},
		// For weighted_round_robin the usable backend is rare in a long
		// schedule, which exercises pickByWeight.
		{name: "one light usable of many", weights: append([]int{1000}, weightsUpTo(29)...), down: seq(0, 28)},
		{name: "none usable", weights: []int{1, 2, 3}, down: []int{0, 1, 2}},
	}
	for _, name := range Names() {
		for _, tt := range tests {
			t.Run(name+"/"+tt.name, func(t *testing.T) {
				bs := newBackends(tt.weights...)
				for _, i := range tt.down {
					bs[i].SetDown(true)
				}
				k := upstream.Key{Hashed: true}
				for _, i := range tt.exclude {
					k.Exclude.Add(i)
				}
				p := mustNew(t, name, bs, tt.rnd)
				got := testing.AllocsPerRun(1000, func() {
					k.Hash++
					p.Pick(k)
				})
				if got != 0 {
					t.Errorf("allocs per pick: got %v, want 0", got)
				}
			})
		}
	}
}

// TestPickAllocsWithPolicies extends TestPickAllocs to slow start (a
// backend in its ramp, which reads the clock) and, for consistent_hash, to
// bounded load and to requests without a key (the fallback).
func TestPickAllocsWithPolicies(t *testing.T) {
	for _, name := range Names() {
		for _, hashed := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/hashed=%v", name, hashed), func(t *testing.T) {
				clk := clock.NewFake(time.Unix(1_000_000, 0))
				bs := rampingBackends(clk, 1, weightsUpTo(8)...)
				clk.Advance(testSlowStart / 3)
				bs[3].SetDown(true)
				p, err := New(name, bs, Options{BoundedLoad: 1.25, Fallback: LeastConn})
				if err != nil {
					t.Fatal(err)
				}
				k := upstream.Key{Hashed: hashed}
				got := testing.AllocsPerRun(1000, func() {
					k.Hash++
					if b := p.Pick(k); b != nil && k.Hash%3 == 0 {
						b.Begin() // some load, for the bound
					}
				})
				if got != 0 {
					t.Errorf("allocs per pick: got %v, want 0", got)
				}
			})
		}
	}
}

// TestConcurrentPick runs many pickers against backends whose state changes
// under them; run it with -race. Backend 0 is never touched, so a nil pick
// is a bug.
func TestConcurrentPick(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			bs := newBackends(3, 1, 2, 1, 4)
			p := mustNew(t, name, bs, newRand(11))
			stop := make(chan struct{})
			var churn sync.WaitGroup
			churn.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					b := bs[1+i%(len(bs)-1)]
					b.SetDown(i%2 == 0)
					b.Begin()
					b.End(false)
				}
			})
			var pickers sync.WaitGroup
			var nils [16]int
			for g := range 16 {
				pickers.Go(func() {
					for i := range 2000 {
						b := p.Pick(hashKey(g*2000 + i))
						if b == nil {
							nils[g]++
							continue
						}
						b.Begin()
						b.End(false)
					}
				})
			}
			pickers.Wait()
			close(stop)
			churn.Wait()
			for g := range nils {
				if nils[g] != 0 {
					t.Errorf("goroutine %d nil picks: got %v, want 0", g, nils[g])
				}
			}
			for i, b := range bs {
				if got := b.Inflight(); got != 0 {
					t.Errorf("backend %d in-flight after all ended: got %v, want 0", i, got)
				}
			}
		})
	}
}

func BenchmarkPick(b *testing.B) {
	for _, name := range Names() {
		for _, n := range []int{3, 30} {
			b.Run(name+"/"+strconv.Itoa(n), func(b *testing.B) {
				p := mustNew(b, name, newBackends(weightsUpTo(n)...), nil)
				k := upstream.Key{Hashed: true}
				b.ReportAllocs()
				for b.Loop() {
					k.Hash++
					p.Pick(k)
				}
			})
		}
		b.Run(name+"/30/parallel", func(b *testing.B) {
			p := mustNew(b, name, newBackends(weightsUpTo(30)...), nil)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				k := upstream.Key{Hashed: true}
				for pb.Next() {
					k.Hash++
					p.Pick(k)
				}
			})
		})
	}
}

// weightsUpTo returns n weights cycling through 1..5, so weighted strategies
// see unequal weights.
func weightsUpTo(n int) []int {
	w := make([]int, n)
	for i := range w {
		w[i] = 1 + i%5
	}
	return w
}

// seq returns the integers from through to.
func seq(from, to int) []int {
	var s []int
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}
