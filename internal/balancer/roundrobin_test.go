package balancer

import (
	"slices"
	"testing"

	"github.com/helios-lb/helios/internal/upstream"
)

func TestRoundRobinDistribution(t *testing.T) {
	tests := []struct {
		name  string
		n     int
		down  []int
		picks int
		want  []int
	}{
		{name: "4 backends, exactly equal", n: 4, picks: 10000, want: []int{2500, 2500, 2500, 2500}},
		{name: "5 backends, exactly equal", n: 5, picks: 10000, want: []int{2000, 2000, 2000, 2000, 2000}},
		// The turns of a down backend rotate over the usable ones; they
		// do not all go to its neighbour (that would be 3333, 0, 6666).
		{name: "one of three down", n: 3, down: []int{1}, picks: 9999, want: []int{5000, 0, 4999}},
		{name: "alternate ones down", n: 4, down: []int{1, 3}, picks: 10000, want: []int{5000, 0, 5000, 0}},
		{name: "two in a row down", n: 5, down: []int{1, 2}, picks: 10000, want: []int{3334, 0, 0, 3333, 3333}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bs := equalWeights(tt.n)
			for _, i := range tt.down {
				bs[i].SetDown(true)
			}
			p := mustNew(t, RoundRobin, bs, nil)
			if got := countPicks(t, p, tt.n, tt.picks, hashKey); !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRoundRobinOrder(t *testing.T) {
	p := mustNew(t, RoundRobin, equalWeights(3), nil)
	var got []int
	for range 7 {
		got = append(got, p.Pick(upstream.Key{}).Index)
	}
	if want := []int{0, 1, 2, 0, 1, 2, 0}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
