package balancer

import (
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
		b := p.Pick(upstream.Key{Hash: h})
		if b == nil {
			t.Fatalf("client %d: got nil, want a backend", i)
		}
		got[i] = b.Index
	}
	return got
}

func TestIPHashShares(t *testing.T) {
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
			p := mustNew(t, IPHash, bs, nil)
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

func TestIPHashStable(t *testing.T) {
	bs := newBackends(1, 2, 3)
	p := mustNew(t, IPHash, bs, nil)
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
	q := mustNew(t, IPHash, rev, nil)
	for i, h := range hs {
		if got, want := q.Pick(upstream.Key{Hash: h}).Addr, bs[first[i]].Addr; got != want {
			t.Fatalf("client %d after reordering: got %v, want %v", i, got, want)
		}
	}
}

// TestIPHashConsistent takes one backend of N out (down or excluded) and
// checks that only its clients move, and back in, that they return.
func TestIPHashConsistent(t *testing.T) {
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
			p := mustNew(t, IPHash, bs, nil)
			hs := clients(10000, false)
			before := assign(t, p, hs)

			var k upstream.Key
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

// TestIPHashDuplicateAddress checks that a repeated address still gets its
// share instead of losing every tie to its first occurrence.
func TestIPHashDuplicateAddress(t *testing.T) {
	bs := newBackends(1, 1, 1)
	bs[2].Addr = bs[1].Addr
	p := mustNew(t, IPHash, bs, nil)
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
