package engine

import (
	"strconv"

	"github.com/helios-lb/helios/internal/h2"
	"github.com/helios-lb/helios/internal/httpmsg"
)

// streamRequest fills the stream's request head (the neutral head every
// exchange reads) from the head its HEADERS carried, which the HTTP/2
// machine has validated already (RFC 9113 §8.2, §8.3: pseudo-header
// fields, lower-case names, no connection-specific fields). The machine's
// slices are valid only during its call: the head's bytes are copied into
// the stream's memory (st.head), which the stream keeps on the loop's free
// list, so that a request allocates nothing once it has grown. What every
// request passes whatever its protocol (method, target, field values and
// counts, Host) is checked by the same functions as an HTTP/1.1 head's;
// an error is the answer the stream gets (readHead).
func (c *lconn) streamRequest(rh *h2.RequestHead, end bool) error {
	st := c.h2s
	mem := &st.head
	mem.reset()
	r := &c.req
	r.Reset()
	if r.Header.Fields == nil {
		// From the loop's free list, as an HTTP/1.1 head's (closeStream
		// gives it back).
		r.Header.Fields = c.l.fieldBufs.get()
	}
	lim := c.opts.limits()
	r.Proto = httpmsg.HTTP2
	r.Minor = 1
	r.KeepAlive = true
	r.Method = mem.copy(rh.Method)
	if err := lim.CheckMethod(r.Method); err != nil {
		return err
	}
	if string(rh.Method) == "CONNECT" {
		return httpmsg.NewStatusError(405, "CONNECT is not supported")
	}
	r.Scheme = mem.copy(rh.Scheme)
	r.Target = mem.copy(rh.Path)
	r.RawTarget = r.Target
	if err := httpmsg.CheckTarget(r.Target); err != nil {
		return err
	}
	r.Path = httpmsg.PathOf(r.Target)
	r.Authority = mem.copy(rh.Authority)
	cookies := 0
	for i := range rh.Fields {
		f := &rh.Fields[i]
		switch string(f.Name) {
		case "host":
			if len(r.Authority) == 0 {
				r.Authority = mem.copy(f.Value)
			}
			continue // :authority is the request's host (§8.3.1)
		case "cookie":
			cookies++
			continue
		case "expect":
			// 100-continue has no meaning across the hop: the client
			// sends its body when the window allows.
			continue
		}
		name, value := mem.pair(f.Name, f.Value)
		if _, err := lim.AddField(&r.Header, name, value); err != nil {
			return err
		}
	}
	if cookies > 0 {
		// HTTP/2 may split cookies into several fields (§8.2.3); they
		// go on as one.
		if _, err := lim.AddField(&r.Header, cookieName, mem.join(rh.Fields, "cookie", "; ")); err != nil {
			return err
		}
	}
	if len(r.Authority) == 0 {
		return httpmsg.BadRequest("missing Host header")
	}
	if !httpmsg.ValidHost(r.Authority) {
		return httpmsg.BadRequest("invalid Host")
	}
	r.HasHost = true
	r.Host = httpmsg.StripPort(r.Authority)
	switch {
	case end:
		r.ContentLength = 0
	default:
		r.ContentLength = rh.ContentLength // -1: as long as the stream's DATA
	}
	return nil
}

// streamHead starts the request of a stream (readHead): its head was
// filled when the stream opened.
func (c *lconn) streamHead() bool {
	if err := c.h2s.headErr; err != nil {
		c.refuse(err, false)
		return false
	}
	c.reqDeadline = 0
	if rt := c.opts.ReadTimeout; rt > 0 {
		c.reqDeadline = c.l.now + int64(rt)
	}
	c.state = lsBody
	return true
}

var cookieName = []byte("cookie")

// streamMem is memory a stream keeps the bytes of a head in: a received
// head the exchange reads after the machine's call (whose slices are
// valid only during it), or a head being gathered for the machine. It is
// kept with the stream's state on the loop's free list, so that once it
// has grown to the heads a connection carries, a head costs a copy and no
// allocation. Slices it hands out stay valid until its next reset, even
// when it grows meanwhile: growing copies the bytes to a new array and
// leaves the old one, which those slices hold, as it was.
type streamMem struct{ b []byte }

// reset empties the memory for the next head; a buffer an unusually large
// head grew is let go.
func (m *streamMem) reset() {
	m.b = m.b[:0]
	if cap(m.b) > maxStreamMem {
		m.b = nil
	}
}

// maxStreamMem is the most head memory a stream keeps between heads.
const maxStreamMem = 8 << 10

// copy returns a copy of p in the memory (nil for an empty p).
func (m *streamMem) copy(p []byte) []byte {
	if len(p) == 0 {
		return nil
	}
	i := len(m.b)
	m.b = append(m.b, p...)
	return m.b[i:len(m.b):len(m.b)]
}

// pair copies a field's name and value, side by side.
func (m *streamMem) pair(name, value []byte) ([]byte, []byte) {
	i := len(m.b)
	m.b = append(append(m.b, name...), value...)
	n := i + len(name)
	return m.b[i:n:n], m.b[n:len(m.b):len(m.b)]
}

// number returns v in decimal, in the memory.
func (m *streamMem) number(v int64) []byte {
	i := len(m.b)
	m.b = strconv.AppendInt(m.b, v, 10)
	return m.b[i:len(m.b):len(m.b)]
}

// join returns the values of the fields named name, joined with sep, in
// the memory.
func (m *streamMem) join(fs []h2.Field, name, sep string) []byte {
	i := len(m.b)
	first := true
	for k := range fs {
		if f := &fs[k]; string(f.Name) == name {
			if !first {
				m.b = append(m.b, sep...)
			}
			first = false
			m.b = append(m.b, f.Value...)
		}
	}
	return m.b[i:len(m.b):len(m.b)]
}

// h2fields is a FieldSink that gathers a head's fields for the HTTP/2
// machine (which lowercases their names as it encodes them), copied into
// its memory: a sink's slices are valid only during its call. A stream
// keeps one for the heads it sends (a pointer to it, passed as a
// FieldSink, costs no allocation).
type h2fields struct {
	fs  []h2.Field
	mem streamMem
}

// reset empties the sink for the next head.
func (s *h2fields) reset() {
	s.fs = s.fs[:0]
	s.mem.reset()
}

// free empties the sink of a stream going back to the free list.
func (s *h2fields) free() {
	clear(s.fs)
	s.fs = s.fs[:0]
	if cap(s.fs) > maxStreamFields {
		s.fs = nil
	}
	s.mem.reset()
}

// maxStreamFields is the most field slots a stream keeps between heads.
const maxStreamFields = 64

// Field appends one field; Upgrade, which only an HTTP/1.1 hop can act
// on, is not (RFC 9113 §8.2.2).
func (s *h2fields) Field(name, value []byte) {
	if len(name) == len("upgrade") && httpmsg.EqualFold(name, "upgrade") {
		return
	}
	n, v := s.mem.pair(name, value)
	s.fs = append(s.fs, h2.Field{Name: n, Value: v})
}

// number appends a field whose value is v in decimal; name is kept, not
// copied (a name of the package's).
func (s *h2fields) number(name []byte, v int64) {
	s.fs = append(s.fs, h2.Field{Name: name, Value: s.mem.number(v)})
}

// Field names and values the HTTP/2 adapters add to heads.
var (
	h2DateName          = []byte("date")
	h2ContentLengthName = []byte("content-length")
	h2TEName            = []byte("te")
	h2TrailersValue     = []byte("trailers")
)
