package proxy

import (
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
)

// ServeExchange routes and answers one request.
func (p *Pipeline) ServeExchange(ex wire.Exchange) {
	g := p.graph.Load()
	rec := Record{Start: time.Now()}
	rt, ok := g.Routes.Match(ex.Host(), ex.Path())
	switch {
	case !ok:
		rec.Status = 404
		ex.Respond(404, textHeader, bodyNoRoute)
		rec.Bytes = int64(len(bodyNoRoute))
	case rt.Upstream != nil:
		rec.Route = rt
		p.forward(ex, rt.Upstream, &rec)
	case rt.Respond != nil:
		rec.Route = rt
		rec.Status = rt.Respond.Status
		if err := ex.Respond(rt.Respond.Status, rt.Respond.Header, rt.Respond.Body); err != nil {
			rec.Status, rec.Err = StatusClientClosed, err
		}
		rec.Bytes = int64(len(rt.Respond.Body))
	default:
		rec.Route = rt
		rec.Status, rec.Bytes = ex.ServeHTTP(rt.Static)
	}
	if g.Recorder != nil {
		rec.Duration = time.Since(rec.Start)
		g.Recorder.Record(ex, rec)
	}
}

// forward runs pick -> admit -> forward -> retry for an upstream route.
func (p *Pipeline) forward(ex wire.Exchange, up *Upstream, rec *Record) {
	rec.Upstream = up
	var key upstream.Key
	if up.HashClient {
		key.Hash = hashAddr(ex.ClientAddr())
	}
	if up.Budget != nil {
		up.Budget.Earn()
	}
	idem := idempotent(ex.Method())
	var next *upstream.Backend
	for {
		b := next
		next = nil
		if b == nil {
			b = up.Picker.Pick(key)
		}
		if b == nil {
			// Nothing (left) to try: an earlier attempt's error decides
			// the status when there was one.
			p.fail(ex, rec, rec.Err)
			return
		}
		var ticket func(error)
		if up.Guard != nil {
			var ok bool
			if ticket, ok = up.Guard.Admit(b); !ok {
				key.Exclude.Add(b.Index)
				continue
			}
		}
		if rec.Attempts > 0 && up.Stats != nil {
			up.Stats.Retries.Add(1)
		}
		rec.Backend = b
		rec.Attempts++
		b.Begin()
		resp, err := up.Transport.RoundTrip(ex, b)
		if err != nil {
			out := outcomeOf(err)
			b.End(out == Failure)
			if up.Guard != nil {
				up.Guard.Done(b, ticket, out)
			}
			rec.Err = err
			if out == Ignored {
				p.fail(ex, rec, err)
				return
			}
			key.Exclude.Add(b.Index)
			// A request that never reached a backend adds no load when it
			// is sent elsewhere, so connect errors are bounded by attempts
			// only; the budget guards against re-sending work.
			if p.mayRetry(ex, up, rec) && up.Retry.retryableErr(err, idem) &&
				(errors.Is(err, wire.ErrConnect) || spend(up)) {
				continue
			}
			p.fail(ex, rec, err)
			return
		}
		status := resp.StatusCode()
		failed := up.Retry.Statuses.Has(status)
		if failed && p.mayRetry(ex, up, rec) && up.Retry.retryableStatus(status, idem) {
			// Only give up this answer for another backend that exists.
			key.Exclude.Add(b.Index)
			if next = up.Picker.Pick(key); next != nil && spend(up) {
				resp.Discard()
				b.End(true)
				if up.Guard != nil {
					up.Guard.Done(b, ticket, Failure)
				}
				rec.Err = nil
				continue
			}
			next = nil
		}
		n, err := resp.Send()
		rec.Status, rec.Bytes, rec.Err = status, n, err
		out := Success
		switch {
		case failed:
			out = Failure
		case err != nil:
			out = outcomeOf(err)
			if out == Ignored {
				rec.Status = StatusClientClosed
			}
		}
		b.End(out == Failure)
		if up.Guard != nil {
			up.Guard.Done(b, ticket, out)
		}
		return
	}
}

// mayRetry checks what every retry needs: attempts left and a request
// body that has not been sent (a body is never replayed).
func (p *Pipeline) mayRetry(ex wire.Exchange, up *Upstream, rec *Record) bool {
	return rec.Attempts <= up.Retry.Attempts && !ex.BodyStarted()
}

func spend(up *Upstream) bool { return up.Budget == nil || up.Budget.Spend() }

// fail answers with the status err calls for: 503 when no backend could
// be tried, 502 unreachable or broken, 504 timeout, 400 bad request, and
// nothing (logged as 499) when the client is gone.
func (p *Pipeline) fail(ex wire.Exchange, rec *Record, err error) {
	var (
		status int
		body   []byte
	)
	switch {
	case err == nil:
		status, body = 503, bodyNoBacked
		if rec.Upstream != nil && rec.Upstream.Stats != nil {
			rec.Upstream.Stats.NoBackend.Add(1)
		}
	case errors.Is(err, wire.ErrClientGone):
		rec.Status = StatusClientClosed
		return
	case errors.Is(err, wire.ErrTimeout):
		status, body = 504, bodyTimeout
	case errors.Is(err, wire.ErrBadRequest):
		status, body = 400, bodyBadReq
	default:
		status, body = 502, bodyBadGW
	}
	rec.Status = status
	if rerr := ex.Respond(status, textHeader, body); rerr != nil {
		rec.Status = StatusClientClosed
		return
	}
	rec.Bytes = int64(len(body))
}

// outcomeOf says what an engine error means for the backend.
func outcomeOf(err error) Outcome {
	if errors.Is(err, wire.ErrClientGone) || errors.Is(err, wire.ErrBadRequest) {
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
