package engine

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/helios-lb/helios/internal/bodybuf"
	"github.com/helios-lb/helios/internal/http1"
	"github.com/helios-lb/helios/internal/httpmsg"
	"github.com/helios-lb/helios/internal/wire"
	"golang.org/x/sys/unix"
)

func (h1client) event(c *lconn, ev uint32) {
	if ev == evTimeout {
		c.expired()
		return
	}
	if c.state == lsH2 {
		c.h2event(ev)
		return
	}
	if c.state == lsHello {
		c.readHello()
		return
	}
	if c.state == lsProxy {
		if ev&evRdHup != 0 {
			c.fr.rdhup = true
		}
		c.fr.drained = false
		c.readProxy()
		return
	}
	if c.state == lsHandshake || c.state == lsClosing {
		c.handshakeEvent()
		return
	}
	if ev&(evErr|evHup) != 0 && ev&evIn == 0 {
		c.gone(errors.New("connection reset"))
		return
	}
	if ev&evRdHup != 0 {
		c.fr.rdhup = true
	}
	if ev&evOut != 0 && c.fw.busy() {
		c.writable()
		if c.state == lsClosed {
			return
		}
	}
	if ev&(evIn|evRdHup|evHup|evErr) != 0 {
		c.fr.drained = false
		c.readable()
	}
}

func (h1client) close(c *lconn) {
	if c.state == lsClosed || c.state == lsClosing {
		return
	}
	if c.state == lsHandshake && c.sock.blocking {
		// Its handshake goroutine still uses the socket: stop it, and
		// close when it is done (handshaken).
		c.state = lsClosing
		c.sock.cancel()
		return
	}
	c.state = lsClosed
	if c.h2 != nil {
		c.closeH2()
	}
	c.dropExchange()
	c.l.closeFD(c.fd)
	c.fd = -1
	c.l.conns.remove(c)
	c.l.nconns.Add(-1)
	c.releaseSlots()
	c.putReadBufs()
	c.dropFields()
	if c.wr.buf != nil {
		c.l.writeBufs.put(c.wr.buf)
	}
	c.wr.reset(nil, nil)
	c.nodelay = false
	c.tls, c.sock = nil, nil
	c.l.freeConn(c)
}

func (h1client) proto(c *lconn) []byte {
	if c.req.Minor == 0 {
		return proto10
	}
	return proto11
}

func (h1client) respond(c *lconn, status int, header *httpmsg.Header, body []byte) error {
	c.respStarted = true
	c.respStatus = status
	c.ensureWriter()
	w := &c.wr
	http1.WriteFixedHead(w, c.l.eng.status.Line(status), c.l.eng.date.line(time.Unix(0, c.l.now)), header, status, len(body))
	c.endHead()
	c.respBytes = http1.WriteFixedBody(w, status, c.req.Method, body)
	if w.err != nil {
		c.broken = true
		return wrapClientErr(w.err)
	}
	return nil
}

func (h1client) serveFile(c *lconn, a *wire.FileAnswer) {
	c.ensureWriter()
	w := &c.wr
	w.Write(c.l.eng.status.Line(a.Status))
	w.Write(c.l.eng.date.line(time.Unix(0, c.l.now)))
	a.Header.Emit(w)
	c.fileFraming()
	c.endHead()
	if a.File == nil {
		w.Write(a.Body)
		c.respBytes = int64(len(a.Body))
		c.fileDone(nil)
		return
	}
	if b := a.File.Bytes(); b != nil && !c.transforming() {
		// A small file the planner holds in memory: its range leaves
		// with the head, in one write.
		w.Write(b[a.Offset : a.Offset+a.Length])
		c.respBytes = a.Length
		c.fileDone(nil)
		return
	}
	c.state = lsFile
	c.file.off, c.file.end = a.Offset, a.Offset+a.Length
	if c.tls == nil && !c.transforming() {
		// The head goes first (the writer's buffer, then pending), the
		// range behind it, in one segment when it fits (MSG_MORE, as
		// nginx's tcp_nopush).
		c.fw.more = true
		c.flushOut()
		c.fw.more = false
		if c.wr.err != nil {
			c.fileDone(fmt.Errorf("%w: %w", wire.ErrClientGone, c.wr.err))
			return
		}
		c.fw.queueFile(a.File.Fd(), c.file.off, c.file.end)
	}
	c.pumpFile()
}

func (h1client) pumpFile(c *lconn) {
	if c.tls == nil && !c.transforming() {
		done, err := c.fw.flushPending()
		switch {
		case err != nil:
			c.fileDone(fmt.Errorf("%w: %w", wire.ErrClientGone, err))
		case done:
			c.respBytes = c.file.end - c.file.Offset
			c.fileDone(nil)
		default:
			c.respBytes = c.fw.fileOff - c.file.Offset
			c.setDeadline(dlWrite, c.opts.WriteTimeout)
		}
		return
	}
	buf := c.l.scratch()
	ended := false
	for c.file.off < c.file.end {
		if len(c.fw.pending) > c.opts.outputLimit() {
			c.flushOut()
			if c.wr.err != nil {
				c.fileDone(fmt.Errorf("%w: %w", wire.ErrClientGone, c.wr.err))
				return
			}
			if c.fw.busy() {
				// The socket is full: writable() resumes.
				c.setDeadline(dlWrite, c.opts.WriteTimeout)
				return
			}
		}
		p, ok, err := c.filePiece(buf)
		if !ok {
			return
		}
		if len(p) > 0 { // an empty chunk would end the body
			ended = c.writeChunk(p, c.file.off >= c.file.end)
		}
		if c.wr.err != nil {
			c.fileDone(fmt.Errorf("%w: %w", wire.ErrClientGone, c.wr.err))
			return
		}
		if err != nil && c.file.off < c.file.end {
			c.fileDone(fmt.Errorf("reading %w", errFileShort(err)))
			return
		}
	}
	if c.chunkOut && !ended {
		http1.WriteLastChunk(&c.wr, nil)
	}
	c.fileDone(nil)
}

func (h1client) startSend(c *lconn) {
	u := c.up
	r := &u.resp
	c.state = lsSend
	c.respStarted = true
	c.respStatus = r.Status
	c.ensureWriter()
	bodyOut, chunkOut, closeAfter := http1.Framing(c.req.Method, c.req.Minor, &r.Response)
	if closeAfter {
		c.closeAfter = true
	}
	c.chunkOut = chunkOut
	http1.WriteResponseHead(&c.wr, &r.Response, bodyOut, chunkOut)
	c.endHead()
	// The head has been copied out: its bytes need not stay pinned.
	u.rd.unpin()
	if !bodyOut {
		u.body.done = true
		c.sendDone(nil)
		return
	}
	c.pump()
}

func (h1client) pump(c *lconn) {
	u := c.up
	for {
		if len(c.fw.pending) > c.opts.outputLimit() {
			if c.startSpool() {
				return
			}
			c.setDeadline(dlWrite, c.opts.WriteTimeout)
			return // writable() resumes
		}
		p, ok, err := c.bodyOut(c.opts.outputLimit() - len(c.fw.pending))
		if !ok {
			return
		}
		if err == io.EOF {
			if c.writeLastPiece(p, u.respTrailer()) {
				c.sendDone(nil)
			}
			return
		}
		if len(p) > 0 && !c.writePiece(p) {
			return
		}
		switch {
		case err == nil:
		case err == errWouldBlock:
			// Send what there is while the backend is quiet.
			c.ensureNoDelay()
			c.flushOut()
			if c.broken {
				c.sendDone(nil) // the writer's error: the client is gone
				return
			}
			c.setDeadline(dlUpBody, c.tr.Settings.ReadTimeout)
			return
		default:
			c.sendDone(fmt.Errorf("%w: reading response body: %w", wire.ErrBackend, err))
			return
		}
	}
}

func (h1client) endOutput(c *lconn) {
	closing := c.closing()
	c.flushOut()
	if c.state == lsClosed {
		return
	}
	if c.broken {
		// The client went away as its answer went out: serve it no
		// more (its pipelined requests least of all).
		c.close()
		return
	}
	if len(c.fw.pending) > 0 {
		c.closeAfter = closing
		c.state = lsFlush
		c.setDeadline(dlWrite, c.opts.WriteTimeout)
		return
	}
	if closing {
		c.close()
		return
	}
	c.ensureNoDelay()
	c.releaseWriter()
	c.state = lsIdle
	c.deadline, c.dkind = 0, dlNone
	// Read on when input is waiting: buffered, announced by an edge
	// while busy, or possibly left in the socket because the last read
	// filled the buffer (edge-triggered: no new edge comes for bytes
	// that are already there).
	if !c.serving && (c.readPending || len(c.rd.buffered()) > 0 || c.maybeMore()) {
		c.readPending = false
		c.serveInput()
		return
	}
	if c.readPending {
		c.readPending = false
	}
	if len(c.rd.buffered()) == 0 {
		c.putReadBufs()
		c.dropFields()
		c.setDeadline(dlIdle, c.opts.IdleTimeout)
	}
}

func (h1client) src(c *lconn) io.Reader {
	if c.tls != nil {
		return tlsSource{c}
	}
	return &c.fr
}

func (h1client) maybeMore(c *lconn) bool {
	return !c.fr.drained || c.tls != nil
}

func (h1client) reqTrailer(c *lconn) *trailerSection {
	return c.reqBody.trailers()
}

func (h1client) destAddr(c *lconn) netip.AddrPort {
	e := c.edgeState()
	if !e.dest.IsValid() && c.fd >= 0 {
		if sa, err := unix.Getsockname(c.fd); err == nil {
			switch sa := sa.(type) {
			case *unix.SockaddrInet4:
				e.dest = netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(sa.Port))
			case *unix.SockaddrInet6:
				e.dest = netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), uint16(sa.Port))
			}
		}
	}
	return e.dest
}

func (h1client) readHead(c *lconn) bool { return c.readHead() }

func (h1client) abandon(c *lconn) {
	if c.fd >= 0 {
		// Close the sockets and let the garbage collector have the rest.
		c.l.closeFD(c.fd)
		c.l.conns.remove(c)
		c.l.nconns.Add(-1)
		c.releaseSlots()
		c.fd = -1
		c.state = lsClosed
	}
}

func (h1client) bufferAccount(c *lconn) *bodybuf.Account { return c.opts.bufferAccount() }

func (h1client) flush(c *lconn) bool {
	c.ensureNoDelay()
	c.flushOut()
	if c.broken {
		c.sendDone(nil) // the writer's error: the client is gone
		return false
	}
	return true
}

func (h1client) waitWritable(c *lconn) {
	if c.dkind != dlWrite {
		c.setDeadline(dlWrite, c.opts.WriteTimeout)
	}
}

func (h1client) room(c *lconn) (int, bool, error) {
	return c.opts.outputLimit() - len(c.fw.pending), true, nil
}

func (h1client) writePiece(c *lconn, p []byte) bool { return c.writePiece(p) }

func (h1client) endBody(c *lconn, tr *trailerSection) {
	c.endChunks(tr)
	c.sendDone(nil)
}

func (h1client) hold(c *lconn) {}

func (h1client) wrote(c *lconn) bool { return true }
