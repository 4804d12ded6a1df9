package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/helios-lb/helios/internal/proxy"
)

// mirrorDescs are the series of mirrored routes (routes[].mirror), read
// from the routes' counters (proxy.MirrorStats) when Prometheus scrapes.
type mirrorDescs struct {
	requests, dropped, inflight *prometheus.Desc
}

func newMirrorDescs() mirrorDescs {
	return mirrorDescs{
		requests: prometheus.NewDesc("helios_mirror_requests_total",
			"Copies of a route's requests sent to its shadow upstream, by route, shadow upstream and result: answered (whatever the status; the answer is dropped) or failed (unreachable, timed out, reset).",
			[]string{"route", "upstream", "result"}, nil),
		dropped: prometheus.NewDesc("helios_mirror_dropped_total",
			"Copies of a route's requests not sent to its shadow upstream, by route, shadow upstream and reason: busy (mirror.max_inflight copies were in flight: mirrors are shed first), body (the request's body was not held whole in memory), no_backend (no backend of the shadow was available).",
			[]string{"route", "upstream", "reason"}, nil),
		inflight: prometheus.NewDesc("helios_mirror_inflight",
			"Copies of a route's requests in flight to its shadow upstream.", []string{"route", "upstream"}, nil),
	}
}

// collectMirrors sends the series of every mirrored route of g.
func (m *Metrics) collectMirrors(ch chan<- prometheus.Metric, g *proxy.Graph) {
	d := &m.mirror
	for _, rt := range g.RouteList {
		mi := rt.Mirror
		if mi == nil {
			continue
		}
		s, up := mi.Stats, mi.Upstream.Name
		counter := func(desc *prometheus.Desc, v *atomic.Uint64, label string) {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(v.Load()), rt.Name, up, label)
		}
		counter(d.requests, &s.Answered, "answered")
		counter(d.requests, &s.Failed, "failed")
		counter(d.dropped, &s.Busy, "busy")
		counter(d.dropped, &s.Unbuffered, "body")
		counter(d.dropped, &s.NoBackend, "no_backend")
		ch <- prometheus.MustNewConstMetric(d.inflight, prometheus.GaugeValue, float64(s.Inflight()), rt.Name, up)
	}
}
