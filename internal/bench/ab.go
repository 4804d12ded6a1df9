package bench

import (
	"fmt"
	"io"
	"strings"

	"golang.org/x/perf/benchmath"
)

// A/B mode (--against OLD_HELIOS_BINARY): two Helios builds in interleaved
// rounds, the order flipped every round so that neither always runs first,
// each metric's medians compared with the Mann-Whitney U test as benchstat
// does (golang.org/x/perf/benchmath, the same code), so that a change can be
// shown faster, slower or within noise.
const (
	// abNew and abOld name the two contenders of an A/B run: the build
	// under test (--helios, or this binary) and --against.
	abNew = "helios"
	abOld = "helios-old"
	// abRounds is the default number of rounds of an A/B run: with 4 or
	// fewer per side the U test cannot reach p < 0.05.
	abRounds = 6
)

// abMetrics are the metrics an A/B comparison reports, with the words for
// a significant difference in each direction (better first).
var abMetrics = []struct {
	key           string
	better, worse string
}{
	{MetricRPS, "faster", "slower"},
	{MetricProbeP50, "faster", "slower"},
	{MetricProbeP99, "faster", "slower"},
	{MetricProbeP999, "faster", "slower"},
	{MetricLatP50, "faster", "slower"},
	{MetricLatP99, "faster", "slower"},
	{MetricCPUPerReq, "less CPU", "more CPU"},
	{MetricPeakRSS, "less memory", "more memory"},
	{MetricErrTotal, "fewer errors", "more errors"},
}

// ABComparison is one metric of an A/B case: the change of the median and
// the U test's verdict on it.
type ABComparison struct {
	// Delta is new median / old median - 1.
	Delta float64 `json:"delta"`
	// P is the Mann-Whitney U test's p-value; below Alpha the two builds
	// differ.
	P     float64 `json:"p"`
	Alpha float64 `json:"alpha"`
	// Verdict is "faster", "slower" (or the metric's words for better
	// and worse), or "within noise".
	Verdict string `json:"verdict"`
	// Warning says why the test could not tell, when it could not: too
	// few rounds.
	Warning string `json:"warning,omitempty"`
}

// WithinNoise is the verdict of a difference the U test does not support.
const WithinNoise = "within noise"

// compareAB compares the runs of old and new for a metric that improves in
// direction better, with the words for each outcome.
func compareAB(old, new []float64, better Better, betterWord, worseWord string) ABComparison {
	th := benchmath.DefaultThresholds
	so, sn := benchmath.NewSample(old, &th), benchmath.NewSample(new, &th)
	cmp := benchmath.AssumeNothing.Compare(so, sn)
	mo, mn := Summarize(old).Median, Summarize(new).Median
	c := ABComparison{P: cmp.P, Alpha: cmp.Alpha, Verdict: WithinNoise}
	if mo != 0 {
		c.Delta = mn/mo - 1
	}
	if len(cmp.Warnings) > 0 {
		c.Warning = cmp.Warnings[0].Error()
	}
	if cmp.P < cmp.Alpha && mn != mo {
		if (mn > mo) == (better == Higher) {
			c.Verdict = betterWord
		} else {
			c.Verdict = worseWord
		}
	}
	return c
}

// runValues returns the values of key in ct's runs without an error.
func runValues(ct *ContenderResult, key string) []float64 {
	var v []float64
	for _, r := range ct.Runs {
		if x, ok := r.Metrics[key]; ok && r.Error == "" {
			v = append(v, x)
		}
	}
	return v
}

// abContenders returns the new and old contenders of an A/B case, or nils.
func abContenders(c *CaseResult) (nw, old *ContenderResult) {
	for _, ct := range c.Contenders {
		switch ct.Name {
		case abNew:
			nw = ct
		case abOld:
			old = ct
		}
	}
	return nw, old
}

// compare fills c.AB when the case is an A/B case.
func (c *CaseResult) compare() {
	nw, old := abContenders(c)
	if nw == nil || old == nil {
		return
	}
	c.AB = map[string]ABComparison{}
	for _, m := range abMetrics {
		o, n := runValues(old, m.key), runValues(nw, m.key)
		if len(o) == 0 || len(n) == 0 {
			continue
		}
		d, _ := metricDef(m.key)
		c.AB[m.key] = compareAB(o, n, d.Better, m.better, m.worse)
	}
}

// writeABHeadline writes the A/B table: per case and metric the old and new
// medians with their ranges, the change, the U test's p-value and verdict.
func writeABHeadline(w io.Writer, res *Results) {
	fmt.Fprintf(w, "## A/B\n\n")
	fmt.Fprintf(w, "**new** is %s (%s); **old** is %s (%s). Rounds alternate the order (new, old; old, new; ...). Each metric compares the two builds' per-round values with the Mann-Whitney U test (benchstat's, from golang.org/x/perf/benchmath): below p = 0.05 the change is named, otherwise it is *within noise*. With %d rounds per side the smallest possible p is %s.\n\n",
		mdEscape(res.Settings.HeliosBin), mdEscape(res.Versions["helios"]), mdEscape(res.Settings.Against), mdEscape(res.Versions["helios (against)"]),
		res.Settings.Rounds, minPText(res.Settings.Rounds))
	fmt.Fprintf(w, "| scenario | case | metric | old | new | change | p | verdict |\n|---|---|---|---|---|---|---|---|\n")
	var skipped []string
	for _, s := range res.Scenarios {
		if s.Skipped != "" {
			skipped = append(skipped, fmt.Sprintf("- **%s** skipped: %s", s.Name, s.Skipped))
		}
		for _, c := range s.Cases {
			nw, old := abContenders(c)
			if nw == nil || old == nil {
				continue
			}
			for _, m := range abMetrics {
				cmp, ok := c.AB[m.key]
				if !ok {
					continue
				}
				d, _ := metricDef(m.key)
				label := metricLabel(d, c.LatencyKind)
				verdict := cmp.Verdict
				if verdict != WithinNoise {
					verdict = "**" + verdict + "**"
				}
				fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %+.1f%% | %.3f | %s |\n", s.Name, c.Name, label,
					formatStat(old.Summary[m.key], d.Decimals), formatStat(nw.Summary[m.key], d.Decimals), cmp.Delta*100, cmp.P, verdict)
			}
		}
	}
	fmt.Fprintln(w)
	if len(skipped) > 0 {
		fmt.Fprintf(w, "%s\n\n", strings.Join(skipped, "\n"))
	}
}

// minPText is the smallest p-value the two-sided U test can give with n
// values on each side, in words.
func minPText(n int) string {
	if n < 1 {
		return "undefined"
	}
	// Two-sided: 2 / C(2n, n).
	c := 1.0
	for i := 1; i <= n; i++ {
		c = c * float64(n+i) / float64(i)
	}
	p := 2 / c
	if p >= 0.05 {
		return fmt.Sprintf("%.3f, so no difference can be shown (use --rounds 5 or more)", p)
	}
	return fmt.Sprintf("%.4f", p)
}
