package engine

import (
	"io"

	"github.com/helios-lb/helios/internal/h2"
)

// streamBuf is what one direction of an HTTP/2 stream has received and
// its exchange has not read yet: a client's request body (h2conn.go) or a
// backend's answer body (h2upstream.go), as plain data, no framing. The body
// decoder (body, kind bodyStream or bodyFixed) reads it as it reads a
// socket; its end is the stream's END_STREAM, and trailers, if any, are
// kept aside as a chunked body's decoder keeps its own.
type streamBuf struct {
	// in holds the data received, from inR on.
	in  []byte
	inR int
	// ended: the sender's side is over (all of the data is in in).
	ended bool
	// trailer is the stream's trailer section, if it had one.
	trailer trailerSection
}

// data takes body bytes; end: the body is complete.
func (m *streamBuf) data(p []byte, end bool) {
	m.compact()
	if len(p) > 0 {
		m.in = append(m.in, p...)
	}
	if end {
		m.ended = true
	}
}

// trailers ends the body with fields.
func (m *streamBuf) trailers(fields []h2.Field) {
	m.ended = true
	m.trailer.reset()
	for _, f := range fields {
		m.trailer.add(f.Name, f.Value)
	}
	m.trailer.done()
}

// read copies out what has been received: errWouldBlock when nothing is
// there yet, io.EOF once all is read.
func (m *streamBuf) read(p []byte) (int, error) {
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

// readCrediting reads as read does, and gives the bytes read back to the
// flow-control window of s (nil once the stream has gone): that credit is
// what lets the peer send more, so a reader that stops reading stops the
// sender. calling counts the reader's calls into s under way.
func (m *streamBuf) readCrediting(p []byte, s *h2.Stream, calling *int) (int, error) {
	n, err := m.read(p)
	if n > 0 && s != nil {
		*calling++
		s.Consumed(n)
		*calling--
	}
	return n, err
}

// What a stream's buffer holds is what its reader has not taken yet,
// which the flow-control window bounds (the sender gets credit back only
// as the reader takes bytes): the bytes read are dropped from the front
// before more are added (compact), and a buffer a burst grew goes once it
// is empty (drained), so a stream whose sender stalls keeps nothing, and
// one whose reader lags holds about its window, never the body it has
// passed on.

// keepStreamBuf is the most buffer an empty stream keeps: about two
// frames of the default size, so that a body the reader keeps up with
// does not allocate per frame.
const keepStreamBuf = 32 << 10

// compact moves what is unread to the front once more has been read than
// is left, so that the buffer does not grow with what was read.
func (m *streamBuf) compact() {
	if m.inR > 0 && m.inR >= len(m.in)-m.inR {
		n := copy(m.in, m.in[m.inR:])
		m.in, m.inR = m.in[:n], 0
	}
}

// drained empties a buffer that is all read.
func (m *streamBuf) drained() {
	m.in, m.inR = m.in[:0], 0
	if cap(m.in) > keepStreamBuf {
		m.in = nil
	}
}

// buffered returns the memory the buffer holds.
func (m *streamBuf) buffered() int { return cap(m.in) }

// unread reports whether received data is left to read.
func (m *streamBuf) unread() bool { return m.inR < len(m.in) }

// reset empties the buffer for reuse, keeping small buffers.
func (m *streamBuf) reset() {
	m.in, m.inR = m.in[:0], 0
	if cap(m.in) > maxIdlePending {
		m.in = nil
	}
	m.trailer.reset()
	m.ended = false
}
