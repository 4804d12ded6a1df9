package proxy

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"

	"github.com/helios-lb/helios/internal/route"
	"github.com/helios-lb/helios/internal/upstream"
	"github.com/helios-lb/helios/internal/wire"
)

// splitPipeline returns a pipeline whose one route splits between
// upstreams v1 and v2 (one backend each, addressed v1 and v2) as sp says.
func splitPipeline(t *testing.T, sp *Split, weights ...uint64) *Pipeline {
	t.Helper()
	for i, w := range weights {
		name := "v" + strconv.Itoa(i+1)
		b := &upstream.Backend{State: upstream.NewState(nil), Addr: name, Weight: 1}
		up := &Upstream{Name: name, Backends: []*upstream.Backend{b}, Picker: firstAvailable{b},
			Transport: &wire.Transport{Name: name}, Stats: &UpstreamStats{}}
		sp.Variants[i].Upstream = up
		sp.Variants[i].Weight = w
	}
	tab, err := route.New([]route.Entry[*Route]{{Name: "canary", Value: &Route{Name: "canary", Split: sp}}})
	if err != nil {
		t.Fatal(err)
	}
	return New(&Graph{Routes: tab})
}

// newSplit returns a split of n variants (upstreams and weights filled in
// by splitPipeline) drawing from a deterministic source.
func newSplit(n int, seed uint64) *Split {
	r := rand.New(rand.NewPCG(seed, seed))
	var mu sync.Mutex
	return &Split{
		Variants: make([]Variant, n),
		Rand:     func() uint64 { mu.Lock(); defer mu.Unlock(); return r.Uint64() },
	}
}

// recordingTransport answers 200 and records the backend of every attempt.
type recordingTransport struct{ tried []string }

func (r *recordingTransport) attempt(_ *fakeExchange, b *upstream.Backend) (int, error) {
	r.tried = append(r.tried, b.Addr)
	return 200, nil
}

// TestSplitShares sends 100,000 requests through a 95/5 split: each
// upstream's share is within ±1% of its weight (issue 21), drawn at
// random or from a key that every client has.
func TestSplitShares(t *testing.T) {
	for _, keyed := range []bool{false, true} {
		t.Run(fmt.Sprintf("keyed=%v", keyed), func(t *testing.T) {
			sp := newSplit(2, 7)
			if keyed {
				sp.Key = RequestKey{Kind: KeyHeader, Name: "X-User"}
			}
			p := splitPipeline(t, sp, 95, 5)
			tr := &recordingTransport{}
			const n = 100000
			for i := range n {
				ex := &fakeExchange{method: "GET", hdr: []field{{"X-User", []byte("user-" + strconv.Itoa(i))}}}
				serve(p.NewFlow(), tr, ex)
			}
			counts := map[string]int{}
			for _, b := range tr.tried {
				counts[b]++
			}
			for name, want := range map[string]float64{"v1": 0.95, "v2": 0.05} {
				if got := float64(counts[name]) / n; math.Abs(got-want) > 0.01 {
					t.Errorf("%s share: got %.4f, want %.2f ±0.01", name, got, want)
				}
			}
		})
	}
}

// TestSplitPins checks that a request carrying a variant's header or
// cookie goes to it whatever the weights, and that a pin with a value
// needs that value.
func TestSplitPins(t *testing.T) {
	sp := newSplit(3, 1)
	sp.Variants[1].Pin = &Pin{Key: RequestKey{Kind: KeyHeader, Name: "X-Canary"}}
	sp.Variants[2].Pin = &Pin{Key: RequestKey{Kind: KeyCookie, Name: "version"}, Value: []byte("v3")}
	p := splitPipeline(t, sp, 1, 0, 0)
	tests := []struct {
		name string
		hdr  []field
		want string
	}{
		{name: "nothing: the weights (all on v1)", want: "v1"},
		{name: "the header, any value", hdr: []field{{"x-canary", []byte("1")}}, want: "v2"},
		{name: "the header, empty", hdr: []field{{"X-Canary", []byte("")}}, want: "v1"},
		{name: "the cookie with its value", hdr: []field{{"Cookie", []byte("a=1; version=v3")}}, want: "v3"},
		{name: "the cookie with another value", hdr: []field{{"Cookie", []byte("version=v2")}}, want: "v1"},
		{name: "both: the first variant's pin wins", hdr: []field{{"X-Canary", []byte("y")}, {"Cookie", []byte("version=v3")}}, want: "v2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := &recordingTransport{}
			for range 20 {
				serve(p.NewFlow(), tr, &fakeExchange{method: "GET", hdr: tt.hdr})
			}
			for _, got := range tr.tried {
				if got != tt.want {
					t.Fatalf("got %s, want %s (all tried: %v)", got, tt.want, tr.tried)
				}
			}
		})
	}
}

// TestSplitKeyIsSticky checks a split by key: a client stays on one
// variant over many requests, and raising the canary's weight by a reload
// moves clients to it, never off it.
func TestSplitKeyIsSticky(t *testing.T) {
	variantOf := func(weights ...uint64) func(user string) string {
		sp := newSplit(2, 3)
		sp.Key = RequestKey{Kind: KeyCookie, Name: "uid"}
		p := splitPipeline(t, sp, weights...)
		return func(user string) string {
			tr := &recordingTransport{}
			serve(p.NewFlow(), tr, &fakeExchange{method: "GET", hdr: []field{{"Cookie", []byte("uid=" + user)}}})
			return tr.tried[0]
		}
	}
	before, after := variantOf(95, 5), variantOf(80, 20)
	moved := 0
	for u := range 2000 {
		user := strconv.Itoa(u)
		first := before(user)
		for range 5 {
			if got := before(user); got != first {
				t.Fatalf("user %s: got %s, then %s, want one variant", user, first, got)
			}
		}
		switch now := after(user); {
		case first == "v2" && now != "v2":
			t.Fatalf("user %s: on v2 at 5%%, got %s at 20%%, want v2", user, now)
		case first != now:
			moved++
		}
	}
	// About 15% of users move to v2.
	if moved < 200 || moved > 400 {
		t.Errorf("users moved to v2: got %d of 2000, want about 300", moved)
	}
}

func TestSplitAllocatesNothing(t *testing.T) {
	sp := newSplit(2, 1)
	sp.Rand = nil // the default source
	sp.Variants[1].Pin = &Pin{Key: RequestKey{Kind: KeyCookie, Name: "canary"}, Value: []byte("yes")}
	p := splitPipeline(t, sp, 95, 5)
	f := p.NewFlow()
	for _, hdr := range [][]field{nil, {{"Cookie", []byte("canary=yes")}}} {
		ex := &fakeExchange{method: "GET", hdr: hdr}
		if allocs := testing.AllocsPerRun(1000, func() { serve(f, okTransport{}, ex) }); allocs != 0 {
			t.Errorf("cookie %v: got %v allocations per request, want 0", hdr, allocs)
		}
	}
}
