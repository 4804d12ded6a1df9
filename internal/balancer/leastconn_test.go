package balancer

import (
	"testing"

	"github.com/helios-lb/helios/internal/upstream"
)

func TestLeastConnDistribution(t *testing.T) {
	tests := []struct {
		name     string
		weights  []int
		inflight []int
		want     []float64 // expected counts of 9000 picks, ±5%
	}{
		{name: "idle backend gets every pick", weights: []int{1, 1, 1}, inflight: []int{1, 2, 0}, want: []float64{0, 0, 9000}},
		{name: "idle first backend gets every pick", weights: []int{1, 1, 1}, inflight: []int{0, 1, 1}, want: []float64{9000, 0, 0}},
		{name: "all idle, ties spread", weights: []int{1, 1, 1}, inflight: []int{0, 0, 0}, want: []float64{3000, 3000, 3000}},
		// A rotating start offset would give 0, 6000, 3000.
		{name: "ties among the least loaded only", weights: []int{1, 1, 1}, inflight: []int{2, 0, 0}, want: []float64{0, 4500, 4500}},
		{name: "ties after a busy run", weights: []int{1, 1, 1, 1}, inflight: []int{1, 1, 0, 0}, want: []float64{0, 0, 4500, 4500}},
		// 2/3 < 1/1: the heavier backend is less loaded for its weight.
		{name: "relative to weight", weights: []int{3, 1}, inflight: []int{2, 1}, want: []float64{9000, 0}},
		// 4/2 = 2/1: a tie, spread.
		{name: "weighted tie", weights: []int{2, 1}, inflight: []int{4, 2}, want: []float64{4500, 4500}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bs := newBackends(tt.weights...)
			for i, n := range tt.inflight {
				for range n {
					bs[i].Begin()
				}
			}
			p := mustNew(t, LeastConn, bs, newRand(3))
			got := countPicks(t, p, len(bs), 9000, hashKey)
			for i := range got {
				if !within(got[i], tt.want[i], 0.05) {
					t.Errorf("counts: got %v, want %v ±5%%", got, tt.want)
					break
				}
			}
		})
	}
}

// TestLeastConnFollowsLoad holds requests open on the picked backend, as a
// proxy does, and checks that the load stays level.
func TestLeastConnFollowsLoad(t *testing.T) {
	bs := newBackends(1, 2, 1)
	p := mustNew(t, LeastConn, bs, nil)
	for range 400 {
		p.Pick(upstream.Key{}).Begin()
	}
	want := []int64{100, 200, 100}
	for i, b := range bs {
		if got := b.Inflight(); got != want[i] {
			t.Errorf("backend %d in-flight: got %v, want %v", i, got, want[i])
		}
	}
}
