package bench

import (
	"strings"
	"testing"
)

func TestCompareAB(t *testing.T) {
	tests := []struct {
		name        string
		old, new    []float64
		better      Better
		wantVerdict string
		wantDelta   float64
	}{
		{"clearly faster", []float64{50, 51, 52, 50.5, 51.5, 50.2}, []float64{60, 61, 59, 60.5, 61.5, 60.2}, Higher, "faster", 0.189},
		{"clearly slower", []float64{60, 61, 59, 60.5, 61.5, 60.2}, []float64{50, 51, 52, 50.5, 51.5, 50.2}, Higher, "slower", -0.159},
		{"lower latency is faster", []float64{4, 4.2, 4.1, 4.3, 4.05, 4.15}, []float64{3, 3.1, 3.2, 3.05, 3.15, 3.12}, Lower, "faster", -0.246},
		{"interleaved values", []float64{50, 52, 54, 56, 58, 60}, []float64{51, 53, 55, 57, 59, 61}, Higher, WithinNoise, 0.018},
		// Three rounds per side cannot reach p < 0.05 however far apart.
		{"too few rounds", []float64{50, 51, 52}, []float64{90, 91, 92}, Higher, WithinNoise, 0.784},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := compareAB(tt.old, tt.new, tt.better, "faster", "slower")
			if got.Verdict != tt.wantVerdict {
				t.Errorf("verdict: got %q (p=%.3f), want %q", got.Verdict, got.P, tt.wantVerdict)
			}
			if d := got.Delta - tt.wantDelta; d > 0.001 || d < -0.001 {
				t.Errorf("delta: got %.3f, want %.3f", got.Delta, tt.wantDelta)
			}
			if tt.name == "too few rounds" && got.Warning == "" {
				t.Errorf("got no warning with three rounds per side")
			}
		})
	}
}

func TestMinPText(t *testing.T) {
	tests := []struct {
		n    int
		want string
	}{
		{3, "0.100, so no difference can be shown (use --rounds 5 or more)"},
		{4, "0.0286"},
		{6, "0.0022"},
	}
	for _, tt := range tests {
		if got := minPText(tt.n); got != tt.want {
			t.Errorf("minPText(%d): got %q, want %q", tt.n, got, tt.want)
		}
	}
}

// An A/B report names the two builds and gives each metric's change, p and
// verdict.
func TestABReport(t *testing.T) {
	mk := func(name, label string, rps ...float64) *ContenderResult {
		ct := &ContenderResult{Name: name, Label: label, Peer: "helios"}
		for i, v := range rps {
			ct.Runs = append(ct.Runs, &RunResult{Round: i + 1, Metrics: map[string]float64{MetricRPS: v, MetricCPUPerReq: 12}})
		}
		ct.summarize()
		return ct
	}
	c := &CaseResult{Case: Case{Name: "close-c100"}, LatencyKind: "closed-loop", Contenders: []*ContenderResult{
		mk(abNew, "new", 43000, 43500, 42800, 43900, 43100, 43300),
		mk(abOld, "old", 35000, 35600, 34800, 35200, 35900, 35100),
	}}
	c.ratios()
	c.compare()
	res := &Results{
		Settings:  Settings{Rounds: 6, HeliosBin: "/tmp/helios-new", Against: "/tmp/helios-old"},
		Versions:  map[string]string{"helios": "helios c190f22", "helios (against)": "helios b300605"},
		Scenarios: []*ScenarioResult{{Name: "respond", Cases: []*CaseResult{c}}},
	}
	var b strings.Builder
	WriteMarkdown(&b, res)
	md := b.String()
	for _, want := range []string{
		"# helios bench: Helios new vs Helios old",
		"**new** is /tmp/helios-new (helios c190f22); **old** is /tmp/helios-old (helios b300605).",
		"| respond | close-c100 | Requests/sec | 35,150 (34,800–35,900) | 43,200 (42,800–43,900) | +22.9% | 0.002 | **faster** |",
		"| respond | close-c100 | Proxy CPU per request, µs | 12.0 | 12.0 | +0.0% | 1.000 | within noise |",
		"| Metric | new | old | new/old | Winner |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("A/B report lacks %q:\n%s", want, md)
		}
	}
}
