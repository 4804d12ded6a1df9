package engine

import (
	"unsafe"

	"github.com/helios-lb/helios/internal/h2"
	"github.com/helios-lb/helios/internal/httpmsg"
)

// streamRequest fills the stream's request head (the neutral head every
// exchange reads) from the head its HEADERS carried, which the HTTP/2
// machine has validated already (RFC 9113 §8.2, §8.3: pseudo-header
// fields, lower-case names, no connection-specific fields). What every
// request passes whatever its protocol (method, target, field values
// and counts, Host) is checked by the same functions as an HTTP/1.1
// head's; an error is the answer the stream gets (readHead).
func (c *lconn) streamRequest(rh *h2.RequestHead, end bool) error {
	st := c.h2s
	r := &c.req
	r.reset()
	lim := c.opts.limits()
	r.Proto = httpmsg.HTTP2
	r.minor = 1
	r.keepAlive = true
	r.Method = bytesOf(rh.Method)
	if err := lim.checkMethod(r.Method); err != nil {
		return err
	}
	if rh.Method == "CONNECT" {
		return &statusError{405, "CONNECT is not supported"}
	}
	r.Scheme = bytesOf(rh.Scheme)
	r.Target = bytesOf(rh.Path)
	r.rawTarget = r.Target
	if err := checkTarget(r.Target); err != nil {
		return err
	}
	r.Path = pathOf(r.Target)
	r.Authority = bytesOf(rh.Authority)
	cookies := 0
	for i := range rh.Fields {
		f := &rh.Fields[i]
		switch f.Name {
		case "host":
			if len(r.Authority) == 0 {
				r.Authority = bytesOf(f.Value)
			}
			continue // :authority is the request's host (§8.3.1)
		case "cookie":
			// HTTP/2 may split cookies into several fields (§8.2.3);
			// they go on as one.
			if cookies > 0 {
				st.cookie = append(st.cookie, "; "...)
			}
			st.cookie = append(st.cookie, f.Value...)
			cookies++
			continue
		case "expect":
			// 100-continue has no meaning across the hop: the client
			// sends its body when the window allows.
			continue
		}
		if _, err := r.addField(bytesOf(f.Name), bytesOf(f.Value), lim); err != nil {
			return err
		}
	}
	if cookies > 0 {
		if _, err := r.addField(cookieName, st.cookie, lim); err != nil {
			return err
		}
	}
	if len(r.Authority) == 0 {
		return badRequest("missing Host header")
	}
	if !validHost(r.Authority) {
		return badRequest("invalid Host")
	}
	r.hasHost = true
	r.Host = stripPort(r.Authority)
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

// bytesOf returns the bytes of s without copying them. The head's
// fields are read, never written, so a string's bytes may stand in for a
// slice of a connection's buffer.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// h2fields is a FieldSink that gathers a head's fields for the HTTP/2
// machine: names in lower case (RFC 9113 §8.2.1), from the loop's table
// of names seen before.
type h2fields struct {
	l  *loop
	fs []h2.Field
}

// Field appends one field; Upgrade, which only an HTTP/1.1 hop can act
// on, is not (RFC 9113 §8.2.2).
func (s *h2fields) Field(name, value []byte) {
	if len(name) == len("upgrade") && httpmsg.EqualFold(name, "upgrade") {
		return
	}
	s.fs = append(s.fs, h2.Field{Name: s.l.h2name(name), Value: string(value)})
}
