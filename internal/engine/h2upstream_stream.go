package engine

import (
	"fmt"
	"io"

	"github.com/helios-lb/helios/internal/h2"
	"github.com/helios-lb/helios/internal/http1"
	"github.com/helios-lb/helios/internal/httpmsg"
	"github.com/helios-lb/helios/internal/wire"
	"golang.org/x/net/http2"
)

// The stream role of a lupconn: one request to an HTTP/2 backend as a
// stream of an h2up connection, its head, its body both ways and its end.

// allocUpStream returns a lupconn in the stream role on hu.
func (l *loop) allocUpStream(hu *h2up) *lupconn {
	var u *lupconn
	if n := len(l.freeUpStreams); n > 0 {
		u = l.freeUpStreams[n-1]
		l.freeUpStreams = l.freeUpStreams[:n-1]
	} else {
		u = &lupconn{l: l, h2: &h2upStream{}}
	}
	u.pool = hu.pool
	u.fd = -1
	u.fr = fdReader{fd: -1}
	u.fw = fdWriter{fd: -1, file: -1}
	u.state = upIdle
	u.used = false
	u.sending = false
	tr := u.body.trailer
	if tr != nil {
		tr.reset()
	}
	u.body = body{trailer: tr}
	u.inc++
	st := u.h2
	st.hu = hu
	return u
}

// endStream ends a lupconn in the stream role (its release or close): a
// stream still open is reset (the answer is not wanted any more).
func (u *lupconn) endStream() {
	if u.state == upClosed {
		return
	}
	st := u.h2
	if hu := st.hu; hu != nil && hu.connecting && u.state == upIdle && hu.opening > 0 {
		hu.opening-- // it gave up waiting for the connection
	}
	if s := st.s; s != nil {
		// An answer read whole whose stream has not ended yet (its
		// END_STREAM or trailers still to come), after a request sent
		// whole, is left to end by itself; any other is not wanted any
		// more.
		if !s.Closed() && !(u.body.done && !u.sending && st.err == nil) {
			s.Reset(http2.ErrCodeCancel)
		}
		s.SetUser(nil)
	}
	u.state = upClosed
	u.client = nil
	if u.rd.buf != nil {
		u.l.readBufs.put(u.rd.buf)
		u.rd.buf = nil
	}
	u.rd.r, u.rd.w, u.rd.pin = 0, 0, 0
	hu := st.hu
	msg := st.streamBuf
	msg.reset()
	out, resp := st.out, st.resp
	out.free()
	resp.reset()
	*st = h2upStream{streamBuf: msg, carry: st.carry[:0], out: out, resp: resp}
	if cap(st.carry) > maxIdlePending {
		st.carry = nil
	}
	if len(u.l.freeUpStreams) < 1024 {
		u.l.freeUpStreams = append(u.l.freeUpStreams, u)
	}
	if hu != nil {
		hu.streamEnded()
	}
}

// h2upSrc reads the answer's body from the stream, giving the bytes
// read back to the stream's window.
type h2upSrc struct{ u *lupconn }

func (r h2upSrc) Read(p []byte) (int, error) {
	st := r.u.h2
	if !st.unread() && st.err != nil {
		return 0, st.err
	}
	return st.readCrediting(p, st.s, &st.calling)
}

// sendRequestH2 opens the exchange's stream and sends its request: the
// head, and the body as sendRequest would (a small one whole, what
// buffering holds, or the start of one that streams).
func (c *lconn) sendRequestH2() {
	u := c.up
	st := u.h2
	hu := st.hu
	if u.rd.buf == nil {
		u.rd.reset(h2upSrc{u}, c.l.readBufs.get())
	}
	u.state = upWaitHead
	u.sending = true
	bodyLen := int64(-1)
	if c.bodyBuf == bufferedWhole {
		bodyLen = c.bb.Len()
	}
	var first []byte
	end := false
	switch {
	case c.bodyBuf != notBuffered:
		first = c.bb.Mem()
		if f, n := c.bb.File(); f != nil && n > 0 {
			// Read back on the loop, as a static file over TLS is: the
			// spill was written moments ago and is in the page cache.
			st.file, st.fileOff, st.fileEnd = f, 0, n
		}
		c.streaming = c.bodyBuf == bufferedPrefix
		end = !c.streaming && st.file == nil
	case c.reqBody.done:
		end = true
	default:
		if p, ok := c.reqBody.fullyBuffered(); ok {
			first = p
			c.replay = true
			end = true
		} else {
			c.streaming = true
		}
	}
	c.h2requestHead(st, bodyLen)
	st.calling++
	s, err := hu.conn.OpenStream(&st.head, end && len(first) == 0)
	st.calling--
	if err != nil {
		c.upFailed(fmt.Errorf("%w: %s: %w", wire.ErrConnect, c.be.Addr, err), false)
		return
	}
	st.s = s
	s.SetUser(u)
	if len(first) > 0 {
		// Not bodySent: what buffering holds, or a small body kept for a
		// retry, can be sent again (as on HTTP/1.1).
		c.h2upData(first, end)
	}
	c.setDeadline(dlUpHead, c.tr.Settings.ResponseHeaderTimeout)
	if c.streaming || st.file != nil {
		c.pumpReqH2()
		return
	}
	if len(st.carry) == 0 {
		u.sending = false
	}
	if c.up == u && u.state == upWaitHead && (st.gotHead || st.err != nil) {
		c.readUpHead()
	}
}

// h2requestHead makes the request head for an HTTP/2 backend from the
// exchange's neutral head, by the forwarding rules every request goes by
// (httpmsg.Forwarder: hop-by-hop fields dropped, X-Forwarded-* and
// X-Request-Id set): :method, :scheme, :authority, :path, the fields,
// content-length when the body's length is known, and te: trailers when
// the client takes trailers (gRPC servers look for it; RFC 9113 §8.2.2
// allows it). The pseudo-header fields are slices of the exchange's
// request, the fields copies in the stream's sink: all stay valid while
// the exchange's request does.
func (c *lconn) h2requestHead(st *h2upStream, bodyLen int64) {
	r := &c.req
	hop := c.hop()
	h := &st.head
	h.Method = r.Method
	h.Path = r.Target
	h.Scheme = h2SchemeHTTP
	if c.tr.Settings.TLS {
		h.Scheme = h2SchemeHTTPS
	}
	h.Authority = httpmsg.Authority(&r.Request, &hop)
	out := &st.out
	out.reset()
	c.l.fwd.Fields(out, &r.Request, &hop)
	cl := int64(-1)
	switch {
	case bodyLen >= 0:
		cl = bodyLen
	case r.ContentLength > 0:
		cl = r.ContentLength
	case r.ContentLength == 0 && !http1.MethodWithoutBody(r.Method) && r.Header.HasKind(httpmsg.KindContentLength):
		cl = 0
	}
	if cl >= 0 {
		out.number(h2ContentLengthName, cl)
	}
	if teTrailers(&c.req.Header) {
		out.fs = append(out.fs, h2.Field{Name: h2TEName, Value: h2TrailersValue})
	}
	h.Fields = out.fs
}

// The schemes of requests to HTTP/2 backends.
var (
	h2SchemeHTTP  = []byte("http")
	h2SchemeHTTPS = []byte("https")
)

// h2upData writes request body bytes on the stream, carrying what the
// window does not take.
func (c *lconn) h2upData(p []byte, end bool) {
	u := c.up
	st := u.h2
	if st.s == nil {
		return
	}
	st.calling++
	n, err := st.s.WriteData(p, end)
	st.calling--
	if err != nil || st.s == nil {
		return
	}
	if n == len(p) {
		if end {
			u.sending = false
		}
		return
	}
	st.carry = append(st.carry[:0], p[n:]...)
	st.carryEnd = end
}

// pumpReqH2 moves request body bytes from the client to the backend's
// stream until one of them has to wait (pumpReq): the stream's window
// (OnWritable resumes) or the client (its input resumes).
func (c *lconn) pumpReqH2() {
	defer c.reclaimBodyBuf()
	u := c.up
	st := u.h2
	for {
		if len(st.carry) > 0 {
			if st.s == nil {
				return
			}
			st.calling++
			n, err := st.s.WriteData(st.carry, st.carryEnd)
			st.calling--
			if err != nil || st.s == nil {
				st.carry = st.carry[:0]
				return
			}
			st.carry = st.carry[:copy(st.carry, st.carry[n:])]
			if len(st.carry) > 0 {
				return
			}
			if st.carryEnd {
				u.sending = false
				return
			}
		}
		if st.s == nil {
			return
		}
		if st.file != nil {
			if !c.h2upFile() {
				return
			}
			continue
		}
		if !c.streaming {
			return
		}
		room := st.s.SendWindow()
		if room == 0 {
			st.s.WaitWritable()
			return
		}
		p, err := c.reqPiece(room)
		if len(p) > 0 {
			c.bodySent = true
			c.bodyDeadline = 0
			c.h2upData(p, false)
			if c.state == lsForward && u.state == upWaitHead {
				c.setDeadline(dlUpHead, c.tr.Settings.ResponseHeaderTimeout)
			}
		}
		switch {
		case err == nil:
		case err == io.EOF:
			c.streaming = false
			c.bodyDeadline = 0
			c.h2upEnd()
			return
		case err == errWouldBlock:
			c.awaitClientBody()
			return
		default:
			c.clientBodyFailed(clientBodyErr(err))
			return
		}
	}
}

// h2upFile sends what the window allows of the part of a buffered
// request body kept in a file; it reports false when it has to wait (the
// window, or a failed read, which fails the attempt).
func (c *lconn) h2upFile() bool {
	u := c.up
	st := u.h2
	if st.fileOff >= st.fileEnd {
		st.file = nil
		return true
	}
	room := st.s.SendWindow()
	if room == 0 {
		st.s.WaitWritable()
		return false
	}
	buf := c.l.scratch()
	n, err := st.file.ReadAt(buf[:min(int64(min(len(buf), room)), st.fileEnd-st.fileOff)], st.fileOff)
	if n > 0 {
		st.fileOff += int64(n)
		last := st.fileOff >= st.fileEnd
		if last {
			st.file = nil
		}
		c.h2upData(buf[:n], last && !c.streaming)
	}
	if err != nil && st.fileOff < st.fileEnd {
		c.upFailed(fmt.Errorf("%w: reading the buffered request body back: %w", wire.ErrBadRequest, errFileShort(err)), true)
		return false
	}
	return true
}

// h2upEnd ends the request's stream: with the request's trailers, if
// any, or an empty DATA frame — after what is carried, if anything is.
func (c *lconn) h2upEnd() {
	u := c.up
	st := u.h2
	if st.s == nil {
		return
	}
	if len(st.carry) > 0 {
		st.carryEnd = true // trailers of a body the window held back are dropped
		return
	}
	st.calling++
	if tr := c.reqTrailer(); !tr.empty() {
		out := &st.out
		out.reset()
		httpmsg.TrailerFields(out, &tr.hdr)
		st.s.WriteTrailers(out.fs)
	} else {
		st.s.WriteData(nil, true)
	}
	st.calling--
	u.sending = false
}

// teTrailers reports whether a request's TE field names "trailers".
func teTrailers(h *httpmsg.Header) bool {
	for i := range h.Fields {
		f := &h.Fields[i]
		if f.Kind != httpmsg.KindTE {
			continue
		}
		for v := f.Value; len(v) > 0; {
			var tok []byte
			tok, v = httpmsg.NextToken(v)
			if httpmsg.EqualFold(tok, "trailers") {
				return true
			}
		}
	}
	return false
}
