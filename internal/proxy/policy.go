package proxy

import (
	"net/netip"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/helios-lb/helios/internal/auth"
	"github.com/helios-lb/helios/internal/httpmsg"
	"github.com/helios-lb/helios/internal/ratelimit"
	"github.com/helios-lb/helios/internal/rules"
	"github.com/helios-lb/helios/internal/wire"
)

// Policy is a route's edge policy. Once the route matched, a request is
// checked in this order: access lists (403), rate limit (429), basic
// authentication (401), forward authentication; a request that passes
// has its head edited (rewrite, then request header rules) before it is
// forwarded or served. Response header rules edit every answer the route
// gives, Helios's own included (Flow.AnswerHeader). Nil fields do nothing.
type Policy struct {
	// Allow and Deny list client addresses (as the listener's policy
	// found them): a client in Deny, or outside a non-empty Allow, is
	// answered 403.
	Allow, Deny []netip.Prefix
	// RateLimit limits the route's requests; nil: no limit.
	RateLimit *RateLimit
	// BasicAuth asks for HTTP Basic credentials; nil: none.
	BasicAuth *BasicAuth
	// ForwardAuth asks an authentication service about each request;
	// nil: none.
	ForwardAuth *ForwardAuth
	// Rewrite changes the path a request goes on with; nil: none.
	Rewrite *rules.Rewrite
	// RequestHeaders edit the request head that goes on; nil: none.
	RequestHeaders *rules.HeaderRules
	// ResponseHeaders edit every answer's head; nil: none.
	ResponseHeaders *rules.HeaderRules
}

// Short bodies of the policy's answers.
var (
	bodyForbidden    = []byte("403 Forbidden: this route does not accept requests from your address\n")
	bodyRateLimited  = []byte("429 Too Many Requests: this route's rate limit is reached; retry later\n")
	bodyUnauthorized = []byte("401 Unauthorized: this route needs credentials\n")
	bodyAuthBusy     = []byte("503 Service Unavailable: too many credentials are being checked; retry later\n")
	bodyAuthTimeout  = []byte("504 Gateway Timeout: the authentication service did not answer in time\n")
	bodyAuthFailed   = []byte("502 Bad Gateway: the authentication service could not be reached or failed\n")
)

// The stages of a route's admission, in order (admit).
type admitStage uint8

const (
	stageAccess admitStage = iota
	stageRate
	stageBasic
	stageForward
	stageDone
)

// admit checks the route's policy from stage on and goes on to serve the
// request when it passes.
func (f *flow) admit(rt *Route, stage admitStage) wire.Action {
	p := rt.Policy
	switch stage {
	case stageAccess:
		if !allowed(p, f.ex.ClientAddr()) {
			return f.answer(403, textHeader, bodyForbidden)
		}
		fallthrough
	case stageRate:
		if p.RateLimit != nil {
			if act, limited := f.rateLimit(rt); limited {
				return act
			}
		}
		fallthrough
	case stageBasic:
		if p.BasicAuth != nil {
			if act, done := f.basicAuth(p.BasicAuth); done {
				return act
			}
		}
		fallthrough
	case stageForward:
		if p.ForwardAuth != nil {
			return f.forwardAuth(p.ForwardAuth)
		}
	}
	return f.serve(rt)
}

// allowed reports whether client passes the access lists.
func allowed(p *Policy, client netip.Addr) bool {
	for _, d := range p.Deny {
		if d.Contains(client) {
			return false
		}
	}
	if len(p.Allow) == 0 {
		return true
	}
	for _, a := range p.Allow {
		if a.Contains(client) {
			return true
		}
	}
	return false
}

// editRequest applies the route's rewrite and request header rules to
// the head that goes on.
func (f *flow) editRequest(rt *Route) {
	p := rt.Policy
	if p == nil {
		return
	}
	if p.Rewrite != nil {
		p.Rewrite.Apply(f.ex.Request(), f.ex)
	}
	if !p.RequestHeaders.Empty() {
		p.RequestHeaders.Apply(&f.ex.Request().Header, &f.pol.vars, f.ex)
	}
}

// policyState is a flow's edge policy state, made on its connection's
// first request that needs it and reused by the next ones (a connection
// whose routes have no policy pays nothing for it).
type policyState struct {
	// vars are the request's values for templates.
	vars rules.Vars
	// answerCopy holds the fields of a shared answer head the route's
	// response rules edited; limitHdr the fields of a 429.
	answerCopy, limitHdr httpmsg.Header
	// rateKey is the rate limit's key, when it is the client address.
	rateKey [16]byte
	// job is the check running off the loop the flow waits for; nil
	// when there is none.
	job *offLoop
}

// setVars takes the request's values for templates, as the request came
// (before any rewrite).
func (f *flow) setVars(ex wire.Exchange) {
	if f.pol == nil {
		f.pol = new(policyState)
	}
	r := ex.Request()
	f.pol.vars = rules.Vars{
		ClientIP: ex.ClientAddr(), Host: r.Host, Path: r.Path, Query: r.Query(), Scheme: r.Scheme,
		RequestID: f.rec.RequestID.Bytes(), Header: &r.Header,
	}
}

// AnswerHeader applies the route's response header rules to the head of
// an answer about to be written (wire.Flow): the backend's, a fixed
// answer's, a file's or an error's. A shared head (a fixed answer's) is
// copied into the flow's own first.
func (f *flow) AnswerHeader(h *httpmsg.Header, shared bool) *httpmsg.Header {
	rt := f.rec.Route
	if rt == nil || rt.Policy == nil || rt.Policy.ResponseHeaders.Empty() || f.ex == nil {
		return h
	}
	pol := f.pol // set with the route (setVars)
	if shared {
		pol.answerCopy.Reset()
		if h != nil {
			pol.answerCopy.Fields = append(pol.answerCopy.Fields, h.Fields...)
		}
		h = &pol.answerCopy
	}
	rt.Policy.ResponseHeaders.Apply(h, &pol.vars, f.ex)
	return h
}

// RateKeyKind says what a rate limit counts requests by.
type RateKeyKind uint8

// The keys a rate limit counts by.
const (
	// RateKeyClientIP: each client address (as the listener found it).
	RateKeyClientIP RateKeyKind = iota
	// RateKeyHeader: each value of the header field RateLimit.Header; a
	// request without one counts by its client address.
	RateKeyHeader
	// RateKeyRoute: every request of the route together.
	RateKeyRoute
)

// RateLimit is a route's rate limit.
type RateLimit struct {
	// Limiter decides (ratelimit.Local, or a shared store).
	Limiter ratelimit.Limiter
	// Limit is the rate.
	Limit ratelimit.Limit
	// Key is what requests are counted by; Header names the field for
	// RateKeyHeader.
	Key    RateKeyKind
	Header string
	// Now returns the time requests are decided at (unix nanoseconds);
	// nil: when each request began. Tests set it.
	Now func() int64
	// policy is the RateLimit-Policy value.
	policy []byte
}

// NewRateLimit returns a rate limit deciding with l.
func NewRateLimit(l ratelimit.Limiter, lim ratelimit.Limit, key RateKeyKind, header string) *RateLimit {
	// draft-ietf-httpapi-ratelimit-headers: a policy item with its quota
	// (q) per window (w, in seconds).
	w := int64((lim.Per + time.Second - 1) / time.Second)
	pol := strconv.AppendInt([]byte(`"default";q=`), int64(lim.Requests), 10)
	pol = strconv.AppendInt(append(pol, ";w="...), w, 10)
	return &RateLimit{Limiter: l, Limit: lim, Key: key, Header: header, policy: pol}
}

var (
	retryAfterName      = []byte("Retry-After")
	rateLimitPolicyName = []byte("RateLimit-Policy")
	rateLimitName       = []byte("RateLimit")
	routeKey            = []byte("route")
)

// rateLimit decides the request under the route's limit; limited says it
// was refused, with act the 429 answer.
func (f *flow) rateLimit(rt *Route) (act wire.Action, limited bool) {
	rl := rt.Policy.RateLimit
	var key []byte
	switch rl.Key {
	case RateKeyRoute:
		key = routeKey
	case RateKeyHeader:
		key = f.ex.Header(rl.Header)
	}
	if len(key) == 0 {
		// The address's 16 bytes, in the flow's memory: a slice of the
		// stack handed to an interface would escape, an allocation per
		// request.
		f.pol.rateKey = f.ex.ClientAddr().As16()
		key = f.pol.rateKey[:]
	}
	now := f.rec.Start.UnixNano()
	if rl.Now != nil {
		now = rl.Now()
	}
	d := rl.Limiter.Allow(key, rl.Limit, now)
	if d.Allowed {
		return 0, false
	}
	if rt.Stats != nil {
		rt.Stats.RateLimited.Add(1)
	}
	secs := int64((d.RetryAfter + time.Second - 1) / time.Second)
	retry := strconv.AppendInt(f.ex.Alloc(20)[:0], secs, 10)
	state := f.ex.Alloc(len(`"default";r=0;t=`) + 20)[:0]
	state = strconv.AppendInt(append(state, `"default";r=0;t=`...), secs, 10)
	h := &f.pol.limitHdr
	h.Reset()
	h.Add(retryAfterName, retry)
	h.Add(rateLimitPolicyName, rl.policy)
	h.Add(rateLimitName, state)
	h.Add(contentTypeName, textPlainValue)
	return f.answer(429, h, bodyRateLimited), true
}

// BasicAuth is a route's HTTP Basic authentication.
type BasicAuth struct {
	// Users are the users and their bcrypt hashes.
	Users *auth.Users
	// challenge is the 401's header.
	challenge *httpmsg.Header
	// slots bounds the verifications running off the loop at once.
	slots chan struct{}
}

// NewBasicAuth returns basic authentication of users in realm.
func NewBasicAuth(users *auth.Users, realm string) *BasicAuth {
	return &BasicAuth{
		Users:     users,
		challenge: httpmsg.HeaderOf("WWW-Authenticate", `Basic realm=`+strconv.Quote(realm)+`, charset="UTF-8"`, "Content-Type", "text/plain; charset=utf-8"),
		slots:     make(chan struct{}, max(4, 2*runtime.GOMAXPROCS(0))),
	}
}

// authWaitBound bounds the wait for a verification off the loop.
const authWaitBound = 30 * time.Second

// offLoop is a check that runs off the loop (bcrypt, a subrequest),
// written by its goroutine and read on the loop once done says so.
type offLoop struct {
	done atomic.Bool
	// stage is where admission goes on from when it passes.
	stage admitStage
	// The input: the Authorization value (basic).
	authorization []byte
	// The output: ok (basic: the credentials are right); or the
	// authentication service's answer (forward) or why there is none.
	ok     bool
	answer *authAnswer
	err    error
}

// basicAuth checks the request's credentials: done says the request was
// answered (act) or waits for a verification off the loop.
func (f *flow) basicAuth(ba *BasicAuth) (act wire.Action, done bool) {
	authz := f.ex.Header("Authorization")
	switch ba.Users.Check(authz) {
	case auth.Allowed:
		return 0, false
	case auth.Denied:
		return f.answer(401, ba.challenge, bodyUnauthorized), true
	}
	select {
	case ba.slots <- struct{}{}:
	default:
		return f.answer(503, textHeader, bodyAuthBusy), true
	}
	j := &offLoop{stage: stageForward, authorization: append([]byte(nil), authz...)}
	wake := f.ex.Waker()
	go func() {
		defer func() { <-ba.slots }()
		j.ok = ba.Users.Verify(j.authorization)
		j.done.Store(true)
		wake()
	}()
	return f.waitFor(j, authWaitBound), true
}

// waitFor suspends the flow until j is done (or d has passed).
func (f *flow) waitFor(j *offLoop, d time.Duration) wire.Action {
	f.pol.job = j
	f.waiting, f.delay = true, d
	f.last = wire.ActWait
	return wire.ActWait
}

// jobDone goes on once an off-loop check has ended (or its wait did).
func (f *flow) jobDone(j *offLoop) wire.Action {
	rt := f.rec.Route
	if !j.done.Load() {
		if j.stage == stageDone {
			return f.answer(504, textHeader, bodyAuthTimeout)
		}
		return f.answer(503, textHeader, bodyAuthBusy)
	}
	if j.stage == stageDone {
		return f.forwardAuthDone(rt, j)
	}
	if !j.ok {
		return f.answer(401, rt.Policy.BasicAuth.challenge, bodyUnauthorized)
	}
	return f.admit(rt, j.stage)
}
