package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/tracing/otlp"
)

// count counts a finished request on s. A sampled request's duration
// carries its trace id as an exemplar (trace_id), so that a bucket on a
// latency panel links to a trace; the others observe plainly, without an
// allocation.
func count(s *proxy.RouteStats, r *proxy.Record) {
	if r.Trace.Sampled {
		if eo, ok := s.Duration.(prometheus.ExemplarObserver); ok {
			s.CountStatus(r.Status)
			eo.ObserveWithExemplar(r.Duration.Seconds(), prometheus.Labels{"trace_id": r.Trace.TraceID.String()})
			return
		}
	}
	s.Count(r.Status, r.Duration)
}

// tracingCollector reports the span exporter's counts.
type tracingCollector struct {
	stats             func() otlp.Stats
	exported, dropped *prometheus.Desc
}

// NewTracing returns the collector of the tracing metrics, read from
// stats at scrape time: helios_tracing_spans_exported_total and
// helios_tracing_spans_dropped_total by reason (queue_full: the exporter
// was too far behind to take them; export_failed: the collector did not
// take them). They are 0 while tracing is off.
func NewTracing(stats func() otlp.Stats) prometheus.Collector {
	return &tracingCollector{
		stats: stats,
		exported: prometheus.NewDesc("helios_tracing_spans_exported_total",
			"Spans the OTLP collector took.", nil, nil),
		dropped: prometheus.NewDesc("helios_tracing_spans_dropped_total",
			"Spans lost: queue_full (the exporter's queue was full; a loop never waits for it), export_failed (the collector did not take them).",
			[]string{"reason"}, nil),
	}
}

// Describe sends the descriptions.
func (c *tracingCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.exported
	ch <- c.dropped
}

// Collect reads the counts.
func (c *tracingCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.stats()
	ch <- prometheus.MustNewConstMetric(c.exported, prometheus.CounterValue, float64(st.Exported))
	ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.CounterValue, float64(st.QueueFull), "queue_full")
	ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.CounterValue, float64(st.ExportFailed), "export_failed")
}
