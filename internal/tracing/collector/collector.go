// Package collector is a minimal OTLP/gRPC trace receiver on loopback:
// the far end of Helios's span exporter in tests (which read the spans it
// kept) and the sink of `helios bench`'s tracing variants (which only
// count them). It implements the collector's TraceService with the
// generated OTLP protobuf code and gRPC; it forwards nothing.
package collector

import (
	"context"
	"encoding/hex"
	"net"
	"sync"
	"sync/atomic"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// Span is a received span, flattened for tests.
type Span struct {
	// TraceID, SpanID and ParentSpanID in hex; ParentSpanID is "" for a
	// root span.
	TraceID, SpanID, ParentSpanID string
	Name                          string
	// Kind is OTLP's: 2 server, 3 client.
	Kind       tracepb.Span_SpanKind
	Start, End time.Time
	// Attributes by key: string, int64, float64 or bool.
	Attributes map[string]any
	// Service is the resource's service.name.
	Service string
	// Error says the span's status is Error.
	Error bool
}

// Collector receives spans over OTLP/gRPC.
type Collector struct {
	keep bool
	ln   net.Listener
	srv  *grpc.Server
	n    atomic.Uint64

	mu      sync.Mutex
	spans   []Span
	headers []metadata.MD
}

// Start listens on a loopback port and serves. keep says to keep the
// spans (tests) rather than only count them (a benchmark's sink).
func Start(keep bool) (*Collector, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	c := &Collector{keep: keep, ln: ln, srv: grpc.NewServer()}
	coltracepb.RegisterTraceServiceServer(c.srv, service{c: c})
	go c.srv.Serve(ln)
	return c, nil
}

// Endpoint returns the URL an exporter sends to (tracing.endpoint).
func (c *Collector) Endpoint() string { return "http://" + c.ln.Addr().String() }

// Received returns how many spans have come.
func (c *Collector) Received() uint64 { return c.n.Load() }

// Spans returns the spans kept so far.
func (c *Collector) Spans() []Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Span(nil), c.spans...)
}

// Headers returns the metadata of each export call kept so far.
func (c *Collector) Headers() []metadata.MD {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]metadata.MD(nil), c.headers...)
}

// Wait waits until at least n spans have come or d has passed, and
// reports whether they came.
func (c *Collector) Wait(n uint64, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for c.Received() < n {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// Close stops serving.
func (c *Collector) Close() { c.srv.Stop() }

type service struct {
	coltracepb.UnimplementedTraceServiceServer
	c *Collector
}

// Export takes one batch.
func (s service) Export(ctx context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	c := s.c
	var spans []Span
	n := 0
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				n++
				if c.keep {
					spans = append(spans, flatten(sp, service))
				}
			}
		}
	}
	if c.keep {
		md, _ := metadata.FromIncomingContext(ctx)
		c.mu.Lock()
		c.spans = append(c.spans, spans...)
		c.headers = append(c.headers, md)
		c.mu.Unlock()
	}
	c.n.Add(uint64(n))
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func flatten(sp *tracepb.Span, service string) Span {
	s := Span{
		TraceID: hex.EncodeToString(sp.GetTraceId()), SpanID: hex.EncodeToString(sp.GetSpanId()),
		Name: sp.GetName(), Kind: sp.GetKind(), Service: service,
		Start:      time.Unix(0, int64(sp.GetStartTimeUnixNano())),
		End:        time.Unix(0, int64(sp.GetEndTimeUnixNano())),
		Attributes: map[string]any{},
		Error:      sp.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR,
	}
	if p := sp.GetParentSpanId(); len(p) > 0 {
		s.ParentSpanID = hex.EncodeToString(p)
	}
	for _, kv := range sp.GetAttributes() {
		s.Attributes[kv.GetKey()] = value(kv.GetValue())
	}
	return s
}

func value(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	}
	return v.String()
}
