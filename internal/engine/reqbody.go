package engine

import (
	"fmt"
	"io"
	"os"

	"github.com/helios-lb/helios/internal/bodybuf"
	"github.com/helios-lb/helios/internal/http1"
	"github.com/helios-lb/helios/internal/wire"
)

// Request bodies on the loop.
//
// A small fixed-length body (up to maxLoopBody) is read whole into the
// client's read buffer before the request begins: it can be sent again on
// a retry, and costs the backend nothing while it arrives. Any other body
// (chunked, larger, or behind Expect: 100-continue) begins at once and
// then either streams to the backend as it arrives (pumpReq), with
// backpressure both ways, or is read first under the route's request
// buffering limits (bufferMore): in memory, then in a temporary file
// written by the engine's spill goroutine, since a loop must not wait on
// a disk.

// streamingBody reports whether the request's body is one the loop does
// not wait for before the request begins.
func (c *lconn) streamingBody() bool {
	r := &c.req
	return r.Chunked || r.ContentLength > maxLoopBody || r.Expect100 && r.ContentLength > 0
}

// holdSmallBody charges the connection's request buffers for a small body
// an HTTP/2 stream is to read whole behind its head, and reports whether
// they had room: a connection's streams hold as many such bodies as it
// has streams, so they count with what request buffering holds. Without
// room the body goes the way of a larger one (buffered within the
// budgets, or streamed). An HTTP/1.1 connection holds one at a time,
// within its own buffers, and is not charged.
func (c *lconn) holdSmallBody() bool {
	st := c.h2s
	if st == nil || st.smallAcct != nil {
		return true
	}
	acct := c.bufferAccount()
	if acct == nil {
		return true
	}
	if !acct.Reserve(c.req.ContentLength) {
		return false
	}
	st.smallAcct, st.smallHeld = acct, c.req.ContentLength
	return true
}

// releaseSmallBody gives back what holdSmallBody charged.
func (c *lconn) releaseSmallBody() {
	if st := c.h2s; st != nil && st.smallAcct != nil {
		st.smallAcct.Release(st.smallHeld)
		st.smallAcct, st.smallHeld = nil, 0
	}
}

// bodyPending reports whether some of the request body is still to be
// read from the client (a small body already in the buffer is not).
func (c *lconn) bodyPending() bool {
	if c.reqBody.done {
		return false
	}
	_, whole := c.reqBody.fullyBuffered()
	return !whole
}

// sendContinue answers "Expect: 100-continue" when the body is first
// needed (RFC 9110 §10.1.1): before then the client holds its body back.
func (c *lconn) sendContinue() {
	if c.respStarted {
		return
	}
	c.ensureWriter()
	c.wr.WriteString(http1.Continue)
	c.ensureNoDelay()
	c.flushOut()
}

// armBodyDeadline bounds the wait for more request body bytes: the
// listener's idle timeout, capped by its read timeout for the request.
func (c *lconn) armBodyDeadline() {
	d := c.opts.IdleTimeout
	c.bodyDeadline = 0
	if d > 0 {
		c.bodyDeadline = c.l.now + int64(d)
	}
	if c.reqDeadline != 0 && (c.bodyDeadline == 0 || c.reqDeadline < c.bodyDeadline) {
		c.bodyDeadline = c.reqDeadline
	}
}

// awaitClientBody waits for more of the client's body to forward: its
// body deadline runs, and bounds the wait alone while the backend has not
// got the whole request (a backend's head deadline would otherwise end a
// wait that is the client's).
func (c *lconn) awaitClientBody() {
	c.armBodyDeadline()
	if c.state == lsForward && c.up.state == upWaitHead && c.dkind == dlUpHead {
		c.deadline, c.dkind = 0, dlNone
	}
}

// pumpReq moves request body bytes from the client to the backend until
// one of them has to wait: the backend (its pending input past the
// output limit, or a file range still going out; resumed by its writable
// event) or the client (nothing more to read; resumed by its readable
// event).
func (c *lconn) pumpReq() {
	if c.up != nil && c.up.h2 != nil {
		c.pumpReqH2()
		return
	}
	defer c.endReqPump()
	u := c.up
	if u == nil || !c.streaming {
		return
	}
	chunked := c.req.ContentLength < 0
	for {
		if u.busy() && (u.fileLeft() || len(u.fw.pending) > c.opts.outputLimit()) {
			return
		}
		if c.prefixCRLF {
			// The buffered start of a chunked body went out as one
			// chunk; its end goes now that its file part has.
			c.prefixCRLF = false
			c.l.flushGather()
			http1.WriteChunkEnd(&u.w)
		}
		p, err := c.reqPiece(c.opts.outputLimit() - len(u.fw.pending))
		if len(p) > 0 {
			c.bodySent = true
			switch {
			case chunked && c.rd.lent():
				// A view into the lent buffer: gathered with the
				// read's other chunks (chunkgather.go).
				c.l.gatherChunk(c, p)
			case chunked:
				c.l.flushGather()
				http1.WriteChunk(&u.w, p)
			default:
				u.w.Write(p)
			}
			c.bodyDeadline = 0
			if c.state == lsForward && u.state == upWaitHead {
				// The head timeout runs from the last bytes the
				// backend was given, not while the client is slow.
				c.setDeadline(dlUpHead, c.tr.Settings.ResponseHeaderTimeout)
			}
		}
		if u.w.err != nil {
			c.upWriteFailed(u.w.err)
			return
		}
		switch {
		case err == nil:
		case err == io.EOF:
			switch tr := c.reqTrailer(); {
			case chunked && tr.empty():
				c.l.endChunks(c)
			case chunked:
				c.l.flushGather()
				http1.WriteLastChunk(&u.w, &tr.hdr)
			}
			c.streaming = false
			c.bodyDeadline = 0
			if u.w.flush() != nil {
				c.upWriteFailed(u.w.err)
				return
			}
			c.requestWritten()
			return
		case err == errWouldBlock:
			// Send what there is while the client is quiet.
			c.l.flushGather()
			if u.w.flush() != nil {
				c.upWriteFailed(u.w.err)
				return
			}
			c.awaitClientBody()
			return
		default:
			c.clientBodyFailed(clientBodyErr(err))
			return
		}
	}
}

// bodyPiece returns the next piece of a body being forwarded (a request
// body to a backend, an answer to a client), read through the loop's
// scratch buffer (see nextPiece) and at most room bytes when read straight
// from the socket: room is what the destination's output limit has left,
// so what waits for a slow reader stays within the limit. The piece is
// valid until the loop's next use of the scratch buffer: the caller writes
// it out at once.
func (l *loop) bodyPiece(b *body, room int) ([]byte, error) {
	return nextPiece(b, l.scratch()[:max(min(room, spillSize), 0)])
}

// reqPiece returns the next piece of a request body being forwarded, at
// most room bytes (1 at least), as bodyPiece does. While the body
// streams, the client's reader reads into one of the loop's body buffers
// (68 KiB) instead of its own small one, at most room bytes a read: a
// chunked body's size lines and data then arrive together, in reads of
// tens of KiB, where the small buffer took a read for each size line and
// another for the data behind it. Reading no more than room keeps what
// the client is let send (an HTTP/2 stream's window is credited as its
// bytes are read) to what the backend takes. The pump that asks gives the
// buffer back when it returns (reclaimBodyBuf): none is held across a
// wait.
func (c *lconn) reqPiece(room int) ([]byte, error) {
	room = max(room, 1)
	if !c.rd.lent() && len(c.rd.buf) < bodyBufSize && !c.reqBody.done {
		big := c.l.bodyBufs.get()
		if c.rd.lend(big) {
			c.rd.beforeFill = c.l.gatherBeforeFill
		} else {
			c.l.bodyBufs.put(big)
		}
	}
	if !c.rd.lent() {
		return c.l.bodyPiece(&c.reqBody, room)
	}
	c.rd.max = room
	p, err := c.reqBody.nextMax(room)
	c.rd.max = 0
	return p, err
}

// endReqPump ends a pump of a request body to an HTTP/1.1 backend: the
// chunks it gathered go to the backend, and the lent buffer back to the
// loop.
func (c *lconn) endReqPump() {
	c.l.flushGather()
	c.reclaimBodyBuf()
}

// reclaimBodyBuf ends reqPiece's lend, giving the loop back the lent
// buffer, or the reader's own one when the lent one keeps a pipelined
// request that does not fit there (reader.reclaim).
func (c *lconn) reclaimBodyBuf() {
	c.l.dropGather(c) // views into the lent buffer
	if b := c.rd.reclaim(); b != nil {
		c.l.putClientBuf(b)
	}
}

// putReadBufs gives the client's read buffers back to the loop: its own
// and one lent for a body. What they held is dropped.
func (c *lconn) putReadBufs() {
	c.rd.unpin()
	c.reclaimBodyBuf()
	if c.rd.buf != nil {
		c.l.putClientBuf(c.rd.buf)
	}
	c.rd.buf = nil
	c.rd.r, c.rd.w, c.rd.pin = 0, 0, 0
}

// upWriteFailed handles a backend that stopped taking the request body.
// It may have answered first (an early 413): look for the answer before
// blaming the write; the body is not read any further.
func (c *lconn) upWriteFailed(err error) {
	u := c.up
	c.streaming = false
	c.bodyDeadline = 0
	u.wfailed = err
	c.releaseUpWriter()
	if u.state == upWaitHead {
		c.readUpHead()
	}
}

// clientBodyFailed ends an exchange whose request body the client did not
// deliver (it left, stalled, sent a malformed or too large body): the
// backend, waiting for the rest, is let go, and the pipeline answers with
// what err calls for (408, 400, 413), or nothing when the client is gone.
func (c *lconn) clientBodyFailed(err error) {
	c.streaming = false
	c.buffering = false
	c.bodyDeadline = 0
	c.closeAfter = true // the rest of the body cannot be read
	switch c.state {
	case lsForward:
		c.dropUp(false)
		c.forwarded(0, err)
	case lsSend:
		c.broken = true
		c.clientFailed = true
		c.sendDone(err)
	case lsBuffer:
		c.bufferDone(err)
	}
}

// bodyTimeout acts on the request body's deadline.
func (c *lconn) bodyTimeout() {
	c.bodyDeadline = 0
	if c.streaming || c.buffering {
		c.clientBodyFailed(fmt.Errorf("%w: no request body bytes in time: %w", wire.ErrClientTimeout, os.ErrDeadlineExceeded))
	}
}

// --- request buffering ---

// startBuffering reads the body before the request goes on (ActBuffer).
func (c *lconn) startBuffering(lim wire.BufferLimits) {
	if !c.bodyPending() {
		// Already whole in the read buffer.
		if lim.Discard {
			c.reqBody.consumeBuffered()
		}
		c.act(c.flow.Buffered(c.checkBuffered(lim)))
		return
	}
	c.state = lsBuffer
	c.buffering = true
	c.bufDiscard, c.bufStream = lim.Discard, lim.Stream
	if c.bb == nil {
		c.bb = new(bodybuf.Buffer) // kept for the connection's next bodies
	}
	c.bb.Reset(lim.Memory, lim.File, lim.Dir, c.bufferAccount())
	c.bufferMore()
}

// bufferAccount returns the account the exchange's request buffering is
// charged to: its HTTP/2 connection's, which the connection's streams
// share (made on first use), or, for an HTTP/1.1 connection, which holds
// one body at a time, one of the body's own; nil when the listener has
// no budget. A buffer keeps its account, so what it gives back goes to
// the account it took from, even once its connection is gone.
func (c *lconn) bufferAccount() *bodybuf.Account { return c.client().bufferAccount(c) }

func (h2client) bufferAccount(c *lconn) *bodybuf.Account {
	pc := c.h2s.parent
	h := pc.h2
	if h == nil {
		return nil // the connection is closing
	}
	if h.acct == nil {
		h.acct = pc.opts.bufferAccount()
	}
	return h.acct
}

// bufferMore reads body bytes into c.bb until the body is done, the
// buffer is full, or the client or the disk has to be waited for.
func (c *lconn) bufferMore() {
	if c.bufDiscard {
		c.discardMore()
		return
	}
	for c.buffering && !c.spilling {
		buf := c.l.scratch()
		room := c.bb.Grow(int64(len(buf)))
		if room == 0 {
			c.bufferFull()
			return
		}
		want := min(int64(len(buf)), room)
		if m := c.bb.MemRoom(); m > 0 {
			want = min(want, int64(m))
		}
		n, err := c.reqBody.Read(buf[:want])
		if n > 0 {
			c.bodyDeadline = 0
			if c.bb.MemRoom() >= n {
				c.bb.Write(buf[:n])
			} else {
				c.spill(buf[:n])
			}
		}
		switch {
		case err == nil:
		case err == io.EOF:
			if c.spilling {
				c.bufferEOF = true // done once the last write is
				return
			}
			c.bodyBuf = bufferedWhole
			c.bufferDone(nil)
			return
		case err == errWouldBlock:
			c.armBodyDeadline()
			return
		default:
			c.bufferDone(clientBodyErr(err))
			return
		}
	}
}

// bufferFull ends the buffering of a body that has no room left: its
// route's caps are reached, or its connection's or the process's request
// buffers are spent. A route that streams what it cannot hold (auto)
// forwards what was buffered and streams the rest, backpressure and all,
// as flow control then bounds it; one that buffers whole bodies (on)
// refuses it: 413 when it is larger than the route allows, 503 when the
// buffers are spent for now.
func (c *lconn) bufferFull() {
	switch {
	case c.bufStream:
		c.bodyBuf = bufferedPrefix
		if c.bb.Len() == 0 {
			c.bodyBuf = notBuffered
		}
		c.bufferDone(nil)
	case c.bb.AtCap():
		c.bufferDone(fmt.Errorf("%w: more than the %d bytes this route buffers", wire.ErrBodyTooLarge, c.bb.Cap()))
	default:
		c.bufferDone(fmt.Errorf("%w: %d bytes of the body held, no room for more", wire.ErrBuffersFull, c.bb.Len()))
	}
}

// discardMore reads body bytes and drops them until the body is done or
// the client has to be waited for.
func (c *lconn) discardMore() {
	for c.buffering {
		_, err := c.reqBody.next()
		switch {
		case err == nil:
			c.bodyDeadline = 0
		case err == io.EOF:
			c.bufferDone(nil)
			return
		case err == errWouldBlock:
			c.armBodyDeadline()
			return
		default:
			c.bufferDone(clientBodyErr(err))
			return
		}
	}
}

// bufferDone ends buffering and lets the pipeline go on.
func (c *lconn) bufferDone(err error) {
	c.buffering = false
	c.bodyDeadline = 0
	switch {
	case c.spilling:
		// The spill goroutine still writes (spilled closes it).
		if err != nil {
			c.closeAfter = true
		}
	case c.bb == nil:
		if err != nil {
			c.closeAfter = true
		}
	case err != nil:
		c.closeAfter = true
		c.bb.Close()
	default:
		c.bb.Trim() // room taken and not needed goes back
	}
	c.state = lsForward
	c.act(c.flow.Buffered(err))
}

// spillJob is one write of a buffered body to its temporary file, done
// by the engine's spill goroutine.
type spillJob struct {
	c    *lconn
	gen  uint32
	data *[]byte
	n    int
	// out, when set, makes it a write of a buffered answer to out's
	// file, f (nil: none yet; respbuffer.go).
	out *respSpool
	f   *os.File
}

// spill hands p to the spill goroutine; the loop reads no more of the
// body until it is written (spilled).
func (c *lconn) spill(p []byte) {
	e := c.l.eng
	data := e.spillBufs.Get().(*[]byte)
	n := copy(*data, p)
	c.spilling = true
	j := spillJob{c: c, gen: c.gen, data: data, n: n}
	select {
	case e.spills <- j:
	default:
		// The spill goroutine is behind: the loop does not wait for
		// it; its sweeps hand the write over when there is room.
		c.l.spillLater = append(c.l.spillLater, j)
	}
}

// retrySpills hands over the spill writes that found no room.
func (l *loop) retrySpills() {
	for len(l.spillLater) > 0 {
		select {
		case l.eng.spills <- l.spillLater[0]:
			l.spillLater[0] = spillJob{}
			l.spillLater = l.spillLater[1:]
		default:
			return
		}
	}
}

// spillLoop writes buffered bodies to their temporary files. The loop
// that owns a connection does not touch its buffer while a write is under
// way (lconn.spilling).
func (e *Engine) spillLoop() {
	defer e.wg.Done()
	for {
		select {
		case <-e.ctx.Done():
			return
		case j := <-e.spills:
			if j.out != nil {
				e.spillAnswer(j)
				continue
			}
			_, err := j.c.bb.Write((*j.data)[:j.n])
			e.spillBufs.Put(j.data)
			l := j.c.l
			if !l.post(func() { j.c.spilled(j.gen, err) }) {
				j.c.bb.Close() // the loop has stopped
			}
		}
	}
}

// spilled goes on once a spill write is done.
func (c *lconn) spilled(gen uint32, err error) {
	c.spilling = false
	if gen != c.gen || !c.buffering {
		// The connection ended (or the exchange failed) meanwhile.
		if c.bb != nil {
			c.bb.Close()
		}
		return
	}
	if err != nil {
		// The disk failed us, not the client or a backend: no backend
		// was tried, so the request is refused whole.
		c.bufferDone(fmt.Errorf("%w: %w", wire.ErrBodyTooLarge, err))
		return
	}
	if c.bufferEOF {
		c.bufferEOF = false
		c.bodyBuf = bufferedWhole
		c.bufferDone(nil)
		return
	}
	c.bufferMore()
}

// sendBuffered writes what request buffering holds of the body to the
// backend: the memory part through u.w, the file part with sendfile(2)
// behind it; a prefix of a chunked body as one chunk (its closing CRLF
// goes when the file part has).
func (c *lconn) sendBuffered() {
	u := c.up
	if c.req.ContentLength < 0 && c.bodyBuf == bufferedPrefix {
		http1.WriteChunkHead(&u.w, c.bb.Len())
		c.prefixCRLF = true
	}
	u.w.Write(c.bb.Mem())
	if f, n := c.bb.File(); f != nil && n > 0 {
		u.w.flush()
		if u.tls.tc != nil {
			// Over TLS the file's bytes must be encrypted: read back
			// (pread) as the socket takes them.
			u.tfile, u.tfileOff, u.tfileEnd = f, 0, n
		} else {
			u.fw.queueFile(int(f.Fd()), 0, n)
		}
		u.flushPending()
	}
}
