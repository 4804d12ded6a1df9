package tracing

import "github.com/helios-lb/helios/internal/wire"

// Span is a request's place in its trace, as the pipeline leaves it in
// the request's record: what the access log, the metrics' exemplars and
// the exporter read. The zero Span means tracing is off.
type Span struct {
	// TraceID is the trace: the caller's, or one Helios started.
	TraceID TraceID
	// SpanID is Helios's server span, the parent of every attempt's.
	SpanID SpanID
	// Parent is the caller's context; not Valid when Helios started the
	// trace.
	Parent Context
	// Sampled says the request is recorded: its spans are exported.
	Sampled bool
	// Attempts are a sampled request's forwarding attempts, in order;
	// nil for a request that is not sampled (collecting them would
	// allocate).
	Attempts []Attempt
}

// On reports whether tracing was on for the request.
func (s *Span) On() bool { return !s.TraceID.IsZero() }

// Attempt is one forwarding attempt of a sampled request: a client span.
type Attempt struct {
	// SpanID is the attempt's span, the parent the backend was given.
	SpanID SpanID
	// Backend is the backend's address.
	Backend string
	// Timing is how the attempt went, as the engine measured it.
	Timing wire.Timing
	// Status is the status of the backend's answer; 0 when none came.
	Status int
	// Err is why the attempt failed, if it did.
	Err error
	// Failed says the attempt counts as a backend failure (an error, or
	// a status the upstream retries).
	Failed bool
}
