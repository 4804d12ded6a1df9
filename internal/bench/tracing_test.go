package bench

import (
	"testing"

	"github.com/helios-lb/helios/internal/config"
)

// TestTracingVariant: the features-on-tracing scenario traces Helios at
// 0.01 (and 1.0 in its second case), with Helios with tracing off as a
// column; the rendered config is one Helios accepts, with the tracing
// block pointing at the sink, and is named apart.
func TestTracingVariant(t *testing.T) {
	ss, err := LoadScenarios()
	if err != nil {
		t.Fatal(err)
	}
	var sc *Scenario
	for i := range ss {
		if ss[i].Name == "features-on-tracing" {
			sc = &ss[i]
		}
	}
	if sc == nil {
		t.Fatal("no features-on-tracing scenario")
	}
	var ratios []float64
	for _, c := range sc.Cases {
		m := c.merged(sc.Defaults)
		if !m.Features || !m.TracingOffBaseline {
			t.Errorf("case %s: features %v, tracing-off baseline %v, want both", c.Name, m.Features, m.TracingOffBaseline)
		}
		ratios = append(ratios, m.TraceRatio)
	}
	if len(ratios) != 2 || ratios[0] != 0.01 || ratios[1] != 1 {
		t.Errorf("got ratios %v, want [0.01 1]", ratios)
	}

	r := &runner{res: &Results{Versions: map[string]string{}}}
	c := sc.Cases[0].merged(sc.Defaults)
	helios, _ := peerByName("helios")
	cs := r.contenders(c)
	if len(cs) < 2 || !cs[0].traced || cs[1].traced || cs[1].res.Name != "helios-tracing-off" || !cs[1].features {
		t.Fatalf("contenders: want traced Helios, then Helios with features and tracing off; got %+v", cs)
	}
	for _, traced := range []bool{true, false} {
		got := r.peerData(helios, *sc, c, true, traced)
		d := testPeerData(t, "helios")
		d.Features, d.TraceEndpoint, d.TraceRatio = true, got.TraceEndpoint, got.TraceRatio
		text := render(t, "helios", d)
		cfg, err := config.Parse([]byte(text), "helios.yaml", func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatalf("traced=%v: config.Parse: %v\n%s", traced, err, text)
		}
		switch {
		case !traced && cfg.Tracing != nil:
			t.Errorf("untraced config has tracing: %+v", cfg.Tracing)
		case traced && (cfg.Tracing == nil || cfg.Tracing.SampleRatio != 0.01 || cfg.Tracing.Endpoint != "http://127.0.0.1:4317" || cfg.Tracing.Protocol != "grpc"):
			t.Errorf("traced config: got %+v, want grpc to the sink at 0.01", cfg.Tracing)
		}
		if got, want := variant("helios", d), map[bool]string{true: "helios-features-tracing", false: "helios-features"}[traced]; got != want {
			t.Errorf("variant: got %q, want %q", got, want)
		}
	}
	// Peers are never traced.
	nginx, _ := peerByName("nginx")
	if d := r.peerData(nginx, *sc, c, true, true); d.TraceEndpoint != "" {
		t.Errorf("nginx got a trace endpoint %q", d.TraceEndpoint)
	}
}
