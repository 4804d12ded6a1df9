package proxy

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/helios-lb/helios/internal/httpmsg"
	"github.com/helios-lb/helios/internal/upstream"
	"github.com/helios-lb/helios/internal/wire"
)

// Mirror sends a copy of a share of a route's requests to a shadow
// upstream (routes[].mirror) and forgets it: the copy is made on the
// loop, from the request as it is forwarded (the forwarding rules
// applied), when the pipeline starts forwarding it, and handed to a
// wire.Mirrorer, which sends it away from the loops and drops its answer.
// Nothing of the copy, not its latency, not its errors, reaches the
// request it copies.
//
// A copy carries the request's body only when the engine holds the whole
// body in memory (wire.Exchange.BodyHeld); a request whose body streams,
// or lies in a temporary file, is not copied at all (a request without
// its body would be another request), and is counted (Unbuffered).
//
// Requests that ask for an upgrade (WebSocket) are not copied.
//
// Copies are shed first: past MaxInflight copies in flight, a copy is
// dropped and counted (Busy), so a slow shadow costs a bounded number of
// worker goroutines and connections and nothing else. Requests that are
// not copied pay one random draw; a copy costs its bytes, copied once.
type Mirror struct {
	// Upstream is the shadow: its members and strategy pick each copy's
	// backend, which counts the copy as a request in flight while it is.
	Upstream *Upstream
	// PerMillion is the share of the route's requests copied, in
	// millionths: 1,000,000 (or more) copies every request, 0 none.
	PerMillion uint64
	// MaxInflight bounds the copies in flight; more are dropped.
	MaxInflight int64
	// Timeout bounds each copy, from its send to the end of its answer.
	Timeout time.Duration
	// Sender sends the copies.
	Sender wire.Mirrorer
	// Rand draws the share; it must be safe for concurrent use. Nil
	// means math/rand/v2's Uint64.
	Rand func() uint64
	// Stats counts the copies; the server keeps them across reloads for
	// a route that keeps its shadow, so that the bound holds across a
	// reload too. Never nil.
	Stats *MirrorStats

	// copies are the copies done with, for reuse.
	copies sync.Pool
}

// million is PerMillion's whole.
const million = 1_000_000

// MirrorStats count a route's copies.
type MirrorStats struct {
	// Answered counts copies the shadow answered, whatever the status;
	// Failed those it did not (unreachable, timed out, reset).
	Answered, Failed atomic.Uint64
	// Busy counts copies dropped because MaxInflight were in flight;
	// Unbuffered requests not copied because the engine did not hold
	// their whole body in memory; NoBackend copies dropped because no
	// backend of the shadow was available.
	Busy, Unbuffered, NoBackend atomic.Uint64
	// inflight counts the copies in flight.
	inflight atomic.Int64
}

// Inflight returns the copies in flight now.
func (s *MirrorStats) Inflight() int64 { return s.inflight.Load() }

// send copies the request on ex to the shadow, when it is drawn, its
// body is held, the bound allows and the shadow has a backend. It never
// blocks.
func (m *Mirror) send(ex wire.Exchange) {
	if ex.Upgrade() != nil {
		return // a copy of a WebSocket handshake would open nothing
	}
	if m.PerMillion < million {
		r := m.Rand
		if r == nil {
			r = rand.Uint64
		}
		if r()%million >= m.PerMillion {
			return
		}
	}
	st := m.Stats
	body, ok := ex.BodyHeld()
	if !ok {
		st.Unbuffered.Add(1)
		return
	}
	if st.inflight.Add(1) > m.MaxInflight {
		st.inflight.Add(-1)
		st.Busy.Add(1)
		return
	}
	up := m.Upstream
	var k upstream.Key
	k.Hash, k.Hashed = up.Key.hash(ex)
	b := up.Members().Picker.Pick(k)
	if b == nil {
		st.inflight.Add(-1)
		st.NoBackend.Add(1)
		return
	}
	c := m.copyOf(ex, b, body)
	b.Begin()
	m.Sender.Mirror(&c.MirrorRequest)
}

// mirrorCopy is a wire.MirrorRequest with what making it needs, reused
// from copy to copy.
type mirrorCopy struct {
	wire.MirrorRequest
	m    *Mirror
	fw   httpmsg.Forwarder
	sink copySink
}

// maxKeptCopy is the largest buffer a copy keeps for reuse.
const maxKeptCopy = 256 << 10

// copyOf makes the copy of the request on ex for backend b.
func (m *Mirror) copyOf(ex wire.Exchange, b *upstream.Backend, body []byte) *mirrorCopy {
	c, _ := m.copies.Get().(*mirrorCopy)
	if c == nil {
		c = &mirrorCopy{}
		c.Done = c.finish // made once per copy, not per request
	}
	c.m = m
	r := &c.MirrorRequest
	r.Transport, r.Backend, r.Timeout = m.Upstream.Transport, b, m.Timeout
	req := ex.Request()
	// The copy names the client the listener found, as a request from it
	// (its own forwarding fields are not passed on).
	hop := httpmsg.Hop{Peer: ex.ClientAddr(), TLS: ex.TLSVersion() != nil, Backend: b.Addr}
	s := &c.sink
	s.buf, s.offs = r.Buf[:0], s.offs[:0]
	s.add(req.Method)
	s.add(httpmsg.Authority(req, &hop))
	s.add(req.Target)
	c.fw.Fields(s, req, &hop)
	s.add(body)
	// Every byte is in; the slices can point into the buffer now.
	o, buf := s.offs, s.buf
	r.Buf = buf
	r.Method, r.Authority, r.Target = buf[o[0]:o[1]], buf[o[1]:o[2]], buf[o[2]:o[3]]
	r.Header.Reset()
	for i := 3; i+2 < len(o); i += 2 {
		r.Header.Fields = append(r.Header.Fields, httpmsg.Field{Name: buf[o[i]:o[i+1]], Value: buf[o[i+1]:o[i+2]]})
	}
	r.Body = nil
	if len(body) > 0 {
		r.Body = buf[o[len(o)-2]:o[len(o)-1]]
	}
	return c
}

// finish ends a copy (wire.MirrorRequest.Done): the backend's count, the
// route's, and the copy back for reuse.
func (c *mirrorCopy) finish(r *wire.MirrorRequest, _ int, err error) {
	m := c.m
	switch {
	case err == nil:
		m.Stats.Answered.Add(1)
	case err != wire.ErrMirrorClosed:
		m.Stats.Failed.Add(1)
	}
	r.Backend.End(err != nil && err != wire.ErrMirrorClosed)
	m.Stats.inflight.Add(-1)
	r.Transport, r.Backend, r.Method, r.Authority, r.Target, r.Body = nil, nil, nil, nil, nil, nil
	r.Header.Reset()
	c.m = nil
	if cap(r.Buf) > maxKeptCopy {
		r.Buf, c.sink.buf = nil, nil
	}
	m.copies.Put(c)
}

// copySink collects the parts of a copy in one buffer: offs[i] is where
// part i starts and the next begins (offs[0] is 0). It is an
// httpmsg.FieldSink: a field is two parts, name and value.
type copySink struct {
	buf  []byte
	offs []int
}

func (s *copySink) add(p []byte) {
	if len(s.offs) == 0 {
		s.offs = append(s.offs, len(s.buf))
	}
	s.buf = append(s.buf, p...)
	s.offs = append(s.offs, len(s.buf))
}

// Field takes one field of the copy's head.
func (s *copySink) Field(name, value []byte) {
	s.add(name)
	s.add(value)
}
