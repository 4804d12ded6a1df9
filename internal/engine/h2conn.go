package engine

import (
	"errors"
	"io"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/sys/unix"

	"github.com/helios-lb/helios/internal/bodybuf"
	"github.com/helios-lb/helios/internal/h2"
)

// HTTP/2 clients on the loop.
//
// A client connection that speaks HTTP/2 (ALPN chose h2, or an h2c
// listener saw the connection preface) is driven by an h2.Conn, the
// protocol's state machine: the loop feeds it what the socket gives,
// ticks it once a second, and the frames it writes go out through the
// connection's writer like any answer (TLS or not). The connection's
// lconn only moves bytes (state lsH2).
//
// Each stream is an exchange of its own, served by the same machine as an
// HTTP/1.1 request: an lconn in the stream role (h2s set, no socket). Its
// request head is the protocol-neutral head (httpmsg.Request) filled from
// the validated HEADERS (h2request.go), its body the DATA as plain bytes
// (streamBuf), with the trailers, if any, kept aside — so routing, request
// buffering, forwarding, retries, body streaming with backpressure,
// timeouts and records are the ones every request gets, in one place.
// Only the answer differs: it goes out as
// HEADERS and DATA on the stream (h2send.go), sized by the stream's flow
// control windows, which are what backpressure is over HTTP/2. Received
// body bytes give window back as the exchange reads them, so a backend
// that stops taking a body stops the client.

// h2Preface is the client connection preface (RFC 9113 §3.4), which an
// h2c listener looks for at the start of a connection.
const h2Preface = http2.ClientPreface

// h2ReadBufSize is an HTTP/2 connection's read buffer: it must hold a
// whole frame of the largest size the connection accepts
// (h2.Conn.FrameBufferSize), and a few more frames besides.
const h2ReadBufSize = 32 << 10

// h2OutBufSize is the buffer an h2.Conn gathers its output in during one
// call: about 64 KiB before it writes, plus a frame.
const h2OutBufSize = 80 << 10

// h2Linger is how long a connection whose HTTP/2 session is over waits,
// its write side shut, for the client to close first, so that the final
// GOAWAY is read before a reset could destroy it.
const h2Linger = 2 * time.Second

// h2conn is the HTTP/2 side of a client connection (lconn.h2).
type h2conn struct {
	c    *lconn
	conn *h2.Conn
	// rbuf holds received bytes Feed has not consumed yet (rn of them);
	// it goes back to the loop's free list when none are left.
	rbuf []byte
	rn   int
	// acct is what the request buffering of the connection's streams
	// is charged to, together (bufferAccount).
	acct *bodybuf.Account
	// ending: the session is over; what is pending goes out, then the
	// write side is shut (shut) and the connection lingers.
	ending, shut bool
	// held: the loop gathers the machine's output until the end of its
	// batch of events (loop.hold).
	held bool
}

// h2stream is the stream side of an lconn serving one HTTP/2 stream
// (lconn.h2s).
type h2stream struct {
	parent *lconn
	s      *h2.Stream
	// streamBuf is the request body the stream received.
	streamBuf
	// head holds the bytes of the request's head (streamRequest);
	// headErr is why the head was refused.
	head    streamMem
	headErr error
	// pumping guards the answer's pump against re-entry from the
	// stream's OnWritable; calling counts the exchange's calls into the
	// stream under way (OnReset).
	pumping bool
	calling int
	// carry is what a write cut short left of the answer's body (with
	// the stream's end when carryEnd); eof: the backend's body is all
	// read, its end still to write.
	carry         []byte
	carryEnd, eof bool
	// out gathers the answer's head, then its trailers.
	out h2fields
	// smallAcct holds smallHeld bytes of the request's small body, read
	// whole behind its head (holdSmallBody).
	smallAcct *bodybuf.Account
	smallHeld int64
}

// h2bufs lends h2.Conns their output buffers from the loop's free list.
type h2bufs struct{ l *loop }

func (b h2bufs) Get() []byte  { return b.l.h2OutBufs.get() }
func (b h2bufs) Put(p []byte) { b.l.h2OutBufs.put(p[:cap(p)]) }

// h2output is an h2.Conn's Output: the client connection's writer, which
// keeps what the socket does not take. A backlog past the listener's
// output limit blocks the machine's DATA until it drains (writable).
type h2output struct{ c *lconn }

func (o h2output) Write(p []byte) (int, error) {
	c := o.c
	n, err := c.sink().Write(p)
	if err == nil && len(c.fw.pending) > c.opts.outputLimit() && c.h2 != nil && c.h2.conn != nil {
		c.h2.conn.SetOutputBlocked(true)
	}
	return n, err
}

// startH2 makes c an HTTP/2 connection; pre holds bytes read already
// (the preface an h2c listener recognised, and what came behind it).
func (c *lconn) startH2(pre []byte) {
	h := &h2conn{c: c}
	c.h2 = h
	c.state = lsH2
	c.fresh = 0
	cfg := c.opts.HTTP2
	cfg.Buffers = h2bufs{c.l}
	if cfg.IdleTimeout == 0 && c.opts.IdleTimeout > 0 {
		cfg.IdleTimeout = c.opts.IdleTimeout
	}
	if cfg.Limits.HeaderTimeout == 0 {
		// A header block is bounded as an HTTP/1.1 head is: by the
		// head's timeout, or else by the idle wait it began in.
		ht := c.opts.headerTimeout()
		if ht <= 0 {
			ht = c.opts.IdleTimeout
		}
		if ht <= 0 {
			ht = -1 // no bound, as for HTTP/1.1
		}
		cfg.Limits.HeaderTimeout = ht
	}
	c.ensureNoDelay()
	h.conn = h2.NewServerConn(h2output{c}, h, cfg)
	c.setDeadline(dlH2Tick, time.Second)
	if len(pre) > 0 {
		h.rbuf = c.l.h2ReadBufs.get()
		h.rn = copy(h.rbuf, pre)
	}
	if c.l.eng.draining.Load() || c.ll.draining.Load() {
		h.conn.Shutdown()
	}
	c.h2read()
}

// takeH2 switches a cleartext connection whose first bytes, pre, were
// the HTTP/2 preface (in its read buffer) to HTTP/2.
func (c *lconn) takeH2(pre []byte) {
	buf := c.rd.buf
	c.rd.buf = nil
	c.rd.r, c.rd.w, c.rd.pin = 0, 0, 0
	c.startH2(pre)
	c.l.putClientBuf(buf)
}

// h2event handles readiness of an HTTP/2 connection's socket.
func (c *lconn) h2event(ev uint32) {
	h := c.h2
	if ev&evRdHup != 0 {
		c.fr.rdhup = true
	}
	if ev&evOut != 0 && c.fw.busy() {
		c.h2writable()
		if c.state != lsH2 {
			return
		}
	}
	if ev&(evIn|evRdHup|evHup|evErr) != 0 {
		c.fr.drained = false
		if h.shut {
			c.h2discard()
			return
		}
		c.h2read()
	}
}

// h2read feeds the machine what the socket has, until it has no more.
func (c *lconn) h2read() {
	h := c.h2
	for !h.ending {
		if h.rbuf == nil {
			h.rbuf = c.l.h2ReadBufs.get()
		}
		n, err := c.src().Read(h.rbuf[h.rn:])
		h.rn += n
		if h.rn > 0 {
			k, _ := h.conn.Feed(h.rbuf[:h.rn])
			h.rn = copy(h.rbuf, h.rbuf[k:h.rn])
			if h.conn.Done() || c.state != lsH2 {
				break
			}
		}
		if err == errWouldBlock {
			break
		}
		if err != nil {
			// The client closed or broke the connection: its streams
			// end as if reset (their exchanges hear the client went).
			h.conn.Close(err)
			break
		}
	}
	if c.state != lsH2 {
		return
	}
	if h.rn == 0 && h.rbuf != nil {
		c.l.h2ReadBufs.put(h.rbuf)
		h.rbuf = nil
	}
	c.h2check()
}

// h2writable writes out what is pending; once the backlog is below the
// output limit the machine's DATA flows again.
func (c *lconn) h2writable() {
	h := c.h2
	done, err := c.fw.flushPending()
	if err != nil {
		h.conn.Close(err)
		c.close()
		return
	}
	if len(c.fw.pending) <= c.opts.outputLimit()/2 {
		h.conn.SetOutputBlocked(false)
	}
	if done {
		c.h2check()
	}
}

// h2check ends the connection once its session is over: what is pending
// goes first, then the write side is shut and the connection lingers for
// the client's close (h2discard), at most h2Linger. Output the loop holds
// in the machine is pending too: the answers of the session's last
// streams, and its final GOAWAY, may be there (issue 26: a drain shut the
// write side under them, and the client saw the connection end without
// them).
func (c *lconn) h2check() {
	h := c.h2
	if c.state != lsH2 || !h.conn.Done() {
		return
	}
	h.ending = true
	if h.held || c.fw.busy() {
		return // releaseHeld or h2writable comes back
	}
	if h.shut {
		return
	}
	h.shut = true
	if h.conn.Err() != nil && !isGraceful(h.conn.Err()) || c.fr.rdhup {
		c.close()
		return
	}
	unix.Shutdown(c.fd, unix.SHUT_WR)
	c.setDeadline(dlH2Linger, h2Linger)
	c.h2discard()
}

// isGraceful reports whether a session ended by agreement (GOAWAY after a
// drain, idle), after which the connection lingers for the client.
func isGraceful(err error) bool { return err == nil || errors.Is(err, h2.ErrClosed) }

// h2discard reads and drops what a lingering connection's client still
// sends, and closes when it has closed.
func (c *lconn) h2discard() {
	buf := c.l.scratch()
	for {
		_, err := c.src().Read(buf)
		if err == errWouldBlock {
			return
		}
		if err != nil {
			c.close()
			return
		}
	}
}

// h2tick gives the machine the time (about once a second).
func (c *lconn) h2tick() {
	h := c.h2
	if h.shut {
		if c.dkind == dlH2Linger {
			c.close()
		}
		return
	}
	h.conn.Tick(time.Unix(0, c.l.now))
	if c.state != lsH2 {
		return
	}
	c.setDeadline(dlH2Tick, time.Second)
	c.h2check()
}

// h2drain starts a graceful close of the session (GOAWAY): streams under
// way finish, new ones are refused, and the connection ends after the
// last one.
func (c *lconn) h2drain() {
	c.h2.conn.Shutdown()
	c.h2check()
}

// closeH2 ends the session of a connection that closes: its streams end
// as if reset, their exchanges told that the client went.
func (c *lconn) closeH2() {
	h := c.h2
	c.h2 = nil
	h.conn.Close(errConnClosed)
	if h.rbuf != nil {
		c.l.h2ReadBufs.put(h.rbuf)
		h.rbuf = nil
	}
}

// errConnClosed is why the streams of a connection closed under them end.
var errConnClosed = io.ErrClosedPipe

// --- h2.ServerHandler: the connection's streams ---

// OnRequest starts a stream's exchange.
func (h *h2conn) OnRequest(s *h2.Stream, rh *h2.RequestHead, end bool) {
	c := h.c
	sc := c.l.allocConn()
	sc.startStream(c, s, rh, end)
	c.l.deliver(sc, evIn)
}

// OnData takes body bytes into the stream's input.
func (h *h2conn) OnData(s *h2.Stream, p []byte, end bool) {
	sc, _ := s.User().(*lconn)
	if sc == nil {
		return
	}
	sc.h2s.data(p, end)
	h.c.l.deliver(sc, evIn)
}

// OnTrailers ends the stream's body with its trailers (in the last chunk;
// a body of declared length has nowhere to carry them in HTTP/1.1).
func (h *h2conn) OnTrailers(s *h2.Stream, fields []h2.Field) {
	sc, _ := s.User().(*lconn)
	if sc == nil {
		return
	}
	sc.h2s.trailers(fields)
	h.c.l.deliver(sc, evIn)
}

// OnWritable resumes an answer that waited for window or output.
func (h *h2conn) OnWritable(s *h2.Stream) {
	if sc, _ := s.User().(*lconn); sc != nil {
		h.c.l.deliver(sc, evOut)
	}
}

// OnReset ends the exchange of a stream the client reset, or whose
// connection ended: the client went. A reset that comes from within the
// exchange's own call into the stream (a write that found the connection
// broken) is not acted on in the middle of that call: the exchange sees
// its stream gone when the call returns, and is told on the loop's next
// turn if it has not ended by then.
func (h *h2conn) OnReset(s *h2.Stream, err error) {
	sc, _ := s.User().(*lconn)
	if sc == nil {
		return
	}
	s.SetUser(nil)
	st := sc.h2s
	st.s = nil
	if st.calling == 0 {
		sc.gone(err)
		return
	}
	inc := sc.inc
	sc.l.post(func() {
		if sc.h2s == st && sc.inc == inc && sc.state != lsClosed {
			sc.gone(err)
		}
	})
}

// --- the stream role ---

// startStream makes c serve stream s of the HTTP/2 connection pc.
func (c *lconn) startStream(pc *lconn, s *h2.Stream, rh *h2.RequestHead, end bool) {
	st := c.l.allocStream()
	st.parent, st.s = pc, s
	st.ended = end
	c.h2s = st
	c.ll = pc.ll
	c.opts = pc.opts
	c.fd = -1
	c.remote = pc.remote
	c.fr = fdReader{fd: -1}
	c.fw = fdWriter{fd: -1, file: -1}
	c.state = lsIdle
	c.scanned = 0
	c.headDeadline = false
	c.nodelay = true
	c.flowDone = true
	c.readPending = false
	c.tls, c.sock = nil, nil
	c.tlsVer = pc.tlsVer
	c.fresh = 0
	c.deadline, c.dkind = 0, dlNone
	c.inc++
	s.SetUser(c)
	st.headErr = c.streamRequest(rh, end)
	c.l.streams.add(c)
}

// h2src reads a stream's input for its exchange, giving the bytes read
// back to the stream's flow-control window: that credit is what lets the
// client send more, so an exchange that stops reading (its backend is
// slow) stops the client.
type h2src struct{ c *lconn }

func (r h2src) Read(p []byte) (int, error) {
	st := r.c.h2s
	return st.readCrediting(p, st.s, &st.calling)
}

// streamEvent handles what the stream's connection tells its exchange:
// input (evIn) or room to write the answer (evOut).
func (c *lconn) streamEvent(ev uint32) {
	if ev == evTimeout {
		c.expired()
		return
	}
	if ev&evOut != 0 {
		switch c.state {
		case lsSend:
			c.pump()
		case lsFile:
			c.pumpFile()
		case lsFlush:
			if c.h2flushCarry() {
				c.streamDone()
			}
		}
		if c.state == lsClosed {
			return
		}
	}
	if ev&evIn != 0 {
		c.readable()
	}
}

// streamDone ends a stream whose exchange is over: the answer went out
// whole (a request body the exchange did not read is refused with
// RST_STREAM NO_ERROR, RFC 9113 §8.1), or it broke (the stream is reset).
func (c *lconn) streamDone() {
	st := c.h2s
	if len(st.carry) > 0 && !c.broken && st.s != nil {
		// The answer's last bytes wait for window (streamEvent).
		c.state = lsFlush
		c.deadline, c.dkind = 0, dlNone
		return
	}
	if s := st.s; s != nil && !s.Closed() {
		switch {
		case c.broken || !c.respStarted:
			s.Reset(c.brokenCode())
		case !st.ended || st.unread():
			s.Reset(http2.ErrCodeNo)
		}
	}
	c.closeStream()
}

// brokenCode is the code that resets a stream whose answer was cut short
// or never given: CANCEL when the exchange was given up for the client's
// own failure (its body stalled: the stream is no longer wanted; NO_ERROR
// is only for after a complete answer, RFC 9113 §8.1), INTERNAL_ERROR
// when the proxy or its backend failed it.
func (c *lconn) brokenCode() http2.ErrCode {
	if c.clientFailed {
		return http2.ErrCodeCancel
	}
	return http2.ErrCodeInternal
}

// closeStream frees an lconn in the stream role.
func (c *lconn) closeStream() {
	st := c.h2s
	if c.state == lsClosed {
		return
	}
	if s := st.s; s != nil {
		if !s.Closed() {
			// Broken: the answer was cut short (its backend failed);
			// otherwise the exchange was abandoned (a shutdown).
			code := http2.ErrCodeCancel
			if c.broken {
				code = c.brokenCode()
			}
			s.Reset(code)
		}
		s.SetUser(nil)
	}
	c.state = lsClosed
	c.dropExchange()
	c.l.streams.remove(c)
	c.putReadBufs()
	c.dropFields()
	c.h2s = nil
	c.l.freeStream(st)
	c.l.freeConn(c)
}

// allocStream returns stream state from the loop's free list.
func (l *loop) allocStream() *h2stream {
	if n := len(l.freeStreams); n > 0 {
		st := l.freeStreams[n-1]
		l.freeStreams = l.freeStreams[:n-1]
		return st
	}
	return &h2stream{}
}

// freeStream keeps stream state for reuse.
func (l *loop) freeStream(st *h2stream) {
	st.parent, st.s = nil, nil
	st.streamBuf.reset()
	st.head.reset()
	st.headErr = nil
	st.out.free()
	st.pumping = false
	st.calling = 0
	st.carry, st.carryEnd, st.eof = st.carry[:0], false, false
	if cap(st.carry) > maxIdlePending {
		st.carry = nil
	}
	if len(l.freeStreams) < 1024 {
		l.freeStreams = append(l.freeStreams, st)
	}
}

// appendHex appends v in hexadecimal.
func appendHex(b []byte, v int64) []byte {
	const digits = "0123456789abcdef"
	var tmp [16]byte
	i := len(tmp)
	for {
		i--
		tmp[i] = digits[v&0xf]
		v >>= 4
		if v == 0 {
			break
		}
	}
	return append(b, tmp[i:]...)
}
