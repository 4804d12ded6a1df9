package engine

import (
	"fmt"

	"github.com/helios-lb/helios/internal/http1"
	"github.com/helios-lb/helios/internal/wire"
	"golang.org/x/sys/unix"
)

// Sending a backend's answer to the client: the head, the body in pieces
// or chunks (on an HTTP/2 stream, h2send.go's methods take over), and the
// end of the exchange (keep-alive, close, or the next pipelined request).

// startSend writes the backend's response head and starts its body.
func (c *lconn) startSend() {
	u := c.up
	r := &u.resp
	c.answerHeader(&r.Header, false)
	if r.Status == 101 {
		c.startTunnel()
		return
	}
	c.transformHead(&r.Response)
	c.client().startSend(c)
}

// pump moves response body from the backend to the client until one of
// them has to wait.
func (c *lconn) pump() {
	if c.rs != nil && c.spoolPump() {
		return // a buffered answer (respbuffer.go)
	}
	c.client().pump(c)
}

// writePiece writes a piece of the answer's body to the client (a chunk
// when the answer goes out chunked); false when the client is gone (the
// exchange has ended).
func (c *lconn) writePiece(p []byte) bool {
	c.respBytes += int64(len(p))
	c.writeChunk(p, false)
	return c.wroteOK()
}

// writeLastPiece writes the last piece of an answer's body, p (perhaps
// empty), and ends the body (endChunks, with tr's fields). A chunked
// answer with no trailer fields has its end leave with its last piece,
// in the same system call, not in a flush of its own (writeChunk). It
// reports false when the client is gone: the answer has been ended.
func (c *lconn) writeLastPiece(p []byte, tr *trailerSection) bool {
	ended := false
	if len(p) > 0 { // an empty chunk would end the body
		c.respBytes += int64(len(p))
		ended = c.writeChunk(p, tr.empty())
		if !c.wroteOK() {
			return false
		}
	}
	if !ended {
		c.endChunks(tr)
	}
	return true
}

// wroteOK reports whether the client's writer has not failed; when it
// has, it ends the answer (the client is gone).
func (c *lconn) wroteOK() bool {
	if w := &c.wr; w.err != nil {
		c.sendDone(fmt.Errorf("%w: %w", wire.ErrClientGone, w.err))
		return false
	}
	return true
}

// writeChunk writes a piece of an answer's body to an HTTP/1.1 client:
// as a chunk when the answer goes out chunked (chunkOut), and when it is
// the body's last piece (last) with the body's end behind it, no trailer
// fields (http1.WriteFinalChunk). It reports whether it wrote that end.
func (c *lconn) writeChunk(p []byte, last bool) (ended bool) {
	switch {
	case !c.chunkOut:
		c.wr.Write(p)
		return false
	case last:
		http1.WriteFinalChunk(&c.wr, p)
		return true
	}
	http1.WriteChunk(&c.wr, p)
	return false
}

// endChunks ends an answer that goes out chunked, with its trailer.
func (c *lconn) endChunks(tr *trailerSection) {
	if c.chunkOut {
		http1.WriteLastChunk(&c.wr, &tr.hdr)
	}
}

// sendDone ends an answer streamed from a backend.
func (c *lconn) sendDone(err error) {
	if err == nil && c.wr.err != nil {
		err = fmt.Errorf("%w: %w", wire.ErrClientGone, c.wr.err)
	}
	c.letGoUp(err)
	if err != nil {
		c.broken = true
	}
	c.flow.Sent(c.respStatus, c.respBytes, err)
	c.finish()
}

// letGoUp ends the use of the backend connection once its answer has
// been read, or given up on (err): back to its pool when it can carry
// another request, closed otherwise. A backend connection whose request
// body did not all go out (it answered early) cannot.
func (c *lconn) letGoUp(err error) {
	u := c.up
	c.up = nil
	if u != nil {
		u.release(err == nil && u.resp.KeepAlive && u.body.done && !c.streaming && !u.busy())
		c.releaseUpWriterOf(u)
	}
}

// finish ends the exchange and goes on to the next request when the
// connection allows it.
func (c *lconn) finish() {
	c.releaseTransform()
	c.endFlow()
	c.dropBodies()
	if c.broken {
		c.flushOut()
		c.close()
		return
	}
	if !c.reqBody.done {
		// An unforwarded body (a fixed answer): it is in the buffer, or
		// it is still to come and the connection closes (closing).
		if p, ok := c.reqBody.fullyBuffered(); ok && p != nil {
			c.reqBody.consumeBuffered()
		}
	}
	c.rd.unpin()
	c.reclaimBodyBuf()
	c.endOutput()
}

// endOutput flushes the answer and moves to the next request, or closes.
func (c *lconn) endOutput() {
	c.client().endOutput(c)
}

// dropFields gives the request head's field array back to the loop
// between requests: an idle connection holds none (a browser's dozen
// fields take most of a kilobyte).
func (c *lconn) dropFields() {
	if c.req.Header.Fields != nil {
		c.l.fieldBufs.put(c.req.Header.Fields)
		c.req.Header.Fields = nil
	}
}

// ensureNoDelay turns Nagle's algorithm off once a connection will carry
// more than one write of answers: a kept-alive connection, or an answer
// that goes out in parts. Like nginx, a connection that closes after one
// answer written at once never pays for the setsockopt; with pipelined
// requests or streamed answers, Nagle would hold a small write back
// until the client's (delayed) acknowledgement of the previous one.
func (c *lconn) ensureNoDelay() {
	if !c.nodelay {
		c.nodelay = true
		unix.SetsockoptInt(c.fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	}
}

// flushOut hands buffered output to the socket (what it does not take
// waits in fw.pending).
func (c *lconn) flushOut() {
	if c.wr.buf == nil || c.wr.n == 0 {
		return
	}
	if err := c.wr.flush(); err != nil {
		c.broken = true
		// An answer under way is ended by its own code, which records
		// it (the write error says the client went).
		if c.state != lsSend && c.state != lsForward && c.state != lsFile {
			c.close()
		}
	}
}

func (c *lconn) closing() bool {
	// A request body not read to its end leaves the connection
	// unframed: it cannot carry another request.
	return !c.req.KeepAlive || c.closeAfter || c.bodyPending() || c.l.eng.draining.Load() || c.ll.draining.Load()
}

// endHead ends an answer's head to an HTTP/1.1 client: its Connection
// field and the empty line.
func (c *lconn) endHead() {
	closing := c.closing()
	c.closeAfter = c.closeAfter || closing
	http1.WriteConnection(&c.wr, closing, c.req.Minor)
	http1.EndHead(&c.wr)
}

func (c *lconn) ensureWriter() {
	if c.wr.buf == nil {
		c.wr.reset(c.sink(), c.l.writeBufs.get())
	}
}

// maxIdlePending is the most room for pending output a connection keeps
// between answers; a slow client's large download grows it to about
// Options.OutputBufferBytes, which thousands of idle keep-alive
// connections must not each hold on to.
const maxIdlePending = 16 << 10

// releaseWriter gives back the output buffers of a connection going idle.
func (c *lconn) releaseWriter() {
	if c.wr.buf != nil && c.wr.n == 0 {
		c.l.writeBufs.put(c.wr.buf)
		c.wr.reset(nil, nil)
	}
	if len(c.fw.pending) == 0 && cap(c.fw.pending) > maxIdlePending {
		c.fw.pending = nil
	}
}

// dropBodies ends what the exchange held of its bodies: forwarding or
// buffering the request's stops, the answer's spool goes, and the
// buffered request body is closed unless it is still being written to
// disk (the spill's end closes it then).
func (c *lconn) dropBodies() {
	c.streaming, c.buffering = false, false
	c.bodyDeadline = 0
	c.dropSpool()
	if !c.spilling && c.bb != nil {
		c.bb.Close()
	}
}
