package bench

import (
	"fmt"
	"math"
	"slices"
)

// Stat summarises one metric over the rounds of a case: the median with
// the range around it. The zero Stat (N == 0) means no round measured it.
type Stat struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	// N is the number of rounds that measured the metric.
	N int `json:"n"`
}

// Summarize returns the median, minimum and maximum of vals. The median of
// an even number of values is the mean of the middle two. NaNs are ignored.
func Summarize(vals []float64) Stat {
	v := make([]float64, 0, len(vals))
	for _, x := range vals {
		if !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return Stat{}
	}
	slices.Sort(v)
	n := len(v)
	med := v[n/2]
	if n%2 == 0 {
		med = (v[n/2-1] + v[n/2]) / 2
	}
	return Stat{Median: med, Min: v[0], Max: v[n-1], N: n}
}

// Ratio returns a/b, and false when it is undefined: b is zero, or either
// side was not measured.
func Ratio(a, b Stat) (float64, bool) {
	if a.N == 0 || b.N == 0 || b.Median == 0 {
		return 0, false
	}
	return a.Median / b.Median, true
}

// overlap reports whether the min-max ranges of a and b intersect.
func overlap(a, b Stat) bool { return a.Min <= b.Max && b.Min <= a.Max }

// NoNoiseEstimate is what Winner says instead of a winner when a side was
// measured once: without a second round there is no telling a lead from
// noise.
const NoNoiseEstimate = "one round, noise unknown"

// Winner names the contender with the best median for a metric that has a
// direction, and by how much it beats the runner-up, in the seed's style:
// "nginx +9.9%" for a higher-is-better metric, "Helios -12.2%" for a
// lower-is-better one (the winner's value relative to the runner-up's).
// It says "tie" when the best medians are equal, "Helios (0 vs 12)" when the
// best is zero, and adds "(ranges overlap)" when the two min-max ranges
// intersect, so the lead is within the noise. When either of the two was
// measured in one round only, the noise is unknown and it names no winner:
// it returns NoNoiseEstimate.
// labels and stats are parallel; contenders without a measurement are left
// out. It returns "" when fewer than two contenders measured the metric or
// the metric is Neutral.
func Winner(better Better, labels []string, stats []Stat) string {
	if better == Neutral {
		return ""
	}
	type entry struct {
		label string
		s     Stat
	}
	var es []entry
	for i, s := range stats {
		if s.N > 0 {
			es = append(es, entry{labels[i], s})
		}
	}
	if len(es) < 2 {
		return ""
	}
	slices.SortStableFunc(es, func(a, b entry) int {
		if better == Lower {
			return cmpFloat(a.s.Median, b.s.Median)
		}
		return cmpFloat(b.s.Median, a.s.Median)
	})
	best, next := es[0], es[1]
	if best.s.N < 2 || next.s.N < 2 {
		return NoNoiseEstimate
	}
	if best.s.Median == next.s.Median {
		return "tie"
	}
	var w string
	if best.s.Median == 0 {
		w = fmt.Sprintf("%s (0 vs %s)", best.label, formatNumber(next.s.Median, -1))
	} else {
		w = fmt.Sprintf("%s %+.1f%%", best.label, (best.s.Median/next.s.Median-1)*100)
	}
	if overlap(best.s, next.s) {
		w += " (ranges overlap)"
	}
	return w
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
