package engine

import "github.com/helios-lb/helios/internal/httpmsg"

// trailerSection is the trailer section of a body, whatever protocol
// carried it: an HTTP/1.1 chunked body's (body.go) or an HTTP/2
// stream's (streamBuf). Its fields are slices of its own buffer, made
// once the section is whole (done), since the buffer may move while it
// grows.
type trailerSection struct {
	buf  []byte
	offs []uint32 // per field: name end, value end (offsets in buf)
	hdr  httpmsg.Header
	// size counts the section's bytes as received, the fields it dropped
	// included, for its bound.
	size int
}

// reset empties the section, keeping small buffers.
func (t *trailerSection) reset() {
	t.buf, t.offs, t.size = t.buf[:0], t.offs[:0], 0
	if cap(t.buf) > maxIdlePending {
		t.buf = nil
	}
	t.hdr.Reset()
}

// add appends a field (copied).
func (t *trailerSection) add(name, value []byte) {
	t.buf = append(t.buf, name...)
	n := len(t.buf)
	t.buf = append(t.buf, value...)
	t.offs = append(t.offs, uint32(n), uint32(len(t.buf)))
}

// done makes the fields, once every one has been added.
func (t *trailerSection) done() {
	t.hdr.Reset()
	start := uint32(0)
	for i := 0; i+1 < len(t.offs); i += 2 {
		ne, ve := t.offs[i], t.offs[i+1]
		name := t.buf[start:ne:ne]
		t.hdr.Fields = append(t.hdr.Fields, httpmsg.Field{Name: name, Value: t.buf[ne:ve:ve], Kind: httpmsg.Classify(name)})
		start = ve
	}
}

// empty reports whether the section has no field to pass on.
func (t *trailerSection) empty() bool { return len(t.hdr.Fields) == 0 }

// copyFrom makes t a copy of o (which is done).
func (t *trailerSection) copyFrom(o *trailerSection) {
	t.buf = append(t.buf[:0], o.buf...)
	t.offs = append(t.offs[:0], o.offs...)
	t.size = o.size
	t.done()
}

// reqTrailer returns the trailer section of the exchange's request body:
// its chunked body's, or its stream's.
func (c *lconn) reqTrailer() *trailerSection {
	return c.client().reqTrailer(c)
}

// respTrailer returns the trailer section of the answer u reads: its
// chunked body's, or its stream's.
func (u *lupconn) respTrailer() *trailerSection {
	if u.h2 != nil {
		return &u.h2.trailer
	}
	return u.body.trailers()
}
