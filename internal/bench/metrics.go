package bench

import (
	"time"

	"github.com/helios-lb/helios/internal/bench/loadgen"
)

// The metric keys of a run, as they appear in results.json. A run holds the
// keys its tool can measure: h2load has no percentiles, only the open-loop
// generator has p99.9 and unsent requests, only c10k has the idle RSS and
// memory per connection.
const (
	MetricRPS        = "rps"
	MetricRequests   = "requests"
	MetricLatAvg     = "latency_avg_ms"
	MetricLatP50     = "latency_p50_ms"
	MetricLatP90     = "latency_p90_ms"
	MetricLatP99     = "latency_p99_ms"
	MetricLatP999    = "latency_p999_ms"
	MetricLatMax     = "latency_max_ms"
	MetricErrConnect = "errors_connect"
	MetricErrRead    = "errors_read"
	MetricErrWrite   = "errors_write"
	MetricErrTimeout = "errors_timeout"
	MetricErrNon2xx  = "errors_non2xx"
	MetricErrUnsent  = "errors_unsent"
	MetricErrTotal   = "errors_total"
	MetricCPUPerReq  = "cpu_us_per_req"
	MetricCPUSeconds = "cpu_s"
	MetricPeakRSS    = "peak_rss_mib"
	MetricIdleRSS    = "idle_rss_mib"
	MetricRSSPerConn = "rss_per_conn_kib"
	// MetricBytesPerAnswer is what the load generator read per answer,
	// head included (wrk, compress cases only): how much a coding shrank
	// the answers.
	MetricBytesPerAnswer = "bytes_per_answer"

	// The latency probe's figures (open-loop, from each request's intended
	// send time, at about 1% of the load), measured beside a saturating
	// load generator.
	MetricProbeP50      = "probe_p50_ms"
	MetricProbeP90      = "probe_p90_ms"
	MetricProbeP99      = "probe_p99_ms"
	MetricProbeP999     = "probe_p999_ms"
	MetricProbeMax      = "probe_max_ms"
	MetricProbeRPS      = "probe_rps"
	MetricProbeRequests = "probe_requests"
	MetricProbeConns    = "probe_connections"
	// MetricErrProbe counts the probe's failed and unsent requests.
	MetricErrProbe = "errors_probe"

	// MetricMiBps is the body throughput: request bodies sent (upload),
	// or bytes received (h2load's traffic), per second.
	MetricMiBps = "mib_per_s"
	// MetricResumedPct is the share of TLS handshakes that resumed a
	// session (tls-handshake), in per cent.
	MetricResumedPct = "resumed_pct"
	// MetricConnsHeld counts the idle connections held open (idle).
	MetricConnsHeld = "connections_held"
)

// Better says which way a metric improves.
type Better int

// The directions of Better. Neutral metrics (request counts) have no winner.
const (
	Neutral Better = iota
	Higher
	Lower
)

// MetricDef describes one metric for the reports.
type MetricDef struct {
	Key   string
	Label string
	// Unit is appended to values in the Markdown report ("ms", "µs").
	Unit   string
	Better Better
	// Latency marks the load generator's latency metrics, whose label gets
	// the run's latency kind (closed-loop, open-loop).
	Latency bool
	// Probe marks the latency probe's metrics.
	Probe bool
	// Decimals is the number of decimals printed; -1 picks them by size.
	Decimals int
}

// Metrics lists every metric in report order.
var Metrics = []MetricDef{
	{Key: MetricRPS, Label: "Requests/sec", Better: Higher, Decimals: 0},
	{Key: MetricMiBps, Label: "Throughput", Unit: "MiB/s", Better: Higher, Decimals: -1},
	{Key: MetricProbeP50, Label: "p50 latency", Unit: "ms", Better: Lower, Probe: true, Decimals: -1},
	{Key: MetricProbeP90, Label: "p90 latency", Unit: "ms", Better: Lower, Probe: true, Decimals: -1},
	{Key: MetricProbeP99, Label: "p99 latency", Unit: "ms", Better: Lower, Probe: true, Decimals: -1},
	{Key: MetricProbeP999, Label: "p99.9 latency", Unit: "ms", Better: Lower, Probe: true, Decimals: -1},
	{Key: MetricProbeMax, Label: "Max latency", Unit: "ms", Better: Lower, Probe: true, Decimals: -1},
	{Key: MetricLatP50, Label: "p50 latency", Unit: "ms", Better: Lower, Latency: true, Decimals: -1},
	{Key: MetricLatP90, Label: "p90 latency", Unit: "ms", Better: Lower, Latency: true, Decimals: -1},
	{Key: MetricLatP99, Label: "p99 latency", Unit: "ms", Better: Lower, Latency: true, Decimals: -1},
	{Key: MetricLatP999, Label: "p99.9 latency", Unit: "ms", Better: Lower, Latency: true, Decimals: -1},
	{Key: MetricLatAvg, Label: "Avg latency", Unit: "ms", Better: Lower, Latency: true, Decimals: -1},
	{Key: MetricLatMax, Label: "Max latency", Unit: "ms", Better: Lower, Latency: true, Decimals: -1},
	{Key: MetricErrTotal, Label: "Errors", Better: Lower, Decimals: 0},
	{Key: MetricErrConnect, Label: "errors: connect", Better: Lower, Decimals: 0},
	{Key: MetricErrRead, Label: "errors: read", Better: Lower, Decimals: 0},
	{Key: MetricErrWrite, Label: "errors: write", Better: Lower, Decimals: 0},
	{Key: MetricErrTimeout, Label: "errors: timeout", Better: Lower, Decimals: 0},
	{Key: MetricErrNon2xx, Label: "errors: non-2xx/3xx", Better: Lower, Decimals: 0},
	{Key: MetricErrUnsent, Label: "errors: unsent (behind schedule)", Better: Lower, Decimals: 0},
	{Key: MetricErrProbe, Label: "errors: probe (failed or unsent)", Better: Lower, Decimals: 0},
	{Key: MetricCPUPerReq, Label: "Proxy CPU per request", Unit: "µs", Better: Lower, Decimals: 1},
	{Key: MetricPeakRSS, Label: "Proxy peak RSS", Unit: "MiB", Better: Lower, Decimals: 1},
	{Key: MetricIdleRSS, Label: "Proxy idle RSS", Unit: "MiB", Better: Lower, Decimals: 1},
	{Key: MetricRSSPerConn, Label: "Memory per connection", Unit: "KiB", Better: Lower, Decimals: 1},
	{Key: MetricBytesPerAnswer, Label: "Bytes read per answer (head included)", Better: Neutral, Decimals: 0},
	{Key: MetricRequests, Label: "Requests completed", Better: Neutral, Decimals: 0},
	{Key: MetricResumedPct, Label: "Handshakes that resumed a session", Unit: "%", Better: Neutral, Decimals: 0},
	{Key: MetricConnsHeld, Label: "Idle connections held", Better: Neutral, Decimals: 0},
	{Key: MetricProbeRequests, Label: "Probe requests completed", Better: Neutral, Decimals: 0},
	{Key: MetricProbeConns, Label: "Probe connections used", Better: Neutral, Decimals: 0},
	{Key: MetricCPUSeconds, Label: "Proxy CPU time", Unit: "s", Better: Neutral, Decimals: 2},
}

// metricDef returns the definition of key.
func metricDef(key string) (MetricDef, bool) {
	for _, d := range Metrics {
		if d.Key == key {
			return d, true
		}
	}
	return MetricDef{}, false
}

// errorKinds are the error metrics summed into MetricErrTotal.
var errorKinds = []string{MetricErrConnect, MetricErrRead, MetricErrWrite, MetricErrTimeout, MetricErrNon2xx, MetricErrUnsent, MetricErrProbe}

func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// wrkMetrics converts a wrk result. wrk's distribution has p50, p75, p90
// and p99. With deep pipelining wrk sometimes prints a distribution of
// zeros beside a non-zero mean; such a distribution is left out rather
// than reported as 0 ms.
func wrkMetrics(w *WrkResult) map[string]float64 {
	m := map[string]float64{
		MetricRPS:        w.RPS,
		MetricRequests:   float64(w.Requests),
		MetricLatAvg:     msf(w.LatencyAvg),
		MetricLatMax:     msf(w.LatencyMax),
		MetricErrConnect: float64(w.Connect),
		MetricErrRead:    float64(w.Read),
		MetricErrWrite:   float64(w.Write),
		MetricErrTimeout: float64(w.Timeout),
		MetricErrNon2xx:  float64(w.Non2xx),
	}
	if w.Requests > 0 && w.BytesRead > 0 {
		m[MetricBytesPerAnswer] = w.BytesRead / float64(w.Requests)
	}
	if !(w.Percentiles["99%"] == 0 && w.LatencyAvg > 0) {
		for pct, key := range map[string]string{"50%": MetricLatP50, "90%": MetricLatP90, "99%": MetricLatP99} {
			if d, ok := w.Percentiles[pct]; ok {
				m[key] = msf(d)
			}
		}
	}
	addErrorTotal(m)
	return m
}

// h2loadMetrics converts an h2load result. Streams that failed with an
// error other than a timeout count as read errors.
func h2loadMetrics(h *H2loadResult) map[string]float64 {
	m := map[string]float64{
		MetricRPS:        h.RPS,
		MetricRequests:   float64(h.Succeeded),
		MetricLatAvg:     msf(h.ReqMean),
		MetricLatMax:     msf(h.ReqMax),
		MetricErrRead:    float64(max(h.Errored-h.Timeout, 0)),
		MetricErrTimeout: float64(h.Timeout),
		MetricErrNon2xx:  float64(h.Status4xx + h.Status5xx),
	}
	if h.TrafficBytes > 0 && h.Elapsed > 0 {
		m[MetricMiBps] = float64(h.TrafficBytes) / (1 << 20) / h.Elapsed.Seconds()
	}
	addErrorTotal(m)
	return m
}

// closedLoopMetrics are the metrics of a closed-loop tool of ours
// (websocket, tls-handshake): operations per second, their count, their
// latency and errors.
func closedLoopMetrics(perSecond float64, n uint64, l loadgen.LatencyMS, e loadgen.Errors) map[string]float64 {
	m := map[string]float64{
		MetricRPS:        perSecond,
		MetricRequests:   float64(n),
		MetricLatAvg:     l.Mean,
		MetricLatP50:     l.P50,
		MetricLatP90:     l.P90,
		MetricLatP99:     l.P99,
		MetricLatMax:     l.Max,
		MetricErrConnect: float64(e.Connect),
		MetricErrRead:    float64(e.Read),
		MetricErrWrite:   float64(e.Write),
		MetricErrTimeout: float64(e.Timeout),
		MetricErrNon2xx:  float64(e.Non2xx),
	}
	addErrorTotal(m)
	return m
}

// loadgenMetrics converts an open-loop generator result. Its req/s is the
// rate achieved, which is the target rate when the proxy keeps up.
func loadgenMetrics(r *loadgen.Result) map[string]float64 {
	m := map[string]float64{
		MetricRPS:        r.AchievedRPS,
		MetricRequests:   float64(r.Completed),
		MetricLatAvg:     r.Latency.Mean,
		MetricLatP50:     r.Latency.P50,
		MetricLatP90:     r.Latency.P90,
		MetricLatP99:     r.Latency.P99,
		MetricLatP999:    r.Latency.P999,
		MetricLatMax:     r.Latency.Max,
		MetricErrConnect: float64(r.Errors.Connect),
		MetricErrRead:    float64(r.Errors.Read),
		MetricErrWrite:   float64(r.Errors.Write),
		MetricErrTimeout: float64(r.Errors.Timeout),
		MetricErrNon2xx:  float64(r.Errors.Non2xx),
		MetricErrUnsent:  float64(r.Unsent),
	}
	addErrorTotal(m)
	return m
}

// addErrorTotal sets MetricErrTotal to the sum of the error kinds in m.
func addErrorTotal(m map[string]float64) {
	var t float64
	for _, k := range errorKinds {
		t += m[k]
	}
	m[MetricErrTotal] = t
}
