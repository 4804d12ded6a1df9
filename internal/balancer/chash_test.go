package balancer

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/helios-lb/helios/internal/upstream"
)

// clients returns n client hashes: sequential ones (the worst case for a
// weak mix) or random ones.
func clients(n int, sequential bool) []uint64 {
	r := rand.New(rand.NewPCG(1, 2))
	hs := make([]uint64, n)
	for i := range hs {
		if sequential {
			hs[i] = uint64(i)
		} else {
			hs[i] = r.Uint64()
		}
	}
	return hs
}

// assign returns the backend index of every client; a nil pick fails.
func assign(t *testing.T, p upstream.Picker, hs []uint64) []int {
	t.Helper()
	got := make([]int, len(hs))
	for i, h := range hs {
		b := p.Pick(upstream.Key{Hash: h, Hashed: true})
		if b == nil {
			t.Fatalf("client %d: got nil, want a backend", i)
		}
		got[i] = b.Index
	}
	return got
}

func TestConsistentHashShares(t *testing.T) {
	tests := []struct {
		name       string
		weights    []int
		sequential bool
	}{
		{name: "equal weights, random clients", weights: []int{1, 1, 1, 1, 1}},
		{name: "equal weights, sequential clients", weights: []int{1, 1, 1, 1, 1}, sequential: true},
		{name: "weights 1,2,3,4", weights: []int{1, 2, 3, 4}},
		{name: "weights 1,2,3,4, sequential clients", weights: []int{1, 2, 3, 4}, sequential: true},
		{name: "weights 10,1", weights: []int{10, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bs := newBackends(tt.weights...)
			p := mustNew(t, ConsistentHash, bs, nil)
			hs := clients(10000, tt.sequential)
			got := make([]int, len(bs))
			for _, i := range assign(t, p, hs) {
				got[i]++
			}
			total := 0
			for _, w := range tt.weights {
				total += w
			}
			for i, w := range tt.weights {
				want := float64(len(hs)) * float64(w) / float64(total)
				if !within(got[i], want, 0.10) {
					t.Errorf("backend %d: got %v, want %.0f ±10%% (counts %v)", i, got[i], want, got)
				}
			}
		})
	}
}

func TestConsistentHashStable(t *testing.T) {
	bs := newBackends(1, 2, 3)
	p := mustNew(t, ConsistentHash, bs, nil)
	hs := clients(10000, false)
	first := assign(t, p, hs)
	for round := range 3 {
		if got := assign(t, p, hs); !slices.Equal(got, first) {
			t.Fatalf("round %d: assignments changed: got %v, want %v", round, diff(got, first), "none")
		}
	}
	// A client maps by address, not position: the same backends in
	// reverse order (a reordered config, another Helios instance) give
	// every client the same address.
	rev := newBackends(3, 2, 1)
	for i := range rev {
		rev[i].Addr = bs[len(bs)-1-i].Addr
	}
	q := mustNew(t, ConsistentHash, rev, nil)
	for i, h := range hs {
		if got, want := q.Pick(upstream.Key{Hash: h, Hashed: true}).Addr, bs[first[i]].Addr; got != want {
			t.Fatalf("client %d after reordering: got %v, want %v", i, got, want)
		}
	}
}

// TestConsistentHashConsistent takes one backend of N out (down or excluded) and
// checks that only its clients move, and back in, that they return.
func TestConsistentHashConsistent(t *testing.T) {
	tests := []struct {
		name    string
		weights []int
		remove  int
		exclude bool
	}{
		{name: "equal weights, first down", weights: []int{1, 1, 1, 1, 1}, remove: 0},
		{name: "equal weights, middle down", weights: []int{1, 1, 1, 1, 1}, remove: 2},
		{name: "equal weights, last excluded", weights: []int{1, 1, 1, 1, 1}, remove: 4, exclude: true},
		{name: "weighted, heaviest down", weights: []int{1, 2, 3, 4, 5}, remove: 4},
		{name: "weighted, lightest down", weights: []int{1, 2, 3, 4, 5}, remove: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bs := newBackends(tt.weights...)
			p := mustNew(t, ConsistentHash, bs, nil)
			hs := clients(10000, false)
			before := assign(t, p, hs)

			k := upstream.Key{Hashed: true}
			if tt.exclude {
				k.Exclude.Add(tt.remove)
			} else {
				bs[tt.remove].SetDown(true)
			}
			moved := 0
			movedTo := make([]int, len(bs))
			for i, h := range hs {
				k.Hash = h
				b := p.Pick(k)
				if b == nil {
					t.Fatalf("client %d: got nil, want a backend", i)
				}
				switch {
				case before[i] == tt.remove:
					moved++
					movedTo[b.Index]++
					if b.Index == tt.remove {
						t.Fatalf("client %d: got removed backend %v, want another", i, b.Index)
					}
				case b.Index != before[i]:
					t.Fatalf("client %d of a remaining backend: got %v, want %v", i, b.Index, before[i])
				}
			}
			total := 0
			for _, w := range tt.weights {
				total += w
			}
			share := float64(tt.weights[tt.remove]) / float64(total)
			if limit := share + 0.02; float64(moved)/float64(len(hs)) > limit {
				t.Errorf("moved fraction: got %.3f, want <= %.3f", float64(moved)/float64(len(hs)), limit)
			}
			// The runner-up is itself a weighted draw, so the moved
			// clients spread over all the others.
			for i, n := range movedTo {
				if i != tt.remove && n == 0 {
					t.Errorf("moved clients on backend %d: got 0, want some (spread %v)", i, movedTo)
				}
			}

			bs[tt.remove].SetDown(false)
			if got := assign(t, p, hs); !slices.Equal(got, before) {
				t.Errorf("after the backend returns: got %v, want %v", diff(got, before), "no change")
			}
		})
	}
}

// TestConsistentHashDuplicateAddress checks that a repeated address still gets its
// share instead of losing every tie to its first occurrence.
func TestConsistentHashDuplicateAddress(t *testing.T) {
	bs := newBackends(1, 1, 1)
	bs[2].Addr = bs[1].Addr
	p := mustNew(t, ConsistentHash, bs, nil)
	got := make([]int, len(bs))
	for _, i := range assign(t, p, clients(9000, false)) {
		got[i]++
	}
	for i := range got {
		if !within(got[i], 3000, 0.1) {
			t.Errorf("backend %d: got %v, want 3000 ±10%% (counts %v)", i, got[i], got)
		}
	}
}

// diff describes the first few differing assignments.
func diff(got, want []int) []string {
	var d []string
	for i := range got {
		if got[i] != want[i] && len(d) < 5 {
			d = append(d, "client "+strconv.Itoa(i)+": "+strconv.Itoa(want[i])+"->"+strconv.Itoa(got[i]))
		}
	}
	return d
}

// TestConsistentHashMovesFewKeys checks the promise of consistent hashing
// (issue 21): when a 5th backend joins 4, or one of 5 leaves, by a reload
// that rebuilds the table, at most about 1/N of 100,000 keys move (25%
// +2% slack for the join), and the keys that move on a join go mostly to
// the newcomer.
func TestConsistentHashMovesFewKeys(t *testing.T) {
	const keys = 100000
	four, five := equalWeights(4), equalWeights(5)
	p4 := mustNew(t, ConsistentHash, four, nil)
	p5 := mustNew(t, ConsistentHash, five, nil)
	moved, toNew := 0, 0
	for i := range keys {
		a, b := p4.Pick(hashKey(i)), p5.Pick(hashKey(i))
		if a.Addr != b.Addr {
			moved++
			if b.Index == 4 {
				toNew++
			}
		}
	}
	if got, limit := float64(moved)/keys, 0.25+0.02; got > limit {
		t.Errorf("a 5th joins 4, keys moved: got %.4f, want <= %.2f", got, limit)
	}
	if got, want := float64(toNew)/float64(moved), 0.95; got < want {
		t.Errorf("a 5th joins 4, share of moved keys that went to it: got %.3f, want >= %.2f", got, want)
	}

	// One of five leaves: a table over the other four.
	rest := newBackends(1, 1, 1, 1)
	for i, j := range []int{0, 1, 3, 4} {
		rest[i].Addr = five[j].Addr
	}
	p := mustNew(t, ConsistentHash, rest, nil)
	moved = 0
	for i := range keys {
		if p5.Pick(hashKey(i)).Addr != p.Pick(hashKey(i)).Addr {
			moved++
		}
	}
	if got, limit := float64(moved)/keys, 0.20+0.02; got > limit {
		t.Errorf("one of 5 leaves, keys moved: got %.4f, want <= %.2f", got, limit)
	}
}

// TestConsistentHashFallback checks that a request without a key goes to
// the fallback strategy, round_robin unless another is named, and that a
// hash strategy cannot be a fallback.
func TestConsistentHashFallback(t *testing.T) {
	bs := equalWeights(3)
	p := mustNew(t, ConsistentHash, bs, nil)
	var got []int
	for range 6 {
		got = append(got, p.Pick(upstream.Key{}).Index)
	}
	if want := []int{0, 1, 2, 0, 1, 2}; !slices.Equal(got, want) {
		t.Errorf("round_robin fallback: got %v, want %v", got, want)
	}
	bs[0].Begin()
	bs[1].Begin()
	lc, err := New(ConsistentHash, bs, Options{Fallback: LeastConn})
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if b := lc.Pick(upstream.Key{}); b.Index != 2 {
			t.Fatalf("least_conn fallback: got backend %d, want 2 (the idle one)", b.Index)
		}
	}
	for _, fb := range []string{ConsistentHash, IPHash, "nope"} {
		if _, err := New(ConsistentHash, bs, Options{Fallback: fb}); !errors.Is(err, ErrUnknownStrategy) {
			t.Errorf("fallback %q: got %v, want an error wrapping %v", fb, err, ErrUnknownStrategy)
		}
	}
	for _, c := range []float64{-1, 0.5, 0.99, 101, math.NaN()} {
		if _, err := New(ConsistentHash, bs, Options{BoundedLoad: c}); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("bounded load %v: got %v, want an error wrapping %v", c, err, ErrInvalidOption)
		}
	}
}

// boundedRun makes n picks with the given keys (hot: every other request
// carries the same key), holding each request in flight, and calls check
// after each pick. It returns the backend of every pick.
func boundedRun(t *testing.T, p upstream.Picker, bs []*upstream.Backend, n int, check func(i int)) []int {
	t.Helper()
	r := rand.New(rand.NewPCG(3, 4))
	var got []int
	for i := range n {
		k := upstream.Key{Hash: 42, Hashed: true}
		if i%2 == 1 {
			k.Hash = r.Uint64()
		}
		b := p.Pick(k)
		if b == nil {
			t.Fatalf("pick %d: got nil, want a backend", i)
		}
		b.Begin()
		got = append(got, b.Index)
		check(i)
	}
	return got
}

// TestBoundedLoadHotKey sends one hot key (half of all requests) and many
// cold ones, holding every request in flight: with bounded_load 1.25 no
// backend ever holds more than 1.25 times its weighted share of the
// requests in flight (rounded up), and the hot key's overflow goes to the
// same next choices in the same order every time. Without the bound, the
// hot key's backend goes far over it, which shows the check can fail.
func TestBoundedLoadHotKey(t *testing.T) {
	tests := []struct {
		name    string
		weights []int
	}{
		{name: "equal weights", weights: []int{1, 1, 1, 1}},
		{name: "weights 1,2,3,4", weights: []int{1, 2, 3, 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			overCap := func(bs []*upstream.Backend, c float64) (int, string) {
				var total, sumW int64
				for _, b := range bs {
					total += b.Inflight()
					sumW += int64(b.Weight)
				}
				for i, b := range bs {
					limit := math.Ceil(c * float64(total) * float64(b.Weight) / float64(sumW))
					if float64(b.Inflight()) > limit {
						return i, fmt.Sprintf("backend %d: %d in flight, want at most %.0f (1.25 x its share of %d)", i, b.Inflight(), limit, total)
					}
				}
				return -1, ""
			}
			run := func() []int {
				bs := newBackends(tt.weights...)
				p, err := New(ConsistentHash, bs, Options{BoundedLoad: 1.25})
				if err != nil {
					t.Fatal(err)
				}
				return boundedRun(t, p, bs, 10000, func(i int) {
					if _, msg := overCap(bs, 1.25); msg != "" {
						t.Fatalf("after pick %d: %s", i, msg)
					}
				})
			}
			first := run()
			if again := run(); !slices.Equal(first, again) {
				t.Errorf("the same requests again: got %v, want %v", diff(again, first), "the same backends")
			}

			bs := newBackends(tt.weights...)
			p := mustNew(t, ConsistentHash, bs, nil)
			boundedRun(t, p, bs, 10000, func(int) {})
			if i, _ := overCap(bs, 1.25); i < 0 {
				t.Errorf("without a bound: got every backend within 1.25 x its share, want the hot key's over it")
			}
		})
	}
}

// TestBoundedLoadGivesWay checks that the bound never makes a pick fail:
// when every usable backend is over it (the others excluded by a retry),
// the key still gets a backend, its first choice when that is usable.
func TestBoundedLoadGivesWay(t *testing.T) {
	bs := equalWeights(3)
	p, err := New(ConsistentHash, bs, Options{BoundedLoad: 1})
	if err != nil {
		t.Fatal(err)
	}
	k := upstream.Key{Hash: 7, Hashed: true}
	first := p.Pick(k)
	for range 30 {
		first.Begin()
	}
	for _, b := range bs {
		if b != first {
			k.Exclude.Add(b.Index)
		}
	}
	if got := p.Pick(k); got != first {
		t.Errorf("got %v, want the first choice %v", got, first.Index)
	}
}
