package engine

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"time"

	"github.com/helios-lb/helios/internal/httpmsg"

	"golang.org/x/sys/unix"

	"github.com/helios-lb/helios/internal/h2"
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
// the same code as an HTTP/1.1 request's (http1.WriteRequestHead: one httpmsg.Header
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
	// head is the request head, its fields gathered in out (then the
	// request's trailers); resp holds the bytes of the answer's head
	// (OnResponse). carry is what a short write left of the body
	// (carryEnd: with the stream's end).
	head     h2.RequestHead
	out      h2fields
	resp     streamMem
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
		if c.waitForRoom(p, ", their streams in use,") {
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
	var hu *h2up
	connected, err := l.openSocket(p, func(fd int, _ bool) target {
		hu = &h2up{l: l, pool: p, fd: fd, connecting: true, lastTick: l.now, tr: tr, pp: pp, ppFor: ppFor}
		if d := tr.Settings.DialTimeout; d > 0 {
			hu.connectBy = l.now + int64(d)
		}
		hu.fr = fdReader{fd: fd, p: l.poller}
		hu.fw = fdWriter{fd: fd, p: l.poller, file: -1}
		return hu
	})
	if err != nil {
		return nil, err
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
		n, err = hu.l.tlsWrite(tc, &hu.fw, p)
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
// reads (u.resp), its fields copied into the stream's memory (the
// machine's slices are valid only during the call).
func (hu *h2up) OnResponse(s *h2.Stream, h *h2.ResponseHead, end bool) {
	u, _ := s.User().(*lupconn)
	if u == nil || h.Status < 200 {
		return // interim answers are not relayed
	}
	st := u.h2
	r := &u.resp
	r.Reset()
	r.Status = h.Status
	r.Proto = httpmsg.HTTP2
	r.Minor = 1
	r.KeepAlive = true
	mem := &st.resp
	mem.reset()
	for i := range h.Fields {
		f := &h.Fields[i]
		name, value := mem.pair(f.Name, f.Value)
		r.Header.Fields = append(r.Header.Fields, httpmsg.Field{Name: name, Value: value, Kind: httpmsg.Classify(name)})
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
