package engine

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/helios-lb/helios/internal/balancer"
	"github.com/helios-lb/helios/internal/compress"
	"github.com/helios-lb/helios/internal/httpmsg"
	"github.com/helios-lb/helios/internal/netpoll"
	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/route"
	"github.com/helios-lb/helios/internal/tracing"
	"github.com/helios-lb/helios/internal/upstream"
	"github.com/helios-lb/helios/internal/wire"
)

// The engine's tests run the real pipeline (internal/proxy: routes, a
// round-robin picker, retries) in front of an Engine with one LoopListener
// on a loopback socket, as internal/server wires them, once per driver
// (run): the loops serve every request themselves, whichever poller says
// which sockets are ready.

// loopConfig describes a loopProxy. The zero value serves the routes
// below with no upstream backend and no timeouts.
type loopConfig struct {
	// backends are the upstream's backend addresses; several may repeat
	// one address (the loops pool by address).
	backends []string
	to       wire.TransportSettings
	opts     Options
	retry    proxy.RetryPolicy
	// fixed adds exact-path routes with fixed answers.
	fixed map[string]proxy.Fixed
	// loops is the number of event loops (0: 1).
	loops int
	// maxConns caps the admitted connections (0: no cap).
	maxConns int32
	// dialControl is given each backend socket the loops dial.
	dialControl func(fd int)
	// acceptControl is given each client socket the loops accept.
	acceptControl func(fd int)
	// lookup, when set, resolves backend host names, and they are
	// looked up again after a failure at once.
	lookup func(ctx context.Context, host string) ([]netip.Addr, error)
	// bare leaves out the counting guard and the recorder, which
	// allocate, for allocation counts and benchmarks.
	bare bool
	// poller is the readiness poller ("" the native one); run sets it.
	poller netpoll.Kind
	// panicPath makes the recorder panic for requests to this path.
	panicPath string
	// compress is the upstream route's compression (nil: none).
	compress *compress.Policy
	// transform, when set, gives the body transform of the answers the
	// pipeline sends (nil: none), asked as the flow returns ActSend.
	transform func(ex wire.Exchange) wire.BodyTransform
	// clientTLS is how the engine dials backends when to.TLS is set.
	clientTLS wire.ClientTLS
	// respBuf is the upstream route's response buffering (nil: off).
	respBuf *wire.ResponseBuffer
	// tracing is the pipeline's tracing policy (nil: off).
	tracing *tracing.Policy
	// upPolicy and upCond are the edge policy and match conditions of
	// the route to the upstream (nil: none).
	upPolicy *proxy.Policy
	upCond   *route.Cond
	// wrapPoller stands between each loop and its poller (nil: none).
	wrapPoller func(netpoll.Poller) netpoll.Poller
}

// pollers are the drivers every engine test runs on (epoll without
// batched reads: TestEpollAlone).
var pollers = []netpoll.Kind{netpoll.KindURing, netpoll.KindPortable}

// run runs f once per poller, as subtests named after them (the way
// net/http's tests run every test in every mode): one test body, every
// driver.
func run(t *testing.T, f func(t *testing.T, k netpoll.Kind)) {
	for _, k := range pollers {
		t.Run(string(k), func(t *testing.T) { f(t, k) })
	}
}

// Routes every loopProxy has besides cfg.fixed; everything else goes to
// the upstream.
var (
	fixedBody  = []byte("fixed")
	fixedRoute = proxy.Fixed{Status: 200, Header: *httpmsg.HeaderOf("X-Test", "1"), Body: fixedBody}
	// bigFixed is larger than socket buffers take at once.
	bigFixed = proxy.Fixed{Status: 200, Body: []byte(strings.Repeat("B", 1<<20))}
)

// loopProxy is an Engine serving the pipeline on a loopback listener.
type loopProxy struct {
	t        testing.TB
	eng      *Engine
	ll       *LoopListener
	pipe     *proxy.Pipeline
	up       *proxy.Upstream
	tr       *wire.Transport
	guard    *countingGuard
	addr     string
	fd       int
	admitted atomic.Int32
	released atomic.Int32
	refused  atomic.Int32
	// busyFlows counts requests begun and not finished.
	busyFlows atomic.Int32
	maxConns  int32
	recs      chan proxy.Record
	logs      chan string
	// panicPath makes Record panic (loopConfig.panicPath).
	panicPath string
	// transform is loopConfig.transform.
	transform func(ex wire.Exchange) wire.BodyTransform
}

// startLoopProxy starts a loopProxy that is shut down, checked and closed
// when the test ends.
func startLoopProxy(t testing.TB, k netpoll.Kind, cfg loopConfig) *loopProxy {
	cfg.poller = k
	t.Helper()
	p := &loopProxy{t: t, recs: make(chan proxy.Record, 4096), logs: make(chan string, 100), maxConns: cfg.maxConns, panicPath: cfg.panicPath,
		transform: cfg.transform}
	p.guard = &countingGuard{}
	var backends []*upstream.Backend
	for i, a := range cfg.backends {
		backends = append(backends, &upstream.Backend{State: upstream.NewState(nil), Addr: a, Weight: 1, Index: i})
	}
	picker, err := balancer.New(balancer.RoundRobin, backends, balancer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p.tr = &wire.Transport{Name: "up", Settings: cfg.to, TLS: cfg.clientTLS}
	p.up = &proxy.Upstream{Name: "up", Strategy: balancer.RoundRobin, Backends: backends, Picker: picker,
		Transport: p.tr, Retry: cfg.retry, Guard: p.guard, Stats: &proxy.UpstreamStats{}}
	var rec proxy.Recorder = p
	if cfg.bare {
		p.up.Guard, rec = nil, nil
	}
	var entries []route.Entry[*proxy.Route]
	for path, f := range cfg.fixed {
		f := f
		entries = append(entries, route.Entry[*proxy.Route]{Name: path, Path: path, Value: &proxy.Route{Name: path, Respond: &f}})
	}
	entries = append(entries,
		route.Entry[*proxy.Route]{Name: "fixed", PathPrefix: "/fixed/", Value: &proxy.Route{Name: "fixed", Respond: &fixedRoute}},
		route.Entry[*proxy.Route]{Name: "big", Path: "/big-fixed", Value: &proxy.Route{Name: "big", Respond: &bigFixed}},
		route.Entry[*proxy.Route]{Name: "local", PathPrefix: "/local/", Value: &proxy.Route{Name: "local", Local: &wire.Local{Name: "local", Handler: localHandler()}}},
		route.Entry[*proxy.Route]{Name: "up", Cond: cfg.upCond, Value: &proxy.Route{Name: "up", Upstream: p.up, Upgrades: [][]byte{[]byte("websocket")},
			ResponseBuffer: cfg.respBuf, Compress: cfg.compress, Policy: cfg.upPolicy}},
	)
	table, err := route.New(entries)
	if err != nil {
		t.Fatal(err)
	}
	p.pipe = proxy.New(&proxy.Graph{Routes: table, Upstreams: []*proxy.Upstream{p.up}, Recorder: rec, Tracing: cfg.tracing})
	var stepper wire.Stepper = p.pipe
	if !cfg.bare {
		stepper = &checkedStepper{p: p, s: p.pipe}
	}
	p.eng, err = NewEngine(stepper, EngineOptions{Loops: max(cfg.loops, 1), Poller: cfg.poller, wrapPoller: cfg.wrapPoller})
	if err != nil {
		t.Fatal(err)
	}
	p.eng.SetErrorLog(func(msg string, err error) { p.log(msg + ": " + err.Error()) })
	p.eng.dialControl = cfg.dialControl
	p.eng.acceptControl = cfg.acceptControl
	if cfg.lookup != nil {
		p.eng.lookup = cfg.lookup
		p.eng.resolveRetry = 0
	}
	p.fd, p.addr = listenLoopback(t)
	p.ll, err = p.eng.Attach("test", []int{p.fd}, cfg.opts, p.admit, p.release)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.stop)
	return p
}

func (p *loopProxy) admit() bool {
	if p.maxConns > 0 && p.admitted.Load()-p.released.Load() >= p.maxConns {
		p.refused.Add(1)
		return false
	}
	p.admitted.Add(1)
	return true
}

func (p *loopProxy) release() { p.released.Add(1) }

func (p *loopProxy) log(s string) {
	select {
	case p.logs <- s:
	default:
	}
}

// Record implements proxy.Recorder. It panics for a request to
// panicPath, as a buggy recorder might.
func (p *loopProxy) Record(ex wire.Exchange, r proxy.Record) {
	if p.panicPath != "" && string(ex.Path()) == p.panicPath {
		panic("recorder bug")
	}
	select {
	case p.recs <- r:
	default:
		p.t.Errorf("record dropped: %+v", r)
	}
}

// nextRec returns the next finished request's record.
func (p *loopProxy) nextRec(t testing.TB) proxy.Record {
	t.Helper()
	select {
	case r := <-p.recs:
		return r
	case <-time.After(testTimeout):
		t.Fatal("no request recorded")
		return proxy.Record{}
	}
}

// noRec checks no request was recorded within d.
func (p *loopProxy) noRec(t testing.TB, d time.Duration) {
	t.Helper()
	select {
	case r := <-p.recs:
		t.Errorf("got record %+v, want none", r)
	case <-time.After(d):
	}
}

// stop shuts the proxy down and checks nothing leaked: every admitted
// connection released, every admitted attempt finished exactly once, no
// request left in flight at a backend, and the loops' state consistent.
func (p *loopProxy) stop() {
	t := p.t
	p.checkInvariants()
	p.ll.Stop()
	p.closeListener()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := p.ll.Shutdown(ctx); err != nil {
		t.Errorf("loop listener shutdown: got %v, want nil", err)
	}
	p.checkInvariants()
	p.eng.Close()
	waitFor(t, "connections to be released", func() bool { return p.admitted.Load() == p.released.Load() })
	if n := p.guard.open.Load(); n != 0 {
		t.Errorf("got %d attempts not finished, want 0", n)
	}
	if n := p.busyFlows.Load(); n != 0 {
		t.Errorf("got %d requests not finished, want 0", n)
	}
	if n := p.guard.doubled.Load(); n != 0 {
		t.Errorf("got %d attempts finished twice, want 0", n)
	}
	for _, b := range p.up.Backends {
		if n := b.Inflight(); n != 0 {
			t.Errorf("backend %s: got %d requests in flight, want 0", b.Addr, n)
		}
	}
}

// closeListener closes the listening socket (once; after Stop).
func (p *loopProxy) closeListener() {
	if p.fd >= 0 {
		syscall.Close(p.fd)
		p.fd = -1
	}
}

// checkInvariants checks, on each loop, that the loop's bookkeeping is
// consistent: live connections registered under their fd, pooled backend
// connections idle and registered, HTTP/2 streams on live HTTP/2
// connections, HTTP/2 backend connections registered and in their pools,
// free stream state let go of, and no buffer both free and in use (or
// free twice), which would let two connections write into one. It holds
// at any time, exchanges in flight or not.
func (p *loopProxy) checkInvariants() {
	p.t.Helper()
	p.checkLoops(p.t, (*loop).invariantErrors)
}

// checkLoops fails t with what check finds wrong on each loop, run on
// the loop's goroutine.
func (p *loopProxy) checkLoops(t testing.TB, check func(l *loop) []string) {
	t.Helper()
	for _, l := range p.eng.loops {
		var errs []string
		l.do(func() { errs = check(l) })
		for _, e := range errs {
			t.Errorf("loop %d: %s", l.id, e)
		}
	}
}

func (l *loop) invariantErrors() []string {
	var errs []string
	if g := &l.gather; g.n > 0 || g.owner != nil {
		// A pump writes or drops what it gathered before it returns
		// (chunkgather.go).
		errs = append(errs, fmt.Sprintf("the chunk gather holds %d chunks between events", g.n))
	}
	bufs := map[*byte]string{}
	own := func(b []byte, who string) {
		if cap(b) == 0 {
			return
		}
		p := &b[:1][0]
		if prev, ok := bufs[p]; ok {
			errs = append(errs, fmt.Sprintf("buffer held by %s and %s", prev, who))
		}
		bufs[p] = who
	}
	// An exchange's buffers and backend connection: a connection's or
	// an HTTP/2 stream's.
	exchange := func(c *lconn, who string) {
		own(c.rd.buf, who+" read buffer")
		own(c.rd.home, who+" read buffer set aside")
		if c.rd.lent() {
			// A pump lends a body buffer and takes it back before it
			// returns (lconn.reqPiece).
			errs = append(errs, who+": holds a lent body buffer between events")
		}
		own(c.wr.buf, who+" write buffer")
		if c.rs != nil && c.state != lsSend {
			errs = append(errs, fmt.Sprintf("%s: holds a buffered answer in state %d", who, c.state))
		}
		if u := c.up; u != nil {
			own(u.rd.buf, who+" backend read buffer")
			if u.client != c {
				errs = append(errs, who+": its backend connection serves another client")
			}
		}
	}
	n := 0
	live := map[*lconn]bool{}
	for c := l.conns.head; c != nil; c = c.next {
		n++
		live[c] = true
		who := fmt.Sprintf("conn fd %d", c.fd)
		if c.state == lsClosed || c.fd < 0 {
			errs = append(errs, who+": closed but listed")
			continue
		}
		if c.fd >= len(l.targets) || l.targets[c.fd] != target(c) {
			errs = append(errs, who+": not registered")
		}
		if c.state == lsH2 && c.h2 == nil {
			errs = append(errs, who+": HTTP/2 without a session")
		}
		if c.h2 != nil {
			own(c.h2.rbuf, who+" HTTP/2 read buffer")
		}
		exchange(c, who)
	}
	for c := l.streams.head; c != nil; c = c.next {
		st := c.h2s
		who := "stream"
		if st != nil && st.s != nil {
			who = fmt.Sprintf("stream %d", st.s.ID())
		}
		switch {
		case st == nil:
			errs = append(errs, "a listed stream has no stream state")
			continue
		case c.state == lsClosed:
			errs = append(errs, who+": closed but listed")
		case !live[st.parent] || st.parent.state != lsH2:
			errs = append(errs, who+": its connection is not a live HTTP/2 connection of this loop")
		}
		exchange(c, who)
	}
	for _, st := range l.freeStreams {
		if st.parent != nil || st.s != nil {
			errs = append(errs, "a free stream state still points to its stream")
		}
	}
	errs = append(errs, l.h2upInvariantErrors(own)...)
	if int64(n) != l.nconns.Load() {
		errs = append(errs, fmt.Sprintf("%d connections listed, %d counted", n, l.nconns.Load()))
	}
	for _, c := range l.freeConns {
		if c.state != lsClosed || c.prev != nil || c.next != nil || l.conns.head == c {
			errs = append(errs, "a free connection is live")
		}
	}
	for key, pl := range l.pools {
		seen := map[*lupconn]bool{}
		for _, u := range pl.idle {
			who := "idle backend connection to " + key.addr
			if seen[u] {
				errs = append(errs, who+": pooled twice")
			}
			seen[u] = true
			if u.state != upIdle || u.client != nil || u.fd < 0 {
				errs = append(errs, fmt.Sprintf("%s: state %d, client %v, fd %d", who, u.state, u.client != nil, u.fd))
			} else if u.fd >= len(l.targets) || l.targets[u.fd] != target(u) {
				errs = append(errs, who+": not registered")
			}
			own(u.rd.buf, who)
		}
	}
	for i, b := range l.readBufs.bufs {
		own(b, fmt.Sprintf("read free list [%d]", i))
	}
	for i, b := range l.headBufs.bufs {
		own(b, fmt.Sprintf("head free list [%d]", i))
	}
	for i, b := range l.writeBufs.bufs {
		own(b, fmt.Sprintf("write free list [%d]", i))
	}
	for i, b := range l.bodyBufs.bufs {
		own(b, fmt.Sprintf("body free list [%d]", i))
	}
	for i, b := range l.h2ReadBufs.bufs {
		own(b, fmt.Sprintf("HTTP/2 read free list [%d]", i))
	}
	for i, b := range l.h2OutBufs.bufs {
		own(b, fmt.Sprintf("HTTP/2 output free list [%d]", i))
	}
	return errs
}

// idleBackendConns counts the loops' idle connections to the first
// backend's address.
func (p *loopProxy) idleBackendConns() int { return p.eng.IdleBackendConns(p.up.Backends[0].Addr) }

// listenLoopback opens a non-blocking SO_REUSEPORT listening socket on
// 127.0.0.1, as internal/listener does, and returns it with its address.
func listenLoopback(t testing.TB) (int, string) { return listenLoopbackAt(t, 0) }

// listenLoopbackAt is listenLoopback on a given port (0: any).
func listenLoopbackAt(t testing.TB, port int) (int, string) {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	syscall.CloseOnExec(fd)
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		t.Fatal(err)
	}
	syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
	syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, unix.SO_REUSEPORT, 1)
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: port}); err != nil {
		syscall.Close(fd)
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 1024); err != nil {
		syscall.Close(fd)
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		syscall.Close(fd)
		t.Fatal(err)
	}
	return fd, fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}

// localHandler is a net/http handler the loops serve as an in-process
// backend over a socketpair (local.go). It answers with the path, flushing
// in between, so its answer streams (chunked to an HTTP/1.1 client) rather
// than arriving as one fixed-length piece.
func localHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Local", "1")
		io.WriteString(w, "local:")
		w.(http.Flusher).Flush()
		io.WriteString(w, r.URL.Path)
	})
}

// checkedStepper wraps the pipeline's flows to check the engine drives
// them as wire.Flow says: Begin, then the calls the actions ask for, then
// Finish exactly once (ActServeHTTP too: the loop forwards the request to
// the in-process backend and reports Forwarded and Sent as for any
// backend), and nothing after Finish but Begin.
type checkedStepper struct {
	p *loopProxy
	s wire.Stepper
}

func (s *checkedStepper) NewFlow() wire.Flow { return &checkedFlow{p: s.p, f: s.s.NewFlow()} }

type checkedFlow struct {
	p    *loopProxy
	f    wire.Flow
	ex   wire.Exchange
	busy bool        // between Begin and Finish
	last wire.Action // the last action handed out
	sent bool
}

func (f *checkedFlow) fail(format string, args ...any) {
	f.p.t.Errorf("flow: "+format, args...)
}

func (f *checkedFlow) Begin(ex wire.Exchange) wire.Action {
	if f.busy {
		f.fail("Begin during a request (last action %d)", f.last)
	}
	f.busy, f.sent = true, false
	f.ex = ex
	f.last = f.f.Begin(ex)
	f.p.busyFlows.Add(1)
	return f.last
}

func (f *checkedFlow) Answer() (int, *httpmsg.Header, []byte) {
	if !f.busy || f.last != wire.ActRespond {
		f.fail("Answer after action %d (busy %v)", f.last, f.busy)
	}
	return f.f.Answer()
}

func (f *checkedFlow) Handler() *wire.Local {
	if !f.busy || f.last != wire.ActServeHTTP {
		f.fail("Handler after action %d (busy %v)", f.last, f.busy)
	}
	return f.f.Handler()
}

func (f *checkedFlow) Files() wire.Files {
	if !f.busy || f.last != wire.ActServeFile {
		f.fail("Files after action %d (busy %v)", f.last, f.busy)
	}
	return f.f.Files()
}

func (f *checkedFlow) BufferLimits() wire.BufferLimits {
	if !f.busy || f.last != wire.ActBuffer {
		f.fail("BufferLimits after action %d (busy %v)", f.last, f.busy)
	}
	return f.f.BufferLimits()
}

func (f *checkedFlow) ResponseBuffer() *wire.ResponseBuffer {
	if !f.busy || f.last != wire.ActSend {
		f.fail("ResponseBuffer after action %d (busy %v)", f.last, f.busy)
	}
	return f.f.ResponseBuffer()
}

func (f *checkedFlow) Buffered(err error) wire.Action {
	if !f.busy || f.last != wire.ActBuffer {
		f.fail("Buffered after action %d (busy %v)", f.last, f.busy)
	}
	f.last = f.f.Buffered(err)
	return f.last
}

func (f *checkedFlow) AnswerHeader(h *httpmsg.Header, shared bool) *httpmsg.Header {
	if !f.busy {
		f.fail("AnswerHeader with no request (last action %d)", f.last)
	}
	return f.f.AnswerHeader(h, shared)
}

func (f *checkedFlow) Refused(ex wire.Exchange, status int, err error) {
	if f.busy {
		f.fail("Refused during a request (last action %d)", f.last)
	}
	f.f.Refused(ex, status, err)
}

func (f *checkedFlow) Target() (*wire.Transport, *upstream.Backend) {
	if !f.busy || f.last != wire.ActForward {
		f.fail("Target after action %d (busy %v)", f.last, f.busy)
	}
	return f.f.Target()
}

func (f *checkedFlow) Forwarded(status int, err error) wire.Action {
	if !f.busy || f.last != wire.ActForward && f.last != wire.ActServeHTTP && f.last != wire.ActWait {
		f.fail("Forwarded(%d, %v) after action %d (busy %v)", status, err, f.last, f.busy)
	}
	f.last = f.f.Forwarded(status, err)
	if f.last == wire.ActSend && f.p.transform != nil {
		if x := f.p.transform(f.ex); x != nil {
			f.ex.TransformBody(x)
		}
	}
	return f.last
}

func (f *checkedFlow) Delay() time.Duration {
	if !f.busy || f.last != wire.ActWait {
		f.fail("Delay after action %d (busy %v)", f.last, f.busy)
	}
	return f.f.Delay()
}

func (f *checkedFlow) Resume() wire.Action {
	if !f.busy || f.last != wire.ActWait {
		f.fail("Resume after action %d (busy %v)", f.last, f.busy)
	}
	f.last = f.f.Resume()
	return f.last
}

func (f *checkedFlow) Sent(status int, n int64, err error) {
	if !f.busy || f.sent || (f.last != wire.ActRespond && f.last != wire.ActSend && f.last != wire.ActServeHTTP && f.last != wire.ActServeFile) {
		f.fail("Sent(%d, %d, %v) after action %d (busy %v, sent %v)", status, n, err, f.last, f.busy, f.sent)
	}
	f.sent = true
	f.f.Sent(status, n, err)
}

func (f *checkedFlow) Finish() {
	if !f.busy {
		f.fail("Finish with no request (last action %d)", f.last)
	}
	// A panic ends the flow without Sent (lconn.crash).
	if !f.sent && f.last != wire.ActClose && f.p.eng.Panics() == 0 {
		f.fail("Finish without Sent after action %d", f.last)
	}
	if f.busy {
		f.p.busyFlows.Add(-1)
	}
	f.busy = false
	f.f.Finish()
}

// countingGuard admits every attempt and counts the ones not yet done,
// so a test can see each attempt finished exactly once.
type countingGuard struct {
	open    atomic.Int64
	doubled atomic.Int64
	mu      sync.Mutex
	out     []proxy.Outcome
}

func (g *countingGuard) Admit(b *upstream.Backend) (func(error), bool) {
	g.open.Add(1)
	var done atomic.Bool
	return func(error) {
		if done.Swap(true) {
			g.doubled.Add(1)
		}
	}, true
}

func (g *countingGuard) Done(b *upstream.Backend, ticket func(error), o proxy.Outcome) {
	ticket(nil)
	g.open.Add(-1)
	g.mu.Lock()
	g.out = append(g.out, o)
	g.mu.Unlock()
}

// outcomes returns the outcomes reported so far.
func (g *countingGuard) outcomes() []proxy.Outcome {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]proxy.Outcome(nil), g.out...)
}

// blockLoop keeps loop i busy until the returned function is called, so
// that what the test does meanwhile reaches the loop as one batch of
// events, in the order it happened.
func (p *loopProxy) blockLoop(i int) (unblock func()) {
	l := p.eng.loops[i]
	entered := make(chan struct{})
	release := make(chan struct{})
	l.post(func() {
		close(entered)
		<-release
	})
	<-entered
	var once sync.Once
	unblock = func() { once.Do(func() { close(release) }) }
	p.t.Cleanup(unblock)
	return unblock
}

// settle waits until the loops have handled what is queued (a round
// trip through each loop's queue).
func (p *loopProxy) settle() {
	for _, l := range p.eng.loops {
		l.do(func() {})
	}
}

// tcpConn returns the *net.TCPConn under a rawClient.
func (c *rawClient) tcp() *net.TCPConn { return c.nc.(*net.TCPConn) }
