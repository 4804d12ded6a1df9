package balancer

import (
	"testing"
)

func TestP2CDistribution(t *testing.T) {
	tests := []struct {
		name     string
		weights  []int
		inflight []int
		// check judges the counts of 10,000 picks.
		check func(got []int) bool
		want  string
	}{
		{
			// Two distinct draws: the busiest backend can never win.
			name: "busiest never wins", weights: []int{1, 1, 1}, inflight: []int{5, 0, 0},
			check: func(got []int) bool { return got[0] == 0 && within(got[1], 5000, 0.1) && within(got[2], 5000, 0.1) },
			want:  "[0 ~5000 ~5000]",
		},
		{
			// Backend i wins exactly the pairs with a busier one: 0, 1, 2
			// and 3 of the 6 pairs.
			name: "fewer in-flight wins", weights: []int{1, 1, 1, 1}, inflight: []int{3, 2, 1, 0},
			check: func(got []int) bool {
				return got[0] == 0 && within(got[1], 10000.0/6, 0.1) && within(got[2], 20000.0/6, 0.1) && within(got[3], 30000.0/6, 0.1)
			},
			want: "[0 ~1667 ~3333 ~5000]",
		},
		{
			// 2/4 < 1/1: relative to weight, the first is less loaded.
			name: "relative to weight", weights: []int{4, 1}, inflight: []int{2, 1},
			check: func(got []int) bool { return got[0] == 10000 && got[1] == 0 },
			want:  "[10000 0]",
		},
		{
			name: "all idle spread evenly", weights: []int{1, 1, 1}, inflight: []int{0, 0, 0},
			check: func(got []int) bool {
				return within(got[0], 10000.0/3, 0.1) && within(got[1], 10000.0/3, 0.1) && within(got[2], 10000.0/3, 0.1)
			},
			want: "each ~3333",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bs := newBackends(tt.weights...)
			for i, n := range tt.inflight {
				for range n {
					bs[i].Begin()
				}
			}
			p := mustNew(t, P2C, bs, newRand(9))
			got := countPicks(t, p, len(bs), 10000, hashKey)
			if !tt.check(got) {
				t.Errorf("counts: got %v, want %v", got, tt.want)
			}
		})
	}
}
