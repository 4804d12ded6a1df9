package tracing

import (
	"encoding/binary"
	"math/rand/v2"
)

// TraceID identifies a trace: 16 bytes, never all zero once set.
type TraceID [16]byte

// SpanID identifies a span within a trace: 8 bytes, never all zero once
// set.
type SpanID [8]byte

// IsZero reports whether t is unset (the all-zero id is invalid).
func (t TraceID) IsZero() bool { return t == TraceID{} }

// IsZero reports whether s is unset (the all-zero id is invalid).
func (s SpanID) IsZero() bool { return s == SpanID{} }

// AppendHex appends t as 32 lower-case hex digits.
func (t TraceID) AppendHex(b []byte) []byte { return appendHex(b, t[:]) }

// AppendHex appends s as 16 lower-case hex digits.
func (s SpanID) AppendHex(b []byte) []byte { return appendHex(b, s[:]) }

// String returns t in hex (it allocates: not for the request path).
func (t TraceID) String() string { return string(t.AppendHex(nil)) }

// String returns s in hex (it allocates: not for the request path).
func (s SpanID) String() string { return string(s.AppendHex(nil)) }

const hexDigits = "0123456789abcdef"

func appendHex(b, p []byte) []byte {
	for _, c := range p {
		b = append(b, hexDigits[c>>4], hexDigits[c&0xf])
	}
	return b
}

// putHex writes p in hex into dst, which holds 2*len(p) bytes.
func putHex(dst, p []byte) {
	for i, c := range p {
		dst[2*i], dst[2*i+1] = hexDigits[c>>4], hexDigits[c&0xf]
	}
}

// NewTraceID returns a random trace id. Its bytes come from math/rand/v2's
// per-thread generator (ChaCha8, seeded from the system): unpredictable
// enough for ids, without a lock or an allocation.
func NewTraceID() TraceID {
	var t TraceID
	for t.IsZero() {
		binary.BigEndian.PutUint64(t[:8], rand.Uint64())
		binary.BigEndian.PutUint64(t[8:], rand.Uint64())
	}
	return t
}

// NewSpanID returns a random span id.
func NewSpanID() SpanID {
	var s SpanID
	for s.IsZero() {
		binary.BigEndian.PutUint64(s[:], rand.Uint64())
	}
	return s
}

// unhex decodes lower-case hex from src into dst (len(src) == 2*len(dst)),
// reporting false on any other byte. upper also accepts A-F (B3 is
// lenient where W3C is not).
func unhex(dst, src []byte, upper bool) bool {
	for i := range dst {
		hi, ok1 := fromHex(src[2*i], upper)
		lo, ok2 := fromHex(src[2*i+1], upper)
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

func fromHex(c byte, upper bool) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case upper && c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
