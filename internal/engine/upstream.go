package engine

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"

	"github.com/helios-lb/helios/internal/http1"
	"github.com/helios-lb/helios/internal/httpmsg"

	"golang.org/x/sys/unix"

	"github.com/helios-lb/helios/internal/h2"
	"github.com/helios-lb/helios/internal/netpoll"
	"github.com/helios-lb/helios/internal/wire"
)

type upState uint8

const (
	upIdle       upState = iota
	upConnecting         // connecting; the request is not written yet
	upWaitHead           // the request is going or gone; waiting for the answer's head
	upBody               // the answer's body
	upTunnel             // an upgraded connection
	upClosed
)

// lupconn is a loop's connection to a backend.
type lupconn struct {
	l      *loop
	pool   *lpool
	fd     int
	fr     fdReader
	rd     reader
	fw     fdWriter
	state  upState
	client *lconn
	used   bool
	// sending: the request (head or body) is still going out; w buffers
	// it (wbuf is a loop write buffer, held only while sending).
	sending bool
	w       writer
	wbuf    []byte
	// wfailed: writing the request failed; the backend may still have
	// answered.
	wfailed   error
	idleSince int64
	resp      response
	body      body
	// h2 is set on a lupconn in the stream role: one stream of an
	// HTTP/2 connection to the backend (h2upstream.go), no socket of its own;
	// inc numbers its uses.
	h2  *h2upStream
	inc uint32
	// tls is the connection's TLS when its transport has it (upstream_tls.go);
	// tfile, from tfileOff to tfileEnd, is a file range still to go out
	// through it (the part of a buffered request body in a file).
	tls                upTLS
	tfile              *os.File
	tfileOff, tfileEnd int64
	// pp is the PROXY header the connection still has to open with
	// (upstream_proxyproto.go); nil when it has none to send. ppFor is the client
	// it names.
	pp    []byte
	ppFor netip.Addr
	// ws follows the frames of a tunnel that carries a WebSocket
	// (tunnel.go). It is here rather than on the client's lconn, which
	// every idle connection pays for (and which a pointer more would
	// move to a larger allocation class).
	ws *wsTunnel
}

// dial starts a non-blocking connect to the pool's backend.
func (l *loop) dial(p *lpool) (*lupconn, error) {
	if p.local != nil {
		fd, err := l.dialLocal(p)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", wire.ErrConnect, p.addr, err)
		}
		p.open++
		u := &lupconn{l: l, pool: p, fd: fd, state: upIdle}
		u.fr = fdReader{fd: fd, p: l.poller}
		u.fw = fdWriter{fd: fd, p: l.poller, file: -1}
		if err := l.register(fd, u); err != nil {
			netpoll.CloseFD(fd)
			p.open--
			return nil, fmt.Errorf("%w: %s: %w", wire.ErrConnect, p.addr, err)
		}
		return u, nil
	}
	var u *lupconn
	if _, err := l.openSocket(p, func(fd int, connected bool) target {
		u = &lupconn{l: l, pool: p, fd: fd, state: upConnecting}
		u.fr = fdReader{fd: fd, p: l.poller}
		u.fw = fdWriter{fd: fd, p: l.poller, file: -1}
		if connected {
			u.state = upIdle // connected already; sendRequest follows at once
		}
		return u
	}); err != nil {
		return nil, err
	}
	p.open++
	return u, nil
}

// openSocket takes a descriptor, starts a non-blocking connect to p's
// backend (connect) and registers the socket with the loop for the
// connection mk makes of it (an HTTP/1.1 one, or an HTTP/2 session);
// connected reports that the connect is done already. On failure the
// socket is closed and its descriptor given back.
func (l *loop) openSocket(p *lpool, mk func(fd int, connected bool) target) (connected bool, err error) {
	if !l.eng.takeFD() {
		return false, errNoDescriptor
	}
	fd, connected, err := l.connect(p)
	if err != nil {
		l.releaseFD()
		return false, err
	}
	if err := l.register(fd, mk(fd, connected)); err != nil {
		netpoll.CloseFD(fd)
		l.releaseFD()
		return false, fmt.Errorf("%w: dialing %s: %w", wire.ErrConnect, p.addr, err)
	}
	return connected, nil
}

// connect starts a non-blocking connect to p's backend; connected
// reports that it is done already.
func (l *loop) connect(p *lpool) (fd int, connected bool, err error) {
	if l.eng.stopped.Load() {
		// Closing everything: an exchange a closed connection failed
		// must not open another (and be failed again, for ever).
		return -1, false, fmt.Errorf("%w: %s: %w", wire.ErrConnect, p.addr, errEngineClosed)
	}
	if p.sa == nil {
		return -1, false, fmt.Errorf("%w: resolving %s: %w", wire.ErrConnect, p.addr, p.err)
	}
	fd, err = netpoll.Socket(p.family)
	if err != nil {
		return -1, false, fmt.Errorf("%w: dialing %s: %w", wire.ErrConnect, p.addr, os.NewSyscallError("socket", err))
	}
	unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	if l.eng.dialControl != nil {
		l.eng.dialControl(fd)
	}
	err = unix.Connect(fd, p.sa)
	if err != nil && err != unix.EINPROGRESS && err != unix.EINTR {
		netpoll.CloseFD(fd)
		return -1, false, fmt.Errorf("%w: dialing %s: %w", wire.ErrConnect, p.addr, os.NewSyscallError("connect", err))
	}
	return fd, err == nil, nil
}

// attempt sends the request to the chosen backend: a pooled connection,
// or a new one.
func (c *lconn) attempt() {
	p := c.l.pool(c.tr, c.be.Addr, c.local)
	c.state = lsForward
	if c.tls != nil && !c.fr.drained {
		// A TLS client's records were read whole, never to the socket's
		// end: have the poller watch it again (the portable one waits
		// for that), so that a client that goes away meanwhile is seen
		// (readable, clientClosed).
		c.l.poller.Drained(c.fd)
	}
	if !p.ready(c) {
		return // resolved() resumes
	}
	c.connect(p)
}

// connect goes on with an attempt once the backend's address is known
// (or known to be unknown).
func (c *lconn) connect(p *lpool) {
	if p.opts.Protocol != wire.ProtoHTTP1 {
		c.connectH2(p)
		return
	}
	var u *lupconn
	if c.tries == 0 {
		u = p.getFor(c)
	}
	if u == nil {
		if c.waitForRoom(p, "") {
			return // dequeue() resumes
		}
		var err error
		c.timeDial()
		if u, err = c.l.dial(p); err != nil {
			if errors.Is(err, errNoDescriptor) {
				c.waitFD(p)
				return // a descriptor given back resumes (descriptors.go)
			}
			c.forwarded(0, err)
			return
		}
		u.pp, u.ppFor = c.proxyHeaderFor(p), c.clientAddr()
	}
	c.useConn(u)
}

// useConn sends the request on u (open already, or connecting).
func (c *lconn) useConn(u *lupconn) {
	u.client = c
	c.up = u
	c.state = lsForward
	if u.state == upConnecting {
		c.setDeadline(dlConnect, c.tr.Settings.DialTimeout)
		return // event() continues once connected
	}
	if u.needsTLS() {
		u.state = upConnecting
		c.setDeadline(dlConnect, c.tr.Settings.DialTimeout)
		u.startTLS(c)
		return
	}
	c.sendRequest()
}

// sendRequest writes the request head and the body: a small one already
// in the buffer (kept for a retry), what request buffering holds, or the
// start of a body that streams (pumpReq).
func (c *lconn) sendRequest() {
	u := c.up
	c.timeConnected()
	if u.h2 != nil {
		c.sendRequestH2()
		return
	}
	if u.rd.buf == nil {
		u.rd.reset(u.src(), c.l.readBufs.get())
	}
	// sent counts this request's bytes, so that a failure can tell
	// whether any of them reached the backend.
	u.fw.sent = 0
	u.wfailed = nil
	u.state = upWaitHead
	u.sending = true
	u.wbuf = c.l.writeBufs.get()
	u.w.reset(u.sink(), u.wbuf)
	bodyLen := int64(-1)
	if c.bodyBuf == bufferedWhole {
		bodyLen = c.bb.Len()
	}
	if u.pp != nil {
		u.w.Write(u.pp) // a new connection's first bytes
		u.pp = nil
	}
	hop := c.hop()
	http1.WriteRequestHead(&u.w, &c.l.fwd, &c.req.Request, &hop, bodyLen)
	switch {
	case c.bodyBuf != notBuffered:
		c.sendBuffered()
		c.streaming = c.bodyBuf == bufferedPrefix
	case c.reqBody.done:
	default:
		if p, ok := c.reqBody.fullyBuffered(); ok {
			u.w.Write(p)
			c.replay = true
		} else {
			c.streaming = true
		}
	}
	if u.w.flush() != nil {
		err := u.w.err
		c.releaseUpWriter()
		c.upFailed(err, true)
		return
	}
	c.setDeadline(dlUpHead, c.tr.Settings.ResponseHeaderTimeout)
	if c.streaming {
		c.pumpReq()
		return
	}
	c.requestWritten()
	// The answer may be in already (an edge seen while sending).
	if c.up != nil && c.up.state == upWaitHead {
		c.readUpHead()
	}
}

// requestWritten runs when the whole request has been handed over (some
// may still be pending in u.fw, which event() writes out).
func (c *lconn) requestWritten() {
	u := c.up
	c.releaseUpWriter()
	if !u.busy() {
		c.requestSent()
	}
}

// requestSent runs when the backend's socket has taken the whole request.
func (c *lconn) requestSent() {
	u := c.up
	u.sending = false
	if u.state == upWaitHead && c.state == lsForward {
		c.setDeadline(dlUpHead, c.tr.Settings.ResponseHeaderTimeout)
	}
}

// releaseUpWriter gives back the write buffer of the current backend
// connection.
func (c *lconn) releaseUpWriter() {
	if c.up != nil {
		c.releaseUpWriterOf(c.up)
	}
}

func (c *lconn) releaseUpWriterOf(u *lupconn) {
	if u.wbuf != nil {
		c.l.writeBufs.put(u.wbuf)
		u.wbuf = nil
		u.w.reset(nil, nil)
	}
}

// event handles readiness of a backend socket.
func (u *lupconn) event(ev uint32) {
	if u.tls.handshaking() {
		u.tls.sock.wake()
		u.l.handshakesWoken = true
		return
	}
	if ev&evRdHup != 0 {
		u.fr.rdhup = true
	}
	readable := ev&(evIn|evRdHup|evHup|evErr) != 0
	if readable {
		// Whatever the state: a read skipped now must not be skipped
		// later (edge-triggered: this edge will not come again).
		u.fr.drained = false
	}
	switch u.state {
	case upIdle:
		// An idle connection that becomes readable was closed by the
		// backend (or it sent something unasked): it is not reusable. A
		// report of bytes already read (a poller may report late) is
		// not that, and the connection stays.
		if readable && !u.quiet() {
			u.pool.remove(u)
			u.close()
		}
	case upConnecting:
		if ev&(evOut|evErr|evHup) == 0 {
			return
		}
		c := u.client
		soerr, err := unix.GetsockoptInt(u.fd, unix.SOL_SOCKET, unix.SO_ERROR)
		if err == nil && soerr != 0 {
			err = unix.Errno(soerr)
		}
		if err != nil {
			c.upFailed(fmt.Errorf("%w: dialing %s: %w", wire.ErrConnect, u.pool.addr, os.NewSyscallError("connect", err)), false)
			return
		}
		if u.needsTLS() {
			u.startTLS(c)
			return
		}
		c.sendRequest()
	default:
		c := u.client
		if c == nil {
			return
		}
		// What this event makes of an HTTP/2 stream's answer (its
		// head, body and end, say) goes out with the rest of the loop's
		// batch, in one write.
		c.client().hold(c)
		if u.h2 != nil && ev&evOut != 0 {
			c.pumpReqH2()
			if c.up != u {
				return
			}
		}
		if ev&evOut != 0 && u.state == upTunnel && u.busy() {
			if _, err := u.flushPending(); err != nil {
				c.endTunnel()
				return
			}
			c.tunnelUpWritable()
			return
		}
		if ev&evOut != 0 && u.sending && u.busy() {
			done, err := u.flushPending()
			switch {
			case err != nil:
				// The backend stopped taking the request. It may
				// have answered first (an early 413): look for the
				// answer before blaming the write.
				c.streaming = false
				u.wfailed = err
				readable = true
			case done && c.streaming:
				c.pumpReq()
			case done && u.w.buf == nil:
				c.requestSent()
			}
			if c.up != u {
				return // the exchange moved on
			}
		}
		if !readable {
			return
		}
		switch u.state {
		case upWaitHead:
			// An answer while the request may still be going out:
			// take it (a connection whose request was cut short is
			// not reused). A read error fails the attempt.
			c.readUpHead()
		case upBody:
			if c.rs != nil || len(c.fw.pending) <= c.opts.outputLimit() {
				c.pump()
			} else if !c.startSpool() && c.dkind != dlWrite {
				// The client is behind and the backend has more: the
				// answer waits for the client (unless it could be
				// buffered), and its write timeout bounds the wait, not
				// the backend's read timeout.
				c.setDeadline(dlWrite, c.opts.WriteTimeout)
			}
		case upTunnel:
			c.tunnelFromBackend()
		}
	}
}

// readUpHead reads the backend's response head.
func (c *lconn) readUpHead() {
	u := c.up
	if st := u.h2; st != nil {
		// An HTTP/2 backend's head came whole (OnResponse).
		switch {
		case st.gotHead:
			c.gotHead()
		case st.err != nil:
			c.upFailed(st.err, true)
		}
		return
	}
	head := httpmsg.EqualFold(c.req.Method, "head")
	for {
		b := u.rd.buffered()
		if end, _ := http1.FindHeadEnd(b, 0); end > 0 {
			// Pin first: pinning may move the bytes (to make room for the
			// body), and the parsed fields point into them.
			u.rd.pinHead(end)
			if err := http1.ParseResponse(u.rd.buf[u.rd.pin-end:u.rd.pin], &u.resp, head); err != nil {
				c.upFailed(fmt.Errorf("%w: %w", wire.ErrBackend, err), true)
				return
			}
			if u.resp.Status < 200 && u.resp.Status != 101 {
				u.rd.pin = 0 // interim answers are not relayed, nor kept
				continue
			}
			if u.resp.Status == 101 && c.req.Upgrade == nil {
				// Switching to a protocol nobody asked for (or the route
				// refused) would open a tunnel past routing.
				c.upFailed(fmt.Errorf("%w: 101 Switching Protocols to a request without Upgrade", wire.ErrBackend), true)
				return
			}
			c.gotHead()
			return
		}
		if len(b) > maxResponseHead {
			c.upFailed(fmt.Errorf("%w: response head too large", wire.ErrBackend), true)
			return
		}
		err := u.rd.fill()
		switch {
		case err == nil:
		case err == errWouldBlock:
			if u.wfailed != nil {
				// Nothing to read and nothing more can be written.
				c.upFailed(u.wfailed, true)
			}
			return
		case err == errBufferFull:
			u.rd.grow(min(2*len(u.rd.buf), maxResponseHead+readBufSize))
		default:
			if err == io.EOF && len(b) > 0 {
				err = io.ErrUnexpectedEOF
			}
			c.upFailed(err, true)
			return
		}
	}
}

// gotHead hands a response head to the pipeline.
func (c *lconn) gotHead() {
	u := c.up
	c.timeHead()
	u.state = upBody
	if c.replay {
		c.reqBody.consumeBuffered()
		c.bodySent = true
		c.replay = false
	}
	switch {
	case u.resp.Chunked:
		u.body.reset(&u.rd, bodyChunked, 0)
	case u.resp.ContentLength < 0:
		// Until the connection closes, or the stream ends.
		u.body.reset(&u.rd, bodyUntilClose, 0)
	default:
		u.body.reset(&u.rd, bodyFixed, max(u.resp.ContentLength, 0))
	}
	c.deadline, c.dkind = 0, dlNone
	c.forwarded(u.resp.Status, nil)
}

// upFailed handles an attempt that failed before a response head. A
// pooled connection that turns out closed is replaced once, transparently,
// when nothing can have been processed twice.
func (c *lconn) upFailed(err error, sent bool) {
	u := c.up
	c.up = nil
	wrote := false
	used := false
	if u != nil {
		wrote, used = u.fw.sent > 0, u.used
		u.close()
	}
	stale := used && c.tries == 0 && isStale(err) && !c.bodySent &&
		(!wrote || idempotent(c.req.Method))
	// An HTTP/2 backend that refused the stream, or whose GOAWAY left it
	// unprocessed, did nothing with it: it goes again, transparently,
	// on another stream (RFC 9113 §8.7), a few times at most.
	refused := u != nil && u.h2 != nil && c.tries < maxRefusedRetries && !c.bodySent && errors.Is(err, h2.ErrRetryable)
	if stale || refused {
		c.tries++
		c.attempt()
		return
	}
	c.forwarded(0, classifyErr(err, c.be.Addr))
}

// dropUp ends the use of the current backend connection: kept when its
// answer is complete (or can be read out now), closed otherwise.
func (c *lconn) dropUp(reuse bool) {
	u := c.up
	if u == nil {
		return
	}
	c.up = nil
	if reuse && u.state == upBody && u.resp.KeepAlive {
		// A retry drops an answer: keep the connection if the rest of a
		// small body is already here.
		for !u.body.done {
			if u.body.kind != bodyFixed || u.body.remaining > 16<<10 {
				break
			}
			if _, err := u.body.next(); err != nil {
				break
			}
		}
		u.release(u.body.done)
		return
	}
	u.close()
}

// release returns a connection to its pool when reusable, closes it
// otherwise. A connection whose backend has shut its side (seen with
// the answer's last bytes, so no event comes for it once idle) is not
// reusable: the next request on it would fail, and one that cannot be
// sent twice with a 502.
func (u *lupconn) release(reusable bool) {
	if u.h2 != nil {
		u.endStream()
		return
	}
	if reusable && u.state == upBody && !u.fr.rdhup && len(u.rd.buffered()) == 0 && len(u.fw.pending) == 0 {
		u.rd.unpin()
		if !u.fr.drained {
			// The answer's last read took exactly what was left, so the
			// socket was never found empty: a poller that waits to be
			// told so before watching again (the portable one) must be
			// told now, or the next answer on this connection goes
			// unseen. And the next answer is waited for, not read at
			// once: a read right after the next request would find
			// nothing (EAGAIN) and cost a system call. Its arrival is
			// an edge; a close since the answer is one too (or was
			// seen with it: rdhup, not reused); bytes sent unasked are
			// read with the next answer, as they were before.
			u.fr.p.Drained(u.fd)
			u.fr.drained = true
		}
		c, keep := u.pool.dequeueFor(u)
		if c != nil {
			// A request waits for a connection: it takes this one.
			u.state = upIdle
			u.used = true
			u.client = nil
			c.useConn(u)
			return
		}
		if keep {
			u.pool.put(u)
			return
		}
	}
	u.close()
}

// quiet peeks at an idle connection: true when it has nothing to read
// and its backend has not closed it.
func (u *lupconn) quiet() bool {
	var b [1]byte
	_, _, err := unix.Recvfrom(u.fd, b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
	return err == unix.EAGAIN
}

// close closes the connection and frees its buffers.
func (u *lupconn) close() {
	if u.h2 != nil {
		u.endStream()
		return
	}
	if u.state == upClosed {
		return
	}
	u.closeFD()
}

func (u *lupconn) closeFD() {
	u.state = upClosed
	u.tfile = nil
	if !u.tls.abort() { // else the handshake's end closes the socket
		u.l.closeFD(u.fd)
	}
	u.fd = -1
	if u.rd.buf != nil {
		u.l.readBufs.put(u.rd.buf)
		u.rd.buf = nil
	}
	u.client = nil
	if u.pool.local == nil {
		u.l.releaseFD()
	}
	u.pool.freed()
}
