package proxy

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"testing"

	"github.com/helios-lb/helios/internal/route"
	"github.com/helios-lb/helios/internal/upstream"
	"github.com/helios-lb/helios/internal/wire"
)

// fakeExchange is a request as the pipeline sees it.
type fakeExchange struct {
	method      string
	body        bool
	bodyStarted bool
	status      int
	respBody    string
}

var (
	fakeHost = []byte("example.test")
	fakePath = []byte("/")
	methods  = map[string][]byte{"GET": []byte("GET"), "POST": []byte("POST"), "PUT": []byte("PUT")}
)

func (e *fakeExchange) Method() []byte         { return methods[e.method] }
func (e *fakeExchange) Host() []byte           { return fakeHost }
func (e *fakeExchange) Path() []byte           { return fakePath }
func (e *fakeExchange) ClientAddr() netip.Addr { return netip.MustParseAddr("192.0.2.1") }
func (e *fakeExchange) HasBody() bool          { return e.body }
func (e *fakeExchange) BodyStarted() bool      { return e.bodyStarted }
func (e *fakeExchange) Respond(status int, _ []byte, body []byte) error {
	e.status, e.respBody = status, string(body)
	return nil
}
func (e *fakeExchange) ServeHTTP(http.Handler) (int, int64) { return 0, 0 }

// fakeTransport answers each backend from a script: an error or a status.
type fakeTransport struct {
	script map[string]any // addr -> error or int status
	tried  []string
	// sendsBody: a RoundTrip that gets as far as the backend marks the
	// request body as sent (it streamed).
	sendsBody bool
}

type fakeResponse struct {
	ex        *fakeExchange
	status    int
	discarded *bool
}

func (r *fakeResponse) StatusCode() int { return r.status }
func (r *fakeResponse) Send() (int64, error) {
	r.ex.status = r.status
	return 0, nil
}
func (r *fakeResponse) Discard() { *r.discarded = true }

func (t *fakeTransport) RoundTrip(ex wire.Exchange, b *upstream.Backend) (wire.Response, error) {
	t.tried = append(t.tried, b.Addr)
	fe := ex.(*fakeExchange)
	switch v := t.script[b.Addr].(type) {
	case error:
		if t.sendsBody && !errors.Is(v, wire.ErrConnect) && fe.body {
			fe.bodyStarted = true
		}
		return nil, v
	case int:
		if t.sendsBody && fe.body {
			fe.bodyStarted = true
		}
		var d bool
		return &fakeResponse{ex: fe, status: v, discarded: &d}, nil
	}
	panic("no script for " + b.Addr)
}
func (t *fakeTransport) Close() {}

// firstAvailable picks backends in order: deterministic retries.
type firstAvailable []*upstream.Backend

func (p firstAvailable) Pick(k upstream.Key) *upstream.Backend {
	for _, b := range p {
		if b.Usable(k) {
			return b
		}
	}
	return nil
}

func pipelineFor(t *testing.T, tr *fakeTransport, policy RetryPolicy, budget *Budget) (*Pipeline, *Upstream) {
	t.Helper()
	var bs []*upstream.Backend
	for i := 0; i < 3; i++ {
		bs = append(bs, &upstream.Backend{State: upstream.NewState(nil), Addr: fmt.Sprintf("b%d", i+1), Weight: 1, Index: i})
	}
	up := &Upstream{Name: "app", Backends: bs, Picker: firstAvailable(bs), Transport: tr, Retry: policy, Budget: budget, Stats: &UpstreamStats{}}
	tab, err := route.New([]route.Entry[*Route]{{Name: "app", Value: &Route{Name: "app", Upstream: up}}})
	if err != nil {
		t.Fatal(err)
	}
	return New(&Graph{Routes: tab, Upstreams: []*Upstream{up}}), up
}

func defaultPolicy() RetryPolicy {
	p := RetryPolicy{Attempts: 2, OnConnectError: true, IdempotentOnly: true}
	for _, s := range []int{502, 503, 504} {
		p.Statuses.Add(s)
	}
	return p
}

func TestRetryRules(t *testing.T) {
	refused := fmt.Errorf("%w: dial: connection refused", wire.ErrConnect)
	timeout := fmt.Errorf("%w: read: i/o timeout", wire.ErrTimeout)
	tests := []struct {
		name       string
		method     string
		body       bool
		sendsBody  bool
		script     map[string]any
		policy     func(*RetryPolicy)
		wantTried  string
		wantStatus int
	}{
		{"GET retried on 503", "GET", false, false, map[string]any{"b1": 503, "b2": 200}, nil, "[b1 b2]", 200},
		{"POST not retried on 503", "POST", true, false, map[string]any{"b1": 503, "b2": 200}, nil, "[b1]", 503},
		{"POST retried on 503 when idempotent_only is off", "POST", false, false, map[string]any{"b1": 503, "b2": 200},
			func(p *RetryPolicy) { p.IdempotentOnly = false }, "[b1 b2]", 200},
		{"GET retried on a refused connection", "GET", false, false, map[string]any{"b1": refused, "b2": 200}, nil, "[b1 b2]", 200},
		{"POST retried on a refused connection", "POST", true, true, map[string]any{"b1": refused, "b2": 200}, nil, "[b1 b2]", 200},
		{"a body already sent is not replayed", "PUT", true, true, map[string]any{"b1": 503, "b2": 200}, nil, "[b1]", 503},
		{"attempts bound retries", "GET", false, false, map[string]any{"b1": refused, "b2": refused, "b3": 200},
			func(p *RetryPolicy) { p.Attempts = 1 }, "[b1 b2]", 502},
		{"no backend left: the last answer is passed on", "GET", false, false, map[string]any{"b1": 503, "b2": 503, "b3": 503},
			func(p *RetryPolicy) { p.Attempts = 5 }, "[b1 b2 b3]", 503},
		{"all refused: 502", "GET", false, false, map[string]any{"b1": refused, "b2": refused, "b3": refused}, nil, "[b1 b2 b3]", 502},
		{"timeout: 504, not retried unless listed", "GET", false, false, map[string]any{"b1": timeout, "b2": 200}, nil, "[b1]", 504},
		{"timeout retried when listed", "GET", false, false, map[string]any{"b1": timeout, "b2": 200},
			func(p *RetryPolicy) { p.OnTimeout = true }, "[b1 b2]", 200},
		{"unlisted status passed on", "GET", false, false, map[string]any{"b1": 500, "b2": 200}, nil, "[b1]", 500},
		{"GET retried when the backend breaks before answering", "GET", false, false,
			map[string]any{"b1": fmt.Errorf("%w: read: connection reset by peer", wire.ErrBackend), "b2": 200},
			func(p *RetryPolicy) { p.OnBackendError = true }, "[b1 b2]", 200},
		{"POST not retried when the backend breaks before answering", "POST", false, false,
			map[string]any{"b1": fmt.Errorf("%w: read: connection reset by peer", wire.ErrBackend), "b2": 200},
			func(p *RetryPolicy) { p.OnBackendError = true; p.IdempotentOnly = false }, "[b1]", 502},
		{"client gone: no retry", "GET", false, false, map[string]any{"b1": fmt.Errorf("%w: reset", wire.ErrClientGone), "b2": 200}, nil, "[b1]", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := &fakeTransport{script: tt.script, sendsBody: tt.sendsBody}
			pol := defaultPolicy()
			if tt.policy != nil {
				tt.policy(&pol)
			}
			p, _ := pipelineFor(t, tr, pol, nil)
			ex := &fakeExchange{method: tt.method, body: tt.body}
			p.ServeExchange(ex)
			if got := fmt.Sprint(tr.tried); got != tt.wantTried {
				t.Errorf("got backends tried %s, want %s", got, tt.wantTried)
			}
			if ex.status != tt.wantStatus {
				t.Errorf("got status %d, want %d", ex.status, tt.wantStatus)
			}
		})
	}
}

func TestRetryBudgetExhaustion(t *testing.T) {
	b := NewBudget(0.2, 3)
	for i := 0; i < 3; i++ {
		if !b.Spend() {
			t.Fatalf("retry %d refused from a full budget of 3", i+1)
		}
	}
	if b.Spend() {
		t.Fatal("a fourth retry was allowed with a burst of 3 and no requests since")
	}
	// Five requests earn one retry at ratio 0.2, four do not.
	for i := 0; i < 4; i++ {
		b.Earn()
	}
	if b.Spend() {
		t.Fatal("4 requests earned a retry at ratio 0.2")
	}
	b.Earn()
	if !b.Spend() {
		t.Fatal("5 requests did not earn a retry at ratio 0.2")
	}
	// Earnings stop at the burst.
	for i := 0; i < 1000; i++ {
		b.Earn()
	}
	if got := b.Tokens(); got != 3 {
		t.Errorf("got %d tokens after 1000 requests, want the burst, 3", got)
	}
}

func TestBudgetBoundsStatusRetriesInThePipeline(t *testing.T) {
	tr := &fakeTransport{script: map[string]any{"b1": 503, "b2": 200, "b3": 200}}
	budget := NewBudget(0.2, 2)
	p, up := pipelineFor(t, tr, defaultPolicy(), budget)
	retried := 0
	for i := 0; i < 20; i++ {
		tr.tried = nil
		ex := &fakeExchange{method: "GET"}
		p.ServeExchange(ex)
		if len(tr.tried) > 1 {
			retried++
		}
	}
	// Burst 2, then 20 requests at 0.2 earn 4 more: at most 6 retries.
	if retried > 6 || retried < 5 {
		t.Errorf("got %d retried requests of 20, want 5 or 6 (burst 2 + 20*0.2)", retried)
	}
	if got := up.Stats.Retries.Load(); got != uint64(retried) {
		t.Errorf("got retries counter %d, want %d", got, retried)
	}
}

func TestNoBackendIs503AtOnce(t *testing.T) {
	tr := &fakeTransport{script: map[string]any{}}
	p, up := pipelineFor(t, tr, defaultPolicy(), nil)
	for _, b := range up.Backends {
		b.SetDown(true)
	}
	ex := &fakeExchange{method: "GET"}
	p.ServeExchange(ex)
	if ex.status != 503 || len(tr.tried) != 0 {
		t.Errorf("got status %d after trying %v, want 503 without trying", ex.status, tr.tried)
	}
	if up.Stats.NoBackend.Load() != 1 {
		t.Errorf("got NoBackend %d, want 1", up.Stats.NoBackend.Load())
	}
}

func TestPipelineAllocatesNothing(t *testing.T) {
	tr := &fakeTransport{script: map[string]any{"b1": 200, "b2": 200, "b3": 200}}
	p, _ := pipelineFor(t, tr, defaultPolicy(), NewBudget(0.2, 10))
	ex := &fakeExchange{method: "GET"}
	resp := &fakeResponse{ex: ex, status: 200, discarded: new(bool)}
	fixed := &staticTransport{resp: resp}
	p.Graph().Upstreams[0].Transport = fixed
	allocs := testing.AllocsPerRun(1000, func() { p.ServeExchange(ex) })
	if allocs != 0 {
		t.Errorf("got %v allocations per request through the pipeline, want 0", allocs)
	}
}

// staticTransport returns the same response every time (no allocation).
type staticTransport struct{ resp *fakeResponse }

func (s *staticTransport) RoundTrip(wire.Exchange, *upstream.Backend) (wire.Response, error) {
	return s.resp, nil
}
func (s *staticTransport) Close() {}

func BenchmarkPipeline(b *testing.B) {
	tr := &fakeTransport{}
	p, up := pipelineFor(&testing.T{}, tr, defaultPolicy(), NewBudget(0.2, 10))
	ex := &fakeExchange{method: "GET"}
	up.Transport = &staticTransport{resp: &fakeResponse{ex: ex, status: 200, discarded: new(bool)}}
	b.ReportAllocs()
	for b.Loop() {
		p.ServeExchange(ex)
	}
}
