package balancer

import "testing"

func TestRandomDistribution(t *testing.T) {
	tests := []struct {
		name string
		n    int
		down []int
	}{
		{name: "3 backends", n: 3},
		{name: "5 backends", n: 5},
		// A missed draw must not fall through to the next backend: one
		// draw and a scan would give backend 2 (after the down one)
		// twice the share of the others, three draws and a scan would
		// give backend 3 here 42% instead of 33%.
		{name: "one of four down", n: 4, down: []int{1}},
		{name: "three of six down", n: 6, down: []int{0, 1, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bs := equalWeights(tt.n)
			for _, i := range tt.down {
				bs[i].SetDown(true)
			}
			p := mustNew(t, Random, bs, newRand(42))
			const picks = 10000
			got := countPicks(t, p, tt.n, picks, hashKey)
			want := float64(picks) / float64(tt.n-len(tt.down))
			for i := range got {
				if isIn(i, tt.down) {
					continue
				}
				if !within(got[i], want, 0.10) {
					t.Errorf("backend %d: got %v, want %.0f ±10%% (counts %v)", i, got[i], want, got)
				}
			}
		})
	}
}

// TestRandomUsesRnd checks that all randomness comes from rnd: the same
// source gives the same picks.
func TestRandomUsesRnd(t *testing.T) {
	for _, name := range []string{Random, P2C} {
		t.Run(name, func(t *testing.T) {
			a := mustNew(t, name, equalWeights(10), newRand(5))
			b := mustNew(t, name, equalWeights(10), newRand(5))
			c := mustNew(t, name, equalWeights(10), newRand(6))
			differ := false
			for i := range 100 {
				x, y, z := a.Pick(hashKey(i)), b.Pick(hashKey(i)), c.Pick(hashKey(i))
				if x.Index != y.Index {
					t.Fatalf("pick %d: got %v, want %v", i, y.Index, x.Index)
				}
				differ = differ || x.Index != z.Index
			}
			if !differ {
				t.Errorf("another seed changed picks: got false, want true")
			}
		})
	}
}

func isIn(i int, s []int) bool {
	for _, x := range s {
		if x == i {
			return true
		}
	}
	return false
}
