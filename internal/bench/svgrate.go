package bench

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// ratePoint is one contender's latency at one rate of latency-at-rate.
type ratePoint struct {
	rate, p50, p99 float64
}

// rateCurves collects, per contender of latency-at-rate, its p50 and p99 at
// each target rate, in rate order, with the contenders' labels in order of
// appearance.
func rateCurves(res *Results) (map[string][]ratePoint, []*ContenderResult) {
	curves := map[string][]ratePoint{}
	var order []*ContenderResult
	for _, s := range res.Scenarios {
		for _, c := range s.Cases {
			if c.LatencyKind != "open-loop" || c.RateRPS <= 0 {
				continue
			}
			for _, ct := range c.Contenders {
				p50, ok1 := latencyValue(c, ct, "p50")
				p99, ok2 := latencyValue(c, ct, "p99")
				if !ok1 || !ok2 {
					continue
				}
				if _, seen := curves[ct.Name]; !seen {
					order = append(order, ct)
				}
				curves[ct.Name] = append(curves[ct.Name], ratePoint{c.RateRPS, p50, p99})
			}
		}
	}
	for _, pts := range curves {
		slices.SortFunc(pts, func(a, b ratePoint) int { return cmpFloat(a.rate, b.rate) })
	}
	return curves, order
}

// rateTick formats a rate for the x axis: "20k".
func rateTick(v float64) string {
	if v >= 1000 {
		return strconv.FormatFloat(v/1000, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// RateSVG draws latency against the offered rate from latency-at-rate: for
// every contender its p99 (solid) and p50 (dashed) at 50, 80 and 95% of the
// peak, latency on a logarithmic axis. Without latency-at-rate data it says
// so.
func RateSVG(res *Results) string {
	curves, order := rateCurves(res)
	title := "Latency against offered rate (latency-at-rate, open loop, median of rounds)"
	subtitle := "Solid: p99; dashed: p50; x: the fixed request rate. " + res.Started.Format("2006-01-02") + ", " + res.Machine.Hostname
	var legend []legendItem
	for _, ct := range order {
		legend = append(legend, legendItem{ct.Label, swatch(colorOf(ct.Name))})
	}
	legend = append(legend,
		legendItem{"p99", func(b *strings.Builder, x, y float64) {
			fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#495057" stroke-width="2"/>`, x, y-4, x+12, y-4)
		}},
		legendItem{"p50", func(b *strings.Builder, x, y float64) {
			fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#495057" stroke-width="2" stroke-dasharray="4 3"/>`, x, y-4, x+12, y-4)
		}})
	lo, hi, maxRate := math.Inf(1), math.Inf(-1), 0.0
	for _, pts := range curves {
		for _, p := range pts {
			lo, hi, maxRate = min(lo, p.p50), max(hi, p.p99), max(maxRate, p.rate)
		}
	}
	lo, hi, _ = logAxis(lo, hi, 0, 1)
	yLabelW := textWidth(msLabel(hi), fontSize, false)
	for d := lo; d <= hi*1.0001; d *= 10 {
		yLabelW = max(yLabelW, textWidth(msLabel(d), fontSize, false))
	}
	width := max(minChartWidth, headerWidth(title, subtitle))
	plotL, plotR := margin+yLabelW+8, width-margin-24
	plotT, plotH := float64(chartTop), 300.0
	plotB := plotT + plotH
	height := plotB + 40 + float64(legendRows(legend, width)*legendRow) + margin
	var b strings.Builder
	svgDoc(&b, width, height, title, subtitle)
	if len(curves) == 0 {
		fmt.Fprintf(&b, `<text x="%d" y="%.0f" fill="#888">No latency-at-rate results in this run.</text>`+"\n", margin, plotT+20)
		b.WriteString("</svg>\n")
		return b.String()
	}
	// Latency grows upward: invert the log axis.
	_, _, yUp := logAxis(lo, hi, 0, plotH)
	yOf := func(v float64) float64 { return plotB - yUp(v) }
	step := niceStep(maxRate * 1.05 / 5)
	ticks := int(math.Ceil(maxRate * 1.05 / step))
	xMax := step * float64(ticks)
	xOf := func(v float64) float64 { return plotL + (plotR-plotL)*v/xMax }
	for d := lo; d <= hi*1.0001; d *= 10 {
		y := yOf(d)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e5e5e5"/>`+"\n", plotL, y, plotR, y)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" fill="#555">%s</text>`+"\n", plotL-6, y+4, msLabel(d))
	}
	for i := 0; i <= ticks; i++ {
		v := step * float64(i)
		x := xOf(v)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e5e5e5"/>`+"\n", x, plotT, x, plotB)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#555">%s</text>`+"\n", x, plotB+16, rateTick(v))
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" fill="#555">requests/s</text>`+"\n", plotR, plotB+32)
	for _, ct := range order {
		pts := curves[ct.Name]
		col := colorOf(ct.Name)
		for _, line := range []struct {
			pick func(ratePoint) float64
			dash string
			name string
		}{
			{func(p ratePoint) float64 { return p.p99 }, "", "p99"},
			{func(p ratePoint) float64 { return p.p50 }, ` stroke-dasharray="4 3"`, "p50"},
		} {
			var d, tip []string
			for i, p := range pts {
				cmd := "L"
				if i == 0 {
					cmd = "M"
				}
				d = append(d, fmt.Sprintf("%s%.1f %.1f", cmd, xOf(p.rate), yOf(line.pick(p))))
				tip = append(tip, fmt.Sprintf("%s req/s: %s ms", formatNumber(p.rate, 0), formatNumber(line.pick(p), -1)))
			}
			fmt.Fprintf(&b, `<g><title>%s %s: %s</title><path d="%s" stroke="%s" stroke-width="2" fill="none"%s/>`,
				esc(ct.Label), line.name, esc(strings.Join(tip, "; ")), strings.Join(d, ""), col, line.dash)
			for _, p := range pts {
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`, xOf(p.rate), yOf(line.pick(p)), col)
			}
			b.WriteString("</g>\n")
		}
	}
	drawLegend(&b, legend, plotB+40+14, width)
	b.WriteString("</svg>\n")
	return b.String()
}

// niceStep rounds v up to 1, 2 or 5 times a power of ten: an axis step.
func niceStep(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}
