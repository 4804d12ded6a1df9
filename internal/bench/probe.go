package bench

import (
	"bytes"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/helios-lb/helios/internal/bench/loadgen"
)

// The latency probe (dpbench's method): while a saturating load generator
// runs, a separate open-loop client sends a small fixed rate of the same
// requests and measures each one's latency from its intended send time. A
// saturating generator's own latency is closed-loop (it measures its own
// queue as much as the proxy); the probe's is what a client arriving
// during that load would see.
const (
	// probeShare is the probe's rate as a share of the load's.
	probeShare = 0.01
	// probeMinRate keeps enough samples for a p99.9 in a few seconds.
	probeMinRate = 100
	// probeRateWithoutWarmup is used when there is no warm-up to measure
	// the load's rate from.
	probeRateWithoutWarmup = 200
	// probeConnections is the pool the probe starts with, and
	// probeMaxConnections what it may grow to while requests find every
	// connection busy (at c10k a request takes half a second, so a few
	// hundred requests a second need a couple of hundred connections).
	probeConnections    = 4
	probeMaxConnections = 256
)

// probes reports whether runs of case c of s get the latency probe: every
// timed case whose load generator saturates the proxy with HTTP requests.
// gRPC calls are not HTTP/1.1 requests the probe could send.
func probes(s *Selection, c Case) bool {
	return (s.Tool == ToolWrk || s.Tool == ToolH2load) && c.Requests == 0 && !slices.Contains(s.Requires, RequireGRPC)
}

// probeRate returns the probe's rate for a case whose warm-up measured
// warmRPS requests per second (0: no warm-up): probeShare of it, rounded,
// at least probeMinRate.
func probeRate(warmRPS float64) float64 {
	if warmRPS <= 0 || math.IsNaN(warmRPS) {
		return probeRateWithoutWarmup
	}
	return max(probeMinRate, math.Round(warmRPS*probeShare))
}

// probeCommand returns the probe's run for case c of s: the case's path and
// headers (a probe in a Connection: close case opens a connection per
// request, as the load does; in a hash case, a user of its own, so that
// it is hashed as the load is), HTTP/1.1, at rate for d.
func (r *runner) probeCommand(s *Selection, c Case, d time.Duration, rate float64) toolRun {
	headers := c.Headers
	if c.HashUsers > 0 {
		headers = maps.Clone(headers)
		if headers == nil {
			headers = map[string]string{}
		}
		headers[HashHeader] = "probe"
	}
	return toolRun{
		argv:  r.loadgenArgs(r.target(s)+c.Path, rate, d, probeConnections, probeMaxConnections, headers),
		env:   []string{"GOMAXPROCS=1"},
		parse: parseProbeMetrics,
	}
}

// parseProbeMetrics reads the probe's loadgen output into the probe_*
// metrics.
func parseProbeMetrics(b []byte) (map[string]float64, error) {
	g, err := loadgen.Parse(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return probeMetrics(g), nil
}

// probeMetrics converts the probe's result. Its failed and unsent requests
// are errors like the load generator's.
// A probe none of whose requests succeeded has no latency to report.
func probeMetrics(g *loadgen.Result) map[string]float64 {
	m := map[string]float64{
		MetricProbeRPS:      g.AchievedRPS,
		MetricProbeRequests: float64(g.Completed),
		MetricProbeConns:    float64(max(g.ConnectionsUsed, g.Connections)),
		MetricErrProbe:      float64(g.Errors.Total() + g.Unsent),
	}
	if g.Completed > 0 {
		m[MetricProbeP50], m[MetricProbeP90], m[MetricProbeP99] = g.Latency.P50, g.Latency.P90, g.Latency.P99
		m[MetricProbeP999], m[MetricProbeMax] = g.Latency.P999, g.Latency.Max
	}
	return m
}

// mergeProbe adds the probe's metrics to a run's and recomputes what
// depends on both: the error total.
func mergeProbe(m, probe map[string]float64) {
	for k, v := range probe {
		m[k] = v
	}
	addErrorTotal(m)
}

// formatRate writes a rate for the report: "600 req/s".
func formatRate(rps float64) string { return strconv.FormatFloat(rps, 'f', 0, 64) + " req/s" }
