package bench

import (
	"math"
	"testing"
)

func TestSummarize(t *testing.T) {
	tests := []struct {
		name string
		in   []float64
		want Stat
	}{
		{"empty", nil, Stat{}},
		{"one", []float64{5}, Stat{Median: 5, Min: 5, Max: 5, N: 1}},
		{"odd, unsorted", []float64{9, 1, 5}, Stat{Median: 5, Min: 1, Max: 9, N: 3}},
		{"even: mean of the middle two", []float64{4, 1, 10, 2}, Stat{Median: 3, Min: 1, Max: 10, N: 4}},
		{"NaN ignored", []float64{math.NaN(), 2, 4}, Stat{Median: 3, Min: 2, Max: 4, N: 2}},
		{"only NaN", []float64{math.NaN()}, Stat{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Summarize(tt.in); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestSummarizeDoesNotReorderInput(t *testing.T) {
	in := []float64{3, 1, 2}
	Summarize(in)
	if in[0] != 3 || in[1] != 1 || in[2] != 2 {
		t.Errorf("input changed: got %v, want [3 1 2]", in)
	}
}

func TestRatio(t *testing.T) {
	s := func(m float64) Stat { return Stat{Median: m, Min: m, Max: m, N: 1} }
	tests := []struct {
		name   string
		a, b   Stat
		want   float64
		wantOK bool
	}{
		{"plain", s(5422), s(5961), 5422.0 / 5961, true},
		{"zero denominator", s(3), s(0), 0, false},
		{"zero numerator", s(0), s(4), 0, true},
		{"unmeasured", Stat{}, s(4), 0, false},
		{"unmeasured denominator", s(4), Stat{}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Ratio(tt.a, tt.b)
			if ok != tt.wantOK || math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("got %v, %v, want %v, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestWinner(t *testing.T) {
	one := func(m float64) Stat { return Stat{Median: m, Min: m, Max: m, N: 1} }
	rng := func(m, lo, hi float64) Stat { return Stat{Median: m, Min: lo, Max: hi, N: 3} }
	labels := []string{"Helios", "nginx"}
	tests := []struct {
		name   string
		better Better
		stats  []Stat
		want   string
	}{
		// The seed's first table: nginx +9.9% req/s, -12.2% avg latency.
		{"higher is better", Higher, []Stat{rng(5422, 5400, 5430), rng(5961, 5950, 5970)}, "nginx +9.9%"},
		{"lower is better", Lower, []Stat{rng(19.31, 19.2, 19.4), rng(16.95, 16.9, 17)}, "nginx -12.2%"},
		{"Helios wins", Higher, []Stat{rng(6896, 6800, 6900), rng(5182, 5100, 5200)}, "Helios +33.1%"},
		{"tie", Higher, []Stat{rng(10, 9, 11), rng(10, 9, 11)}, "tie"},
		{"no errors beats some", Lower, []Stat{rng(0, 0, 0), rng(420, 400, 430)}, "Helios (0 vs 420)"},
		{"both zero", Lower, []Stat{rng(0, 0, 0), rng(0, 0, 0)}, "tie"},
		{"overlapping ranges", Higher, []Stat{rng(110, 90, 120), rng(100, 95, 105)}, "Helios +10.0% (ranges overlap)"},
		{"separate ranges", Higher, []Stat{rng(110, 108, 120), rng(100, 95, 105)}, "Helios +10.0%"},
		// One round says nothing about the noise: no winner, whatever the gap.
		{"one round", Higher, []Stat{one(6896), one(5182)}, NoNoiseEstimate},
		{"one round against three", Lower, []Stat{one(1), rng(4, 3, 5)}, NoNoiseEstimate},
		{"neutral metric", Neutral, []Stat{one(1), one(2)}, ""},
		{"one side unmeasured", Higher, []Stat{rng(1, 1, 1), {}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Winner(tt.better, labels, tt.stats); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	// With three contenders the lead is over the runner-up.
	got := Winner(Higher, []string{"Helios", "nginx", "HAProxy"}, []Stat{rng(50, 49, 51), rng(60, 59, 61), rng(63, 62, 64)})
	if want := "HAProxy +5.0%"; got != want {
		t.Errorf("three contenders: got %q, want %q", got, want)
	}
}

func TestContenderSummaryAndRatios(t *testing.T) {
	h := &ContenderResult{Name: "helios", Label: "Helios", Runs: []*RunResult{
		{Round: 1, Metrics: map[string]float64{MetricRPS: 100, MetricLatP99: 4}},
		{Round: 2, Error: "did not start"},
		{Round: 3, Metrics: map[string]float64{MetricRPS: 120, MetricLatP99: 2}},
	}}
	n := &ContenderResult{Name: "nginx", Label: "nginx", Runs: []*RunResult{
		{Round: 1, Metrics: map[string]float64{MetricRPS: 100, MetricLatP99: 0}},
		{Round: 2, Metrics: map[string]float64{MetricRPS: 80, MetricLatP99: 0}},
		{Round: 3, Metrics: map[string]float64{MetricRPS: 90, MetricLatP99: 0}},
	}}
	h.summarize()
	n.summarize()
	if got, want := h.Summary[MetricRPS], (Stat{Median: 110, Min: 100, Max: 120, N: 2}); got != want {
		t.Errorf("Helios rps without the failed round: got %+v, want %+v", got, want)
	}
	cr := &CaseResult{Contenders: []*ContenderResult{h, n}}
	cr.ratios()
	r := cr.Ratios["Helios/nginx"]
	if got := r[MetricRPS]; math.Abs(got-110.0/90) > 1e-12 {
		t.Errorf("rps ratio: got %v, want %v", got, 110.0/90)
	}
	if _, ok := r[MetricLatP99]; ok {
		t.Errorf("p99 ratio over a zero median: got %v, want none", r[MetricLatP99])
	}
}
