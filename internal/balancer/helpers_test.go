package balancer

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/helios-lb/helios/internal/upstream"
)

// newBackends returns one up backend per weight, addressed 10.0.0.<i+1>:80.
func newBackends(weights ...int) []*upstream.Backend {
	bs := make([]*upstream.Backend, len(weights))
	for i, w := range weights {
		bs[i] = &upstream.Backend{
			State:  upstream.NewState(nil),
			Addr:   fmt.Sprintf("10.0.0.%d:80", i+1),
			Weight: w,
			Index:  i,
		}
	}
	return bs
}

// equalWeights returns n backends of weight 1.
func equalWeights(n int) []*upstream.Backend {
	w := make([]int, n)
	for i := range w {
		w[i] = 1
	}
	return newBackends(w...)
}

// newRand returns a deterministic splitmix64 source that is safe for
// concurrent use, as New requires.
func newRand(seed uint64) func() uint64 {
	var s atomic.Uint64
	s.Store(seed)
	return func() uint64 { return mix(s.Add(0x9e3779b97f4a7c15)) }
}

func mustNew(t testing.TB, strategy string, bs []*upstream.Backend, rnd func() uint64) upstream.Picker {
	t.Helper()
	p, err := New(strategy, bs, Options{Rand: rnd})
	if err != nil {
		t.Fatalf("New(%q): got error %v, want nil", strategy, err)
	}
	return p
}

// countPicks makes n picks with keys from key(i) and returns how often each
// backend index was picked; a nil pick fails the test.
func countPicks(t *testing.T, p upstream.Picker, nb, n int, key func(i int) upstream.Key) []int {
	t.Helper()
	got := make([]int, nb)
	for i := range n {
		b := p.Pick(key(i))
		if b == nil {
			t.Fatalf("pick %d: got nil, want a backend", i)
		}
		got[b.Index]++
	}
	return got
}

// hashKey gives every pick a different client hash, so that ip_hash is
// exercised over many clients and the other strategies ignore it.
func hashKey(i int) upstream.Key { return upstream.Key{Hash: mix(uint64(i) + 1), Hashed: true} }

// within reports whether got is within frac (relative) of want.
func within(got int, want float64, frac float64) bool {
	return float64(got) >= want*(1-frac) && float64(got) <= want*(1+frac)
}
