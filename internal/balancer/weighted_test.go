package balancer

import (
	"slices"
	"testing"

	"github.com/helios-lb/helios/internal/upstream"
)

func TestWeightedCycle(t *testing.T) {
	tests := []struct {
		name    string
		weights []int
		want    []int32
	}{
		{name: "nginx example 5,1,1", weights: []int{5, 1, 1}, want: []int32{0, 0, 1, 0, 2, 0, 0}},
		{name: "3,2,1", weights: []int{3, 2, 1}, want: []int32{0, 1, 0, 2, 1, 0}},
		{name: "reduced by gcd", weights: []int{10, 20}, want: []int32{1, 0, 1}},
		{name: "equal weights", weights: []int{7, 7, 7}, want: []int32{0, 1, 2}},
		{name: "single backend", weights: []int{4}, want: []int32{0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := mustNew(t, WeightedRoundRobin, newBackends(tt.weights...), nil).(*weighted)
			if !slices.Equal(w.cycle, tt.want) {
				t.Errorf("got %v, want %v", w.cycle, tt.want)
			}
		})
	}
}

// TestWeightedDistribution checks exact ratios over whole cycles and
// smoothness: the longest run of one backend, measured over many cycles so
// that runs across the cycle boundary count.
func TestWeightedDistribution(t *testing.T) {
	tests := []struct {
		name       string
		weights    []int
		picks      int
		want       []int
		wantMaxRun []int
	}{
		// a,a,b,a,c,a,a|a,a,...: four a's across the boundary, never five.
		{name: "5,1,1", weights: []int{5, 1, 1}, picks: 7 * 1428, want: []int{7140, 1428, 1428}, wantMaxRun: []int{4, 1, 1}},
		{name: "3,2,1", weights: []int{3, 2, 1}, picks: 6 * 1666, want: []int{4998, 3332, 1666}, wantMaxRun: []int{2, 1, 1}},
		{name: "1,2", weights: []int{1, 2}, picks: 9999, want: []int{3333, 6666}, wantMaxRun: []int{1, 2}},
		{name: "equal", weights: []int{2, 2, 2, 2}, picks: 10000, want: []int{2500, 2500, 2500, 2500}, wantMaxRun: []int{1, 1, 1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustNew(t, WeightedRoundRobin, newBackends(tt.weights...), nil)
			got := make([]int, len(tt.weights))
			maxRun := make([]int, len(tt.weights))
			prev, run := -1, 0
			for i := range tt.picks {
				b := p.Pick(upstream.Key{})
				if b == nil {
					t.Fatalf("pick %d: got nil, want a backend", i)
				}
				got[b.Index]++
				if b.Index == prev {
					run++
				} else {
					prev, run = b.Index, 1
				}
				maxRun[b.Index] = max(maxRun[b.Index], run)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("counts: got %v, want %v", got, tt.want)
			}
			if !slices.Equal(maxRun, tt.wantMaxRun) {
				t.Errorf("longest runs: got %v, want %v", maxRun, tt.wantMaxRun)
			}
		})
	}
}

// TestWeightedUnusable checks that the turns of an unusable backend go to
// the others roughly by weight, including through the fallback scan of
// schedules longer than maxFollow.
func TestWeightedUnusable(t *testing.T) {
	tests := []struct {
		name    string
		weights []int
		down    []int
		exclude []int
		picks   int
		want    []float64 // expected share per backend
		tol     float64   // relative
	}{
		// Shares of the usable backends follow their weights: 5:1:1,
		// not a's 5/8 plus b's 1/8 (what handing b's turn to the entry
		// after it would give).
		{name: "light backend down", weights: []int{5, 1, 1, 1}, down: []int{1}, picks: 7000, want: []float64{5.0 / 7, 0, 1.0 / 7, 1.0 / 7}, tol: 0.01},
		// Taking the entry after each a would give 5:3.
		{name: "first backend excluded", weights: []int{2, 3, 3}, exclude: []int{0}, picks: 6000, want: []float64{0, 0.5, 0.5}, tol: 0.01},
		{name: "two down", weights: []int{4, 3, 2, 1}, down: []int{0, 2}, picks: 8000, want: []float64{0, 0.75, 0, 0.25}, tol: 0.01},
		// Past maxFollow entries, pickByWeight decides.
		{name: "long schedule, only light ones left", weights: []int{1000, 1, 2}, down: []int{0}, picks: 9000, want: []float64{0, 1.0 / 3, 2.0 / 3}, tol: 0.05},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bs := newBackends(tt.weights...)
			for _, i := range tt.down {
				bs[i].SetDown(true)
			}
			var ex upstream.Set
			for _, i := range tt.exclude {
				ex.Add(i)
			}
			p := mustNew(t, WeightedRoundRobin, bs, nil)
			got := countPicks(t, p, len(bs), tt.picks, func(int) upstream.Key { return upstream.Key{Exclude: ex} })
			for i, share := range tt.want {
				if !within(got[i], share*float64(tt.picks), tt.tol) {
					t.Errorf("backend %d: got %v, want %v ±%v%% (counts %v)", i, got[i], share*float64(tt.picks), tt.tol*100, got)
				}
			}
		})
	}
}

// TestWeightedCycleBound checks what happens to weights whose reduced sum
// exceeds maxCycle: the schedule stays bounded, every backend keeps a slot,
// and shares stay close to the weights.
func TestWeightedCycleBound(t *testing.T) {
	tests := []struct {
		name    string
		weights []int
	}{
		{name: "large coprime weights", weights: []int{MaxWeight, MaxWeight - 1, 999_983}},
		{name: "one tiny among huge", weights: []int{MaxWeight, MaxWeight - 1, 1}},
		{name: "many backends", weights: weightsDistinct(300)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := mustNew(t, WeightedRoundRobin, newBackends(tt.weights...), nil).(*weighted)
			if got, limit := len(w.cycle), maxCycle+len(tt.weights); got > limit {
				t.Fatalf("cycle length: got %v, want at most %v", got, limit)
			}
			slots := make([]int, len(tt.weights))
			for _, i := range w.cycle {
				slots[i]++
			}
			total := 0
			for _, x := range tt.weights {
				total += x
			}
			for i, x := range tt.weights {
				if slots[i] == 0 {
					t.Fatalf("backend %d slots: got 0, want at least 1", i)
				}
				// Scaling loses less than one slot per backend; the
				// one-slot minimum adds at most one.
				want := float64(x) / float64(total) * float64(len(w.cycle))
				if d := float64(slots[i]) - want; d > 1+float64(len(tt.weights)) || d < -1-float64(len(tt.weights)) {
					t.Errorf("backend %d slots: got %v, want %.1f ±%d", i, slots[i], want, 1+len(tt.weights))
				}
			}
		})
	}
}

// weightsDistinct returns n weights 1000, 1001, ... whose sum exceeds
// maxCycle many times over.
func weightsDistinct(n int) []int {
	w := make([]int, n)
	for i := range w {
		w[i] = 1000 + i
	}
	return w
}
