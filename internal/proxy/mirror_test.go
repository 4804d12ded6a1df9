package proxy

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/route"
	"github.com/helios-lb/helios/internal/upstream"
	"github.com/helios-lb/helios/internal/wire"
)

// sentCopy is what a fake Mirrorer saw of a copy, copied out.
type sentCopy struct {
	backend, method, authority, target, body string
	fields                                   []string
	timeout                                  time.Duration
}

// fakeMirrorer records copies; while hold is set it keeps them, not done,
// until release.
type fakeMirrorer struct {
	mu   sync.Mutex
	sent []sentCopy
	hold bool
	held []*wire.MirrorRequest
}

func (fm *fakeMirrorer) Mirror(r *wire.MirrorRequest) {
	c := sentCopy{backend: r.Backend.Addr, method: string(r.Method), authority: string(r.Authority),
		target: string(r.Target), body: string(r.Body), timeout: r.Timeout}
	for _, f := range r.Header.Fields {
		c.fields = append(c.fields, string(f.Name)+": "+string(f.Value))
	}
	fm.mu.Lock()
	fm.sent = append(fm.sent, c)
	hold := fm.hold
	if hold {
		fm.held = append(fm.held, r)
	}
	fm.mu.Unlock()
	if !hold {
		r.Done(r, 200, nil)
	}
}

// release finishes the copies held, the first with err.
func (fm *fakeMirrorer) release(err error) {
	fm.mu.Lock()
	held := fm.held
	fm.held, fm.hold = nil, false
	fm.mu.Unlock()
	for i, r := range held {
		if i == 0 && err != nil {
			r.Done(r, 0, err)
			continue
		}
		r.Done(r, 200, nil)
	}
}

// mirrorPipeline returns a pipeline whose route forwards to app (three
// backends) and mirrors to shadow (two backends, s1 and s2).
func mirrorPipeline(t *testing.T, perMillion uint64, maxInflight int64) (*Pipeline, *Mirror, *fakeMirrorer) {
	t.Helper()
	p, up := pipelineFor(t, &fakeTransport{}, defaultPolicy(), nil)
	var sbs []*upstream.Backend
	for i := range 2 {
		sbs = append(sbs, &upstream.Backend{State: upstream.NewState(nil), Addr: fmt.Sprintf("s%d", i+1), Weight: 1, Index: i})
	}
	shadow := &Upstream{Name: "shadow", Backends: sbs, Picker: firstAvailable(sbs), Transport: &wire.Transport{Name: "shadow"}, Stats: &UpstreamStats{}}
	fm := &fakeMirrorer{}
	r := rand.New(rand.NewPCG(1, 2))
	var mu sync.Mutex
	m := &Mirror{Upstream: shadow, PerMillion: perMillion, MaxInflight: maxInflight, Timeout: 3 * time.Second, Sender: fm,
		Rand: func() uint64 { mu.Lock(); defer mu.Unlock(); return r.Uint64() }, Stats: &MirrorStats{}}
	tab, err := route.New([]route.Entry[*Route]{{Name: "app", Value: &Route{Name: "app", Upstream: up, Mirror: m, Upgrades: [][]byte{[]byte("websocket")}}}})
	if err != nil {
		t.Fatal(err)
	}
	p.Swap(&Graph{Routes: tab, Upstreams: []*Upstream{up, shadow}})
	return p, m, fm
}

// mirroredExchange is a POST with a body held in memory, a hop-by-hop
// field and an X-Forwarded-For from an earlier proxy.
func mirroredExchange(body string) *fakeExchange {
	ex := &fakeExchange{method: "POST", body: true, length: int64(len(body)), held: []byte(body)}
	ex.req.Method = []byte("POST")
	ex.req.Authority = []byte("example.test")
	ex.req.Target = []byte("/orders?id=7")
	ex.req.Path = []byte("/orders")
	ex.req.ContentLength = int64(len(body))
	ex.req.Header.Add([]byte("Content-Type"), []byte("application/json"))
	ex.req.Header.Add([]byte("Connection"), []byte("keep-alive"))
	ex.req.Header.Add([]byte("Content-Length"), []byte(fmt.Sprint(len(body))))
	ex.req.Header.Add([]byte("X-Forwarded-For"), []byte("203.0.113.9"))
	return ex
}

// TestMirrorCopiesTheRequest checks a copy: the request as forwarded
// (hop-by-hop and framing fields dropped, X-Forwarded-* added), its
// body, a backend of the shadow, the timeout; the client's request is
// forwarded as ever.
func TestMirrorCopiesTheRequest(t *testing.T) {
	p, m, fm := mirrorPipeline(t, million, 10)
	tr := &fakeTransport{script: map[string]any{"b1": 200}}
	ex := mirroredExchange(`{"item":1}`)
	serve(p.NewFlow(), tr, ex)
	if ex.status != 200 || fmt.Sprint(tr.tried) != "[b1]" {
		t.Errorf("the client's request: got %d from %v, want 200 from [b1]", ex.status, tr.tried)
	}
	if len(fm.sent) != 1 {
		t.Fatalf("got %d copies, want 1", len(fm.sent))
	}
	got := fm.sent[0]
	// The copy carries the request's id, so the shadow's logs can be
	// matched with the client's request.
	for i, f := range got.fields {
		if id, ok := strings.CutPrefix(f, "X-Request-Id: "); ok && len(id) == 32 {
			got.fields[i] = "X-Request-Id: ID"
		}
	}
	want := sentCopy{backend: "s1", method: "POST", authority: "example.test", target: "/orders?id=7", body: `{"item":1}`,
		// The client's own X-Forwarded-For never goes on (issue 20): the
		// copy names the client the listener found.
		fields:  []string{"Content-Type: application/json", "X-Request-Id: ID", "X-Forwarded-For: 192.0.2.1", "X-Forwarded-Proto: http", "X-Forwarded-Host: example.test"},
		timeout: 3 * time.Second}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got copy\n%+v\nwant\n%+v", got, want)
	}
	if m.Stats.Answered.Load() != 1 || m.Stats.Inflight() != 0 {
		t.Errorf("got answered %d, in flight %d; want 1, 0", m.Stats.Answered.Load(), m.Stats.Inflight())
	}
	if b := m.Upstream.Backends[0]; b.Requests() != 1 || b.Inflight() != 0 {
		t.Errorf("shadow backend s1: got %d requests, %d in flight; want 1, 0", b.Requests(), b.Inflight())
	}
	// Reused for the next copy: nothing of the first is left.
	ex2 := mirroredExchange("")
	ex2.method, ex2.req.Method, ex2.held = "GET", []byte("GET"), nil
	ex2.req.Target = []byte("/")
	serve(p.NewFlow(), tr, ex2)
	if got := fm.sent[1]; got.method != "GET" || got.target != "/" || got.body != "" || len(got.fields) != 5 {
		t.Errorf("second copy: got %+v, want GET / without a body, 5 fields", got)
	}
}

// TestMirrorShare checks that percent 10 copies 10% ±1% of 20,000
// requests, and that 0 copies none.
func TestMirrorShare(t *testing.T) {
	for _, tt := range []struct {
		perMillion uint64
		lo, hi     int
	}{{100_000, 1800, 2200}, {0, 0, 0}} {
		p, _, fm := mirrorPipeline(t, tt.perMillion, 10)
		for range 20000 {
			serve(p.NewFlow(), okTransport{}, mirroredExchange("x"))
		}
		if n := len(fm.sent); n < tt.lo || n > tt.hi {
			t.Errorf("per million %d: got %d copies of 20000, want %d-%d", tt.perMillion, n, tt.lo, tt.hi)
		}
	}
}

// TestMirrorIsShedFirst holds copies in flight: past max_inflight they
// are dropped and counted, the client's requests going on; once copies
// end, copying resumes. A copy that failed counts as failed, and against
// its backend.
func TestMirrorIsShedFirst(t *testing.T) {
	p, m, fm := mirrorPipeline(t, million, 3)
	fm.hold = true
	for i := range 10 {
		ex := mirroredExchange("x")
		serve(p.NewFlow(), okTransport{}, ex)
		if ex.status != 200 {
			t.Fatalf("request %d: got status %d, want 200", i, ex.status)
		}
	}
	if len(fm.sent) != 3 || m.Stats.Busy.Load() != 7 || m.Stats.Inflight() != 3 {
		t.Errorf("got %d copies sent, %d dropped busy, %d in flight; want 3, 7, 3", len(fm.sent), m.Stats.Busy.Load(), m.Stats.Inflight())
	}
	fm.release(fmt.Errorf("%w: shadow reset", wire.ErrBackend))
	if m.Stats.Inflight() != 0 || m.Stats.Failed.Load() != 1 || m.Stats.Answered.Load() != 2 {
		t.Errorf("released: got %d in flight, %d failed, %d answered; want 0, 1, 2", m.Stats.Inflight(), m.Stats.Failed.Load(), m.Stats.Answered.Load())
	}
	if got := m.Upstream.Backends[0].Failures(); got != 1 {
		t.Errorf("shadow backend failures: got %d, want 1", got)
	}
	serve(p.NewFlow(), okTransport{}, mirroredExchange("x"))
	if len(fm.sent) != 4 {
		t.Errorf("after the release: got %d copies, want 4", len(fm.sent))
	}
}

// TestMirrorNotCopied checks the requests that are not copied, and how
// each is counted: a body the engine does not hold, an upgrade (not
// counted), a shadow without a backend.
func TestMirrorNotCopied(t *testing.T) {
	p, m, fm := mirrorPipeline(t, million, 10)
	ex := mirroredExchange("x")
	ex.notHeld = true
	serve(p.NewFlow(), okTransport{}, ex)
	up := mirroredExchange("")
	up.method, up.req.Method, up.upgrade = "GET", []byte("GET"), "websocket"
	serve(p.NewFlow(), okTransport{}, up)
	for _, b := range m.Upstream.Backends {
		b.SetDown(true)
	}
	serve(p.NewFlow(), okTransport{}, mirroredExchange("x"))
	if len(fm.sent) != 0 || m.Stats.Unbuffered.Load() != 1 || m.Stats.NoBackend.Load() != 1 || m.Stats.Inflight() != 0 {
		t.Errorf("got %d sent, %d unbuffered, %d without a backend, %d in flight; want 0, 1, 1, 0",
			len(fm.sent), m.Stats.Unbuffered.Load(), m.Stats.NoBackend.Load(), m.Stats.Inflight())
	}
}

// TestMirrorDrawAllocatesNothing checks that a request of a mirrored
// route that is not drawn for a copy allocates nothing.
func TestMirrorDrawAllocatesNothing(t *testing.T) {
	p, _, fm := mirrorPipeline(t, 0, 10)
	f := p.NewFlow()
	ex := &fakeExchange{method: "GET"}
	if allocs := testing.AllocsPerRun(1000, func() { serve(f, okTransport{}, ex) }); allocs != 0 {
		t.Errorf("got %v allocations per request, want 0", allocs)
	}
	if len(fm.sent) != 0 {
		t.Errorf("got %d copies at 0%%, want 0", len(fm.sent))
	}
}

// doneMirrorer finishes every copy at once, allocating nothing.
type doneMirrorer struct{}

func (doneMirrorer) Mirror(r *wire.MirrorRequest) { r.Done(r, 200, nil) }

// TestMirrorCopyAllocatesNothing checks that making a copy on the loop
// (head, fields and body into a buffer reused from copy to copy)
// allocates nothing once warm.
func TestMirrorCopyAllocatesNothing(t *testing.T) {
	p, m, _ := mirrorPipeline(t, million, 10)
	m.Sender = doneMirrorer{}
	f := p.NewFlow()
	ex := mirroredExchange(`{"item":1}`)
	n := len(ex.req.Header.Fields)
	if allocs := testing.AllocsPerRun(1000, func() {
		ex.req.Header.Fields = ex.req.Header.Fields[:n] // the request id the pipeline adds
		serve(f, okTransport{}, ex)
	}); allocs != 0 && !raceEnabled {
		t.Errorf("got %v allocations per copied request, want 0", allocs)
	}
	if m.Stats.Answered.Load() < 1000 {
		t.Errorf("got %d copies answered, want at least 1000", m.Stats.Answered.Load())
	}
}
