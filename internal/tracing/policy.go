package tracing

import (
	"encoding/binary"

	"github.com/helios-lb/helios/internal/httpmsg"
)

// Policy is how requests join traces: the formats read and written, and
// the sampling decision. It is immutable once made and safe for
// concurrent use; a reload makes a new one (the graph holds it), so a
// new ratio applies from the next request on.
type Policy struct {
	// formats are read in order (the first valid context wins) and all
	// written.
	formats [2]Format
	n       int
	// bound: a trace id whose last 8 bytes, shifted right by one, are
	// below it is sampled (OpenTelemetry's TraceIDRatioBased).
	bound       uint64
	parentBased bool
}

// NewPolicy returns the policy that samples ratio (0-1) of the traces
// Helios decides on, follows the caller's decision when parentBased and
// the caller made one, and reads and writes formats (W3C, B3; none
// means W3C; repeats are ignored).
func NewPolicy(ratio float64, parentBased bool, formats ...Format) *Policy {
	p := &Policy{parentBased: parentBased}
	for _, f := range formats {
		if (f == W3C || f == B3) && !p.has(f) {
			p.formats[p.n] = f
			p.n++
		}
	}
	if p.n == 0 {
		p.formats[0], p.n = W3C, 1
	}
	switch {
	case ratio >= 1:
		p.bound = 1 << 63
	case ratio > 0:
		p.bound = uint64(ratio * (1 << 63))
	}
	return p
}

func (p *Policy) has(f Format) bool {
	for _, g := range p.formats[:p.n] {
		if g == f {
			return true
		}
	}
	return false
}

// Formats returns the formats the policy reads and writes, in order.
func (p *Policy) Formats() []Format { return p.formats[:p.n:p.n] }

// Extract reads the caller's context from h, in the policy's formats in
// order: the first valid one wins. A context that is not valid may still
// carry a decision (a lone B3 sampling state).
func (p *Policy) Extract(h *httpmsg.Header) Context {
	var decision Context
	for _, f := range p.formats[:p.n] {
		var c Context
		var ok bool
		switch f {
		case W3C:
			if v, found := h.Get("traceparent"); found {
				c, ok = ParseTraceparent(v)
			}
		case B3:
			if v, found := h.Get("b3"); found {
				c, ok = ParseB3Single(v)
			} else {
				c, ok = ParseB3Multi(h)
			}
		}
		if ok {
			return c
		}
		if c.Decided && !decision.Decided {
			decision = Context{Sampled: c.Sampled, Decided: true}
		}
	}
	return decision
}

// Sample decides whether the trace t, whose caller's context is parent,
// is recorded: the caller's decision when the policy is parent-based and
// the caller made one, else the ratio on the trace id, so that every
// service sampling the same ratio of the same trace agrees.
func (p *Policy) Sample(parent *Context, t TraceID) bool {
	if p.parentBased && parent.Decided {
		return parent.Sampled
	}
	return binary.BigEndian.Uint64(t[8:])>>1 < p.bound
}

// Allocator lends memory that lives as long as a request head
// (wire.Exchange implements it).
type Allocator interface {
	// Alloc returns n bytes.
	Alloc(n int) []byte
}

// Header field names Inject writes and drops.
var (
	nameTraceparent = []byte("traceparent")
	nameTracestate  = []byte("tracestate")
	nameB3          = []byte("b3")
	nameB3TraceID   = []byte("X-B3-TraceId")
	nameB3SpanID    = []byte("X-B3-SpanId")
	nameB3Sampled   = []byte("X-B3-Sampled")
	nameB3Parent    = []byte("X-B3-ParentSpanId")
	nameB3Flags     = []byte("X-B3-Flags")
	b3Yes, b3No     = []byte("1"), []byte("0")
)

// Inject writes the context of trace t with parent span s and the
// sampling decision into h, in every format of the policy, replacing what
// the caller sent in those formats; values live in memory from a. The
// caller's tracestate goes on with traceparent only when the context came
// from it (from reads the format the caller's context was read in; 0 when
// there was none), as W3C Trace Context §3.3 asks of a new trace.
func (p *Policy) Inject(h *httpmsg.Header, a Allocator, t TraceID, s SpanID, sampled bool, from Format) {
	for _, f := range p.formats[:p.n] {
		switch f {
		case W3C:
			buf := a.Alloc(traceparentLen)
			PutTraceparent(buf, t, s, sampled)
			h.Set(nameTraceparent, buf)
			if from != W3C {
				h.Del(nameTracestate)
			}
		case B3:
			buf := a.Alloc(48)
			putHex(buf[:32], t[:])
			putHex(buf[32:], s[:])
			h.Del(nameB3)
			h.Del(nameB3Parent)
			h.Del(nameB3Flags)
			h.Set(nameB3TraceID, buf[:32])
			h.Set(nameB3SpanID, buf[32:])
			if sampled {
				h.Set(nameB3Sampled, b3Yes)
			} else {
				h.Set(nameB3Sampled, b3No)
			}
		}
	}
}
