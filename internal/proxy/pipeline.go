package proxy

import (
	"bytes"
	"errors"
	"net/netip"
	"time"

	"github.com/helios-lb/helios/internal/upstream"
	"github.com/helios-lb/helios/internal/wire"
)

// StatusClientClosed is logged when the client went away before its answer
// (nginx's 499). It is never sent.
const StatusClientClosed = 499

// Short bodies of the answers Helios makes itself. Never a 500 for a
// proxy error: the status says whose fault it was.
var (
	textHeader   = []byte("Content-Type: text/plain; charset=utf-8\r\n")
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
	notAllowedHeader = []byte("Allow: GET, HEAD, POST, PUT, DELETE, OPTIONS, PATCH\r\nContent-Type: text/plain; charset=utf-8\r\n")
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
	up  *Upstream
	key upstream.Key
	// idem: the method is idempotent.
	idem bool
	// The attempt in progress.
	b      *upstream.Backend
	ticket func(error)
	// next: a backend already picked (and checked to exist) for a retry.
	next *upstream.Backend
	// status of the response being sent; failed: it counts as a backend
	// failure.
	status int
	failed bool
	// last is the action handed to the engine, so Sent knows what it
	// reports on.
	last wire.Action
	// The answer for ActRespond.
	ansStatus       int
	ansHeader, ansB []byte
}

// Begin routes the request.
func (f *flow) Begin(ex wire.Exchange) wire.Action {
	p := f.p
	*f = flow{p: p, g: p.graph.Load(), ex: ex}
	f.rec.Start = time.Now()
	f.setRequestID(ex)
	rt, ok := f.g.Routes.Match(ex.Host(), ex.Path())
	if ok {
		if rt.refuses(ex.Method()) {
			f.rec.Route = rt
			return f.answer(405, notAllowedHeader, bodyNotAllowed)
		}
		if up := ex.Upgrade(); up != nil && !rt.upgradeAllowed(up) {
			// Served as a plain request (issue 9: an h2c upgrade
			// forwarded past the proxy reached paths other routes
			// guard).
			ex.RefuseUpgrade()
		}
	}
	switch {
	case !ok:
		return f.answer(404, textHeader, bodyNoRoute)
	case rt.Upstream != nil:
		f.rec.Route = rt
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
		return f.startForward(rt.Upstream)
	case rt.Respond != nil:
		f.rec.Route = rt
		return f.answer(rt.Respond.Status, rt.Respond.Header, rt.Respond.Body)
	default:
		f.rec.Route = rt
		f.last = wire.ActServeHTTP
		return wire.ActServeHTTP
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

func (f *flow) answer(status int, header, body []byte) wire.Action {
	f.ansStatus, f.ansHeader, f.ansB = status, header, body
	f.last = wire.ActRespond
	return wire.ActRespond
}

// Answer returns the answer for ActRespond.
func (f *flow) Answer() (int, []byte, []byte) { return f.ansStatus, f.ansHeader, f.ansB }

// Handler returns the route's in-process handler for ActServeHTTP.
func (f *flow) Handler() *wire.Local { return f.rec.Route.Static }

// BufferLimits returns the route's request buffering limits.
func (f *flow) BufferLimits() wire.BufferLimits { return *f.rec.Route.Buffer }

// Buffered goes on once the request body has been buffered.
func (f *flow) Buffered(err error) wire.Action {
	if err != nil {
		f.rec.Err = err
		return f.fail(err)
	}
	return f.startForward(f.rec.Route.Upstream)
}

// Target returns the upstream's transport and the backend to try.
func (f *flow) Target() (*wire.Transport, *upstream.Backend) { return f.up.Transport, f.b }

func (f *flow) startForward(up *Upstream) wire.Action {
	f.up = up
	f.rec.Upstream = up
	if up.HashClient {
		f.key.Hash = hashAddr(f.ex.ClientAddr())
	}
	if up.Budget != nil {
		up.Budget.Earn(f.rec.Start)
	}
	f.idem = idempotent(f.ex.Method())
	return f.pick()
}

// pick chooses and admits the backend of the next attempt.
func (f *flow) pick() wire.Action {
	up := f.up
	for {
		b := f.next
		f.next = nil
		if b == nil {
			b = up.Picker.Pick(f.key)
		}
		if b == nil {
			// Nothing (left) to try: an earlier attempt's error decides
			// the status when there was one.
			return f.fail(f.rec.Err)
		}
		var ticket func(error)
		if up.Guard != nil {
			var ok bool
			if ticket, ok = up.Guard.Admit(b); !ok {
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
		b.Begin()
		f.last = wire.ActForward
		return wire.ActForward
	}
}

// done closes the current attempt with its outcome.
func (f *flow) done(out Outcome) {
	f.b.End(out == Failure)
	if f.up.Guard != nil {
		f.up.Guard.Done(f.b, f.ticket, out)
	}
	f.ticket = nil
}

// Forwarded takes the result of an attempt and decides: send it, retry
// elsewhere, or answer with an error.
func (f *flow) Forwarded(status int, err error) wire.Action {
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
			return f.pick()
		}
		return f.fail(err)
	}
	f.status = status
	f.failed = up.Retry.Statuses.Has(status)
	if f.failed && f.mayRetry() && up.Retry.retryableStatus(status, f.idem) {
		// Only give up this answer for another backend that exists.
		f.key.Exclude.Add(f.b.Index)
		if next := up.Picker.Pick(f.key); next != nil && spend(up) {
			f.done(Failure)
			f.rec.Err = nil
			f.next = next
			return f.pick()
		}
	}
	f.last = wire.ActSend
	return wire.ActSend
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
		if rt, ok := g.Routes.Match(ex.Host(), ex.Path()); ok {
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

// hashAddr hashes a client address for consistent strategies (FNV-1a
// over the 16-byte form, so IPv4 and IPv4-mapped IPv6 agree).
func hashAddr(a netip.Addr) uint64 {
	b := a.As16()
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}
