package bench

import (
	"cmp"
	"encoding/xml"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// svgText is a <text> element with what its extent depends on.
type svgText struct {
	x, y   float64
	anchor string
	size   float64
	bold   bool
	text   string
}

// parseSVG returns a document's width and its text elements (tooltips in
// <title> are not drawn and are left out), and checks it is well-formed.
func parseSVG(t *testing.T, svg string) (float64, []svgText, []map[string]string) {
	t.Helper()
	dec := xml.NewDecoder(strings.NewReader(svg))
	var (
		width  float64
		texts  []svgText
		shapes []map[string]string
		cur    *svgText
	)
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed: %v", err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			attrs := map[string]string{}
			for _, a := range el.Attr {
				attrs[a.Name.Local] = a.Value
			}
			switch el.Name.Local {
			case "svg":
				width, _ = strconv.ParseFloat(attrs["width"], 64)
			case "text":
				x, _ := strconv.ParseFloat(attrs["x"], 64)
				y, _ := strconv.ParseFloat(attrs["y"], 64)
				size := float64(fontSize)
				if v, ok := attrs["font-size"]; ok {
					size, _ = strconv.ParseFloat(v, 64)
				}
				cur = &svgText{x: x, y: y, anchor: attrs["text-anchor"], size: size, bold: attrs["font-weight"] != ""}
			default:
				shapes = append(shapes, attrs)
			}
		case xml.CharData:
			if cur != nil {
				cur.text += string(el)
			}
		case xml.EndElement:
			if el.Name.Local == "text" && cur != nil {
				texts = append(texts, *cur)
				cur = nil
			}
		}
	}
	return width, texts, shapes
}

// checkFits fails the test for any text or shape that reaches outside the
// canvas, and for texts on one line that overlap, by the same text measure
// the layout uses.
func checkFits(t *testing.T, name, svg string) {
	t.Helper()
	width, texts, shapes := parseSVG(t, svg)
	if width < minChartWidth {
		t.Errorf("%s: width %v, want at least %d", name, width, minChartWidth)
	}
	type span struct {
		l, r float64
		text string
	}
	lines := map[float64][]span{}
	for _, tx := range texts {
		w := textWidth(tx.text, tx.size, tx.bold)
		left := tx.x
		switch tx.anchor {
		case "middle":
			left -= w / 2
		case "end":
			left -= w
		}
		if left < 0 || left+w > width+0.5 {
			t.Errorf("%s: %q spans %.0f..%.0f, outside 0..%.0f", name, tx.text, left, left+w, width)
		}
		lines[tx.y] = append(lines[tx.y], span{left, left + w, tx.text})
	}
	for y, spans := range lines {
		slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.l, b.l) })
		for i := 1; i < len(spans); i++ {
			if spans[i].l < spans[i-1].r-0.5 {
				t.Errorf("%s: at y=%v %q (%.0f..%.0f) overlaps %q (%.0f..%.0f)", name, y,
					spans[i].text, spans[i].l, spans[i].r, spans[i-1].text, spans[i-1].l, spans[i-1].r)
			}
		}
	}
	for _, s := range shapes {
		x, errX := strconv.ParseFloat(s["x"], 64)
		w, errW := strconv.ParseFloat(s["width"], 64)
		if errX == nil && errW == nil && (x < 0 || w < 0 || x+w > width+0.5) {
			t.Errorf("%s: a shape spans %.0f..%.0f, outside 0..%.0f", name, x, x+w, width)
		}
	}
}

// longResults is sampleResults with labels and values far longer than any
// real report's, and a latency-at-rate scenario.
func longResults() *Results {
	res := sampleResults()
	c := res.Scenarios[0].Cases[0]
	c.Name = "c100-with-a-case-name-much-longer-than-any-we-have"
	c.Contenders[0].Label = "Helios, features off, built from a branch with a long name"
	for _, r := range c.Contenders[1].Runs {
		r.Metrics[MetricRPS] *= 1e7 // 630,000,000,000 req/s
		r.Metrics[MetricProbeP999] = 123456.789
	}
	c.Contenders[1].summarize()
	rate := &ScenarioResult{Name: "latency-at-rate", Tool: ToolOpenLoop}
	for i, pct := range []float64{0.5, 0.8, 0.95} {
		rc := &CaseResult{Case: Case{Name: strconv.Itoa(int(pct*100)) + "pct", RateOfPeak: pct}, LatencyKind: "open-loop", RateRPS: 60000 * pct}
		for j, name := range []string{"helios", "nginx", "haproxy", "caddy"} {
			ct := &ContenderResult{Name: name, Label: contenderLabel(name) + " with an extra long label"}
			for round := 1; round <= 3; round++ {
				ct.Runs = append(ct.Runs, &RunResult{Round: round, Metrics: map[string]float64{
					MetricRPS: rc.RateRPS, MetricLatP50: 0.3 * float64(i+j+1), MetricLatP99: 3 * float64((i+1)*(i+1)+j), MetricLatP999: 40}})
			}
			ct.summarize()
			rc.Contenders = append(rc.Contenders, ct)
		}
		rate.Cases = append(rate.Cases, rc)
	}
	res.Scenarios = append(res.Scenarios, rate)
	return res
}

func TestChartsFitTheirLabels(t *testing.T) {
	for name, res := range map[string]*Results{"sample": sampleResults(), "long labels": longResults(), "empty": {}} {
		t.Run(name, func(t *testing.T) {
			checkFits(t, "throughput", ThroughputSVG(res))
			checkFits(t, "latency", LatencySVG(res))
			checkFits(t, "latency-rate", RateSVG(res))
		})
	}
	// The layout grows the canvas rather than cutting a label.
	w, _, _ := parseSVG(t, ThroughputSVG(longResults()))
	if w <= minChartWidth {
		t.Errorf("long labels: width %v, want more than %d", w, minChartWidth)
	}
}

// The latency legend shows a marker only when some case draws it: here no
// case has a p99.9, so the legend has no p99.9.
func TestLatencyLegendShowsOnlyDrawnMarkers(t *testing.T) {
	res := sampleResults()
	for _, ct := range res.Scenarios[0].Cases[0].Contenders {
		for _, r := range ct.Runs {
			delete(r.Metrics, MetricProbeP999)
		}
		ct.summarize()
	}
	_, texts, _ := parseSVG(t, LatencySVG(res))
	var legend []string
	for _, tx := range texts {
		if tx.text == "p50" || tx.text == "p99" || tx.text == "p99.9" {
			legend = append(legend, tx.text)
		}
	}
	if got := strings.Join(legend, ","); got != "p50,p99" {
		t.Errorf("latency legend markers: got %q, want %q", got, "p50,p99")
	}
	if strings.Contains(LatencySVG(res), "<rect x=") && strings.Count(LatencySVG(res), `width="8" height="8"`) > 0 {
		t.Errorf("a p99.9 marker is drawn though no case measured p99.9")
	}
}

func TestRateChartDrawsEveryContender(t *testing.T) {
	svg := RateSVG(longResults())
	for _, name := range []string{"Helios", "nginx", "HAProxy", "Caddy"} {
		if !strings.Contains(svg, name+" with an extra long label p99: 30,000 req/s") {
			t.Errorf("no p99 curve for %s", name)
		}
		if !strings.Contains(svg, name+" with an extra long label p50: 30,000 req/s") {
			t.Errorf("no p50 curve for %s", name)
		}
	}
	if !strings.Contains(RateSVG(sampleResults()), "No latency-at-rate results") {
		t.Errorf("a run without latency-at-rate does not say so")
	}
}

func TestTextWidth(t *testing.T) {
	// A digit is 0.556 em in Arial; bold and the safety margin add to it.
	if got, want := textWidth("0000", 10, false), 4*5.56*textSafety; math.Abs(got-want) > 1e-9 {
		t.Errorf("plain: got %v, want %v", got, want)
	}
	if textWidth("WWW", 12, false) <= textWidth("iii", 12, false) {
		t.Errorf("W is not wider than i")
	}
	if textWidth("ab", 12, true) <= textWidth("ab", 12, false) {
		t.Errorf("bold is not wider")
	}
	if textWidth("–µ", 12, false) < textWidth("MM", 12, false) {
		t.Errorf("non-ASCII glyphs are measured narrower than M")
	}
}
