package proxy

import (
	"github.com/helios-lb/helios/internal/tracing"
	"github.com/helios-lb/helios/internal/upstream"
	"github.com/helios-lb/helios/internal/wire"
)

// The pipeline's part of tracing (Graph.Tracing): it joins the caller's
// trace or starts one, decides whether the request is sampled, and hands
// each attempt's context to the backend. A request that is not sampled
// costs a few random draws and two header fields written into memory the
// exchange lends (Alloc): nothing is allocated. A sampled one collects
// its attempts in Record.Trace for the exporter.

// startTrace reads the caller's context and decides on sampling.
func (f *flow) startTrace(ex wire.Exchange) {
	pol := f.g.Tracing
	if pol == nil {
		return
	}
	t := &f.rec.Trace
	t.Parent = pol.Extract(&ex.Request().Header)
	if t.Parent.Valid() {
		t.TraceID = t.Parent.TraceID
	} else {
		t.TraceID = tracing.NewTraceID()
	}
	t.SpanID = tracing.NewSpanID()
	t.Sampled = pol.Sample(&t.Parent, t.TraceID)
}

// traceAttempt writes the context of the attempt about to go to b into
// the request head: a sampled request's attempt is a span of its own
// (a child of Helios's server span), the parent the backend is given;
// for a request that is not sampled the backend gets Helios's server span
// as parent and the decision not to sample, so that it does not record
// half a trace.
func (f *flow) traceAttempt(b *upstream.Backend) {
	pol := f.g.Tracing
	if pol == nil {
		return
	}
	t := &f.rec.Trace
	span := t.SpanID
	if t.Sampled {
		span = tracing.NewSpanID()
		if t.Attempts == nil {
			t.Attempts = make([]tracing.Attempt, 0, f.up.Retry.Attempts+1)
		}
		t.Attempts = append(t.Attempts, tracing.Attempt{SpanID: span, Backend: b.Addr})
	}
	pol.Inject(&f.ex.Request().Header, f.ex, t.TraceID, span, t.Sampled, t.Parent.Format)
}

// attemptDone records how the attempt just reported went: its timing
// for the access log, and, for a sampled request, its span's outcome.
func (f *flow) attemptDone(status int, err error) {
	f.rec.Timing = f.ex.Timing()
	t := &f.rec.Trace
	if n := len(t.Attempts); n > 0 {
		a := &t.Attempts[n-1]
		a.Timing, a.Status, a.Err = f.rec.Timing, status, err
		a.Failed = err != nil && outcomeOf(err) == Failure || err == nil && f.up.Retry.Statuses.Has(status)
	}
}
