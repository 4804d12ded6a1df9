package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/tracing"
	"github.com/helios-lb/helios/internal/tracing/otlp"
)

// TestExemplarsAndTracingCounters: a sampled request's duration carries
// its trace id as an exemplar on its bucket, one not sampled none; both
// are counted by status. The tracing counters read the exporter's stats.
func TestExemplarsAndTracingCounters(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg, fakeSource{})
	if err != nil {
		t.Fatal(err)
	}
	stats := otlp.Stats{Exported: 7, QueueFull: 2, ExportFailed: 3}
	if err := reg.Register(NewTracing(func() otlp.Stats { return stats })); err != nil {
		t.Fatal(err)
	}
	rt := &proxy.Route{Name: "app", Stats: m.RouteStats("app", "up")}
	id := tracing.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	// count is what Record does for a routed request.
	count(rt.Stats, &proxy.Record{Route: rt, Status: 200, Duration: 3 * time.Millisecond, Trace: tracing.Span{TraceID: id, Sampled: true}})
	count(rt.Stats, &proxy.Record{Route: rt, Status: 200, Duration: 300 * time.Millisecond, Trace: tracing.Span{TraceID: tracing.NewTraceID()}})
	if n := rt.Stats.Codes[200].Load(); n != 2 {
		t.Errorf("got %d requests counted, want 2", n)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var exemplars []string
	counters := map[string]float64{}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			switch mf.GetName() {
			case "helios_request_duration_seconds":
				if mt.GetLabel()[0].GetValue() != "app" {
					continue
				}
				if mt.GetHistogram().GetSampleCount() != 2 {
					t.Errorf("got %d observations, want 2", mt.GetHistogram().GetSampleCount())
				}
				for _, b := range mt.GetHistogram().GetBucket() {
					if e := b.GetExemplar(); e != nil {
						for _, l := range e.GetLabel() {
							exemplars = append(exemplars, l.GetName()+"="+l.GetValue())
						}
					}
				}
			case "helios_tracing_spans_exported_total", "helios_tracing_spans_dropped_total":
				key := mf.GetName()
				for _, l := range mt.GetLabel() {
					key += "/" + l.GetValue()
				}
				counters[key] = mt.GetCounter().GetValue()
			}
		}
	}
	if len(exemplars) != 1 || exemplars[0] != "trace_id=4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("got exemplars %v, want one: the sampled request's trace id", exemplars)
	}
	want := map[string]float64{"helios_tracing_spans_exported_total": 7, "helios_tracing_spans_dropped_total/queue_full": 2, "helios_tracing_spans_dropped_total/export_failed": 3}
	for k, v := range want {
		if counters[k] != v {
			t.Errorf("%s: got %v, want %v", k, counters[k], v)
		}
	}
}

// TestExemplarsOnePerBucketASecond: a bucket takes a sampled request's
// trace id as its exemplar at most once a second (by the requests' ends);
// another bucket takes its own meanwhile, and every request is observed.
func TestExemplarsOnePerBucketASecond(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg, fakeSource{})
	if err != nil {
		t.Fatal(err)
	}
	rt := &proxy.Route{Name: "app", Stats: m.RouteStats("app", "up")}
	start := time.Unix(1_800_000_000, 0)
	ids := make([]tracing.TraceID, 5)
	sampled := func(i int, at time.Time, d time.Duration) {
		ids[i] = tracing.NewTraceID()
		count(rt.Stats, &proxy.Record{Route: rt, Status: 200, Start: at, Duration: d, Trace: tracing.Span{TraceID: ids[i], Sampled: true}})
	}
	sampled(0, start, 3*time.Millisecond)                             // le=0.005: taken
	sampled(1, start.Add(500*time.Millisecond), 3*time.Millisecond)   // le=0.005, 0.5 s later: not
	sampled(2, start.Add(600*time.Millisecond), 300*time.Millisecond) // le=0.5: its own
	exemplars := func() (map[float64]string, uint64) {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[float64]string{}
		var n uint64
		for _, mf := range mfs {
			if mf.GetName() != "helios_request_duration_seconds" {
				continue
			}
			for _, mt := range mf.GetMetric() {
				if mt.GetLabel()[0].GetValue() != "app" {
					continue
				}
				n = mt.GetHistogram().GetSampleCount()
				for _, b := range mt.GetHistogram().GetBucket() {
					if e := b.GetExemplar(); e != nil {
						got[b.GetUpperBound()] = e.GetLabel()[0].GetValue()
					}
				}
			}
		}
		return got, n
	}
	got, n := exemplars()
	want := map[float64]string{0.005: ids[0].String(), 0.5: ids[2].String()}
	if n != 3 || len(got) != 2 || got[0.005] != want[0.005] || got[0.5] != want[0.5] {
		t.Fatalf("got exemplars %v over %d observations, want %v over 3", got, n, want)
	}
	sampled(3, start.Add(1100*time.Millisecond), 3*time.Millisecond) // le=0.005, over a second after the first: taken
	if got, _ := exemplars(); got[0.005] != ids[3].String() {
		t.Errorf("a second on: got exemplar %s, want %s", got[0.005], ids[3])
	}
}
