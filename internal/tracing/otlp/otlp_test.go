package otlp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/tracing"
	"github.com/helios-lb/helios/internal/wire"
	"github.com/helios-lb/helios/internal/wire/wiretest"
)

// exchange is a finished request as the exporter sees it.
func exchange() *wiretest.Exchange {
	return &wiretest.Exchange{
		MethodV: []byte("GET"), HostV: []byte("shop.example"), PathV: []byte("/cart"),
		Client: netip.MustParseAddr("192.0.2.7"), ProtoV: []byte("HTTP/2.0"), TLSV: []byte("1.3"),
		Headers: map[string][]byte{"User-Agent": []byte("curl/8")},
	}
}

var (
	traceID = tracing.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	caller  = tracing.SpanID{0, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}
	server  = tracing.SpanID{1, 1, 1, 1, 1, 1, 1, 1}
	try1    = tracing.SpanID{2, 2, 2, 2, 2, 2, 2, 2}
	try2    = tracing.SpanID{3, 3, 3, 3, 3, 3, 3, 3}
)

// retried is a sampled request whose first attempt was refused and whose
// second answered 200.
func retried(start time.Time) proxy.Record {
	ms := func(n int) int64 { return start.Add(time.Duration(n) * time.Millisecond).UnixNano() }
	return proxy.Record{
		Route:    &proxy.Route{Name: "shop"},
		Upstream: &proxy.Upstream{Name: "app"},
		Status:   200, Bytes: 512, Start: start, Duration: 20 * time.Millisecond, Attempts: 2,
		Trace: tracing.Span{
			TraceID: traceID, SpanID: server, Sampled: true,
			Parent: tracing.Context{TraceID: traceID, SpanID: caller, Sampled: true, Decided: true, Format: tracing.W3C},
			Attempts: []tracing.Attempt{
				{SpanID: try1, Backend: "10.0.0.1:9000", Failed: true, Err: fmt.Errorf("%w: refused", wire.ErrConnect),
					Timing: wire.Timing{Start: ms(-1), End: ms(2), Connect: 3 * time.Millisecond}},
				{SpanID: try2, Backend: "10.0.0.2:9000", Status: 200,
					Timing: wire.Timing{Start: ms(2), End: ms(9), Queue: time.Millisecond, FirstByte: 7 * time.Millisecond}},
			},
		},
	}
}

func attrs(kv []attribute.KeyValue) map[string]any {
	m := map[string]any{}
	for _, a := range kv {
		m[string(a.Key)] = a.Value.AsInterface()
	}
	return m
}

// TestSpansOfARetriedRequest: a server span with the pipeline's ids,
// child of the caller's span, and a client span per attempt, child of the
// server span, with the ids the backends were given, the HTTP semantic
// conventions' attributes and the engine's times (issue 24).
func TestSpansOfARetriedRequest(t *testing.T) {
	mem := newMemory()
	e := NewWith(mem, Settings{ServiceName: "edge"})
	start := time.Unix(1700000000, 0)
	e.Record(exchange(), retried(start))
	if err := e.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := mem.GetSpans()
	if len(spans) != 3 {
		t.Fatalf("got %d spans, want 3", len(spans))
	}
	byID := map[trace.SpanID]tracetest.SpanStub{}
	for _, s := range spans {
		byID[s.SpanContext.SpanID()] = s
		if s.SpanContext.TraceID() != trace.TraceID(traceID) {
			t.Errorf("span %s in trace %s, want %s", s.Name, s.SpanContext.TraceID(), traceID)
		}
		if got := s.Resource.Attributes(); len(got) != 1 || got[0].Value.AsString() != "edge" {
			t.Errorf("resource %v, want service.name edge", got)
		}
	}
	sv, ok := byID[trace.SpanID(server)]
	if !ok {
		t.Fatalf("no server span %s", server)
	}
	if sv.Name != "GET shop" || sv.SpanKind != trace.SpanKindServer || sv.Parent.SpanID() != trace.SpanID(caller) || !sv.Parent.IsRemote() {
		t.Errorf("server span %q kind %v parent %s: want GET shop, server, child of the caller %s", sv.Name, sv.SpanKind, sv.Parent.SpanID(), caller)
	}
	if !sv.StartTime.Equal(start) || !sv.EndTime.Equal(start.Add(20*time.Millisecond)) {
		t.Errorf("server span %v-%v, want the request's", sv.StartTime, sv.EndTime)
	}
	for k, v := range map[string]any{
		"http.request.method": "GET", "url.path": "/cart", "url.scheme": "https", "server.address": "shop.example",
		"network.protocol.version": "2", "http.response.status_code": int64(200), "http.response.body.size": int64(512),
		"client.address": "192.0.2.7", "user_agent.original": "curl/8", "tls.protocol.version": "1.3",
		"helios.route": "shop", "helios.upstream": "app", "helios.attempts": int64(2),
	} {
		if got := attrs(sv.Attributes)[k]; got != v {
			t.Errorf("server span %s: got %v, want %v", k, got, v)
		}
	}
	for i, want := range []struct {
		id     tracing.SpanID
		attrs  map[string]any
		status codes.Code
		start  time.Time
		end    time.Time
	}{
		// The first attempt began in the loop's batch before the request's
		// start: kept inside its parent.
		{try1, map[string]any{"server.address": "10.0.0.1", "server.port": int64(9000), "error.type": "connect",
			"helios.outcome": "failure", "helios.connect.duration": 0.003}, codes.Error, start, start.Add(2 * time.Millisecond)},
		{try2, map[string]any{"server.address": "10.0.0.2", "http.request.resend_count": int64(1), "http.response.status_code": int64(200),
			"helios.outcome": "success", "helios.queue.duration": 0.001, "helios.first_byte.duration": 0.007}, codes.Unset,
			start.Add(2 * time.Millisecond), start.Add(20 * time.Millisecond)},
	} {
		s, ok := byID[trace.SpanID(want.id)]
		if !ok {
			t.Fatalf("attempt %d: no span %s", i, want.id)
		}
		if s.SpanKind != trace.SpanKindClient || s.Parent.SpanID() != trace.SpanID(server) {
			t.Errorf("attempt %d: kind %v parent %s, want a client span, child of %s", i, s.SpanKind, s.Parent.SpanID(), server)
		}
		for k, v := range want.attrs {
			if got := attrs(s.Attributes)[k]; got != v {
				t.Errorf("attempt %d: %s: got %v, want %v", i, k, got, v)
			}
		}
		if s.Status.Code != want.status {
			t.Errorf("attempt %d: status %v, want %v", i, s.Status.Code, want.status)
		}
		if !s.StartTime.Equal(want.start) || !s.EndTime.Equal(want.end) {
			t.Errorf("attempt %d: %v-%v, want %v-%v", i, s.StartTime, s.EndTime, want.start, want.end)
		}
	}
	if st := e.Stats(); st.Exported != 3 || st.QueueFull != 0 {
		t.Errorf("got stats %+v, want 3 exported", st)
	}
	e.Close(context.Background())
}

// TestNotSampledIsNotQueued: a request that is not sampled makes no span.
func TestNotSampledIsNotQueued(t *testing.T) {
	mem := newMemory()
	e := NewWith(mem, Settings{})
	r := retried(time.Now())
	r.Trace.Sampled = false
	e.Record(exchange(), r)
	e.Close(context.Background())
	if n := len(mem.GetSpans()); n != 0 {
		t.Errorf("got %d spans, want none", n)
	}
}

// TestFullQueueDropsAndCounts: when the worker is behind, Record drops
// the request's spans and counts them instead of waiting (a loop never
// waits on the exporter).
func TestFullQueueDropsAndCounts(t *testing.T) {
	mem := newMemory()
	// An exporter whose worker has not started: nothing leaves the queue.
	e := &Exporter{queue: make(chan *request, 2), stop: make(chan struct{}), done: make(chan struct{})}
	e.setUp(mem, Settings{}, "helios", time.Second)
	for range 5 {
		e.Record(exchange(), retried(time.Now()))
	}
	if st := e.Stats(); st.QueueFull != 9 {
		t.Errorf("got %d spans dropped, want 9 (three requests of three spans)", st.QueueFull)
	}
	go e.work()
	e.Close(context.Background())
	if n := len(mem.GetSpans()); n != 6 {
		t.Errorf("got %d spans exported at Close, want the 6 queued", n)
	}
	e.Record(exchange(), retried(time.Now()))
	if st := e.Stats(); st.QueueFull != 12 {
		t.Errorf("after Close: got %d dropped, want 12", st.QueueFull)
	}
}

// memory is the SDK's in-memory exporter, whose spans outlive Shutdown
// (tracetest's forgets them).
type memory struct{ *tracetest.InMemoryExporter }

func newMemory() memory                       { return memory{tracetest.NewInMemoryExporter()} }
func (memory) Shutdown(context.Context) error { return nil }

// failing refuses every batch.
type failing struct{ sdktrace.SpanExporter }

func (failing) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error {
	return errors.New("collector unavailable")
}
func (failing) Shutdown(context.Context) error { return nil }

// TestFailedExportsAreCounted: spans a collector does not take are
// counted and reported.
func TestFailedExportsAreCounted(t *testing.T) {
	var reported error
	e := NewWith(failing{}, Settings{OnError: func(err error) { reported = err }})
	e.Record(exchange(), retried(time.Now()))
	e.Flush(context.Background())
	e.Close(context.Background())
	if st := e.Stats(); st.ExportFailed != 3 || st.Exported != 0 {
		t.Errorf("got %+v, want 3 failed", st)
	}
	if reported == nil {
		t.Error("the failure was not reported")
	}
}

// TestSwitch: records go to the exporter in use; a swapped-out one is
// closed, and its counts stay in the switch's.
func TestSwitch(t *testing.T) {
	var s Switch
	s.Record(exchange(), retried(time.Now())) // none: nothing happens
	a, b := newMemory(), newMemory()
	ea := NewWith(a, Settings{})
	s.Swap(ea, 0, time.Second)
	s.Record(exchange(), retried(time.Now()))
	s.Swap(NewWith(b, Settings{}), 0, time.Second)
	s.Record(exchange(), retried(time.Now()))
	deadline := time.Now().Add(5 * time.Second)
	for s.Stats().Exported < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // the old exporter closes after the grace
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(a.GetSpans()) != 3 || len(b.GetSpans()) != 3 {
		t.Errorf("got %d and %d spans, want 3 each", len(a.GetSpans()), len(b.GetSpans()))
	}
	if st := s.Stats(); st.Exported != 6 {
		t.Errorf("got %d exported in all, want 6", st.Exported)
	}
}

// TestSettings: the endpoint is checked, and equal settings are equal.
func TestSettings(t *testing.T) {
	for _, bad := range []Settings{{Endpoint: "localhost:4317"}, {Endpoint: "ftp://x:1"}, {Endpoint: "http://x:1", Protocol: "udp"}} {
		if _, err := New(bad); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
	for _, good := range []Settings{{Endpoint: "http://127.0.0.1:4317"}, {Endpoint: "https://collector.example:4318", Protocol: ProtocolHTTP, Headers: map[string]string{"x-api-key": "k"}}} {
		e, err := New(good)
		if err != nil {
			t.Errorf("%+v: %v", good, err)
			continue
		}
		e.Close(context.Background())
	}
	a := Settings{Endpoint: "http://a:1", Headers: map[string]string{"k": "v"}}
	b := a
	b.Headers = map[string]string{"k": "w"}
	if !a.Equal(&a) || a.Equal(&b) {
		t.Error("Equal compares headers wrong")
	}
}

// TestOTLPHTTP: with protocol http, spans are posted as OTLP protobuf to
// the endpoint's path (/v1/traces when it has none), with the headers.
func TestOTLPHTTP(t *testing.T) {
	type post struct{ path, contentType, key string }
	posts := make(chan post, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		posts <- post{r.URL.Path, r.Header.Get("Content-Type"), r.Header.Get("X-Api-Key")}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer srv.Close()
	e, err := New(Settings{Endpoint: srv.URL, Protocol: ProtocolHTTP, Headers: map[string]string{"x-api-key": "sesame"}})
	if err != nil {
		t.Fatal(err)
	}
	e.Record(exchange(), retried(time.Now()))
	if err := e.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.Close(context.Background())
	select {
	case p := <-posts:
		if p.path != "/v1/traces" || p.contentType != "application/x-protobuf" || p.key != "sesame" {
			t.Errorf("got a post to %s of %s with key %q, want /v1/traces, application/x-protobuf, sesame", p.path, p.contentType, p.key)
		}
	default:
		t.Fatal("no spans posted")
	}
	if st := e.Stats(); st.Exported != 3 {
		t.Errorf("got %+v, want 3 exported", st)
	}
}
