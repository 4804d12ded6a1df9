// Package otlp exports the spans of sampled requests with the
// OpenTelemetry Go SDK, over OTLP (gRPC or HTTP).
//
// # Nothing waits on an event loop
//
// Exporter.Record runs on an event loop when a request ends. For a request
// that is not sampled it returns at once. For a sampled one it copies
// what the spans need out of the exchange (whose bytes are the
// connection's) and hands the copy to a worker goroutine through a
// bounded queue; when the queue is full the request's spans are dropped
// and counted (helios_tracing_spans_dropped_total{reason="queue_full"})
// rather than wait. The worker builds the SDK spans (a server span per
// request and a client span per attempt, with the ids the pipeline
// already gave the backends, through an IDGenerator that returns them)
// and ends them into the SDK's batch span processor, which the worker
// waits on when the exporter is behind: back-pressure reaches the queue,
// never a loop. Batches that fail to export are counted
// (reason="export_failed").
package otlp

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.39.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/tracing"
	"github.com/helios-lb/helios/internal/wire"
)

// The protocols an Exporter speaks to its collector.
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http"
)

// DefaultQueue is how many sampled requests may wait for the worker.
const DefaultQueue = 4096

// Settings say where an Exporter sends spans. Two Settings that are equal
// (Equal) make the same exporter, so a reload that keeps them keeps it.
type Settings struct {
	// Endpoint is the collector's URL: http:// (cleartext) or https://
	// (TLS, the system's roots), host and port; for ProtocolHTTP, its
	// path is where spans are posted (none: /v1/traces).
	Endpoint string
	// Protocol is ProtocolGRPC or ProtocolHTTP; "" means gRPC.
	Protocol string
	// Headers go with every export (an API key); nil sends none.
	Headers map[string]string
	// ServiceName is the service.name of the spans; "" means helios.
	ServiceName string
	// Queue bounds the sampled requests waiting for the worker; 0 means
	// DefaultQueue.
	Queue int
	// BatchTimeout is the longest a span waits to be exported; 0 means
	// 2s.
	BatchTimeout time.Duration
	// OnError is told of failed exports (rate-limiting is the caller's);
	// nil: they are only counted.
	OnError func(error)
}

// Equal reports whether s and o make the same exporter.
func (s *Settings) Equal(o *Settings) bool {
	if s.Endpoint != o.Endpoint || s.Protocol != o.Protocol || s.ServiceName != o.ServiceName || s.Queue != o.Queue || s.BatchTimeout != o.BatchTimeout || len(s.Headers) != len(o.Headers) {
		return false
	}
	for k, v := range s.Headers {
		if w, ok := o.Headers[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// Exporter is a proxy.Recorder that exports the spans of sampled
// requests. It is safe for concurrent use.
type Exporter struct {
	queue  chan *request
	stop   chan struct{}
	done   chan struct{}
	closed atomic.Bool
	once   sync.Once

	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
	// attrs is the worker's scratch for a span's attributes.
	attrs []attribute.KeyValue

	dropped, failed, exported atomic.Uint64
}

// New returns an exporter sending to the collector s names. It does not
// connect: the first export does (and a collector that is down only
// costs failed exports, counted).
func New(s Settings) (*Exporter, error) {
	exp, err := newSpanExporter(s)
	if err != nil {
		return nil, err
	}
	return NewWith(exp, s), nil
}

func newSpanExporter(s Settings) (sdktrace.SpanExporter, error) {
	u, err := url.Parse(s.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("tracing endpoint %q: want http:// or https://, host and port", s.Endpoint)
	}
	ctx := context.Background()
	switch s.Protocol {
	case "", ProtocolGRPC:
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpointURL(s.Endpoint)}
		if len(s.Headers) > 0 {
			opts = append(opts, otlptracegrpc.WithHeaders(s.Headers))
		}
		return otlptracegrpc.New(ctx, opts...)
	case ProtocolHTTP:
		if u.Path == "" || u.Path == "/" {
			u.Path = "/v1/traces"
		}
		opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(u.String())}
		if len(s.Headers) > 0 {
			opts = append(opts, otlptracehttp.WithHeaders(s.Headers))
		}
		return otlptracehttp.New(ctx, opts...)
	}
	return nil, fmt.Errorf("tracing protocol %q: want grpc or http", s.Protocol)
}

// NewWith returns an exporter that hands its spans to exp (the SDK's
// in-memory exporter in tests), with s's service name, queue and batch
// timeout; s's endpoint, protocol and headers are not used.
func NewWith(exp sdktrace.SpanExporter, s Settings) *Exporter {
	// The SDK reports failed exports to OpenTelemetry's process-wide
	// error handler, whose default prints each to standard error (the
	// process log's stream, in another format). The exporter counts them
	// and hands them to Settings.OnError itself, so the handler drops
	// them; setting it again is harmless.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {}))
	name := s.ServiceName
	if name == "" {
		name = "helios"
	}
	q := s.Queue
	if q <= 0 {
		q = DefaultQueue
	}
	bt := s.BatchTimeout
	if bt <= 0 {
		bt = 2 * time.Second
	}
	e := &Exporter{queue: make(chan *request, q), stop: make(chan struct{}), done: make(chan struct{})}
	e.setUp(exp, s, name, bt)
	go e.work()
	return e
}

// setUp makes the exporter's tracer provider (its worker not started).
func (e *Exporter) setUp(exp sdktrace.SpanExporter, s Settings, name string, bt time.Duration) {
	counted := &countingExporter{SpanExporter: exp, e: e, onError: s.OnError}
	e.tp = sdktrace.NewTracerProvider(
		sdktrace.WithSpanProcessor(sdktrace.NewBatchSpanProcessor(counted,
			// The worker waits for room; the loops never do (Record's
			// queue drops).
			sdktrace.WithBlocking(),
			sdktrace.WithBatchTimeout(bt),
			sdktrace.WithMaxQueueSize(2048),
			sdktrace.WithMaxExportBatchSize(512),
		)),
		// The pipeline decided; every span the worker makes is sampled.
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithIDGenerator(presetIDs{}),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceNameKey.String(name))),
	)
	e.tracer = e.tp.Tracer("github.com/helios-lb/helios")
}

// Switch is a proxy.Recorder that passes each record to the current
// Exporter, if any; a reload that changes where spans go swaps in
// another. It is safe for concurrent use; the zero Switch has none.
type Switch struct {
	cur     atomic.Pointer[Exporter]
	mu      sync.Mutex
	retired Stats // of the exporters swapped out
}

// Record passes r to the current exporter.
func (s *Switch) Record(ex wire.Exchange, r proxy.Record) {
	if e := s.cur.Load(); e != nil {
		e.Record(ex, r)
	}
}

// Current returns the exporter in use; nil when tracing is off.
func (s *Switch) Current() *Exporter { return s.cur.Load() }

// Swap makes e (nil: none) the exporter in use and closes the previous
// one after grace (records that picked it up just before still reach it),
// giving it timeout to export what it holds. It returns at once.
func (s *Switch) Swap(e *Exporter, grace, timeout time.Duration) {
	old := s.cur.Swap(e)
	if old == nil || old == e {
		return
	}
	time.AfterFunc(grace, func() { s.retire(old, timeout) })
}

func (s *Switch) retire(old *Exporter, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	old.Close(ctx)
	cancel()
	s.mu.Lock()
	s.retired = s.retired.Add(old.Stats())
	s.mu.Unlock()
}

// Close closes the exporter in use, exporting what it holds within ctx.
func (s *Switch) Close(ctx context.Context) error {
	e := s.cur.Swap(nil)
	if e == nil {
		return nil
	}
	err := e.Close(ctx)
	s.mu.Lock()
	s.retired = s.retired.Add(e.Stats())
	s.mu.Unlock()
	return err
}

// Stats returns the counts of every exporter the switch has held.
func (s *Switch) Stats() Stats {
	s.mu.Lock()
	st := s.retired
	s.mu.Unlock()
	if e := s.cur.Load(); e != nil {
		st = st.Add(e.Stats())
	}
	return st
}

// countingExporter counts what its exporter took and what failed.
type countingExporter struct {
	sdktrace.SpanExporter
	e       *Exporter
	onError func(error)
}

func (c *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := c.SpanExporter.ExportSpans(ctx, spans)
	if err != nil {
		c.e.failed.Add(uint64(len(spans)))
		if c.onError != nil {
			c.onError(err)
		}
		return err
	}
	c.e.exported.Add(uint64(len(spans)))
	return nil
}

// Record queues a sampled request's spans; it never blocks.
func (e *Exporter) Record(ex wire.Exchange, r proxy.Record) {
	if !r.Trace.Sampled {
		return
	}
	n := uint64(1 + len(r.Trace.Attempts))
	if e.closed.Load() {
		e.dropped.Add(n)
		return
	}
	select {
	case e.queue <- copyRequest(ex, &r):
	default:
		e.dropped.Add(n)
	}
}

// work makes the spans of queued requests until Close.
func (e *Exporter) work() {
	defer close(e.done)
	for {
		select {
		case q := <-e.queue:
			e.emitOrMark(q)
		case <-e.stop:
			for {
				select {
				case q := <-e.queue:
					e.emitOrMark(q)
				default:
					return
				}
			}
		}
	}
}

func (e *Exporter) emitOrMark(q *request) {
	if q.flushed != nil {
		close(q.flushed)
		return
	}
	e.emit(q)
}

// Flush exports every span of the requests recorded so far (tests, and
// an operator's shutdown); it waits, so it is not for a loop.
func (e *Exporter) Flush(ctx context.Context) error {
	// A marker through the queue: once the worker reaches it, what was
	// queued before has been made into spans.
	mark := &request{flushed: make(chan struct{})}
	select {
	case e.queue <- mark:
	case <-e.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-mark.flushed:
	case <-e.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return e.tp.ForceFlush(ctx)
}

// Close makes the spans of what is queued, exports them, and stops,
// within ctx. Records after Close are dropped and counted.
func (e *Exporter) Close(ctx context.Context) error {
	var err error
	e.once.Do(func() {
		e.closed.Store(true)
		close(e.stop)
		select {
		case <-e.done:
		case <-ctx.Done():
			err = ctx.Err()
		}
		err = errors.Join(err, e.tp.Shutdown(ctx))
	})
	return err
}

// Stats are an exporter's counts of spans.
type Stats struct {
	// Exported were taken by the collector.
	Exported uint64
	// QueueFull were dropped because the worker was too far behind.
	QueueFull uint64
	// ExportFailed were in batches the collector did not take.
	ExportFailed uint64
}

// Stats returns the exporter's counts so far.
func (e *Exporter) Stats() Stats {
	return Stats{Exported: e.exported.Load(), QueueFull: e.dropped.Load(), ExportFailed: e.failed.Load()}
}

// Add returns the sum of s and o.
func (s Stats) Add(o Stats) Stats {
	return Stats{Exported: s.Exported + o.Exported, QueueFull: s.QueueFull + o.QueueFull, ExportFailed: s.ExportFailed + o.ExportFailed}
}

// presetIDs is the SDK's IDGenerator: a span gets the ids the pipeline
// gave it (and the backend), carried in the context by withIDs.
type presetIDs struct{}

type idsKey struct{}

type ids struct {
	trace trace.TraceID
	span  trace.SpanID
}

func withIDs(ctx context.Context, t tracing.TraceID, s tracing.SpanID) context.Context {
	return context.WithValue(ctx, idsKey{}, ids{trace: trace.TraceID(t), span: trace.SpanID(s)})
}

func (presetIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if v, ok := ctx.Value(idsKey{}).(ids); ok {
		return v.trace, v.span
	}
	return trace.TraceID(tracing.NewTraceID()), trace.SpanID(tracing.NewSpanID())
}

func (presetIDs) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if v, ok := ctx.Value(idsKey{}).(ids); ok {
		return v.span
	}
	return trace.SpanID(tracing.NewSpanID())
}
