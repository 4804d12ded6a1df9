package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c"

	"github.com/helios-lb/helios/internal/tracing/collector"
)

// flakyBackends are two backends behind one handler: the first attempt
// of each request (by its X-Test-Id) is answered 503, the next 200, so
// every request is retried once, whichever backend it meets first. They
// note the trace context every attempt came with.
type flakyBackends struct {
	addrs []string
	mu    sync.Mutex
	seen  map[string]int
	got   map[string][]string // X-Test-Id -> traceparent of each attempt
}

func startFlakyBackends(t *testing.T, h2 bool) *flakyBackends {
	fb := &flakyBackends{seen: map[string]int{}, got: map[string][]string{}}
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Test-Id")
		fb.mu.Lock()
		fb.seen[id]++
		n := fb.seen[id]
		fb.got[id] = append(fb.got[id], r.Header.Get("Traceparent"))
		fb.mu.Unlock()
		if n == 1 && id != "" {
			w.WriteHeader(503)
			return
		}
		io.WriteString(w, "ok")
	})
	if h2 {
		h = h2c.NewHandler(h, &http2.Server{})
	}
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: h}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		fb.addrs = append(fb.addrs, ln.Addr().String())
	}
	return fb
}

// parents returns the traceparent each attempt of request id came with.
func (fb *flakyBackends) parents(id string) []string {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	return append([]string(nil), fb.got[id]...)
}

// recordedN waits until the log has been handed n requests: then the
// exporter, an earlier recorder, has them too (a client may have its
// answer before its request is recorded).
func (l *countedLog) recordedN(t *testing.T, n int64) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); l.n.Load() < n; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d requests recorded, want %d", l.n.Load(), n)
		}
	}
}

// byRequestID indexes access log lines by request id.
func byRequestID(lines []map[string]any) map[string]map[string]any {
	m := map[string]map[string]any{}
	for _, l := range lines {
		id, _ := l["request_id"].(string)
		m[id] = l
	}
	return m
}

func tracingConfig(endpoint string, fb *flakyBackends, h2Backend bool, ratio string) string {
	transport := ""
	if h2Backend {
		transport = "\n    transport: {protocol: h2c}"
	}
	return fmt.Sprintf(`
listeners: [{name: web, address: "127.0.0.1:1", h2c: true}]
routes: [{name: app, match: {path_prefix: /}, upstream: app}]
upstreams:
  - name: app
    backends: [{address: "%s"}, {address: "%s"}]%s
admin: {address: "127.0.0.1:9901"}
tracing: {endpoint: "%s", sample_ratio: %s, service_name: edge}
`, fb.addrs[0], fb.addrs[1], transport, endpoint, ratio)
}

// clientFor returns an HTTP/1.1 or an h2c client.
func clientFor(h2 bool) *http.Client {
	if !h2 {
		return &http.Client{Transport: &http.Transport{}}
	}
	return &http.Client{Transport: &http2.Transport{AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}}
}

// tracedGet sends GET / with a request id, a test id and, when set, a
// traceparent; it wants 200.
func tracedGet(t *testing.T, c *http.Client, base, id, traceparent string) {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/", nil)
	req.Header.Set("X-Request-Id", id)
	req.Header.Set("X-Test-Id", id)
	if traceparent != "" {
		req.Header.Set("Traceparent", traceparent)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("request %s: got %d, want 200", id, resp.StatusCode)
	}
}

// flush exports what the server's exporter holds.
func flush(t *testing.T, s *Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.spans.Current().Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// spansOf returns the collector's spans of trace id: the server span and
// the client spans in the order of their start.
func spansOf(col *collector.Collector, trace string) (server *collector.Span, clients []collector.Span) {
	for _, s := range col.Spans() {
		if s.TraceID != trace {
			continue
		}
		if s.Kind == 2 {
			s := s
			server = &s
		} else {
			clients = append(clients, s)
		}
	}
	for i := 1; i < len(clients); i++ {
		for j := i; j > 0 && clients[j].Start.Before(clients[j-1].Start); j-- {
			clients[j], clients[j-1] = clients[j-1], clients[j]
		}
	}
	return server, clients
}

var exemplarRE = regexp.MustCompile(`^helios_request_duration_seconds_bucket\{[^}]*route="app"[^}]*\} \d+ # \{trace_id="([0-9a-f]{32})"\}`)

// exemplars returns the trace ids the duration histogram's buckets carry
// as exemplars, as an OpenMetrics scrape shows them.
func exemplars(t *testing.T, s *Server) map[string]bool {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+s.AdminAddr().String()+"/metrics", nil)
	req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/openmetrics-text") {
		t.Fatalf("got Content-Type %q, want OpenMetrics", ct)
	}
	ids := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if m := exemplarRE.FindStringSubmatch(sc.Text()); m != nil {
			ids[m[1]] = true
		}
	}
	return ids
}

// TestTracingEndToEnd runs requests through Helios to backends that fail
// each request's first attempt, with spans going over OTLP/gRPC to a
// collector on loopback, for HTTP/1.1 and h2c clients and HTTP/1.1 and
// h2c backends on both pollers (issue 24):
//   - a request with a sampled caller context: the server span is the
//     caller's child, each attempt a client span of its own (the retry's
//     with http.request.resend_count 1), each backend was handed its
//     attempt's span as parent, and the access log line and the
//     histogram's exemplar carry the same trace id;
//   - after a reload to sample_ratio 0 (no restart), a request without
//     context is not sampled: the backend gets Helios's context with
//     flags 00 and no span is exported;
//   - with sample_ratio 0, a sampled caller is still followed
//     (parent_based).
func TestTracingEndToEnd(t *testing.T) {
	eachEngine(t, func(t *testing.T, engine string) {
		for _, tc := range []struct {
			name             string
			h2Client, h2Back bool
		}{
			{"http1 to http1", false, false},
			{"h2c to http1", true, false},
			{"http1 to h2c", false, true},
			{"h2c to h2c", true, true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				testTracing(t, engine, tc.h2Client, tc.h2Back)
			})
		}
	})
}

func testTracing(t *testing.T, engine string, h2Client, h2Back bool) {
	col, err := collector.Start(true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(col.Close)
	fb := startFlakyBackends(t, h2Back)
	cfg := yamlConfig(t, tracingConfig(col.Endpoint(), fb, h2Back, "1"), nil)
	setEngine(cfg, engine)
	log := newCountedLog()
	t.Cleanup(func() { log.Close() })
	s, base := startServer(t, cfg, Options{Recorder: log})
	client := clientFor(h2Client)
	proto := map[bool]string{false: "1.1", true: "2"}[h2Client]

	// A sampled caller; the request is retried once.
	const trace, caller = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	tracedGet(t, client, base, "sampled-1", "00-"+trace+"-"+caller+"-01")
	log.recordedN(t, 1)
	flush(t, s)
	server, clients := spansOf(col, trace)
	if server == nil || len(clients) != 2 {
		t.Fatalf("trace %s: got server span %v and %d client spans, want one and two", trace, server, len(clients))
	}
	if server.ParentSpanID != caller || server.Name != "GET app" || server.Service != "edge" ||
		server.Attributes["network.protocol.version"] != proto || server.Attributes["http.response.status_code"] != int64(200) {
		t.Errorf("server span: parent %s, name %q, service %q, attributes %v; want the caller's child GET app of edge, HTTP %s, 200",
			server.ParentSpanID, server.Name, server.Service, server.Attributes, proto)
	}
	parents := fb.parents("sampled-1")
	if len(parents) != 2 {
		t.Fatalf("the backends saw %d attempts, want 2", len(parents))
	}
	for i, c := range clients {
		if c.ParentSpanID != server.SpanID || c.Kind != 3 {
			t.Errorf("attempt %d: parent %s kind %v, want a client span, child of %s", i, c.ParentSpanID, c.Kind, server.SpanID)
		}
		if want := "00-" + trace + "-" + c.SpanID + "-01"; parents[i] != want {
			t.Errorf("attempt %d: the backend got traceparent %q, want %q (Helios's span)", i, parents[i], want)
		}
		if _, ok := c.Attributes["server.port"]; !ok {
			t.Errorf("attempt %d: no server.port in %v", i, c.Attributes)
		}
	}
	if clients[0].Attributes["http.response.status_code"] != int64(503) || !clients[0].Error ||
		clients[1].Attributes["http.request.resend_count"] != int64(1) || clients[1].Attributes["http.response.status_code"] != int64(200) {
		t.Errorf("attempts: got %v and %v, want 503 (an error), then the resend answered 200", clients[0].Attributes, clients[1].Attributes)
	}
	serverSpan := server.SpanID
	if ex := exemplars(t, s); !ex[trace] {
		t.Errorf("no duration bucket carries trace %s as its exemplar; got %v", trace, ex)
	}

	// A reload to ratio 0 changes sampling at once: a request without
	// context is not sampled, and its backend is told so.
	cfg2 := yamlConfig(t, tracingConfig(col.Endpoint(), fb, h2Back, "0"), nil)
	setEngine(cfg2, engine)
	cfg2.Listeners[0].Address = s.Addr("web").String()
	cfg2.Admin.Address = s.AdminAddr().String()
	if err := s.Reload(cfg2); err != nil {
		t.Fatal(err)
	}
	before := col.Received()
	tracedGet(t, client, base, "unsampled-1", "")
	unsampled := fb.parents("unsampled-1")

	// The caller's decision still counts (parent_based).
	const trace2 = "1af7651916cd43dd8448eb211c80319c"
	tracedGet(t, client, base, "sampled-2", "00-"+trace2+"-"+caller+"-01")
	log.recordedN(t, 3)
	flush(t, s)
	if server, clients := spansOf(col, trace2); server == nil || len(clients) != 2 {
		t.Errorf("parent-based at ratio 0: got server span %v and %d client spans, want the trace recorded", server, len(clients))
	}
	if got := col.Received() - before; got != 3 {
		t.Errorf("after the reload: got %d spans, want 3 (the caller-sampled request's only)", got)
	}

	// The access log, written out: the same trace ids, the timings.
	lines := byRequestID(log.lines(t))
	line := lines["sampled-1"]
	if line["trace_id"] != trace || line["span_id"] != serverSpan || line["sampled"] != true || line["attempts"] != 2.0 {
		t.Errorf("access log: trace_id %v span_id %v sampled %v attempts %v, want %s %s true 2", line["trace_id"], line["span_id"], line["sampled"], line["attempts"], trace, serverSpan)
	}
	for _, k := range []string{"queue_time", "connect_time", "first_byte_time"} {
		if _, ok := line[k].(float64); !ok {
			t.Errorf("access log: %s is %v, want a number", k, line[k])
		}
	}
	line = lines["unsampled-1"]
	id, _ := line["trace_id"].(string)
	if line["sampled"] != false || len(id) != 32 || id == trace {
		t.Errorf("access log after the reload: trace_id %v sampled %v, want a new trace, not sampled", line["trace_id"], line["sampled"])
	}
	if len(unsampled) != 2 {
		t.Errorf("the backends saw %d attempts of the request not sampled, want 2", len(unsampled))
	}
	for i, p := range unsampled {
		if !strings.HasPrefix(p, "00-"+id+"-") || !strings.HasSuffix(p, "-00") {
			t.Errorf("attempt %d: the backend got traceparent %q, want trace %s, not sampled", i, p, id)
		}
	}
	if line := lines["sampled-2"]; line["trace_id"] != trace2 || line["sampled"] != true {
		t.Errorf("access log: trace_id %v sampled %v, want %s true", line["trace_id"], line["sampled"], trace2)
	}
}

// TestTracingReloadMovesTheExporter: a reload that names another
// collector (and headers) sends the next spans there, with the headers,
// and one that drops the tracing block stops tracing: no span, and the
// backend gets no context from Helios.
func TestTracingReloadMovesTheExporter(t *testing.T) {
	colA, err := collector.Start(true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(colA.Close)
	colB, err := collector.Start(true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(colB.Close)
	fb := startFlakyBackends(t, false)
	log := newCountedLog()
	t.Cleanup(func() { log.Close() })
	s, base := startServer(t, yamlConfig(t, tracingConfig(colA.Endpoint(), fb, false, "1"), nil), Options{Recorder: log})
	reload := func(yaml string) {
		t.Helper()
		cfg := yamlConfig(t, yaml, nil)
		cfg.Listeners[0].Address = s.Addr("web").String()
		cfg.Admin.Address = s.AdminAddr().String()
		if err := s.Reload(cfg); err != nil {
			t.Fatal(err)
		}
	}
	c := clientFor(false)
	tracedGet(t, c, base, "to-a", "")
	log.recordedN(t, 1)
	flush(t, s)

	reload(strings.Replace(tracingConfig(colB.Endpoint(), fb, false, "1"), "service_name: edge}", "service_name: edge, headers: {x-api-key: sesame}}", 1))
	tracedGet(t, c, base, "to-b", "")
	log.recordedN(t, 2)
	flush(t, s)
	if a, b := colA.Received(), colB.Received(); a != 3 || b != 3 {
		t.Errorf("got %d spans at the first collector and %d at the second, want 3 each", a, b)
	}
	if hs := colB.Headers(); len(hs) == 0 || len(hs[0].Get("x-api-key")) == 0 || hs[0].Get("x-api-key")[0] != "sesame" {
		t.Errorf("the second collector got metadata %v, want x-api-key: sesame", hs)
	}

	yaml := tracingConfig(colB.Endpoint(), fb, false, "1")
	reload(yaml[:strings.Index(yaml, "tracing:")])
	tracedGet(t, c, base, "untraced", "")
	log.recordedN(t, 3)
	if s.spans.Current() != nil {
		t.Error("an exporter is still in use without a tracing block")
	}
	for i, p := range fb.parents("untraced") {
		if p != "" {
			t.Errorf("attempt %d: the backend got traceparent %q with tracing off, want none", i, p)
		}
	}
	if b := colB.Received(); b != 3 {
		t.Errorf("got %d spans at the second collector, want still 3", b)
	}
}
