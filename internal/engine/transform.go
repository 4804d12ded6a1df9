package engine

import (
	"fmt"
	"io"

	"github.com/helios-lb/helios/internal/http1"
	"github.com/helios-lb/helios/internal/httpmsg"
	"github.com/helios-lb/helios/internal/wire"
)

// The body-transform stage. An answer whose pipeline asked for it
// (wire.Exchange.TransformBody: compression) has its body run through
// the transform on its way to the client, over HTTP/1.1 or HTTP/2, from a
// backend or from a file: each piece as it is read, with the same
// backpressure as any answer (the pump reads no more while the client's
// output is past its limit, so nothing is held whole in memory; with
// response buffering the spool holds the backend's bytes and they are
// transformed on their way out, respbuffer.go), and a flush
// whenever the source has nothing more for now, so that an answer that
// trickles (server-sent events, a long poll's heartbeat) reaches the
// client as it comes. The length of what comes out is not known until
// the end: the answer is framed as one of unknown length (chunked for
// HTTP/1.1, no content-length on HTTP/2). The transform is released
// once, at the end of the exchange however it ends (finish, or
// dropExchange when the connection or stream closes first).
//
// Answers without a transform never come here: their copy-free paths
// (sendfile, a large piece read straight into the scratch buffer and
// written with the head in one writev) stay as they are.

// xform is a connection's body-transform state.
type xform struct {
	// t is the transform of the answer being sent; nil for none.
	t wire.BodyTransform
	// dirty: bytes went into t since its last flush.
	dirty bool
}

// TransformBody sets the transform of the answer being sent
// (wire.Exchange).
func (c *lconn) TransformBody(t wire.BodyTransform) {
	c.releaseTransform()
	if t == nil {
		return
	}
	if c.xf == nil {
		c.xf = new(xform)
	}
	c.xf.t, c.xf.dirty = t, false
}

// transforming reports whether the answer goes through a transform.
func (c *lconn) transforming() bool { return c.xf != nil && c.xf.t != nil }

// releaseTransform ends the answer's transform, if it has one.
func (c *lconn) releaseTransform() {
	if x := c.xf; x != nil && x.t != nil {
		t := x.t
		x.t = nil
		t.Release()
	}
}

// transformHead makes a backend's answer that goes through a transform
// one of unknown length, so that the framing of either protocol follows
// (framing, httpmsg.ResponseFields). The body is read by its own
// framing, set when its head came (gotHead).
func (c *lconn) transformHead(r *httpmsg.Response) {
	if c.transforming() {
		r.ContentLength = -1
	}
}

// transform runs a piece of the answer's body through its transform: p
// as the source gave it, with the source's error after it. io.EOF ends
// the body; errWouldBlock (nothing more for now) flushes what the
// transform holds of what went in since the last flush. It returns the
// bytes to send in p's place, or the transform's failure (which writing
// into memory never causes; the answer is cut short as by any failure).
func (c *lconn) transform(p []byte, err error) ([]byte, error) {
	end := err == io.EOF
	x := c.xf
	flush := err == errWouldBlock && x.dirty
	if len(p) == 0 && !end && !flush {
		return nil, nil
	}
	out, terr := x.t.Transform(p, flush, end)
	switch {
	case flush || end:
		x.dirty = false
	case len(p) > 0:
		x.dirty = true
	}
	if terr != nil {
		return nil, fmt.Errorf("transforming the answer: %w", terr)
	}
	return out, nil
}

// bodyOut reads the next piece of the backend's answer (at most room
// bytes when read straight from the socket: bodyPiece) and returns it as
// it goes to the client, through the transform when there is one, with
// the source's error. ok is false when the transform failed: the answer
// has been ended.
func (c *lconn) bodyOut(room int) (p []byte, ok bool, err error) {
	p, err = c.l.bodyPiece(&c.up.body, room)
	if c.transforming() {
		var terr error
		if p, terr = c.transform(p, err); terr != nil {
			c.sendDone(terr)
			return nil, false, nil
		}
	}
	return p, true, err
}

// spoolPiece is a piece of a buffered answer as it goes to the client
// (respbuffer.go): through the transform when there is one. The spool holds
// what the backend sent, so that its caps and its file count the
// backend's bytes; what the client is sent is coded on the way out.
func (c *lconn) spoolPiece(p []byte) ([]byte, error) {
	if !c.transforming() {
		return p, nil
	}
	return c.transform(p, nil)
}

// spoolTransformEnd writes the end of a buffered answer's transform, if
// it has one, and lets the transform go. It reports whether the answer
// may end now: false when the exchange has ended (the client is gone,
// or the transform failed), or when an HTTP/2 stream's window did not
// take it all (the spool's pump comes back to end the answer once it
// has gone out).
func (c *lconn) spoolTransformEnd() bool {
	if !c.transforming() {
		return true
	}
	p, err := c.transform(nil, io.EOF)
	c.releaseTransform()
	if err != nil {
		c.sendDone(err)
		return false
	}
	if len(p) > 0 && !c.client().writePiece(c, p) {
		return false
	}
	return c.client().wrote(c)
}

// filePiece reads the next piece of a file answer's range into buf (at
// most len(buf) bytes) and returns it as it goes to the client, through
// the transform when there is one, with the read's error; counted as
// sent. ok is false when the transform failed: the answer has been ended.
func (c *lconn) filePiece(buf []byte) (p []byte, ok bool, err error) {
	f := c.file
	n, err := f.File.ReadAt(buf[:min(int64(len(buf)), f.end-f.off)], f.off)
	if n <= 0 {
		return nil, true, err
	}
	f.off += int64(n)
	p = buf[:n]
	if c.transforming() {
		var terr error
		if p, terr = c.transform(p, eofIf(f.off >= f.end)); terr != nil {
			c.fileDone(terr)
			return nil, false, nil
		}
	}
	c.respBytes += int64(len(p))
	return p, true, err
}

// fileFraming frames a file's answer that goes through a transform
// (serveFile): chunked for an HTTP/1.1 client; an HTTP/1.0 client's
// ends with the connection.
func (c *lconn) fileFraming() {
	c.chunkOut = false
	if !c.transforming() {
		return
	}
	if c.req.Minor == 1 {
		c.chunkOut = true
		http1.WriteChunkedFraming(&c.wr)
		return
	}
	c.closeAfter = true
}

// eofIf is io.EOF when end, nil otherwise: a file's piece as a source's
// piece and error (transform).
func eofIf(end bool) error {
	if end {
		return io.EOF
	}
	return nil
}
