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
	m.compact()
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
	m.compact()
	m.in = append(m.in, "0\r\n"...)
	m.in = appendTrailer(m.in, fields)
	m.in = append(m.in, "\r\n"...)
	return true
}

// read copies out what has been rendered: errWouldBlock when nothing is
// there yet, io.EOF once the message is all read.
func (m *h1msg) read(p []byte) (int, error) {
	if m.inR == len(m.in) {
		m.drained()
		if m.ended {
			return 0, io.EOF
		}
		return 0, errWouldBlock
	}
	n := copy(p, m.in[m.inR:])
	m.inR += n
	if m.inR == len(m.in) {
		m.drained()
	}
	return n, nil
}

// What a message's buffer holds is what its reader has not taken yet,
// which the flow-control window bounds (the sender gets credit back only
// as the reader takes bytes): the bytes read are dropped from the front
// before more are added (compact), and a buffer a burst grew goes once it
// is empty (drained), so a stream whose sender stalls keeps nothing, and
// one whose reader lags holds about its window, never the body it has
// passed on.

// keepMsgBuf is the most buffer an empty message keeps: about two frames
// of the default size, so that a body the reader keeps up with does not
// allocate per frame.
const keepMsgBuf = 32 << 10

// compact moves what is unread to the front once more has been read than
// is left, so that the buffer does not grow with what was read.
func (m *h1msg) compact() {
	if m.inR > 0 && m.inR >= len(m.in)-m.inR {
		n := copy(m.in, m.in[m.inR:])
		m.in, m.inR = m.in[:n], 0
	}
}

// drained empties a message that is all read.
func (m *h1msg) drained() {
	m.in, m.inR = m.in[:0], 0
	if cap(m.in) > keepMsgBuf {
		m.in = nil
	}
}

// buffered returns the memory the message holds.
func (m *h1msg) buffered() int { return cap(m.in) }

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
