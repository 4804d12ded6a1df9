package bench

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

// Chart geometry, in SVG user units (px). Widths that depend on text are
// measured (textWidth) at draw time, so that no label runs off the canvas
// whatever its length.
const (
	minChartWidth = 960
	minPlotWidth  = 320
	margin        = 16
	fontSize      = 12
	titleSize     = 16
	barHeight     = 14
	barGap        = 4
	groupGap      = 14
	chartTop      = 64
	legendRow     = 20
)

// contenderColors colours contenders consistently across charts.
var contenderColors = map[string]string{
	"helios":              "#e8590c",
	"helios-features-off": "#f7b267",
	"helios-policy-off":   "#f4845f",
	"nginx":               "#2b8a3e",
	"haproxy":             "#1971c2",
	"caddy":               "#7048e8",
	"helios-old":          "#868e96",
}

func colorOf(name string) string {
	if c, ok := contenderColors[name]; ok {
		return c
	}
	return "#495057"
}

func esc(s string) string { return html.EscapeString(s) }

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

// svgDoc starts an SVG document of the given size with a title and a
// subtitle.
func svgDoc(b *strings.Builder, width, height float64, title, subtitle string) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif" font-size="%d">`+"\n",
		width, height, width, height, fontSize)
	fmt.Fprintf(b, `<rect width="100%%" height="100%%" fill="#ffffff"/>`+"\n")
	fmt.Fprintf(b, `<text x="%d" y="24" font-size="%d" font-weight="600">%s</text>`+"\n", margin, titleSize, esc(title))
	fmt.Fprintf(b, `<text x="%d" y="44" fill="#555">%s</text>`+"\n", margin, esc(subtitle))
}

// headerWidth is the width a chart needs for its title and subtitle.
func headerWidth(title, subtitle string) float64 {
	return 2*margin + max(textWidth(title, titleSize, true), textWidth(subtitle, fontSize, false))
}

// legendItem is one entry of a legend: a swatch (drawn by draw at x, y
// being the text baseline) and a label.
type legendItem struct {
	label string
	draw  func(b *strings.Builder, x, y float64)
}

// swatch draws a contender's colour as a square.
func swatch(color string) func(b *strings.Builder, x, y float64) {
	return func(b *strings.Builder, x, y float64) {
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="12" height="12" fill="%s"/>`, x, y-10, color)
	}
}

// legendWidthPerItem is the space a legend item takes: swatch, gap, label,
// gap to the next.
func legendItemWidth(it legendItem) float64 { return 16 + textWidth(it.label, fontSize, false) + 14 }

// legendRows returns how many rows the items need in width.
func legendRows(items []legendItem, width float64) int {
	if len(items) == 0 {
		return 0
	}
	rows, x := 1, float64(margin)
	for _, it := range items {
		w := legendItemWidth(it)
		if x > margin && x+w > width-margin {
			rows++
			x = margin
		}
		x += w
	}
	return rows
}

// drawLegend writes the items from y (the first row's baseline), wrapping
// at width.
func drawLegend(b *strings.Builder, items []legendItem, y, width float64) {
	x := float64(margin)
	for _, it := range items {
		w := legendItemWidth(it)
		if x > margin && x+w > width-margin {
			x, y = margin, y+legendRow
		}
		it.draw(b, x, y)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", x+16, y, esc(it.label))
		x += w
	}
}

// contenderLegend returns a swatch per contender in the cases, in order of
// first appearance.
func contenderLegend(cases []chartCase) []legendItem {
	seen := map[string]bool{}
	var items []legendItem
	for _, cc := range cases {
		for _, ct := range cc.c.Contenders {
			if !seen[ct.Name] {
				seen[ct.Name] = true
				items = append(items, legendItem{ct.Label, swatch(colorOf(ct.Name))})
			}
		}
	}
	return items
}

// groupHeight is the height of one case's group of bars.
func groupHeight(c *CaseResult) float64 {
	return float64(len(c.Contenders)*(barHeight+barGap) + groupGap)
}

// missingWhy says why a contender has no numbers.
func missingWhy(ct *ContenderResult) string {
	if ct.Skipped != "" {
		return "skipped"
	}
	return "failed"
}

// rowTexts returns the texts a chart with a row per contender draws: the
// case labels, each measured contender's value text ("nginx 60,154") and
// each unmeasured one's note ("HAProxy: skipped"). value gives the text
// after the label and whether there is one.
func rowTexts(cases []chartCase, value func(*CaseResult, *ContenderResult) (string, bool)) (labels, values, missing []string) {
	for _, cc := range cases {
		labels = append(labels, cc.label)
		for _, ct := range cc.c.Contenders {
			if v, ok := value(cc.c, ct); ok {
				values = append(values, ct.Label+" "+v)
			} else {
				missing = append(missing, ct.Label+": "+missingWhy(ct))
			}
		}
	}
	return labels, values, missing
}

// rowLayout is the horizontal layout of a chart with a label column on the
// left, a plot, and a value column on the right.
type rowLayout struct {
	width, plotL, plotR float64
}

// layoutRows sizes a chart: the label column fits the widest case label,
// the value column the widest value text, the plot at least minPlot (and
// every text drawn inside it), the whole at least minChartWidth and the
// header.
func layoutRows(caseLabels, valueTexts, plotTexts []string, header, minPlot float64) rowLayout {
	var labelW, valueW, plotW float64
	for _, l := range caseLabels {
		labelW = max(labelW, textWidth(l, fontSize, true))
	}
	for _, v := range valueTexts {
		valueW = max(valueW, textWidth(v, fontSize, false))
	}
	plotW = max(minPlotWidth, minPlot)
	for _, t := range plotTexts {
		plotW = max(plotW, textWidth(t, fontSize, false))
	}
	plotL := margin + labelW + margin
	// The value column starts 8px right of the plot.
	need := plotL + plotW + 8 + valueW + margin
	width := max(need, minChartWidth, header)
	return rowLayout{width: width, plotL: plotL, plotR: width - margin - valueW - 8}
}

// ThroughputSVG draws the median req/s of every contender in every case as
// horizontal bars with min-max whiskers. Each case has its own scale (its
// best median fills the width), since cases differ by orders of magnitude;
// the numbers are printed.
func ThroughputSVG(res *Results) string {
	cases := chartCases(res)
	title := "Throughput per case (requests/s, median of rounds)"
	subtitle := "Bars are scaled per case; whiskers span the rounds' min–max. " + res.Started.Format("2006-01-02") + ", " + res.Machine.Hostname
	labels, values, inside := rowTexts(cases, func(c *CaseResult, ct *ContenderResult) (string, bool) {
		s := ct.Summary[MetricRPS]
		return formatNumber(s.Median, 0), s.N > 0
	})
	lay := layoutRows(labels, values, inside, headerWidth(title, subtitle), 0)
	legend := contenderLegend(cases)
	height := float64(chartTop) + 8 + float64(legendRows(legend, lay.width)*legendRow) + margin
	for _, cc := range cases {
		height += groupHeight(cc.c)
	}
	var b strings.Builder
	svgDoc(&b, lay.width, height, title, subtitle)
	plotW := lay.plotR - lay.plotL
	y := float64(chartTop)
	for _, cc := range cases {
		top := 0.0
		for _, ct := range cc.c.Contenders {
			top = max(top, ct.Summary[MetricRPS].Max)
		}
		fmt.Fprintf(&b, `<text x="%d" y="%.0f" font-weight="600">%s</text>`+"\n", margin, y+barHeight-3, esc(cc.label))
		for _, ct := range cc.c.Contenders {
			s := ct.Summary[MetricRPS]
			x0 := lay.plotL
			if s.N > 0 && top > 0 {
				w := plotW * s.Median / top
				fmt.Fprintf(&b, `<rect x="%.1f" y="%.0f" width="%.1f" height="%d" fill="%s"><title>%s: %s req/s</title></rect>`+"\n",
					x0, y, w, barHeight, colorOf(ct.Name), esc(ct.Label), formatStat(s, 0))
				if s.N > 1 {
					lo, hi := x0+plotW*s.Min/top, x0+plotW*s.Max/top
					mid := y + barHeight/2
					fmt.Fprintf(&b, `<path d="M%.1f %.1fH%.1fM%.1f %.1fV%.1fM%.1f %.1fV%.1f" stroke="#222" stroke-width="1.2" fill="none"/>`+"\n",
						lo, mid, hi, lo, mid-4, mid+4, hi, mid-4, mid+4)
				}
				fmt.Fprintf(&b, `<text x="%.1f" y="%.0f">%s</text>`+"\n", lay.plotR+8, y+barHeight-3, esc(ct.Label+" "+formatNumber(s.Median, 0)))
			} else {
				fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" fill="#888">%s</text>`+"\n", x0, y+barHeight-3, esc(ct.Label+": "+missingWhy(ct)))
			}
			y += barHeight + barGap
		}
		y += groupGap
	}
	drawLegend(&b, legend, y+8, lay.width)
	b.WriteString("</svg>\n")
	return b.String()
}

// latencyMark is a percentile the latency chart draws, with its marker.
type latencyMark struct {
	q, label string
	draw     func(b *strings.Builder, x, y float64, color string)
}

// latencyMarks are the report's latency percentiles, in the order drawn.
var latencyMarks = []latencyMark{
	{"p50", "p50", func(b *strings.Builder, x, y float64, col string) {
		fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="4.5" fill="%s"/>`, x, y, col)
	}},
	{"p99", "p99", func(b *strings.Builder, x, y float64, col string) {
		fmt.Fprintf(b, `<path d="M%.1f %.1fl5 5l-5 5l-5 -5z" fill="%s" stroke="#222" stroke-width="0.6"/>`, x, y-5, col)
	}},
	{"p99.9", "p99.9", func(b *strings.Builder, x, y float64, col string) {
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="8" height="8" fill="%s" stroke="#222" stroke-width="0.6"/>`, x-4, y-4, col)
	}},
}

// latencyValue returns a contender's median of percentile q in case c, and
// whether it was measured.
func latencyValue(c *CaseResult, ct *ContenderResult, q string) (float64, bool) {
	key := latencyKey(c, q)
	if key == "" {
		return 0, false
	}
	s := ct.Summary[key]
	return s.Median, s.N > 0 && s.Median > 0
}

// logAxis returns whole decades around [lo, hi] and a function placing a
// value between l and r on them.
func logAxis(lo, hi, l, r float64) (float64, float64, func(float64) float64) {
	if math.IsInf(lo, 1) || lo <= 0 {
		lo, hi = 0.1, 1000
	}
	lo = math.Pow(10, math.Floor(math.Log10(lo)))
	hi = math.Pow(10, math.Ceil(math.Log10(hi)))
	if hi <= lo {
		hi = lo * 10
	}
	return lo, hi, func(v float64) float64 {
		return l + (r-l)*(math.Log10(v)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo))
	}
}

// msLabel formats a decade of milliseconds for an axis: "0.1 ms",
// "100 ms", "1 s", "1000 s".
func msLabel(d float64) string {
	if d >= 1000 {
		return strconv.FormatFloat(d/1000, 'f', -1, 64) + " s"
	}
	return strconv.FormatFloat(d, 'f', -1, 64) + " ms"
}

// LatencySVG draws the report's latency per case on a shared logarithmic
// axis: for each contender a line from its p50 to its p99.9 with a marker
// per percentile. The figures are the latency probe's (or the open-loop
// generator's in latency-at-rate); cases without open-loop latency (h2load)
// are left out. The legend shows only the markers drawn.
func LatencySVG(res *Results) string {
	var cases []chartCase
	drawn := map[string]bool{}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, cc := range chartCases(res) {
		any := false
		for _, ct := range cc.c.Contenders {
			for _, m := range latencyMarks {
				if v, ok := latencyValue(cc.c, ct, m.q); ok {
					lo, hi = min(lo, v), max(hi, v)
					drawn[m.q], any = true, true
				}
			}
		}
		if any {
			cases = append(cases, cc)
		}
	}
	title := "Latency per case (ms, log scale, median of rounds)"
	subtitle := "Open-loop: the latency probe at ~1% of the load beside each saturating run; latency-at-rate's own generator. " + res.Started.Format("2006-01-02") + ", " + res.Machine.Hostname
	labels, values, inside := rowTexts(cases, func(c *CaseResult, ct *ContenderResult) (string, bool) {
		v, ok := latencyValue(c, ct, "p99")
		return "p99 " + formatNumber(v, -1), ok
	})
	lo, hi, _ = logAxis(lo, hi, 0, 1)
	// Tick labels are centred on their decades: the plot must hold them
	// side by side, and half of the last must fit past its end.
	var tickW float64
	decades := 0
	for d := lo; d <= hi*1.0001; d *= 10 {
		tickW = max(tickW, textWidth(msLabel(d), fontSize, false))
		decades++
	}
	values = append(values, strings.Repeat("0", int(math.Ceil(tickW/2/textWidth("0", fontSize, false)))))
	lay := layoutRows(labels, values, inside, headerWidth(title, subtitle), float64(decades)*(tickW+12))
	_, _, xOf := logAxis(lo, hi, lay.plotL, lay.plotR)

	var legend []legendItem
	for _, m := range latencyMarks {
		if drawn[m.q] {
			legend = append(legend, legendItem{m.label, func(b *strings.Builder, x, y float64) { m.draw(b, x+6, y-4, "#868e96") }})
		}
	}
	legend = append(legend, contenderLegend(cases)...)
	height := float64(chartTop) + 24 + 8 + float64(legendRows(legend, lay.width)*legendRow) + margin
	for _, cc := range cases {
		height += groupHeight(cc.c)
	}
	var b strings.Builder
	svgDoc(&b, lay.width, height, title, subtitle)
	axisY := height - margin - float64(legendRows(legend, lay.width)*legendRow) - 20
	for d := lo; d <= hi*1.0001; d *= 10 {
		x := xOf(d)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="#e5e5e5"/>`+"\n", x, chartTop-6, x, axisY)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#555">%s</text>`+"\n", x, axisY+14, msLabel(d))
	}
	y := float64(chartTop)
	for _, cc := range cases {
		fmt.Fprintf(&b, `<text x="%d" y="%.0f" font-weight="600">%s</text>`+"\n", margin, y+barHeight-3, esc(cc.label))
		for _, ct := range cc.c.Contenders {
			mid := y + barHeight/2
			col := colorOf(ct.Name)
			var xs, tip []string
			first, last := math.Inf(1), math.Inf(-1)
			for _, m := range latencyMarks {
				if v, ok := latencyValue(cc.c, ct, m.q); ok {
					first, last = min(first, xOf(v)), max(last, xOf(v))
					tip = append(tip, m.label+" "+formatNumber(v, -1))
					xs = append(xs, m.q)
				}
			}
			if len(xs) == 0 {
				fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" fill="#888">%s</text>`+"\n", lay.plotL, y+barHeight-3, esc(ct.Label+": "+missingWhy(ct)))
				y += barHeight + barGap
				continue
			}
			fmt.Fprintf(&b, `<g><title>%s: %s ms</title>`, esc(ct.Label), esc(strings.Join(tip, ", ")))
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/>`, first, mid, last, mid, col)
			for _, m := range latencyMarks {
				if v, ok := latencyValue(cc.c, ct, m.q); ok {
					m.draw(&b, xOf(v), mid, col)
				}
			}
			b.WriteString("</g>\n")
			if v, ok := latencyValue(cc.c, ct, "p99"); ok {
				fmt.Fprintf(&b, `<text x="%.1f" y="%.0f">%s</text>`+"\n", lay.plotR+8, y+barHeight-3, esc(ct.Label+" p99 "+formatNumber(v, -1)))
			}
			y += barHeight + barGap
		}
		y += groupGap
	}
	drawLegend(&b, legend, height-margin-float64((legendRows(legend, lay.width)-1)*legendRow), lay.width)
	b.WriteString("</svg>\n")
	return b.String()
}
