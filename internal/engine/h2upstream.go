package engine

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"time"

	"github.com/helios-lb/helios/internal/httpmsg"

	"golang.org/x/net/http2"
	"golang.org/x/sys/unix"

	"github.com/helios-lb/helios/internal/h2"
	"github.com/helios-lb/helios/internal/netpoll"
	"github.com/helios-lb/helios/internal/wire"
)

// HTTP/2 to backends (transport protocol h2c).
//
// A loop keeps its own HTTP/2 connections to each backend (h2up), and
// every exchange that goes there opens a stream on one that has room
// under the backend's SETTINGS_MAX_CONCURRENT_STREAMS, a new connection
// being dialled when none has (up to the backend's connection cap). The
// exchange holds a lupconn in the stream role (h2 set, no socket of its
// own): its request goes out as HEADERS and DATA — the head written by
// the same code as an HTTP/1.1 request's (writeRequestHead: one httpmsg.Header
// policy, X-Forwarded-* included), its body as the stream's send window
// allows — and the answer comes back rendered as an HTTP/1.1 message in
// the lupconn's input (chunked, with the trailers, when it has no
// length), which the exchange reads as it reads any backend's. So gRPC's
// trailers reach an HTTP/2 client as trailers, and the answer's body
// gives the backend window back only as the client takes it.

// h2up is a loop's HTTP/2 connection to a backend.
type h2up struct {
	l    *loop
	pool *lpool
	fd   int
	fr   fdReader
	fw   fdWriter
	conn *h2.Conn
	rbuf []byte
	rn   int
	// connecting: the connect is under way; waiting are the streams to
	// open once it is done.
	connecting bool
	waiting    []upWait
	closed     bool
	// tr is the transport the connection was dialled for (its TLS);
	// tls, the connection's TLS when the transport has it.
	tr  *wire.Transport
	tls upTLS
	// opening counts streams promised to exchanges but not yet open
	// (waiting), so that a connection being set up is not promised more
	// than the backend is likely to allow.
	opening  int
	lastTick int64
	// connectBy is when a connect still under way is given up (the
	// transport's dial timeout; 0: never, the system's limit).
	connectBy int64
	// pp is the PROXY header the connection opens with (nil: none), and
	// ppFor the client it names: only its requests share the connection.
	pp    []byte
	ppFor netip.Addr
}

// upWait is a stream waiting for its connection to be set up, and which
// of its lupconn's uses it was (one that gave up meanwhile is skipped).
type upWait struct {
	u   *lupconn
	inc uint32
}

// h2upStream is the stream side of a lupconn in the stream role.
type h2upStream struct {
	hu *h2up
	s  *h2.Stream
	// streamBuf is the answer's body as it arrives; err is what the
	// stream ended with when it was reset; gotHead: the answer's head
	// (u.resp) has come.
	streamBuf
	err     error
	gotHead bool
	// headersOnly: the answer ended with its head (gRPC's
	// trailers-only answer), which an HTTP/2 client gets as one HEADERS
	// frame ending the stream.
	headersOnly bool
	// file, from fileOff to fileEnd, is the part of a buffered request
	// body that went to a temporary file.
	file             *os.File
	fileOff, fileEnd int64
	// calling counts the exchange's calls into the stream under way.
	calling int
	// head is the request head, carry what a short write left of the
	// body (carryEnd: with the stream's end).
	head     h2.RequestHead
	carry    []byte
	carryEnd bool
}

// h2UpStreams is how many streams a connection to a backend is promised
// before any connection to it has had the backend's SETTINGS (Go's
// transport assumes 100 too); after, the pool assumes what the backend
// said last (lpool.h2max), so that a backend allowing few streams gets
// more connections rather than refused streams.
const h2UpStreams = 100

// maxRefusedRetries bounds the transparent retries of a stream an HTTP/2
// backend refused (upFailed).
const maxRefusedRetries = 3

// h2upFor returns a connection to p's backend with room for another
// stream, or nil.
func (p *lpool) h2upFor(c *lconn) *h2up {
	max := h2UpStreams
	if p.h2max > 0 {
		max = p.h2max
	}
	for _, hu := range p.h2 {
		if hu.closed || p.opts.ProxyProtocol != 0 && hu.ppFor != c.clientAddr() {
			continue
		}
		if hu.connecting {
			if hu.opening < max {
				return hu
			}
			continue
		}
		room := hu.conn.AvailableStreams()
		if _, known := hu.conn.PeerMaxStreams(); !known {
			room = min(room, max-hu.conn.ActiveStreams())
		}
		if room > hu.opening {
			return hu
		}
	}
	return nil
}

// connectH2 goes on with an attempt to an HTTP/2 backend: a stream on a
// connection with room, or on a new one.
func (c *lconn) connectH2(p *lpool) {
	hu := p.h2upFor(c)
	if hu == nil {
		if p.maxOpen > 0 && p.open >= p.maxOpen {
			if len(p.queue) >= p.maxQueue {
				c.forwarded(0, fmt.Errorf("%w: %s: %d connections open, their streams in use, and %d requests waiting", wire.ErrBackendBusy, p.addr, p.open, len(p.queue)))
				return
			}
			p.queue = append(p.queue, c)
			c.queued = p
			c.timeQueued()
			c.setDeadline(dlQueue, c.tr.Settings.QueueTimeout)
			return // a stream's end resumes (h2up.streamEnded)
		}
		var err error
		c.timeDial()
		if hu, err = c.l.dialH2(p, c.tr, c.proxyHeaderFor(p), c.clientAddr()); err != nil {
			if errors.Is(err, errNoDescriptor) {
				c.waitFD(p)
				return // a descriptor given back resumes (descriptors.go)
			}
			c.forwarded(0, err)
			return
		}
	}
	u := c.l.allocUpStream(hu)
	u.client = c
	c.up = u
	c.state = lsForward
	if hu.connecting {
		c.timeDial()
		hu.opening++
		hu.waiting = append(hu.waiting, upWait{u, u.inc})
		c.setDeadline(dlConnect, c.tr.Settings.DialTimeout)
		return
	}
	c.sendRequest()
}

// dialH2 starts a connection to p's backend for transport tr, opening
// with the PROXY header pp naming ppFor (nil: none).
func (l *loop) dialH2(p *lpool, tr *wire.Transport, pp []byte, ppFor netip.Addr) (*h2up, error) {
	if !l.eng.takeFD() {
		return nil, errNoDescriptor
	}
	fd, connected, err := l.connect(p)
	if err != nil {
		l.releaseFD()
		return nil, err
	}
	hu := &h2up{l: l, pool: p, fd: fd, connecting: true, lastTick: l.now, tr: tr, pp: pp, ppFor: ppFor}
	if d := tr.Settings.DialTimeout; d > 0 {
		hu.connectBy = l.now + int64(d)
	}
	hu.fr = fdReader{fd: fd, p: l.poller}
	hu.fw = fdWriter{fd: fd, p: l.poller, file: -1}
	if err := l.register(fd, hu); err != nil {
		netpoll.CloseFD(fd)
		l.releaseFD()
		return nil, fmt.Errorf("%w: dialing %s: %w", wire.ErrConnect, p.addr, err)
	}
	p.open++
	p.h2 = append(p.h2, hu)
	l.h2ups = append(l.h2ups, hu)
	if connected {
		hu.established()
	}
	return hu, nil
}

// established goes on once the connect is done: the TLS handshake, when
// the transport has TLS, then the session.
func (hu *h2up) established() {
	if hu.pp != nil {
		err := writeProxyHeader(hu.fd, hu.pp, hu.pool.addr)
		hu.pp = nil
		if err != nil {
			hu.close(err)
			return
		}
	}
	if !hu.pool.opts.TLS {
		hu.connected()
		return
	}
	fd := hu.fd
	hu.l.startUpTLS(&hu.tls, fd, &hu.fr, &hu.fw, hu.tr, hu.pool.addr, func(err error) {
		switch {
		case hu.tls.closing:
			hu.l.closeFD(fd) // closed meanwhile: the socket is ours again
		case hu.closed:
		case err != nil:
			hu.close(err)
		default:
			hu.connected()
			// What the backend sent behind its handshake is in the
			// tls.Conn's buffers, with no event to come for it.
			hu.read()
			hu.check()
		}
	})
}

// connected starts the session once the connect is done, and opens the
// streams that waited for it.
func (hu *h2up) connected() {
	hu.connecting = false
	p := hu.pool
	cfg := h2.Config{Buffers: h2bufs{hu.l}}
	switch d := p.opts.IdleTimeout; {
	case d > 0:
		cfg.IdleTimeout = d
	default:
		cfg.IdleTimeout = -1 // kept until the backend closes it
	}
	hu.conn = h2.NewClientConn(h2upOutput{hu}, hu, cfg)
	ws := hu.waiting
	hu.waiting = nil
	hu.opening = 0
	for _, w := range ws {
		if c := w.u.client; w.u.inc == w.inc && c != nil && c.up == w.u && c.state == lsForward {
			c.sendRequest()
		}
	}
	clear(ws)
}

// failWaiting fails the exchanges waiting for a connection that could
// not be made.
func (hu *h2up) failWaiting(err error) {
	ws := hu.waiting
	hu.waiting = nil
	hu.opening = 0
	for _, w := range ws {
		if c := w.u.client; w.u.inc == w.inc && c != nil && c.up == w.u && c.state == lsForward {
			c.upFailed(err, false)
		}
	}
}

// h2upOutput is a backend connection's Output: its writer, which keeps
// what the socket does not take; a backlog past the output limit blocks
// the machine's DATA until it drains.
type h2upOutput struct{ hu *h2up }

func (o h2upOutput) Write(p []byte) (int, error) {
	hu := o.hu
	var n int
	var err error
	if tc := hu.tls.tc; tc != nil {
		n, err = tc.Write(p)
	} else {
		n, err = hu.fw.Write(p)
	}
	if err == nil && len(hu.fw.pending) > defaultOutputBufferBytes && hu.conn != nil {
		hu.conn.SetOutputBlocked(true)
	}
	return n, err
}

// event handles readiness of the backend connection's socket.
func (hu *h2up) event(ev uint32) {
	if hu.closed {
		return
	}
	if hu.tls.handshaking() {
		hu.tls.sock.wake()
		hu.l.handshakesWoken = true
		return
	}
	if hu.connecting {
		// Readable counts too: the backend speaks first (its SETTINGS),
		// and a poller that reports reading and writing apart (the
		// portable one) may report that first, and once only.
		if ev&(evOut|evIn|evErr|evHup) == 0 {
			return
		}
		soerr, err := unix.GetsockoptInt(hu.fd, unix.SOL_SOCKET, unix.SO_ERROR)
		if err == nil && soerr != 0 {
			err = unix.Errno(soerr)
		}
		if err != nil {
			hu.close(fmt.Errorf("%w: dialing %s: %w", wire.ErrConnect, hu.pool.addr, os.NewSyscallError("connect", err)))
			return
		}
		hu.established()
		if hu.closed || hu.connecting {
			return
		}
	}
	if ev&evRdHup != 0 {
		hu.fr.rdhup = true
	}
	if ev&evOut != 0 && hu.fw.busy() {
		if _, err := hu.fw.flushPending(); err != nil {
			hu.close(fmt.Errorf("%w: %s: %w", wire.ErrBackend, hu.pool.addr, err))
			return
		}
		if len(hu.fw.pending) <= defaultOutputBufferBytes/2 {
			hu.conn.SetOutputBlocked(false)
		}
	}
	if ev&(evIn|evRdHup|evHup|evErr) != 0 {
		hu.fr.drained = false
		hu.read()
	}
	hu.check()
}

// read feeds the machine what the socket has.
func (hu *h2up) read() {
	for !hu.closed && !hu.conn.Done() {
		if hu.rbuf == nil {
			hu.rbuf = hu.l.h2ReadBufs.get()
		}
		var n int
		var err error
		if tc := hu.tls.tc; tc != nil {
			n, err = tlsUpSource{tc}.Read(hu.rbuf[hu.rn:])
		} else {
			n, err = hu.fr.Read(hu.rbuf[hu.rn:])
		}
		hu.rn += n
		if hu.rn > 0 {
			k, _ := hu.conn.Feed(hu.rbuf[:hu.rn])
			hu.rn = copy(hu.rbuf, hu.rbuf[k:hu.rn])
			if n, known := hu.conn.PeerMaxStreams(); known {
				hu.pool.h2max = int(min(n, 1<<20))
			}
		}
		if err == errWouldBlock {
			break
		}
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			hu.conn.Close(fmt.Errorf("%s: %w", hu.pool.addr, err))
			break
		}
	}
	if hu.rn == 0 && hu.rbuf != nil {
		hu.l.h2ReadBufs.put(hu.rbuf)
		hu.rbuf = nil
	}
}

// check closes the connection once its session is over.
func (hu *h2up) check() {
	if !hu.closed && hu.conn != nil && hu.conn.Done() {
		hu.close(hu.conn.Err())
	}
}

// tick gives the machine the time (pings, idle, settings timeouts).
func (hu *h2up) tick(now int64) {
	if hu.connecting && !hu.closed && !hu.tls.handshaking() && hu.connectBy != 0 && now >= hu.connectBy {
		// The connect took longer than the dial timeout: given up, as an
		// HTTP/1.1 one is (a handshake has its own bound).
		hu.close(fmt.Errorf("%w: dialing %s: %w", wire.ErrConnect, hu.pool.addr, os.ErrDeadlineExceeded))
		return
	}
	if hu.closed || hu.connecting || now-hu.lastTick < int64(time.Second) {
		return
	}
	hu.lastTick = now
	hu.conn.Tick(time.Unix(0, now))
	hu.check()
}

// close ends the connection: its streams end as reset (their exchanges
// see the error), and the pool forgets it.
func (hu *h2up) close(cause error) {
	if hu.closed {
		return
	}
	hu.closed = true
	if cause == nil {
		cause = h2.ErrClosed
	}
	if hu.connecting {
		hu.failWaiting(cause)
	} else if hu.conn != nil {
		hu.conn.Close(cause)
	}
	if !hu.tls.abort() { // else the handshake's end closes the socket
		hu.l.closeFD(hu.fd)
	}
	hu.fd = -1
	if hu.rbuf != nil {
		hu.l.h2ReadBufs.put(hu.rbuf)
		hu.rbuf = nil
	}
	p := hu.pool
	for i, x := range p.h2 {
		if x == hu {
			p.h2 = append(p.h2[:i], p.h2[i+1:]...)
			break
		}
	}
	for i, x := range hu.l.h2ups {
		if x == hu {
			last := len(hu.l.h2ups) - 1
			hu.l.h2ups[i] = hu.l.h2ups[last]
			hu.l.h2ups[last] = nil
			hu.l.h2ups = hu.l.h2ups[:last]
			break
		}
	}
	hu.l.releaseFD()
	p.freed()
}

// streamEnded gives a request waiting at the backend's connection cap
// the room a stream left.
func (hu *h2up) streamEnded() {
	if p := hu.pool; !hu.closed {
		if c := p.dequeue(); c != nil {
			c.connect(p)
		}
	}
}

// --- h2.ClientHandler: the answers ---

// OnResponse takes the answer's head: the neutral head every exchange
// reads (u.resp), its fields slices of the machine's strings.
func (hu *h2up) OnResponse(s *h2.Stream, h *h2.ResponseHead, end bool) {
	u, _ := s.User().(*lupconn)
	if u == nil || h.Status < 200 {
		return // interim answers are not relayed
	}
	st := u.h2
	r := &u.resp
	r.reset()
	r.Status = h.Status
	r.Proto = httpmsg.HTTP2
	r.minor = 1
	r.keepAlive = true
	for i := range h.Fields {
		f := &h.Fields[i]
		name := bytesOf(f.Name)
		r.Header.Fields = append(r.Header.Fields, httpmsg.Field{Name: name, Value: bytesOf(f.Value), Kind: httpmsg.Classify(name)})
	}
	r.ContentLength = h.ContentLength
	if end {
		st.ended = true
		st.headersOnly = true
		r.ContentLength = 0
	}
	st.gotHead = true
	hu.l.deliver(u, evIn)
}

// OnData takes the answer's body.
func (hu *h2up) OnData(s *h2.Stream, p []byte, end bool) {
	u, _ := s.User().(*lupconn)
	if u == nil {
		return
	}
	u.h2.data(p, end)
	hu.l.deliver(u, evIn)
}

// OnTrailers ends the answer's body with its trailers.
func (hu *h2up) OnTrailers(s *h2.Stream, fields []h2.Field) {
	u, _ := s.User().(*lupconn)
	if u == nil {
		return
	}
	u.h2.trailers(fields)
	hu.l.deliver(u, evIn)
}

// OnWritable resumes a request body that waited for window.
func (hu *h2up) OnWritable(s *h2.Stream) {
	if u, _ := s.User().(*lupconn); u != nil {
		hu.l.deliver(u, evOut)
	}
}

// OnReset ends the answer: the exchange reads the error where the
// answer's bytes stop. A stream the backend refused, or that a GOAWAY
// left unprocessed, fails as a connect error (nothing was processed, so
// it may go to another backend); any other as the backend's failure.
func (hu *h2up) OnReset(s *h2.Stream, err error) {
	u, _ := s.User().(*lupconn)
	if u == nil {
		return
	}
	s.SetUser(nil)
	st := u.h2
	st.s = nil
	st.ended = true
	sentinel := wire.ErrBackend
	if errors.Is(err, h2.ErrRetryable) {
		sentinel = wire.ErrConnect
	}
	st.err = fmt.Errorf("%w: %s: %w", sentinel, hu.pool.addr, err)
	if st.calling > 0 {
		inc := u.inc
		hu.l.post(func() {
			if u.h2 == st && u.inc == inc && u.state != upClosed {
				hu.l.deliver(u, evIn)
			}
		})
		return
	}
	hu.l.deliver(u, evIn)
}

// --- the stream role of a lupconn ---

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
	*st = h2upStream{streamBuf: msg, carry: st.carry[:0], head: h2.RequestHead{Fields: st.head.Fields[:0]}}
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
	n, err := st.read(p)
	if n > 0 && st.s != nil {
		st.calling++
		st.s.Consumed(n)
		st.calling--
	}
	return n, err
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
	c.h2requestHead(&st.head, bodyLen)
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
// allows it).
func (c *lconn) h2requestHead(h *h2.RequestHead, bodyLen int64) {
	r := &c.req
	hop := c.hop()
	h.Method = methodString(r.Method)
	h.Path = string(r.Target)
	h.Scheme = "http"
	if c.tr.Settings.TLS {
		h.Scheme = "https"
	}
	h.Authority = string(httpmsg.Authority(&r.Request, &hop))
	sink := h2fields{l: c.l, fs: h.Fields[:0]}
	c.l.fwd.Fields(&sink, &r.Request, &hop)
	fs := sink.fs
	cl := int64(-1)
	switch {
	case bodyLen >= 0:
		cl = bodyLen
	case r.ContentLength > 0:
		cl = r.ContentLength
	case r.ContentLength == 0 && !methodWithoutBody(r.Method) && hasField(&r.Header, httpmsg.KindContentLength):
		cl = 0
	}
	if cl >= 0 {
		fs = append(fs, h2.Field{Name: "content-length", Value: strconv.FormatInt(cl, 10)})
	}
	if c.req.teTrailers() {
		fs = append(fs, h2.Field{Name: "te", Value: "trailers"})
	}
	h.Fields = fs
}

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
		p, err := c.l.bodyPiece(&c.reqBody, room)
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
			c.armBodyDeadline()
			if c.state == lsForward && u.state == upWaitHead && c.dkind == dlUpHead {
				c.deadline, c.dkind = 0, dlNone // the client's deadline bounds this wait
			}
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
		sink := h2fields{l: c.l, fs: st.head.Fields[:0]}
		httpmsg.TrailerFields(&sink, &tr.hdr)
		st.head.Fields = sink.fs
		st.s.WriteTrailers(sink.fs)
	} else {
		st.s.WriteData(nil, true)
	}
	st.calling--
	u.sending = false
}

// methodString returns a request method as a string, without allocating
// for the common ones.
func methodString(m []byte) string {
	switch string(m) {
	case "GET":
		return "GET"
	case "POST":
		return "POST"
	case "HEAD":
		return "HEAD"
	case "PUT":
		return "PUT"
	case "DELETE":
		return "DELETE"
	case "OPTIONS":
		return "OPTIONS"
	case "PATCH":
		return "PATCH"
	}
	return string(m)
}

// teTrailers reports whether the request's TE field names "trailers".
func (r *request) teTrailers() bool {
	for i := range r.Header.Fields {
		f := &r.Header.Fields[i]
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
