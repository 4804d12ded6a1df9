package metrics

import (
	"sort"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/tracing"
	"github.com/helios-lb/helios/internal/tracing/otlp"
)

// durationBuckets are helios_request_duration_seconds's buckets.
var durationBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// exemplarEvery is how often a bucket of a route's duration histogram
// takes a new exemplar at most. Prometheus keeps a bucket's last exemplar
// only, and making one allocates (its labels, the trace id as text, the
// exemplar with its timestamp), on the loop: with every request traced,
// one per request cost more than the rest of the count.
const exemplarEvery = time.Second

// durations observes a route's request durations (its
// proxy.RouteStats.Duration); a sampled request's carries its trace id
// as an exemplar on its bucket, unless that bucket took one less than
// exemplarEvery ago.
type durations struct {
	prometheus.Observer
	// last is when each bucket (and +Inf, the last) took its exemplar, in
	// unix nanoseconds of the request's end.
	last []atomic.Int64
}

func newDurations(o prometheus.Observer) *durations {
	return &durations{Observer: o, last: make([]atomic.Int64, len(durationBuckets)+1)}
}

// observeSampled observes a sampled request's duration d, ended at end
// (unix nanoseconds), with trace id as its exemplar when its bucket is
// due one.
func (o *durations) observeSampled(d time.Duration, end int64, id tracing.TraceID) {
	v := d.Seconds()
	eo, ok := o.Observer.(prometheus.ExemplarObserver)
	if !ok {
		o.Observe(v)
		return
	}
	last := &o.last[sort.SearchFloat64s(durationBuckets, v)]
	if prev := last.Load(); end-prev < int64(exemplarEvery) || !last.CompareAndSwap(prev, end) {
		o.Observe(v)
		return
	}
	eo.ObserveWithExemplar(v, prometheus.Labels{"trace_id": id.String()})
}

// count counts a finished request on s. A sampled request's duration
// carries its trace id as an exemplar (trace_id), so that a bucket on a
// latency panel links to a trace (durations: one a second per bucket at
// most); the others observe plainly, without an allocation.
func count(s *proxy.RouteStats, r *proxy.Record) {
	if r.Trace.Sampled {
		if o, ok := s.Duration.(*durations); ok {
			s.CountStatus(r.Status)
			var end time.Time
			if r.Start.IsZero() {
				end = time.Now() // a record without its start (tests)
			} else {
				end = r.Start.Add(r.Duration)
			}
			o.observeSampled(r.Duration, end.UnixNano(), r.Trace.TraceID)
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
