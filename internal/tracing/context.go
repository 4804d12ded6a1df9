package tracing

import (
	"github.com/helios-lb/helios/internal/httpmsg"
)

// Context is the caller's place in a trace, as a request carries it: the
// trace, the caller's span (the parent of Helios's) and the caller's
// sampling decision. The zero Context is none.
type Context struct {
	TraceID TraceID
	// SpanID is the caller's span.
	SpanID SpanID
	// Sampled is the caller's decision, when Decided.
	Sampled bool
	// Decided says the caller made a decision (a B3 context may leave
	// it to the receiver; W3C always carries one).
	Decided bool
	// Format is the header format the context was read from.
	Format Format
}

// Valid reports whether c holds a trace and a parent span.
func (c *Context) Valid() bool { return !c.TraceID.IsZero() && !c.SpanID.IsZero() }

// Format is a way of carrying trace context in headers.
type Format uint8

// The formats Helios reads and writes.
const (
	// W3C is W3C Trace Context: traceparent and tracestate.
	W3C Format = iota + 1
	// B3 is Zipkin's B3: the single b3 field, or X-B3-TraceId,
	// X-B3-SpanId, X-B3-Sampled and X-B3-Flags. Helios reads both and
	// writes the multiple fields, which every B3 implementation reads.
	B3
)

// traceparentLen is the length of a version 00 traceparent:
// 00-<32 hex>-<16 hex>-<2 hex>.
const traceparentLen = 55

// ParseTraceparent reads a traceparent field value (W3C Trace Context
// §3.2). It reports false for a value the recommendation says to ignore:
// a wrong length or separator, upper-case or non-hex digits, version ff,
// an all-zero trace or parent id. A version above 00 is read as 00 when
// its first 55 bytes are, as §3.2.4 asks.
func ParseTraceparent(v []byte) (Context, bool) {
	v = httpmsg.TrimOWS(v)
	if len(v) < traceparentLen || v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return Context{}, false
	}
	var ver [1]byte
	if !unhex(ver[:], v[0:2], false) || ver[0] == 0xff {
		return Context{}, false
	}
	if ver[0] == 0 && len(v) != traceparentLen || len(v) > traceparentLen && v[traceparentLen] != '-' {
		return Context{}, false
	}
	var c Context
	var flags [1]byte
	if !unhex(c.TraceID[:], v[3:35], false) || !unhex(c.SpanID[:], v[36:52], false) || !unhex(flags[:], v[53:55], false) {
		return Context{}, false
	}
	if !c.Valid() {
		return Context{}, false
	}
	c.Sampled, c.Decided, c.Format = flags[0]&1 != 0, true, W3C
	return c, true
}

// PutTraceparent writes the version 00 traceparent of trace t, parent
// span s and the sampling decision into dst, which holds 55 bytes.
func PutTraceparent(dst []byte, t TraceID, s SpanID, sampled bool) {
	_ = dst[traceparentLen-1]
	dst[0], dst[1], dst[2] = '0', '0', '-'
	putHex(dst[3:35], t[:])
	dst[35] = '-'
	putHex(dst[36:52], s[:])
	dst[52], dst[53], dst[54] = '-', '0', '0'
	if sampled {
		dst[54] = '1'
	}
}

// ParseB3Single reads the single b3 field:
// {trace id}-{span id}[-{sampling state}[-{parent span id}]], or a lone
// sampling state (0, 1, d), which decides without a context (ok false,
// but c.Decided set). A 16-digit trace id is a 64-bit one, widened with
// leading zeros.
func ParseB3Single(v []byte) (c Context, ok bool) {
	v = httpmsg.TrimOWS(v)
	if len(v) == 1 {
		c.Sampled, c.Decided = b3State(v)
		return c, false
	}
	i := indexByte(v, '-')
	if i < 0 || !parseB3TraceID(&c.TraceID, v[:i]) {
		return Context{}, false
	}
	v = v[i+1:]
	span := v
	if j := indexByte(v, '-'); j >= 0 {
		span, v = v[:j], v[j+1:]
		state := v
		if k := indexByte(v, '-'); k >= 0 {
			state = v[:k]
		}
		if len(state) != 1 {
			return Context{}, false
		}
		if c.Sampled, c.Decided = b3State(state); !c.Decided {
			return Context{}, false
		}
	}
	if len(span) != 16 || !unhex(c.SpanID[:], span, true) || !c.Valid() {
		return Context{}, false
	}
	c.Format = B3
	return c, true
}

// b3State reads a B3 sampling state: 1 and d (debug) sample, 0 does not;
// anything else decides nothing.
func b3State(v []byte) (sampled, decided bool) {
	if len(v) != 1 {
		return false, false
	}
	switch v[0] {
	case '1', 'd':
		return true, true
	case '0':
		return false, true
	}
	return false, false
}

// parseB3TraceID reads a 16- or 32-digit trace id.
func parseB3TraceID(t *TraceID, v []byte) bool {
	switch len(v) {
	case 32:
		return unhex(t[:], v, true)
	case 16:
		*t = TraceID{}
		return unhex(t[8:], v, true)
	}
	return false
}

// ParseB3Multi reads the multiple B3 fields of h: X-B3-TraceId and
// X-B3-SpanId make the context; X-B3-Sampled (1, 0, and the legacy true
// and false) and X-B3-Flags (1: debug, which samples) the decision.
func ParseB3Multi(h *httpmsg.Header) (c Context, ok bool) {
	if v, found := h.Get("x-b3-flags"); found && string(httpmsg.TrimOWS(v)) == "1" {
		c.Sampled, c.Decided = true, true
	} else if v, found := h.Get("x-b3-sampled"); found {
		switch string(httpmsg.TrimOWS(v)) {
		case "1", "true":
			c.Sampled, c.Decided = true, true
		case "0", "false":
			c.Decided = true
		}
	}
	tid, found := h.Get("x-b3-traceid")
	if !found {
		return c, false
	}
	sid, found := h.Get("x-b3-spanid")
	sid = httpmsg.TrimOWS(sid)
	if !found || !parseB3TraceID(&c.TraceID, httpmsg.TrimOWS(tid)) || len(sid) != 16 || !unhex(c.SpanID[:], sid, true) || !c.Valid() {
		return Context{Sampled: c.Sampled, Decided: c.Decided}, false
	}
	c.Format = B3
	return c, true
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}
