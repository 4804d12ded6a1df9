package h1

import (
	"io"

	"github.com/helios-lb/helios/internal/h2"
)

// h1msg is one direction of an HTTP/2 stream rendered as an HTTP/1.1
// message, for the machine that reads HTTP/1.1: a client's request
// (lh2.go) or a backend's answer (lh2up.go). The side that knows the head
// writes it into in; the body follows as it arrives, in chunks when no
// length was declared (chunked), the trailers, if any, in the last one.
type h1msg struct {
	// in holds the rendered bytes, from inR on.
	in  []byte
	inR int
	// ended: the sender's side is over (all of the message is in in);
	// chunked: the body is rendered in chunks.
	ended, chunked bool
}

// data takes body bytes; end: the body is complete.
func (m *h1msg) data(p []byte, end bool) {
	if len(p) > 0 {
		if m.chunked {
			m.in = appendHex(m.in, int64(len(p)))
			m.in = append(m.in, "\r\n"...)
			m.in = append(m.in, p...)
			m.in = append(m.in, "\r\n"...)
		} else {
			m.in = append(m.in, p...)
		}
	}
	if end {
		m.ended = true
		if m.chunked {
			m.in = append(m.in, "0\r\n\r\n"...)
		}
	}
}

// trailers ends the body with fields, in its last chunk; it reports false
// when the body is not chunked, and HTTP/1.1 has nowhere to carry them
// (the caller keeps them aside, or drops them).
func (m *h1msg) trailers(fields []h2.Field) bool {
	m.ended = true
	if !m.chunked {
		return false
	}
	m.in = append(m.in, "0\r\n"...)
	m.in = appendTrailer(m.in, fields)
	m.in = append(m.in, "\r\n"...)
	return true
}

// read copies out what has been rendered: errWouldBlock when nothing is
// there yet, io.EOF once the message is all read.
func (m *h1msg) read(p []byte) (int, error) {
	if m.inR == len(m.in) {
		m.in, m.inR = m.in[:0], 0
		if m.ended {
			return 0, io.EOF
		}
		return 0, errWouldBlock
	}
	n := copy(p, m.in[m.inR:])
	m.inR += n
	if m.inR == len(m.in) {
		m.in, m.inR = m.in[:0], 0
	}
	return n, nil
}

// reset empties the message for reuse, keeping a small buffer.
func (m *h1msg) reset() {
	m.in, m.inR = m.in[:0], 0
	if cap(m.in) > maxIdlePending {
		m.in = nil
	}
	m.ended, m.chunked = false, false
}

// appendFields appends fields as "name: value\r\n" lines.
func appendFields(b []byte, fields []h2.Field) []byte {
	for _, f := range fields {
		b = appendField(b, f)
	}
	return b
}

// appendTrailer appends the fields of a trailer section as "name: value\r\n"
// lines, without those a trailer may not carry (trailerForbidden).
func appendTrailer(b []byte, fields []h2.Field) []byte {
	for _, f := range fields {
		if !trailerForbidden(f.Name) {
			b = appendField(b, f)
		}
	}
	return b
}

func appendField(b []byte, f h2.Field) []byte {
	b = append(b, f.Name...)
	b = append(b, ": "...)
	b = append(b, f.Value...)
	return append(b, "\r\n"...)
}
