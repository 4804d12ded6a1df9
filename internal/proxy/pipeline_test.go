package proxy

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/httpmsg"
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
	respHeader  string
	// upgrade is the Upgrade header of a request asking for one;
	// upgradeRefused records RefuseUpgrade.
	upgrade        string
	upgradeRefused bool
	// length is the body's declared length (when body is set); limit
	// and buffered record LimitBody and BufferBody, which returns
	// bufferErr.
	length    int64
	limit     int64
	buffered  *wire.BufferLimits
	bufferErr error
	// req is the head the pipeline may edit; arena backs Alloc, from
	// arenaOff on, until begin starts it over; resp, when set, is the
	// backend's answer's head (Response).
	req      httpmsg.Request
	arena    []byte
	arenaOff int
	resp     *httpmsg.Response
	// timing is what Timing reports.
	timing wire.Timing
	// held is the body BodyHeld returns, unless notHeld says the
	// engine does not hold it.
	held    []byte
	notHeld bool
	// hdr, path, query and addr, when set, are the request's header
	// fields, path, query and client address (for request keys).
	hdr   []field
	path  []byte
	query []byte
	addr  netip.Addr
	// listener is the listener's policy; nil: none.
	listener *wire.Listener
	// names are hdr's names as bytes, for the head (made once).
	names [][]byte
	wakes atomic.Int32
}

// field is a request header field.
type field struct {
	name  string
	value []byte
}

var (
	fakeHost   = []byte("example.test")
	fakePath   = []byte("/")
	fakeProto  = []byte("HTTP/1.1")
	fakeAddr   = netip.MustParseAddr("192.0.2.1")
	fakeScheme = []byte("http")
	methods    = map[string][]byte{"GET": []byte("GET"), "POST": []byte("POST"), "PUT": []byte("PUT"),
		"TRACE": []byte("TRACE"), "CONNECT": []byte("CONNECT")}
)

func (e *fakeExchange) Method() []byte { return methods[e.method] }
func (e *fakeExchange) Host() []byte   { return fakeHost }
func (e *fakeExchange) Path() []byte {
	if e.path != nil {
		return e.path
	}
	return fakePath
}
func (e *fakeExchange) ClientAddr() netip.Addr {
	if e.addr.IsValid() {
		return e.addr
	}
	return fakeAddr
}
func (e *fakeExchange) HasBody() bool     { return e.body }
func (e *fakeExchange) BodyStarted() bool { return e.bodyStarted }
func (e *fakeExchange) Upgrade() []byte {
	if e.upgrade == "" || e.upgradeRefused {
		return nil
	}
	return []byte(e.upgrade)
}
func (e *fakeExchange) RefuseUpgrade() { e.upgradeRefused = true }
func (e *fakeExchange) BodyLength() int64 {
	if e.body {
		return e.length
	}
	return 0
}
func (e *fakeExchange) LimitBody(max int64) { e.limit = max }
func (e *fakeExchange) BodyRead() int64     { return 0 }

// BufferBody stands in for an engine's request buffering.
func (e *fakeExchange) BufferBody(lim wire.BufferLimits) error {
	e.buffered = &lim
	return e.bufferErr
}
func (e *fakeExchange) Respond(status int, header *httpmsg.Header, body []byte) error {
	e.status, e.respBody = status, string(body)
	e.respHeader = ""
	if header != nil {
		for _, f := range header.Fields {
			e.respHeader += string(f.Name) + ": " + string(f.Value) + "\r\n"
		}
	}
	return nil
}
func (e *fakeExchange) Query() []byte      { return e.query }
func (e *fakeExchange) Proto() []byte      { return fakeProto }
func (e *fakeExchange) TLSVersion() []byte { return nil }
func (e *fakeExchange) Header(name string) []byte {
	for _, f := range e.hdr {
		if strings.EqualFold(f.name, name) {
			return f.value
		}
	}
	return nil
}
func (e *fakeExchange) Listener() *wire.Listener { return e.listener }

// Waker ends a wait as an engine does, the next time serve asks for
// Resume; wakes counts the calls.
func (e *fakeExchange) Waker() func() {
	return func() { e.wakes.Add(1) }
}
func (e *fakeExchange) Request() *httpmsg.Request {
	if e.req.Method == nil {
		e.fillRequest(e.Method(), e.Host(), e.Path(), e.query)
	}
	return &e.req
}

// fillRequest sets the head as an engine's parser would.
func (e *fakeExchange) fillRequest(method, host, path, query []byte) {
	r := &e.req
	r.Method, r.Host, r.Authority, r.Path = method, host, host, path
	r.Target = path
	if len(query) > 0 {
		r.Target = append(append(append([]byte(nil), path...), '?'), query...)
		r.Path = r.Target[:len(path)]
	}
	r.Scheme = fakeScheme
	if len(r.Header.Fields) == 0 {
		if len(e.names) != len(e.hdr) {
			e.names = e.names[:0]
			for _, f := range e.hdr {
				e.names = append(e.names, []byte(f.name))
			}
		}
		for i, f := range e.hdr {
			r.Header.Add(e.names[i], f.value)
		}
	}
}
func (e *fakeExchange) Response() *httpmsg.Response { return e.resp }
func (e *fakeExchange) BodyHeld() ([]byte, bool)    { return e.held, !e.notHeld }

func (e *fakeExchange) Alloc(n int) []byte {
	if cap(e.arena)-e.arenaOff < n {
		e.arena, e.arenaOff = make([]byte, max(512, n)), 0
	}
	b := e.arena[e.arenaOff : e.arenaOff+n : e.arenaOff+n]
	e.arenaOff += n
	return b
}
func (e *fakeExchange) Timing() wire.Timing { return e.timing }

// begin makes the exchange ready for its next request, as an engine's
// is: a head of its own.
func (e *fakeExchange) begin() { e.req.Reset(); e.arenaOff = 0 }

// fakeTransport answers each backend from a script: an error or a status.
type fakeTransport struct {
	script map[string]any // addr -> error or int status
	tried  []string
	// sendsBody: a RoundTrip that gets as far as the backend marks the
	// request body as sent (it streamed).
	sendsBody bool
}

// attempt answers one attempt at b as the script says.
func (t *fakeTransport) attempt(fe *fakeExchange, b *upstream.Backend) (int, error) {
	t.tried = append(t.tried, b.Addr)
	switch v := t.script[b.Addr].(type) {
	case error:
		if t.sendsBody && !errors.Is(v, wire.ErrConnect) && fe.body {
			fe.bodyStarted = true
		}
		return 0, v
	case int:
		if t.sendsBody && fe.body {
			fe.bodyStarted = true
		}
		return v, nil
	}
	panic("no script for " + b.Addr)
}

// scripted stands in for the engine's forwarding: what each attempt gives.
type scripted interface {
	attempt(ex *fakeExchange, b *upstream.Backend) (status int, err error)
}

// serve drives one request through a flow the way an engine does, the
// attempts answered by s.
func serve(f wire.Flow, s scripted, ex *fakeExchange) {
	act := f.Begin(ex)
	if act == wire.ActBuffer {
		act = f.Buffered(ex.BufferBody(f.BufferLimits()))
	}
	status := 0
	for act == wire.ActForward || act == wire.ActWait {
		if act == wire.ActWait {
			act = f.Resume() // the engine waits f.Delay() first
			continue
		}
		_, b := f.Target()
		var err error
		status, err = s.attempt(ex, b)
		act = f.Forwarded(status, err)
	}
	switch act {
	case wire.ActRespond:
		st, header, body := f.Answer()
		err := ex.Respond(st, header, body)
		f.Sent(st, int64(len(body)), err)
	case wire.ActSend:
		ex.status = status
		f.Sent(status, 0, nil)
	}
	f.Finish()
}

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
	up := &Upstream{Name: "app", Backends: bs, Picker: firstAvailable(bs), Transport: &wire.Transport{Name: "app"}, Retry: policy, Budget: budget, Stats: &UpstreamStats{}}
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
			serve(p.NewFlow(), tr, ex)
			if got := fmt.Sprint(tr.tried); got != tt.wantTried {
				t.Errorf("got backends tried %s, want %s", got, tt.wantTried)
			}
			if ex.status != tt.wantStatus {
				t.Errorf("got status %d, want %d", ex.status, tt.wantStatus)
			}
		})
	}
}

func TestBudgetBoundsStatusRetriesInThePipeline(t *testing.T) {
	tr := &fakeTransport{script: map[string]any{"b1": 503, "b2": 200, "b3": 200}}
	budget := NewBudget(0.2, 0, time.Minute)
	p, up := pipelineFor(t, tr, defaultPolicy(), budget)
	retried := 0
	for i := 0; i < 20; i++ {
		tr.tried = nil
		ex := &fakeExchange{method: "GET"}
		serve(p.NewFlow(), tr, ex)
		if len(tr.tried) > 1 {
			retried++
		}
	}
	// No floor: 20 requests at 0.2 earn 4 retries.
	if retried != 4 {
		t.Errorf("got %d retried requests of 20, want 4 (20*0.2)", retried)
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
	serve(p.NewFlow(), tr, ex)
	if ex.status != 503 || len(tr.tried) != 0 {
		t.Errorf("got status %d after trying %v, want 503 without trying", ex.status, tr.tried)
	}
	if up.Stats.NoBackend.Load() != 1 {
		t.Errorf("got NoBackend %d, want 1", up.Stats.NoBackend.Load())
	}
}

func TestPipelineAllocatesNothing(t *testing.T) {
	tr := &fakeTransport{script: map[string]any{"b1": 200, "b2": 200, "b3": 200}}
	p, _ := pipelineFor(t, tr, defaultPolicy(), NewBudget(0.2, 10, time.Minute))
	ex := &fakeExchange{method: "GET"}
	f := p.NewFlow()
	allocs := testing.AllocsPerRun(1000, func() { serve(f, okTransport{}, ex) })
	if allocs != 0 {
		t.Errorf("got %v allocations per request through the pipeline, want 0", allocs)
	}
}

// okTransport answers 200 to every attempt (no allocation).
type okTransport struct{}

func (okTransport) attempt(*fakeExchange, *upstream.Backend) (int, error) { return 200, nil }

func BenchmarkPipeline(b *testing.B) {
	p, _ := pipelineFor(&testing.T{}, &fakeTransport{}, defaultPolicy(), NewBudget(0.2, 10, time.Minute))
	ex := &fakeExchange{method: "GET"}
	f := p.NewFlow()
	b.ReportAllocs()
	for b.Loop() {
		serve(f, okTransport{}, ex)
	}
}

// Issue 9, items 3 and 9: TRACE and CONNECT are refused unless a route
// allows them, and an upgrade is forwarded only for a protocol the route
// allows; anything else is served as a plain request.
func TestMethodAndUpgradePolicy(t *testing.T) {
	tests := []struct {
		name         string
		method       string
		upgrade      string
		route        func(*Route)
		wantStatus   int
		wantTried    bool
		wantRefused  bool // the upgrade was refused
		wantAllowHdr bool
	}{
		{name: "TRACE refused", method: "TRACE", wantStatus: 405, wantAllowHdr: true},
		{name: "CONNECT refused", method: "CONNECT", wantStatus: 405, wantAllowHdr: true},
		{name: "TRACE allowed by the route", method: "TRACE", route: func(r *Route) { r.AllowTrace = true }, wantStatus: 200, wantTried: true},
		{name: "CONNECT allowed by the route", method: "CONNECT", route: func(r *Route) { r.AllowConnect = true }, wantStatus: 200, wantTried: true},
		{name: "TRACE allowance is not CONNECT's", method: "CONNECT", route: func(r *Route) { r.AllowTrace = true }, wantStatus: 405, wantAllowHdr: true},
		{name: "websocket upgrade allowed", method: "GET", upgrade: "websocket", wantStatus: 200, wantTried: true},
		{name: "websocket with a version, any case", method: "GET", upgrade: "WebSocket/13", wantStatus: 200, wantTried: true},
		{name: "h2c upgrade refused", method: "GET", upgrade: "h2c", wantStatus: 200, wantTried: true, wantRefused: true},
		{name: "one refused protocol refuses the upgrade", method: "GET", upgrade: "websocket, h2c", wantStatus: 200, wantTried: true, wantRefused: true},
		{name: "no upgrades allowed", method: "GET", upgrade: "websocket", route: func(r *Route) { r.Upgrades = nil }, wantStatus: 200, wantTried: true, wantRefused: true},
		{name: "other protocol allowed by the route", method: "GET", upgrade: "example/2", route: func(r *Route) { r.Upgrades = [][]byte{[]byte("example")} },
			wantStatus: 200, wantTried: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := &fakeTransport{script: map[string]any{"b1": 200, "b2": 200, "b3": 200}}
			p, up := pipelineFor(t, tr, defaultPolicy(), nil)
			rt := &Route{Name: "app", Upstream: up, Upgrades: [][]byte{[]byte("websocket")}}
			if tt.route != nil {
				tt.route(rt)
			}
			tab, err := route.New([]route.Entry[*Route]{{Name: "app", Value: rt}})
			if err != nil {
				t.Fatal(err)
			}
			p.Swap(&Graph{Routes: tab, Upstreams: []*Upstream{up}})
			ex := &fakeExchange{method: tt.method, upgrade: tt.upgrade}
			serve(p.NewFlow(), tr, ex)
			if ex.status != tt.wantStatus {
				t.Errorf("got status %d, want %d", ex.status, tt.wantStatus)
			}
			if got := len(tr.tried) > 0; got != tt.wantTried {
				t.Errorf("got forwarded %v, want %v", got, tt.wantTried)
			}
			if ex.upgradeRefused != tt.wantRefused {
				t.Errorf("got upgrade refused %v, want %v", ex.upgradeRefused, tt.wantRefused)
			}
			if got := strings.Contains(ex.respHeader, "Allow: "); got != tt.wantAllowHdr {
				t.Errorf("got Allow header %v (%q), want %v", got, ex.respHeader, tt.wantAllowHdr)
			}
		})
	}
}
