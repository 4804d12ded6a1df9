package bench

import (
	"fmt"
	"html"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Chart geometry, in SVG user units.
const (
	chartWidth  = 960
	labelWidth  = 210
	valueWidth  = 150
	barHeight   = 14
	barGap      = 4
	groupGap    = 14
	chartTop    = 64
	chartBottom = 40
)

// contenderColors colours contenders consistently across charts.
var contenderColors = map[string]string{
	"helios":              "#e8590c",
	"helios-features-off": "#f7b267",
	"nginx":               "#2b8a3e",
	"haproxy":             "#1971c2",
}

func colorOf(name string) string {
	if c, ok := contenderColors[name]; ok {
		return c
	}
	return "#868e96"
}

// chartCase is one case with measurements, for the charts.
type chartCase struct {
	label string
	c     *CaseResult
}

// chartCases lists the cases with at least one measured contender.
func chartCases(res *Results) []chartCase {
	var out []chartCase
	for _, s := range res.Scenarios {
		for _, c := range s.Cases {
			for _, ct := range c.Contenders {
				if ct.Summary[MetricRPS].N > 0 {
					out = append(out, chartCase{s.Name + " " + c.Name, c})
					break
				}
			}
		}
	}
	return out
}

// svgDoc starts an SVG document with a title and subtitle.
func svgDoc(b *strings.Builder, height int, title, subtitle string) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif" font-size="12">`+"\n",
		chartWidth, height, chartWidth, height)
	fmt.Fprintf(b, `<rect width="100%%" height="100%%" fill="#ffffff"/>`+"\n")
	fmt.Fprintf(b, `<text x="16" y="24" font-size="16" font-weight="600">%s</text>`+"\n", esc(title))
	fmt.Fprintf(b, `<text x="16" y="44" fill="#555">%s</text>`+"\n", esc(subtitle))
}

func esc(s string) string { return html.EscapeString(s) }

// legend writes the contenders' colours along the bottom.
func legend(b *strings.Builder, y int, cases []chartCase) {
	seen := map[string]bool{}
	x := 16
	for _, cc := range cases {
		for _, ct := range cc.c.Contenders {
			if seen[ct.Name] {
				continue
			}
			seen[ct.Name] = true
			fmt.Fprintf(b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/>`, x, y-10, colorOf(ct.Name))
			fmt.Fprintf(b, `<text x="%d" y="%d">%s</text>`+"\n", x+16, y, esc(ct.Label))
			x += 28 + 7*len(ct.Label)
		}
	}
}

// groupHeight is the height of one case's group of bars.
func groupHeight(c *CaseResult) int { return len(c.Contenders)*(barHeight+barGap) + groupGap }

// ThroughputSVG draws the median req/s of every contender in every case as
// horizontal bars with min-max whiskers. Each case has its own scale (its
// best median fills the width), since cases differ by orders of magnitude;
// the numbers are printed.
func ThroughputSVG(res *Results) string {
	cases := chartCases(res)
	height := chartTop + chartBottom
	for _, cc := range cases {
		height += groupHeight(cc.c)
	}
	var b strings.Builder
	svgDoc(&b, height, "Throughput per case (requests/s, median of rounds)",
		"Bars are scaled per case; whiskers span the rounds' min–max. "+res.Started.Format("2006-01-02")+", "+res.Machine.Hostname)
	plotW := float64(chartWidth - labelWidth - valueWidth - 16)
	y := chartTop
	for _, cc := range cases {
		top := 0.0
		for _, ct := range cc.c.Contenders {
			top = max(top, ct.Summary[MetricRPS].Max)
		}
		fmt.Fprintf(&b, `<text x="16" y="%d" font-weight="600">%s</text>`+"\n", y+barHeight-3, esc(cc.label))
		for _, ct := range cc.c.Contenders {
			s := ct.Summary[MetricRPS]
			x0 := float64(labelWidth)
			if s.N > 0 && top > 0 {
				w := plotW * s.Median / top
				fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>%s: %s req/s</title></rect>`+"\n",
					x0, y, w, barHeight, colorOf(ct.Name), esc(ct.Label), formatStat(s, 0))
				if s.N > 1 {
					lo, hi := x0+plotW*s.Min/top, x0+plotW*s.Max/top
					mid := y + barHeight/2
					fmt.Fprintf(&b, `<path d="M%.1f %dH%.1fM%.1f %dV%dM%.1f %dV%d" stroke="#222" stroke-width="1.2" fill="none"/>`+"\n",
						lo, mid, hi, lo, mid-4, mid+4, hi, mid-4, mid+4)
				}
				fmt.Fprintf(&b, `<text x="%.1f" y="%d">%s %s</text>`+"\n", x0+plotW+8, y+barHeight-3, esc(ct.Label), formatNumber(s.Median, 0))
			} else {
				fmt.Fprintf(&b, `<text x="%.1f" y="%d" fill="#888">%s: %s</text>`+"\n", x0, y+barHeight-3, esc(ct.Label), missingWhy(ct))
			}
			y += barHeight + barGap
		}
		y += groupGap
	}
	legend(&b, height-14, cases)
	b.WriteString("</svg>\n")
	return b.String()
}

// missingWhy says why a contender has no numbers.
func missingWhy(ct *ContenderResult) string {
	if ct.Skipped != "" {
		return "skipped"
	}
	return "failed"
}

// latencyMarks are the percentiles drawn, with their marker shapes.
var latencyMarks = []struct {
	key, label string
}{
	{MetricLatAvg, "avg"},
	{MetricLatP50, "p50"},
	{MetricLatP90, "p90"},
	{MetricLatP99, "p99"},
	{MetricLatP999, "p99.9"},
	{MetricLatMax, "max"},
}

// LatencySVG draws each contender's latency percentiles (p50, p90, p99,
// p99.9 when measured, max) per case on a shared logarithmic axis: a line
// from p50 to max with a marker per percentile.
func LatencySVG(res *Results) string {
	cases := chartCases(res)
	height := chartTop + chartBottom + 20
	for _, cc := range cases {
		height += groupHeight(cc.c)
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, cc := range cases {
		for _, ct := range cc.c.Contenders {
			for _, m := range latencyMarks {
				if s := ct.Summary[m.key]; s.N > 0 && s.Median > 0 {
					lo, hi = min(lo, s.Median), max(hi, s.Median)
				}
			}
		}
	}
	if math.IsInf(lo, 1) {
		lo, hi = 0.1, 1000
	}
	// Whole decades around the data.
	lo = math.Pow(10, math.Floor(math.Log10(lo)))
	hi = math.Pow(10, math.Ceil(math.Log10(hi)))
	if hi <= lo {
		hi = lo * 10
	}
	plotL, plotR := float64(labelWidth), float64(chartWidth-valueWidth)
	xOf := func(v float64) float64 {
		return plotL + (plotR-plotL)*(math.Log10(v)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo))
	}

	var b strings.Builder
	svgDoc(&b, height, "Latency percentiles per case (ms, log scale, median of rounds)",
		"Markers: ○ avg  ● p50  ▲ p90  ◆ p99  ■ p99.9  | max. wrk latency is closed-loop; latency-at-rate is open-loop.")
	axisY := height - chartBottom - 10
	for d := lo; d <= hi*1.0001; d *= 10 {
		x := xOf(d)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e5e5e5"/>`+"\n", x, chartTop-6, x, axisY)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%s ms</text>`+"\n", x, axisY+14, strconv.FormatFloat(d, 'g', -1, 64))
	}
	y := chartTop
	for _, cc := range cases {
		fmt.Fprintf(&b, `<text x="16" y="%d" font-weight="600">%s</text>`+"\n", y+barHeight-3, esc(cc.label))
		for _, ct := range cc.c.Contenders {
			mid := float64(y) + barHeight/2
			col := colorOf(ct.Name)
			var xs []float64
			var tip []string
			for _, m := range latencyMarks {
				if s := ct.Summary[m.key]; s.N > 0 && s.Median > 0 {
					xs = append(xs, xOf(s.Median))
					tip = append(tip, m.label+" "+formatNumber(s.Median, -1))
				}
			}
			if len(xs) == 0 {
				fmt.Fprintf(&b, `<text x="%.1f" y="%d" fill="#888">%s: %s</text>`+"\n", plotL, y+barHeight-3, esc(ct.Label), missingWhy(ct))
				y += barHeight + barGap
				continue
			}
			fmt.Fprintf(&b, `<g><title>%s: %s ms</title>`, esc(ct.Label), esc(strings.Join(tip, ", ")))
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/>`, slices.Min(xs), mid, slices.Max(xs), mid, col)
			for _, m := range latencyMarks {
				s := ct.Summary[m.key]
				if s.N == 0 || s.Median <= 0 {
					continue
				}
				x := xOf(s.Median)
				switch m.key {
				case MetricLatAvg:
					fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="#fff" stroke="%s" stroke-width="1.5"/>`, x, mid, col)
				case MetricLatP50:
					fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="4.5" fill="%s"/>`, x, mid, col)
				case MetricLatP90:
					fmt.Fprintf(&b, `<path d="M%.1f %.1fl5 8h-10z" fill="%s"/>`, x, mid-5, col)
				case MetricLatP99:
					fmt.Fprintf(&b, `<path d="M%.1f %.1fl5 5l-5 5l-5 -5z" fill="%s" stroke="#222" stroke-width="0.6"/>`, x, mid-5, col)
				case MetricLatP999:
					fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="8" height="8" fill="%s" stroke="#222" stroke-width="0.6"/>`, x-4, mid-4, col)
				case MetricLatMax:
					fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#222" stroke-width="1.5"/>`, x, mid-6, x, mid+6)
				}
			}
			b.WriteString("</g>\n")
			p99 := ct.Summary[MetricLatP99]
			if p99.N == 0 {
				p99 = ct.Summary[MetricLatAvg]
				fmt.Fprintf(&b, `<text x="%.1f" y="%d">%s avg %s</text>`+"\n", plotR+8, y+barHeight-3, esc(ct.Label), formatNumber(p99.Median, -1))
			} else {
				fmt.Fprintf(&b, `<text x="%.1f" y="%d">%s p99 %s</text>`+"\n", plotR+8, y+barHeight-3, esc(ct.Label), formatNumber(p99.Median, -1))
			}
			y += barHeight + barGap
		}
		y += groupGap
	}
	legend(&b, height-14, cases)
	b.WriteString("</svg>\n")
	return b.String()
}
