package bench

import (
	"strings"
	"testing"

	"github.com/helios-lb/helios/internal/bench/loadgen"
)

func TestProbeRate(t *testing.T) {
	tests := []struct {
		name    string
		warmRPS float64
		want    float64
	}{
		{"1% of the warm-up", 61234, 612},
		{"at least the minimum", 5870, probeMinRate},
		{"no warm-up", 0, probeRateWithoutWarmup},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := probeRate(tt.warmRPS); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// The probe's figures become the probe_* metrics; its failures and unsent
// requests join the run's error total, and its requests count in the CPU
// per request.
func TestMergeProbe(t *testing.T) {
	m := map[string]float64{MetricRPS: 60000, MetricRequests: 480000, MetricErrRead: 2}
	addErrorTotal(m)
	g := &loadgen.Result{Connections: 4, ConnectionsUsed: 9, Completed: 4790, Unsent: 3,
		Errors:  loadgen.Errors{Timeout: 1},
		Latency: loadgen.LatencyMS{P50: 0.8, P90: 2, P99: 4.5, P999: 9.1, Max: 12, Count: 4790}}
	mergeProbe(m, probeMetrics(g))
	want := map[string]float64{
		MetricProbeP50: 0.8, MetricProbeP99: 4.5, MetricProbeP999: 9.1, MetricProbeMax: 12,
		MetricProbeRequests: 4790, MetricProbeConns: 9, MetricErrProbe: 4, MetricErrTotal: 6, MetricRequests: 480000,
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s: got %v, want %v", k, m[k], v)
		}
	}
}

func TestLatencyKey(t *testing.T) {
	tests := []struct {
		name string
		c    CaseResult
		q    string
		want string
	}{
		{"probe beside wrk", CaseResult{LatencyKind: "closed-loop", ProbeRateRPS: 600}, "p99", MetricProbeP99},
		{"open-loop case", CaseResult{LatencyKind: "open-loop"}, "p99.9", MetricLatP999},
		{"closed loop without a probe", CaseResult{LatencyKind: "closed-loop"}, "p99", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := latencyKey(&tt.c, tt.q); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// With three peers every headline row shows Helios against each and
// against the best of them, by req/s and by the probe's p99.
func TestHeadlineAgainstEachPeerAndTheBest(t *testing.T) {
	mk := func(name string, rps, p99 float64) *ContenderResult {
		ct := &ContenderResult{Name: name, Label: contenderLabel(name), Runs: []*RunResult{
			{Round: 1, Metrics: map[string]float64{MetricRPS: rps, MetricProbeP99: p99, MetricLatP99: p99 * 10, MetricCPUPerReq: 10, MetricErrTotal: 0}},
			{Round: 2, Metrics: map[string]float64{MetricRPS: rps, MetricProbeP99: p99, MetricLatP99: p99 * 10, MetricCPUPerReq: 10, MetricErrTotal: 0}},
		}}
		ct.summarize()
		return ct
	}
	c := &CaseResult{Case: Case{Name: "c100"}, LatencyKind: "closed-loop", ProbeRateRPS: 600,
		Contenders: []*ContenderResult{mk("helios", 60000, 4), mk("nginx", 57000, 5), mk("haproxy", 62500, 3.2), mk("caddy", 20000, 9)}}
	res := &Results{Settings: Settings{Rounds: 2, Peers: []string{"nginx", "haproxy", "caddy"}},
		Scenarios: []*ScenarioResult{{Name: "proxy-ka", Cases: []*CaseResult{c}}}}
	var b strings.Builder
	names := headlineContenders(res)
	labels := []string{"Helios", "nginx", "HAProxy", "Caddy"}
	writeHeadline(&b, res, names, labels)
	md := b.String()
	for _, want := range []string{
		"| scenario | case | req/s Helios | req/s nginx | req/s HAProxy | req/s Caddy | Helios/nginx | Helios/HAProxy | Helios/Caddy | Helios/best | p99 ms Helios | p99 ms nginx | p99 ms HAProxy | p99 ms Caddy | p99 Helios/best |",
		"| proxy-ka | c100 | 60,000 | 57,000 | 62,500 | 20,000 | 1.05 | 0.96 | 3.00 | 0.96 (HAProxy) | 4.00 | 5.00 | 3.20 | 9.00 | 1.25 (HAProxy) |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("headline lacks %q:\n%s", want, md)
		}
	}
}

// A probe whose every request failed reports errors, not a latency of 0.
func TestProbeWithoutAnswersHasNoLatency(t *testing.T) {
	m := probeMetrics(&loadgen.Result{Connections: 4, Sent: 600, Errors: loadgen.Errors{Non2xx: 600}})
	for _, k := range []string{MetricProbeP50, MetricProbeP99, MetricProbeP999, MetricProbeMax} {
		if _, ok := m[k]; ok {
			t.Errorf("%s: got %v, want no value", k, m[k])
		}
	}
	if m[MetricErrProbe] != 600 {
		t.Errorf("probe errors: got %v, want 600", m[MetricErrProbe])
	}
}
