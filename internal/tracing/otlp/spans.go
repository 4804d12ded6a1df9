package otlp

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.39.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/tracing"
	"github.com/helios-lb/helios/internal/wire"
)

// request is what the spans of one sampled request need, copied out of
// its exchange on the loop (its bytes are the connection's).
type request struct {
	span                      tracing.Span
	start                     time.Time
	duration                  time.Duration
	method, host, path, proto string
	userAgent, tls, requestID string
	client                    netip.Addr
	route, upstream           string
	status                    int
	bytes                     int64
	err                       error
	// flushed, when set, makes this a Flush's marker, not a request:
	// the worker closes it when it gets there.
	flushed chan struct{}
}

func copyRequest(ex wire.Exchange, r *proxy.Record) *request {
	q := &request{
		span:     r.Trace,
		start:    r.Start,
		duration: r.Duration,
		client:   ex.ClientAddr(),
		status:   r.Status,
		bytes:    r.Bytes,
		err:      r.Err,
	}
	// The request's texts, in one string (one allocation, not seven):
	// each field is a piece of it.
	fields := [...][]byte{ex.Method(), ex.Host(), ex.Path(), ex.Proto(), ex.Header("User-Agent"), ex.TLSVersion(), r.RequestID.Bytes()}
	var stack [512]byte
	all := stack[:0]
	for _, f := range fields {
		all = append(all, f...)
	}
	text := string(all)
	var at int
	piece := func(i int) string {
		p := text[at : at+len(fields[i])]
		at += len(fields[i])
		return p
	}
	q.method, q.host, q.path, q.proto = piece(0), piece(1), piece(2), piece(3)
	q.userAgent, q.tls, q.requestID = piece(4), piece(5), piece(6)
	if r.Route != nil {
		q.route = r.Route.Name
	}
	if r.Upstream != nil {
		q.upstream = r.Upstream.Name
	}
	return q
}

// Helios's own attributes, beside OpenTelemetry's HTTP semantic
// conventions.
const (
	attrRoute     = attribute.Key("helios.route")
	attrUpstream  = attribute.Key("helios.upstream")
	attrRequestID = attribute.Key("helios.request_id")
	attrAttempts  = attribute.Key("helios.attempts")
	attrOutcome   = attribute.Key("helios.outcome")
	attrQueue     = attribute.Key("helios.queue.duration")
	attrConnect   = attribute.Key("helios.connect.duration")
	attrFirstByte = attribute.Key("helios.first_byte.duration")
)

// emit makes and ends the request's spans: the server span, then a child
// client span per attempt, with the pipeline's ids and times.
func (e *Exporter) emit(q *request) {
	s := &q.span
	ctx := context.Background()
	if s.Parent.Valid() {
		flags := trace.TraceFlags(0)
		if s.Parent.Sampled {
			flags = trace.FlagsSampled
		}
		ctx = trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: trace.TraceID(s.TraceID), SpanID: trace.SpanID(s.Parent.SpanID), TraceFlags: flags, Remote: true,
		}))
	}
	end := q.start.Add(q.duration)
	name := q.method
	if q.route != "" {
		name += " " + q.route
	}
	// Attributes are set on the started span, not passed as a start
	// option, and made in the worker's scratch slice: the span copies
	// them (an option would be copied once more).
	ctx, server := e.tracer.Start(withIDs(ctx, s.TraceID, s.SpanID), name,
		trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(q.start))
	e.attrs = q.serverAttributes(e.attrs[:0])
	server.SetAttributes(e.attrs...)
	if q.status >= 500 {
		server.SetStatus(codes.Error, "")
	}
	for i := range s.Attempts {
		a := &s.Attempts[i]
		start, aend := q.start, end
		if t := a.Timing.Start; t != 0 {
			start = time.Unix(0, t)
		}
		last := i == len(s.Attempts)-1
		if t := a.Timing.End; t != 0 && !(last && a.Err == nil) {
			// The answer that was sent ends with the request; the
			// others when they were reported.
			aend = time.Unix(0, t)
		}
		// The loop's clock stamps a batch's start: keep children inside
		// their parent.
		start = clamp(start, q.start, end)
		aend = clamp(aend, start, end)
		_, client := e.tracer.Start(withIDs(ctx, s.TraceID, a.SpanID), q.method,
			trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(start))
		e.attrs = q.attemptAttributes(e.attrs[:0], i, a)
		client.SetAttributes(e.attrs...)
		if a.Err != nil || a.Status >= 400 {
			client.SetStatus(codes.Error, errorType(a.Err, a.Status))
		}
		client.End(trace.WithTimestamp(aend))
	}
	server.End(trace.WithTimestamp(end))
}

func clamp(t, lo, hi time.Time) time.Time {
	if t.Before(lo) {
		return lo
	}
	if t.After(hi) {
		return hi
	}
	return t
}

// serverAttributes appends the attributes of the HTTP server span
// conventions to kv.
func (q *request) serverAttributes(kv []attribute.KeyValue) []attribute.KeyValue {
	scheme := "http"
	if q.tls != "" {
		scheme = "https"
	}
	kv = append(kv,
		semconv.HTTPRequestMethodKey.String(q.method),
		semconv.URLPathKey.String(q.path),
		semconv.URLSchemeKey.String(scheme),
		semconv.ServerAddressKey.String(q.host),
		semconv.NetworkProtocolNameKey.String("http"),
		semconv.NetworkProtocolVersionKey.String(protocolVersion(q.proto)),
		semconv.HTTPResponseStatusCodeKey.Int(q.status),
		semconv.HTTPResponseBodySizeKey.Int64(q.bytes),
		attrRequestID.String(q.requestID),
		attrAttempts.Int(len(q.span.Attempts)),
	)
	if q.client.IsValid() {
		client := q.client.String()
		kv = append(kv, semconv.ClientAddressKey.String(client), semconv.NetworkPeerAddressKey.String(client))
	}
	if q.userAgent != "" {
		kv = append(kv, semconv.UserAgentOriginalKey.String(q.userAgent))
	}
	if q.tls != "" {
		kv = append(kv, semconv.TLSProtocolNameKey.String("tls"), semconv.TLSProtocolVersionKey.String(q.tls))
	}
	if q.route != "" {
		kv = append(kv, attrRoute.String(q.route))
	}
	if q.upstream != "" {
		kv = append(kv, attrUpstream.String(q.upstream))
	}
	if q.status >= 500 || q.err != nil && q.status == 0 {
		kv = append(kv, semconv.ErrorTypeKey.String(errorType(q.err, q.status)))
	}
	return kv
}

// attemptAttributes appends the attributes of the HTTP client span
// conventions to kv; the retry number is http.request.resend_count.
func (q *request) attemptAttributes(kv []attribute.KeyValue, i int, a *tracing.Attempt) []attribute.KeyValue {
	kv = append(kv,
		semconv.HTTPRequestMethodKey.String(q.method),
		semconv.URLPathKey.String(q.path),
		attrQueue.Float64(a.Timing.Queue.Seconds()),
		attrConnect.Float64(a.Timing.Connect.Seconds()),
		attrFirstByte.Float64(a.Timing.FirstByte.Seconds()),
		attrOutcome.String(outcome(a)),
	)
	if host, port, err := net.SplitHostPort(a.Backend); err == nil {
		kv = append(kv, semconv.ServerAddressKey.String(host), semconv.NetworkPeerAddressKey.String(host))
		if p, err := strconv.Atoi(port); err == nil {
			kv = append(kv, semconv.ServerPortKey.Int(p))
		}
	} else {
		kv = append(kv, semconv.ServerAddressKey.String(a.Backend))
	}
	if i > 0 {
		kv = append(kv, semconv.HTTPRequestResendCountKey.Int(i))
	}
	if a.Status > 0 {
		kv = append(kv, semconv.HTTPResponseStatusCodeKey.Int(a.Status))
	}
	if a.Err != nil || a.Status >= 400 {
		kv = append(kv, semconv.ErrorTypeKey.String(errorType(a.Err, a.Status)))
	}
	if q.upstream != "" {
		kv = append(kv, attrUpstream.String(q.upstream))
	}
	return kv
}

// outcome classes an attempt as the backend's health sees it: success,
// failure (counted against the backend), or ignored (the client's doing,
// or a backend at its connection cap).
func outcome(a *tracing.Attempt) string {
	switch {
	case a.Failed:
		return "failure"
	case a.Err != nil:
		return "ignored"
	}
	return "success"
}

// errorType names an error's class (error.type): the engine's error
// kinds, or the status code.
func errorType(err error, status int) string {
	switch {
	case err == nil:
		return strconv.Itoa(status)
	case errors.Is(err, wire.ErrConnect):
		return "connect"
	case errors.Is(err, wire.ErrBackendBusy):
		return "backend_busy"
	case errors.Is(err, wire.ErrTimeout):
		return "timeout"
	case errors.Is(err, wire.ErrBackend):
		return "backend"
	case errors.Is(err, wire.ErrClientGone):
		return "client_gone"
	case errors.Is(err, wire.ErrClientTimeout):
		return "client_timeout"
	case errors.Is(err, wire.ErrBodyTooLarge):
		return "body_too_large"
	case errors.Is(err, wire.ErrBadRequest):
		return "bad_request"
	}
	return "_OTHER"
}

// protocolVersion is network.protocol.version: 1.0, 1.1 or 2.
func protocolVersion(proto string) string {
	switch proto {
	case "HTTP/1.0":
		return "1.0"
	case "HTTP/2.0":
		return "2"
	}
	return "1.1"
}
