// Package proxy is the request pipeline: route -> pick -> admit -> forward
// -> retry -> record. It decides what happens to each request and leaves
// the bytes to a wire engine behind the interfaces of package wire.
//
// The pipeline reads one immutable Graph per request through an atomic
// pointer, so a reload swaps the whole graph at once and requests already
// running finish on the graph they started with.
package proxy

import (
	"bytes"
	"slices"
	"sync/atomic"
	"time"

	"github.com/helios-lb/helios/internal/httpmsg"
	"github.com/helios-lb/helios/internal/route"
	"github.com/helios-lb/helios/internal/rules"
	"github.com/helios-lb/helios/internal/tracing"
	"github.com/helios-lb/helios/internal/upstream"
	"github.com/helios-lb/helios/internal/wire"
)

// Graph is one configuration generation's routing objects.
type Graph struct {
	// Routes maps host and path to a route.
	Routes *route.Table[*Route]
	// RouteList lists the routes in configuration order (for metrics and
	// the admin API).
	RouteList []*Route
	// Upstreams lists every upstream, in configuration order.
	Upstreams []*Upstream
	// Recorder receives one Record per request; nil records nothing.
	Recorder Recorder
	// ACME answers HTTP-01 challenges and says which hosts are
	// redirected to HTTPS; nil when no listener gets certificates
	// through ACME.
	ACME ACME
	// Tracing says how requests join traces (formats, sampling); nil
	// when tracing is off.
	Tracing *tracing.Policy
}

// Route is a compiled route with exactly one action set.
type Route struct {
	// Name is the configured route name (a metrics label).
	Name string
	// Upstream forwards the request; nil when another action is set.
	Upstream *Upstream
	// Split forwards the request to one of several upstreams; nil when
	// another action is set.
	Split *Split
	// Mirror copies a share of the requests the route forwards to a
	// shadow upstream; nil copies none.
	Mirror *Mirror
	// Respond answers with a fixed response; nil when another action is set.
	Respond *Fixed
	// Files answers from files, sent by the engine itself
	// (ActServeFile); nil when another action is set.
	Files wire.Files
	// Local answers with an in-process net/http handler, which the
	// engine forwards to as to a backend (ActServeHTTP); nil when
	// another action is set.
	Local *wire.Local
	// Index is the route's position in the configuration.
	Index int
	// Stats counts the route's requests (for a split, those that did not
	// get as far as a variant); nil counts nothing. It is kept across
	// reloads for a route of the same name and upstream.
	Stats *RouteStats
	// Upgrades lists the protocols (lower case, without a version) a
	// request may switch to through the route; nil allows none.
	Upgrades [][]byte
	// AllowTrace and AllowConnect accept TRACE and CONNECT, which are
	// answered 405 otherwise.
	AllowTrace, AllowConnect bool
	// MaxBody bounds request bodies (413 beyond); 0 is no bound.
	MaxBody int64
	// Buffer, when set, makes the engine read a request body before a
	// backend is chosen (request buffering), under these limits; nil
	// streams bodies to the backend as they arrive.
	Buffer *wire.BufferLimits
	// Redirect answers with a redirect; nil when another action is set.
	Redirect *rules.Redirect
	// NoHTTPSRedirect serves the route's cleartext requests that would
	// otherwise be redirected to HTTPS: on a listener with
	// redirect_https (wire.Listener), or for hosts whose certificates
	// come from ACME (Graph.ACME).
	NoHTTPSRedirect bool
	// ResponseBuffer, when set, lets the engine hold an answer for a
	// client that reads it more slowly than the backend sends it
	// (response buffering); nil streams answers with backpressure.
	ResponseBuffer *wire.ResponseBuffer
	// Policy is the route's edge policy; nil: none.
	Policy *Policy
}

// StatsOf returns the counters of the route's requests to up: the
// variant's for a split route, the route's otherwise (and for a request
// that reached no upstream).
func (rt *Route) StatsOf(up *Upstream) *RouteStats {
	if rt.Split != nil && up != nil {
		for i := range rt.Split.Variants {
			if v := &rt.Split.Variants[i]; v.Upstream == up {
				return v.Stats
			}
		}
	}
	return rt.Stats
}

// refuses reports whether the route refuses method m: TRACE and CONNECT
// unless allowed. TRACE echoes the request, cookies and credentials
// included, and CONNECT opens a tunnel; neither belongs on a reverse
// proxy by accident.
func (rt *Route) refuses(m []byte) bool {
	switch string(m) {
	case "TRACE":
		return !rt.AllowTrace
	case "CONNECT":
		return !rt.AllowConnect
	}
	return false
}

// upgradeAllowed reports whether every protocol of an Upgrade header
// value (a comma-separated list of name[/version]) is one the route
// allows. A list with any other protocol is refused whole: forwarding
// part of it would need a rewritten header, and clients offer one.
func (rt *Route) upgradeAllowed(v []byte) bool {
	seen := false
	for len(v) > 0 {
		i := bytes.IndexByte(v, ',')
		tok := v
		if i >= 0 {
			tok, v = v[:i], v[i+1:]
		} else {
			v = nil
		}
		tok = bytes.TrimSpace(tok)
		if j := bytes.IndexByte(tok, '/'); j >= 0 {
			tok = tok[:j]
		}
		if len(tok) == 0 {
			continue
		}
		if !slices.ContainsFunc(rt.Upgrades, func(p []byte) bool { return bytes.EqualFold(p, tok) }) {
			return false
		}
		seen = true
	}
	return seen
}

// RouteStats are a route's request counters, written on the request path
// with one atomic add and read by the metrics collector.
type RouteStats struct {
	// Codes counts answers by status code (499: client gone).
	Codes [600]atomic.Uint64
	// Duration observes request durations in seconds; nil observes nothing.
	Duration Observer
	// RateLimited counts requests the route's rate limit refused (429).
	RateLimited atomic.Uint64
}

// Observer takes one observation (a prometheus.Observer satisfies it).
type Observer interface {
	Observe(float64)
}

// Count records one answered request.
func (s *RouteStats) Count(status int, d time.Duration) {
	s.CountStatus(status)
	if s.Duration != nil {
		s.Duration.Observe(d.Seconds())
	}
}

// CountStatus counts one answered request by its status, for a caller
// that observes the duration itself (with an exemplar).
func (s *RouteStats) CountStatus(status int) {
	if status >= 0 && status < len(s.Codes) {
		s.Codes[status].Add(1)
	}
}

// UpstreamStats are an upstream's counters, kept across reloads.
type UpstreamStats struct {
	// Retries counts attempts after the first.
	Retries atomic.Uint64
	// NoBackend counts requests answered 503 because no backend was
	// available.
	NoBackend atomic.Uint64
}

// Fixed is a pre-rendered response.
type Fixed struct {
	Status int
	// Header holds its fields (but Date and framing, which the engine
	// adds).
	Header httpmsg.Header
	Body   []byte
}

// Upstream is a pool of backends with its strategy, transport and
// resilience policy.
type Upstream struct {
	// Name is the configured upstream name.
	Name string
	// Strategy is the balancing strategy's configured name.
	Strategy string
	// Checked says active health checks run for this upstream.
	Checked bool
	// Backends are the members the upstream was built with;
	// Backends[i].Index == i. Members returns them, with Picker and
	// Guard, until SetMembers replaces them: read Members, not these
	// fields, to see the backends being served.
	Backends []*upstream.Backend
	// Picker chooses a backend among Backends.
	Picker upstream.Picker
	// Transport says how the engine reaches the backends.
	Transport *wire.Transport
	// Key is where the request's key for consistent_hash is read; KeyNone
	// for the strategies that do not hash.
	Key RequestKey
	// Retry says when to try another backend.
	Retry RetryPolicy
	// Budget bounds retries; nil means unbounded (tests only).
	Budget *Budget
	// Guard admits requests to Backends and learns outcomes (breaker,
	// passive ejection); nil admits everything.
	Guard Guard
	// Index is the upstream's position in the configuration.
	Index int
	// Stats counts retries and unavailability; never nil in a built graph.
	Stats *UpstreamStats
	// Sticky keeps clients on their backends with a cookie; nil means no
	// sticky sessions. Members built for the upstream carry its table
	// (Sticky.Table).
	Sticky *Sticky

	// members are the members being served once Members or SetMembers
	// has run; nil before.
	members atomic.Pointer[Members]
}

// Members are an upstream's backends at one moment, with the picker that
// chooses among them and the guard that admits to them. A Members never
// changes once the upstream serves it: a change of membership (DNS or file
// discovery) or of weights (the admin API) builds a new one, which
// SetMembers swaps in, and a request keeps the Members it started with to
// its end, retries included, so Key.Exclude always names its backends.
type Members struct {
	// Backends are the members; Backends[i].Index == i.
	Backends []*upstream.Backend
	// Picker chooses among Backends.
	Picker upstream.Picker
	// Guard admits requests to Backends and learns outcomes; nil admits
	// everything.
	Guard Guard
	// Sticky maps the upstream's sticky cookie values to Backends; nil
	// when the upstream has no sticky sessions.
	Sticky *StickyTable
}

// Members returns the members being served: those SetMembers installed
// last, or the Backends, Picker and Guard the upstream was built with. It
// takes no lock: one atomic load (and, on the first call of an upstream
// built without SetMembers, one allocation).
func (u *Upstream) Members() *Members {
	if m := u.members.Load(); m != nil {
		return m
	}
	u.members.CompareAndSwap(nil, &Members{Backends: u.Backends, Picker: u.Picker, Guard: u.Guard, Sticky: u.Sticky.Table(u.Backends)})
	return u.members.Load()
}

// SetMembers installs m for requests that start from now on; requests
// already running finish with the members they started with.
func (u *Upstream) SetMembers(m *Members) { u.members.Store(m) }

// Outcome is what an attempt on a backend says about the backend.
type Outcome uint8

const (
	// Success: the backend answered with a status not counted as failure.
	Success Outcome = iota
	// Failure: connect error, timeout, broken response, or a failure status.
	Failure
	// Ignored: the attempt says nothing about the backend (the client went
	// away, or sent a bad request).
	Ignored
)

// Guard admits attempts to backends and learns from their outcomes: the
// circuit breaker and passive ejection live behind it.
type Guard interface {
	// Admit reports whether b may take an attempt now. When it may, Done
	// must be called exactly once with the returned ticket and the
	// attempt's outcome. The ticket is opaque to the pipeline (the
	// breaker's completion callback; nil when there is none).
	Admit(b *upstream.Backend) (ticket func(error), ok bool)
	// Done reports the outcome of an admitted attempt.
	Done(b *upstream.Backend, ticket func(error), o Outcome)
}

// Recorder observes finished requests (metrics, access log).
type Recorder interface {
	// Record is called once per request, after the response.
	Record(ex wire.Exchange, r Record)
}

// Record describes one finished request.
type Record struct {
	Route    *Route            // nil when no route matched
	Upstream *Upstream         // nil for non-upstream routes
	Backend  *upstream.Backend // the last backend tried; nil if none
	// Status is the status sent, or 499 when the client went away first.
	Status   int
	Bytes    int64
	Start    time.Time
	Duration time.Duration
	// Attempts counts forwarding attempts (retries are Attempts-1).
	Attempts int
	// Timing is how the last attempt went, as the engine measured it;
	// zero when there was none.
	Timing wire.Timing
	// Trace is the request's place in its trace; zero when tracing is
	// off.
	Trace tracing.Span
	// Err is the error that decided the status, if any.
	Err error
	// RequestID is the request's id: the client's X-Request-Id, or one
	// the pipeline made (and forwarded, when the engine can).
	RequestID RequestID
}

// Pipeline serves exchanges with the current graph. It implements the
// engine's handler (engine.Handler).
type Pipeline struct {
	graph atomic.Pointer[Graph]
	ids   requestIDs
}

// New returns a pipeline serving g.
func New(g *Graph) *Pipeline {
	p := &Pipeline{}
	p.graph.Store(g)
	return p
}

// Swap installs g for new requests and returns the previous graph.
// Requests already running finish on the graph they started with.
func (p *Pipeline) Swap(g *Graph) *Graph { return p.graph.Swap(g) }

// Graph returns the current graph.
func (p *Pipeline) Graph() *Graph { return p.graph.Load() }

// Recorders fans a record out to several recorders in order.
type Recorders []Recorder

// Record passes r to each recorder.
func (rs Recorders) Record(ex wire.Exchange, r Record) {
	for _, rc := range rs {
		rc.Record(ex, r)
	}
}
