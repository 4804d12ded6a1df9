package proxy

import (
	"fmt"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/tracing"
	"github.com/helios-lb/helios/internal/upstream"
	"github.com/helios-lb/helios/internal/wire"
)

// records keeps what the pipeline records.
type records []Record

func (rs *records) Record(_ wire.Exchange, r Record) { *rs = append(*rs, r) }

// propagation answers from a script, and notes the traceparent and
// X-B3-SpanId each attempt went with.
type propagation struct {
	fakeTransport
	parents, b3 []string
}

func (p *propagation) attempt(ex *fakeExchange, b *upstream.Backend) (int, error) {
	v, _ := ex.req.Header.Get("traceparent")
	p.parents = append(p.parents, string(v))
	v, _ = ex.req.Header.Get("x-b3-spanid")
	p.b3 = append(p.b3, string(v))
	ex.timing = wire.Timing{Start: 1, End: 2, Connect: time.Millisecond, FirstByte: 3 * time.Millisecond}
	return p.fakeTransport.attempt(ex, b)
}

const (
	callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan  = "00f067aa0ba902b7"
)

func tracedPipeline(t *testing.T, pol *tracing.Policy, script map[string]any) (*Pipeline, *propagation, *records) {
	tr := &propagation{fakeTransport: fakeTransport{script: script}}
	p, _ := pipelineFor(t, &tr.fakeTransport, defaultPolicy(), nil)
	g := p.Graph()
	g.Tracing = pol
	rs := &records{}
	g.Recorder = rs
	return p, tr, rs
}

// TestTraceAcrossARetry: a sampled request joins the caller's trace;
// each attempt is a span of its own, a child of Helios's server span, and
// the backend of each attempt is handed that attempt's span as parent
// (issue 24).
func TestTraceAcrossARetry(t *testing.T) {
	refused := fmt.Errorf("%w: connection refused", wire.ErrConnect)
	p, tr, rs := tracedPipeline(t, tracing.NewPolicy(0, true, tracing.W3C, tracing.B3), map[string]any{"b1": refused, "b2": 200})
	ex := &fakeExchange{method: "GET"}
	ex.req.Header.Add([]byte("traceparent"), []byte("00-"+callerTrace+"-"+callerSpan+"-01"))
	serve(p.NewFlow(), tr, ex)
	if len(*rs) != 1 {
		t.Fatalf("got %d records, want 1", len(*rs))
	}
	r := (*rs)[0]
	s := r.Trace
	if !s.Sampled || s.TraceID.String() != callerTrace || s.Parent.SpanID.String() != callerSpan || s.SpanID.IsZero() {
		t.Fatalf("got trace %s span %s parent %s sampled %v, want the caller's trace, sampled", s.TraceID, s.SpanID, s.Parent.SpanID, s.Sampled)
	}
	if len(s.Attempts) != 2 {
		t.Fatalf("got %d attempts, want 2", len(s.Attempts))
	}
	a0, a1 := s.Attempts[0], s.Attempts[1]
	if a0.SpanID == a1.SpanID || a0.SpanID == s.SpanID || a0.SpanID.IsZero() || a1.SpanID.IsZero() {
		t.Errorf("attempt spans %s and %s (server %s): want two new ones", a0.SpanID, a1.SpanID, s.SpanID)
	}
	if a0.Backend != "b1" || a0.Err == nil || !a0.Failed || a1.Backend != "b2" || a1.Status != 200 || a1.Failed {
		t.Errorf("got attempts %+v and %+v, want b1 refused and b2 200", a0, a1)
	}
	for i, a := range s.Attempts {
		want := "00-" + callerTrace + "-" + a.SpanID.String() + "-01"
		if tr.parents[i] != want {
			t.Errorf("attempt %d went with traceparent %q, want %q", i, tr.parents[i], want)
		}
		if tr.b3[i] != a.SpanID.String() {
			t.Errorf("attempt %d went with X-B3-SpanId %q, want %q", i, tr.b3[i], a.SpanID)
		}
		if a.Timing.FirstByte != 3*time.Millisecond {
			t.Errorf("attempt %d: got timing %+v, want the engine's", i, a.Timing)
		}
	}
	if r.Timing.Connect != time.Millisecond || r.Timing.FirstByte != 3*time.Millisecond {
		t.Errorf("record timing %+v: want the last attempt's", r.Timing)
	}
}

// TestSamplingDecisions: ratio 0 and 1 decide a trace Helios starts;
// parent_based follows the caller's decision; a request not sampled still
// hands the backend a context (Helios's span, not sampled), so that the
// backend does not start a trace of its own.
func TestSamplingDecisions(t *testing.T) {
	sampled := "00-" + callerTrace + "-" + callerSpan + "-01"
	notSampled := "00-" + callerTrace + "-" + callerSpan + "-00"
	tests := []struct {
		name        string
		ratio       float64
		parentBased bool
		traceparent string
		want        bool
	}{
		{"ratio 1, no parent", 1, true, "", true},
		{"ratio 0, no parent", 0, true, "", false},
		{"parent sampled, ratio 0", 0, true, sampled, true},
		{"parent not sampled, ratio 1", 1, true, notSampled, false},
		{"parent sampled, not parent-based, ratio 0", 0, false, sampled, false},
		{"parent not sampled, not parent-based, ratio 1", 1, false, notSampled, true},
		{"broken parent, ratio 1", 1, true, "00-zz", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, tr, rs := tracedPipeline(t, tracing.NewPolicy(tt.ratio, tt.parentBased), map[string]any{"b1": 200})
			ex := &fakeExchange{method: "GET"}
			if tt.traceparent != "" {
				ex.req.Header.Add([]byte("traceparent"), []byte(tt.traceparent))
				ex.req.Header.Add([]byte("tracestate"), []byte("vendor=1"))
			}
			serve(p.NewFlow(), tr, ex)
			s := (*rs)[0].Trace
			if s.Sampled != tt.want {
				t.Fatalf("got sampled %v, want %v", s.Sampled, tt.want)
			}
			joined := tt.traceparent == sampled || tt.traceparent == notSampled
			if joined != (s.TraceID.String() == callerTrace) {
				t.Errorf("got trace %s; joined the caller's: want %v", s.TraceID, joined)
			}
			parent := s.SpanID
			flags := "-00"
			if tt.want {
				parent, flags = s.Attempts[0].SpanID, "-01"
			} else if s.Attempts != nil {
				t.Errorf("a request not sampled collected attempts: %+v", s.Attempts)
			}
			if want := "00-" + s.TraceID.String() + "-" + parent.String() + flags; tr.parents[0] != want {
				t.Errorf("backend got traceparent %q, want %q", tr.parents[0], want)
			}
			if _, kept := ex.req.Header.Get("tracestate"); kept != joined {
				t.Errorf("tracestate forwarded: %v, want %v", kept, joined)
			}
		})
	}
}

// TestTracingOffTouchesNothing: without a policy the request carries no
// trace and its head no new field.
func TestTracingOffTouchesNothing(t *testing.T) {
	p, tr, rs := tracedPipeline(t, nil, map[string]any{"b1": 200})
	ex := &fakeExchange{method: "GET"}
	serve(p.NewFlow(), tr, ex)
	if (*rs)[0].Trace.On() || tr.parents[0] != "" {
		t.Errorf("tracing off: got trace %+v and traceparent %q", (*rs)[0].Trace, tr.parents[0])
	}
}

// TestTracingAllocatesNothingWhenNotSampled: with tracing on, a request
// that is not sampled (with or without a caller's context) goes through
// the pipeline without an allocation (issue 24: cheap enough to leave on).
func TestTracingAllocatesNothingWhenNotSampled(t *testing.T) {
	for _, caller := range []string{"", "00-" + callerTrace + "-" + callerSpan + "-00"} {
		tr := &fakeTransport{script: map[string]any{"b1": 200}}
		p, _ := pipelineFor(t, tr, defaultPolicy(), NewBudget(0.2, 10, time.Minute))
		p.Graph().Tracing = tracing.NewPolicy(0, true, tracing.W3C, tracing.B3)
		ex := &fakeExchange{method: "GET"}
		f := p.NewFlow()
		name, value := []byte("traceparent"), []byte(caller)
		allocs := testing.AllocsPerRun(1000, func() {
			ex.begin()
			if caller != "" {
				ex.req.Header.Add(name, value)
			}
			serve(f, okTransport{}, ex)
		})
		if allocs != 0 {
			t.Errorf("caller %q: got %v allocations per request, want 0", caller, allocs)
		}
	}
}
