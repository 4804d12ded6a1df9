package proxy

import (
	"bytes"
	"errors"
	"time"

	"github.com/helios-lb/helios/internal/httpmsg"
	"github.com/helios-lb/helios/internal/upstream"
	"github.com/helios-lb/helios/internal/wire"
)

// StatusClientClosed is logged when the client went away before its answer
// (nginx's 499). It is never sent.
const StatusClientClosed = 499

// Short bodies of the answers Helios makes itself. Never a 500 for a
// proxy error: the status says whose fault it was.
var (
	textHeader   = httpmsg.HeaderOf("Content-Type", "text/plain; charset=utf-8")
	bodyNoRoute  = []byte("404 Not Found: no route matches this request\n")
	bodyNoBacked = []byte("503 Service Unavailable: no backend is available\n")
	bodyBadGW    = []byte("502 Bad Gateway: the backend could not be reached or failed\n")
	bodyTimeout  = []byte("504 Gateway Timeout: the backend did not answer in time\n")
	bodyBadReq   = []byte("400 Bad Request: the request could not be forwarded as sent\n")
	bodyTimedOut = []byte("408 Request Timeout: the request body stopped arriving\n")
	bodyTooLarge = []byte("413 Content Too Large: the request body is larger than this route accepts\n")
	bodyBusy     = []byte("503 Service Unavailable: the backend is at its connection limit\n")
	bodyBuffers  = []byte("503 Service Unavailable: the request buffers are full; try again later\n")
	// RFC 9110 §15.5.6: a 405 lists the methods that are allowed.
	notAllowedHeader = httpmsg.HeaderOf("Allow", "GET, HEAD, POST, PUT, DELETE, OPTIONS, PATCH", "Content-Type", "text/plain; charset=utf-8")
	bodyNotAllowed   = []byte("405 Method Not Allowed: this route does not accept the method\n")
)

// StatusClientTimeout is sent and logged when the client stopped sending
// its request before it was complete.
const StatusClientTimeout = 408

// NewFlow returns a Flow for one connection of an event-loop engine
// (wire.Stepper).
func (p *Pipeline) NewFlow() wire.Flow { return &flow{p: p} }

// flow is one request's state in the pipeline: route -> pick -> admit ->
// forward -> retry -> record, one step per call so that an engine that
// cannot block can drive it. It implements wire.Flow.
type flow struct {
	p   *Pipeline
	g   *Graph
	ex  wire.Exchange
	rec Record
	// dest is the upstream the route forwards to (for a split, the
	// variant chosen); up is set once forwarding starts.
	dest *Upstream
	up   *Upstream
	// m are up's members as the request found them: every attempt picks
	// among them.
	m   *Members
	key upstream.Key
	// idem: the method is idempotent.
	idem bool
	// The attempt in progress.
	b      *upstream.Backend
	ticket func(error)
	// next: a backend already picked (and checked to exist) for a retry.
	next *upstream.Backend
	// stuck is the backend the request's sticky cookie names (sticky.go);
	// nil when none.
	stuck *upstream.Backend
	// waiting: a retry waits its backoff (ActWait) for delay.
	waiting bool
	delay   time.Duration
	// status of the response being sent; failed: it counts as a backend
	// failure.
	status int
	failed bool
	// last is the action handed to the engine, so Sent knows what it
	// reports on.
	last wire.Action
	// The answer for ActRespond.
	ansStatus int
	ansHeader *httpmsg.Header
	ansB      []byte
	// local is the in-process handler of an ActServeHTTP that is not a
	// route's (the ACME challenge solver); nil otherwise.
	local *wire.Local
	// redirect holds an https redirect's head, made on the connection's
	// first and reused by its next ones.
	redirect *redirectHead
	// pol is the edge policy's state (policy.go), made on the
	// connection's first request that needs it and reused by its next
	// ones.
	pol *policyState
}

// Begin routes the request.
func (f *flow) Begin(ex wire.Exchange) wire.Action {
	p := f.p
	*f = flow{p: p, g: p.graph.Load(), ex: ex, redirect: f.redirect, pol: f.pol}
	if f.pol != nil {
		f.pol.job = nil
	}
	f.rec.Start = time.Now()
	f.setRequestID(ex)
	f.startTrace(ex)
	if a := f.g.ACME; a != nil {
		if act, ok := f.acmeChallenge(a, ex); ok {
			return act
		}
	}
	rt, ok := f.g.Routes.MatchRequest(ex.Request(), ex.ClientAddr())
	var r *Route
	if ok {
		r = rt
		if rt.Policy != nil || rt.Redirect != nil {
			f.setVars(ex)
		}
	}
	if act, ok := f.httpsRedirect(ex, r); ok {
		return act
	}
	if !ok {
		return f.answer(404, textHeader, bodyNoRoute)
	}
	f.rec.Route = rt
	if rt.refuses(ex.Method()) {
		return f.answer(405, notAllowedHeader, bodyNotAllowed)
	}
	if up := ex.Upgrade(); up != nil && !rt.upgradeAllowed(up) {
		// Served as a plain request (issue 9: an h2c upgrade
		// forwarded past the proxy reached paths other routes
		// guard).
		ex.RefuseUpgrade()
	}
	if rt.Policy != nil {
		return f.admit(rt, stageAccess)
	}
	return f.serve(rt)
}

// serve goes on with a request its route admitted: its action.
func (f *flow) serve(rt *Route) wire.Action {
	ex := f.ex
	switch {
	case rt.Upstream != nil || rt.Split != nil:
		f.editRequest(rt)
		f.dest = rt.Upstream
		if rt.Split != nil {
			f.dest = rt.Split.choose(ex).Upstream
		}
		if ex.HasBody() {
			if rt.MaxBody > 0 && ex.BodyLength() > rt.MaxBody {
				return f.answer(413, textHeader, bodyTooLarge)
			}
			ex.LimitBody(rt.MaxBody)
			if rt.Buffer != nil && !(rt.Buffer.Stream && isGRPC(ex)) {
				f.last = wire.ActBuffer
				return wire.ActBuffer
			}
		}
		return f.startForward(f.dest)
	case rt.Respond != nil:
		return f.answer(rt.Respond.Status, &rt.Respond.Header, rt.Respond.Body)
	case rt.Redirect != nil:
		return f.redirectTo(rt.Redirect)
	case rt.Local != nil:
		f.last = wire.ActServeHTTP
		return wire.ActServeHTTP
	default:
		f.editRequest(rt)
		f.last = wire.ActServeFile
		return wire.ActServeFile
	}
}

// isGRPC reports whether the request is a gRPC call (content-type
// application/grpc, +proto, +json...). Its body is a stream of messages
// that client-streaming and bidirectional calls interleave with the
// answer, so request_buffering auto streams it rather than wait for its
// end (as nginx's grpc_pass does); "on" still buffers.
func isGRPC(ex wire.Exchange) bool {
	ct := ex.Header("Content-Type")
	return len(ct) >= len(grpcType) && bytes.EqualFold(ct[:len(grpcType)], grpcType)
}

var grpcType = []byte("application/grpc")

func (f *flow) answer(status int, header *httpmsg.Header, body []byte) wire.Action {
	f.ansStatus, f.ansHeader, f.ansB = status, header, body
	f.last = wire.ActRespond
	return wire.ActRespond
}

// Answer returns the answer for ActRespond.
func (f *flow) Answer() (int, *httpmsg.Header, []byte) { return f.ansStatus, f.ansHeader, f.ansB }

// Handler returns the route's in-process handler for ActServeHTTP.
func (f *flow) Handler() *wire.Local {
	if f.local != nil {
		return f.local
	}
	return f.rec.Route.Local
}

// Files returns the route's file planner for ActServeFile.
func (f *flow) Files() wire.Files { return f.rec.Route.Files }

// BufferLimits returns the route's request buffering limits.
func (f *flow) BufferLimits() wire.BufferLimits { return *f.rec.Route.Buffer }

// ResponseBuffer returns the route's response buffering (nil: off).
func (f *flow) ResponseBuffer() *wire.ResponseBuffer {
	if f.rec.Route == nil {
		return nil
	}
	return f.rec.Route.ResponseBuffer
}

// Buffered goes on once the request body has been buffered.
func (f *flow) Buffered(err error) wire.Action {
	if err != nil {
		f.rec.Err = err
		return f.fail(err)
	}
	return f.startForward(f.dest)
}

// Target returns the upstream's transport and the backend to try.
func (f *flow) Target() (*wire.Transport, *upstream.Backend) { return f.up.Transport, f.b }

func (f *flow) startForward(up *Upstream) wire.Action {
	f.up = up
	f.m = up.Members()
	f.rec.Upstream = up
	f.key.Hash, f.key.Hashed = up.Key.hash(f.ex)
	f.stuck = f.m.stuck(f.ex)
	if mi := f.rec.Route.Mirror; mi != nil {
		mi.send(f.ex)
	}
	if up.Budget != nil {
		up.Budget.Earn(f.rec.Start)
	}
	f.idem = idempotent(f.ex.Method())
	return f.pick()
}

// pick chooses and admits the backend of the next attempt.
func (f *flow) pick() wire.Action {
	up, m := f.up, f.m
	for {
		b := f.next
		f.next = nil
		if b == nil && f.stuck != nil && f.stuck.Usable(f.key) {
			b = f.stuck // sticky: before any strategy
		}
		if b == nil {
			b = m.Picker.Pick(f.key)
		}
		if b == nil {
			// Nothing (left) to try: an earlier attempt's error decides
			// the status when there was one.
			return f.fail(f.rec.Err)
		}
		var ticket func(error)
		if m.Guard != nil {
			var ok bool
			if ticket, ok = m.Guard.Admit(b); !ok {
				f.key.Exclude.Add(b.Index)
				continue
			}
		}
		if f.rec.Attempts > 0 && up.Stats != nil {
			up.Stats.Retries.Add(1)
		}
		f.b, f.ticket = b, ticket
		f.rec.Backend = b
		f.rec.Attempts++
		f.traceAttempt(b)
		b.Begin()
		f.last = wire.ActForward
		return wire.ActForward
	}
}

// done closes the current attempt with its outcome.
func (f *flow) done(out Outcome) {
	f.b.End(out == Failure)
	if f.m.Guard != nil {
		f.m.Guard.Done(f.b, f.ticket, out)
	}
	f.ticket = nil
}

// Forwarded takes the result of an attempt and decides: send it, retry
// elsewhere, or answer with an error.
func (f *flow) Forwarded(status int, err error) wire.Action {
	if f.waiting {
		// The client went away during a backoff (or a check off the
		// loop): no attempt is open.
		f.waiting, f.next = false, nil
		if f.pol != nil {
			f.pol.job = nil
		}
		f.rec.Err = err
		return f.fail(err)
	}
	up := f.up
	if up == nil {
		// An in-process handler (ActServeHTTP): no backend to judge,
		// nothing to retry.
		if err != nil {
			f.rec.Err = err
			return f.fail(err)
		}
		f.status = status
		f.last = wire.ActSend
		return wire.ActSend
	}
	f.attemptDone(status, err)
	if err != nil {
		out := outcomeOf(err)
		f.done(out)
		f.rec.Err = err
		if errors.Is(err, wire.ErrBackendBusy) {
			// At its connection cap: nothing was sent, and it says
			// nothing against the backend; another may take it.
			f.key.Exclude.Add(f.b.Index)
			if f.rec.Attempts <= up.Retry.Attempts {
				return f.pick()
			}
			return f.fail(err)
		}
		if out == Ignored {
			return f.fail(err)
		}
		f.key.Exclude.Add(f.b.Index)
		// A request that never reached a backend adds no load when it
		// is sent elsewhere, so connect errors are bounded by attempts
		// only; the budget guards against re-sending work.
		if f.mayRetry() && up.Retry.retryableErr(err, f.idem) &&
			(errors.Is(err, wire.ErrConnect) || spend(up)) {
			return f.retry()
		}
		return f.fail(err)
	}
	f.status = status
	f.failed = up.Retry.Statuses.Has(status)
	if f.failed && f.mayRetry() && up.Retry.retryableStatus(status, f.idem) {
		// Only give up this answer for another backend that exists.
		f.key.Exclude.Add(f.b.Index)
		if next := f.m.Picker.Pick(f.key); next != nil && spend(up) {
			f.done(Failure)
			f.rec.Err = nil
			f.next = next
			return f.retry()
		}
	}
	f.stick()
	f.last = wire.ActSend
	return wire.ActSend
}

// retry goes on to the next attempt, after the upstream's backoff when
// it has one.
func (f *flow) retry() wire.Action {
	if d := f.up.Retry.Backoff.delay(f.rec.Attempts); d > 0 {
		f.waiting, f.delay = true, d
		f.last = wire.ActWait
		return wire.ActWait
	}
	return f.pick()
}

// Delay returns the backoff to wait for ActWait.
func (f *flow) Delay() time.Duration { return f.delay }

// Resume goes on after a wait: a check off the loop that ended (or whose
// wait did), or a retry's backoff, after which it picks the next
// attempt's backend.
func (f *flow) Resume() wire.Action {
	f.waiting = false
	if f.pol != nil && f.pol.job != nil {
		j := f.pol.job
		f.pol.job = nil
		return f.jobDone(j)
	}
	if f.next != nil && !f.next.Usable(f.key) {
		f.next = nil // it went out of rotation during the wait
	}
	return f.pick()
}

// Sent records how the answer went.
func (f *flow) Sent(status int, n int64, err error) {
	switch {
	case f.last == wire.ActSend && f.b == nil:
		// An in-process handler's answer.
		f.rec.Status, f.rec.Bytes, f.rec.Err = status, n, err
		if err != nil && outcomeOf(err) == Ignored {
			f.rec.Status = clientFault(err)
		}
	case f.last == wire.ActSend:
		f.rec.Status, f.rec.Bytes, f.rec.Err = status, n, err
		out := Success
		switch {
		case f.failed:
			out = Failure
		case err != nil:
			out = outcomeOf(err)
			if out == Ignored {
				f.rec.Status = clientFault(err)
			}
		}
		f.done(out)
	case f.last == wire.ActRespond:
		f.rec.Status, f.rec.Bytes = status, n
		if err != nil {
			f.rec.Status, f.rec.Err = clientFault(err), err
		}
	default:
		f.rec.Status, f.rec.Bytes = status, n
		if err != nil {
			f.rec.Err = err
		}
	}
}

// Finish hands the record to the recorder.
func (f *flow) Finish() {
	if f.ticket != nil && f.b != nil {
		// An attempt the engine abandoned (it closed the connection
		// instead of reporting): it says nothing about the backend.
		f.done(Ignored)
	}
	g := f.g
	f.g = nil // once: a Finish after a panic records nothing twice
	if g != nil && g.Recorder != nil {
		f.rec.Duration = time.Since(f.rec.Start)
		g.Recorder.Record(f.ex, f.rec)
	}
	f.ex = nil
}

// Refused records a request the engine answered itself (wire.Flow).
func (f *flow) Refused(ex wire.Exchange, status int, err error) { f.p.Refused(ex, status, err) }

// Refused records a request the engine answered itself before it went
// through the pipeline: a malformed head (no route: ex has no method), or
// a body that stalled (routed, for the route's metrics).
func (p *Pipeline) Refused(ex wire.Exchange, status int, err error) {
	g := p.graph.Load()
	if g == nil || g.Recorder == nil {
		return
	}
	rec := Record{Start: time.Now(), Status: status, Err: err}
	if len(ex.Method()) > 0 {
		if rt, ok := g.Routes.MatchRequest(ex.Request(), ex.ClientAddr()); ok {
			rec.Route, rec.Upstream = rt, rt.Upstream
		}
	}
	g.Recorder.Record(ex, rec)
}

// clientFault is the status logged for an exchange the client cut
// short: 408 when it stopped sending its request, 499 when it left.
func clientFault(err error) int {
	switch {
	case errors.Is(err, wire.ErrClientTimeout):
		return StatusClientTimeout
	case errors.Is(err, wire.ErrBodyTooLarge):
		return 413
	}
	return StatusClientClosed
}

// mayRetry checks what every retry needs: attempts left and a request
// body that has not been sent (a body is never replayed).
func (f *flow) mayRetry() bool {
	return f.rec.Attempts <= f.up.Retry.Attempts && !f.ex.BodyStarted()
}

func spend(up *Upstream) bool { return up.Budget == nil || up.Budget.Spend(time.Now()) }

// fail answers with the status err calls for: 503 when no backend could
// be tried, 502 unreachable or broken, 504 timeout, 400 bad request, and
// nothing (logged as 499) when the client is gone.
func (f *flow) fail(err error) wire.Action {
	switch {
	case err == nil:
		if f.up != nil && f.up.Stats != nil {
			f.up.Stats.NoBackend.Add(1)
		}
		return f.answer(503, textHeader, bodyNoBacked)
	case errors.Is(err, wire.ErrClientGone):
		f.rec.Status = StatusClientClosed
		f.last = wire.ActClose
		return wire.ActClose
	case errors.Is(err, wire.ErrClientTimeout):
		return f.answer(StatusClientTimeout, textHeader, bodyTimedOut)
	case errors.Is(err, wire.ErrBodyTooLarge):
		return f.answer(413, textHeader, bodyTooLarge)
	case errors.Is(err, wire.ErrBackendBusy):
		return f.answer(503, textHeader, bodyBusy)
	case errors.Is(err, wire.ErrBuffersFull):
		return f.answer(503, textHeader, bodyBuffers)
	case errors.Is(err, wire.ErrTimeout):
		return f.answer(504, textHeader, bodyTimeout)
	case errors.Is(err, wire.ErrBadRequest):
		return f.answer(400, textHeader, bodyBadReq)
	default:
		return f.answer(502, textHeader, bodyBadGW)
	}
}

// outcomeOf says what an engine error means for the backend.
func outcomeOf(err error) Outcome {
	if errors.Is(err, wire.ErrClientGone) || errors.Is(err, wire.ErrClientTimeout) ||
		errors.Is(err, wire.ErrBadRequest) || errors.Is(err, wire.ErrBodyTooLarge) || errors.Is(err, wire.ErrBackendBusy) ||
		errors.Is(err, wire.ErrBuffersFull) {
		return Ignored
	}
	return Failure
}

// idempotent reports whether a method is idempotent (RFC 9110 §9.2.2).
func idempotent(m []byte) bool {
	switch string(m) {
	case "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE":
		return true
	}
	return false
}
