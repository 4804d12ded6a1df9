// Package h1 is Helios's HTTP/1.1 wire engine: it parses requests on
// client connections, frames responses, and keeps pooled keep-alive
// connections to backends. It implements the interfaces of package wire
// and knows nothing about routing, balancing, health or metrics.
//
// The engine runs one goroutine per client connection and does the whole
// exchange on it: read the request head, hand it to the Handler, which
// forwards through a Transport on the same goroutine, and write the
// answer. Header fields are slices into a per-connection buffer, never
// maps; buffers come from pools; responses to pipelined requests leave in
// one write.
package h1

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/helios-lb/helios/internal/wire"
)

// Handler answers the requests of a Server. ServeExchange must answer
// (Respond, ServeHTTP or a forwarded Response) before it returns; a
// handler that does not is answered with 502.
type Handler interface {
	ServeExchange(ex wire.Exchange)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ex wire.Exchange)

// ServeExchange calls f(ex).
func (f HandlerFunc) ServeExchange(ex wire.Exchange) { f(ex) }

// Options tune client connections. The zero value of each field is noted.
type Options struct {
	// ReadHeaderTimeout bounds the time from the first byte of a request
	// head to its end. Zero: no bound.
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that sends nothing for
	// this long between requests, and bounds each wait for request body
	// bytes. Zero: no bound.
	IdleTimeout time.Duration
	// ReadTimeout, when positive, bounds reading a whole request, head and
	// body. Zero: no bound beyond the two above.
	ReadTimeout time.Duration
	// WriteTimeout bounds how long one write to the client may block (like
	// nginx send_timeout). Zero: no bound.
	WriteTimeout time.Duration
	// MaxHeaderBytes bounds the request head; larger heads get 431.
	// Zero: 64 KiB.
	MaxHeaderBytes int
	// TLS marks connections as HTTPS for X-Forwarded-Proto.
	TLS bool
}

const (
	defaultMaxHeaderBytes = 64 << 10
	readBufSize           = 4 << 10
	headBufSize           = 2 << 10
	writeBufSize          = 4 << 10
	// maxDrainBody is how much unread request body Helios reads and drops
	// to keep a connection alive; beyond it the connection is closed.
	maxDrainBody = 256 << 10
	// rearmSlack is how stale a deadline may get before it is set again;
	// re-arming only when it has drifted saves a timer update per request.
	rearmSlack = int64(time.Second)
)

// keepDeadline reports whether an armed deadline (unix nanoseconds, 0 for
// none) is close enough to want to be left alone: within rearmSlack, and
// within a quarter of the timeout d, so that timeouts shorter than the
// slack are still extended while bytes flow.
func keepDeadline(armed, want int64, d time.Duration) bool {
	slack := min(rearmSlack, int64(d)/4)
	diff := armed - want
	return diff > -slack && diff < slack
}

// Server serves HTTP/1.1 on connections handed to ServeConn. It is safe
// for concurrent use.
type Server struct {
	handler Handler
	opts    atomic.Pointer[Options]
	status  *statusLines
	date    dateCache

	draining atomic.Bool
	mu       sync.Mutex
	conns    map[*conn]struct{}

	readBufs  sync.Pool // *[]byte, readBufSize
	writeBufs sync.Pool // *[]byte, writeBufSize
	conPool   sync.Pool // *conn

	// errorLog receives connection-level errors worth an operator's eye;
	// nil drops them.
	errorLog func(msg string, err error)
}

// NewServer returns a server answering with h.
func NewServer(h Handler, o Options) *Server {
	s := &Server{
		handler: h,
		status:  newStatusLines(),
		conns:   make(map[*conn]struct{}),
	}
	s.SetOptions(o)
	s.readBufs.New = func() any { b := make([]byte, readBufSize); return &b }
	s.writeBufs.New = func() any { b := make([]byte, writeBufSize); return &b }
	return s
}

// SetOptions replaces the options; connections pick them up at their next
// request.
func (s *Server) SetOptions(o Options) {
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = defaultMaxHeaderBytes
	}
	s.opts.Store(&o)
}

// SetErrorLog sets the function that receives connection-level errors.
// It must be called before the first ServeConn.
func (s *Server) SetErrorLog(f func(msg string, err error)) { s.errorLog = f }

// OpenConns returns the number of connections being served.
func (s *Server) OpenConns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// ServeConn serves nc until the client closes it, an error occurs or the
// server drains. It closes nc before returning.
func (s *Server) ServeConn(nc net.Conn) { s.ServeConnBuffered(nc, nil) }

// ServeConnBuffered is ServeConn for a connection whose first bytes were
// already read from it (pending): they are served before anything read
// from nc. The event-loop engine hands connections over this way.
func (s *Server) ServeConnBuffered(nc net.Conn, pending []byte) {
	c, _ := s.conPool.Get().(*conn)
	if c == nil {
		c = &conn{srv: s}
	}
	c.init(nc)
	if len(pending) > 0 {
		if len(pending) > len(c.rd.buf) {
			c.rd.grow(len(pending) + readBufSize)
		}
		c.rd.w = copy(c.rd.buf, pending)
	}
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.mu.Unlock()

	ok := c.serveRecover()

	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	if !ok {
		// A handler panicked: c's state is unknown, so it is dropped
		// rather than pooled.
		return
	}
	c.release()
	s.conPool.Put(c)
}

// serveRecover runs serve and contains a handler's panic to its own
// connection, like net/http: one bad request must not take every
// connection of the process down with it. It reports false after a
// panic, having closed the connections involved.
func (c *conn) serveRecover() (ok bool) {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		ok = false
		if r != http.ErrAbortHandler && c.srv.errorLog != nil {
			// http.ErrAbortHandler is the quiet way to abort, as in net/http.
			c.srv.errorLog("panic serving "+c.remote.String(), fmt.Errorf("%v\n%s", r, debug.Stack()))
		}
		if !c.detached {
			c.nc.Close()
		}
		if uc := c.up.uc; uc != nil {
			uc.nc.Close() // ends a request body pump too
		}
	}()
	c.serve()
	return true
}

// Shutdown stops the server gracefully: connections waiting for a request
// are closed, and each busy one is closed after its current response
// (which carries "Connection: close"). It returns when no connection is
// left, or with ctx's error after closing the remaining ones when ctx ends
// first. The caller stops accepting before calling Shutdown.
func (s *Server) Shutdown(ctx context.Context) error {
	s.draining.Store(true)
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		s.mu.Lock()
		n := len(s.conns)
		for c := range s.conns {
			if c.state.Load() == stateIdle {
				// Wakes the blocked read; the loop sees draining and ends.
				c.nc.SetReadDeadline(time.Unix(1, 0))
			}
		}
		s.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			s.mu.Lock()
			for c := range s.conns {
				c.nc.Close()
			}
			s.mu.Unlock()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Draining reports whether Shutdown has been called.
func (s *Server) Draining() bool { return s.draining.Load() }

const (
	stateActive uint32 = iota
	stateIdle
)

// conn is one client connection and, at any time, at most one exchange on
// it. It implements wire.Exchange.
type conn struct {
	srv    *Server
	nc     net.Conn
	remote netip.AddrPort
	opts   *Options
	state  atomic.Uint32

	rd   reader
	wr   writer
	rbuf *[]byte
	wbuf *[]byte

	req     request
	reqBody body
	start   time.Time // when the current request head was complete

	// rdl and wdl are the read and write deadlines currently armed, in
	// unix nanoseconds (0: none).
	rdl, wdl int64
	// reqDeadline caps body reads when Options.ReadTimeout is set.
	reqDeadline int64

	respStarted bool
	respStatus  int
	respBytes   int64
	// broken: the response could not be completed, so the connection
	// cannot carry another one.
	broken     bool
	closeAfter bool
	hijacked   bool
	// detached: a handler took the connection over (Hijack); it is not
	// closed here.
	detached bool
	// bodySent: request body bytes went to a backend (no replay).
	bodySent bool

	up upExchange // transport state of the current exchange

	// Method values made once per conn: taking one per request would
	// allocate a closure each time.
	flushFn   func()
	touchFn   func()
	contFn    func()
	upTouchFn func() // c.up.touchBody
}

func (c *conn) init(nc net.Conn) {
	c.nc = nc
	c.remote = netip.AddrPort{}
	if ta, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		ap := ta.AddrPort()
		c.remote = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	c.rbuf = c.srv.readBufs.Get().(*[]byte)
	c.rd.reset(nc, *c.rbuf)
	if c.flushFn == nil {
		c.flushFn = func() {
			if c.wr.buffered() > 0 {
				c.armWrite()
				c.wr.flush()
			}
		}
		c.touchFn = c.touchRead
		c.contFn = c.sendContinue
		c.upTouchFn = c.up.touchBody
	}
	c.rd.beforeBlock = c.flushFn
	c.wr.reset(nc, nil)
	c.rdl, c.wdl = 0, 0
	c.state.Store(stateActive)
}

func (c *conn) release() {
	if !c.detached {
		c.nc.Close()
	}
	c.detached = false
	c.hijacked = false
	if c.wbuf != nil {
		c.srv.writeBufs.Put(c.wbuf)
		c.wbuf = nil
	}
	// A grown read buffer is not pooled: keep the pool's buffers uniform.
	if len(c.rd.buf) == readBufSize && &c.rd.buf[0] == &(*c.rbuf)[0] {
		c.srv.readBufs.Put(c.rbuf)
	}
	c.rbuf = nil
	c.rd.reset(nil, nil)
	c.wr.reset(nil, nil)
	c.nc = nil
	c.up = upExchange{}
}

func (c *conn) serve() {
	for {
		if c.srv.draining.Load() {
			return
		}
		c.opts = c.srv.opts.Load()
		if err := c.readHead(); err != nil {
			c.headError(err)
			return
		}
		c.begin()
		c.srv.handler.ServeExchange(c)
		if !c.end() {
			return
		}
	}
}

// readHead reads and parses the next request head.
func (c *conn) readHead() error {
	scanned := 0
	headerDeadline := false
	for {
		b := c.rd.buffered()
		if scanned == 0 {
			// RFC 9112 §2.2: tolerate empty lines before a request.
			for len(b) > 0 && (b[0] == '\r' || b[0] == '\n') {
				c.rd.discard(1)
				b = b[1:]
			}
		}
		if len(b) > 0 {
			end, sc := findHeadEnd(b, scanned)
			if end > 0 {
				if end > c.opts.MaxHeaderBytes {
					// A head that arrived whole is held to the same limit
					// as one that arrives slowly.
					return &statusError{431, "request header too large"}
				}
				c.rd.pinHead(end)
				return parseRequest(c.rd.buf[c.rd.pin-end:c.rd.pin], &c.req)
			}
			scanned = sc
			if len(b) > c.opts.MaxHeaderBytes {
				return &statusError{431, "request header too large"}
			}
			// ReadTimeout bounds the whole request, so the head too.
			rht := c.opts.ReadHeaderTimeout
			if rt := c.opts.ReadTimeout; rt > 0 && (rht <= 0 || rt < rht) {
				rht = rt
			}
			if !headerDeadline && rht > 0 {
				headerDeadline = true
				d := time.Now().Add(rht)
				c.rdl = d.UnixNano()
				c.nc.SetReadDeadline(d)
			}
		} else {
			c.state.Store(stateIdle)
			if c.srv.draining.Load() {
				return io.EOF
			}
			// The previous request's deadlines (ReadTimeout, the header
			// timeout) must not cut the wait for the next one short.
			c.reqDeadline = 0
			if c.opts.IdleTimeout > 0 {
				c.armRead(time.Now().UnixNano(), c.opts.IdleTimeout)
			} else if c.rdl != 0 {
				c.rdl = 0
				c.nc.SetReadDeadline(time.Time{})
			}
		}
		err := c.rd.fill()
		c.state.Store(stateActive)
		if err == errBufferFull {
			if len(c.rd.buf) >= c.opts.MaxHeaderBytes+readBufSize {
				return &statusError{431, "request header too large"}
			}
			c.rd.grow(min(2*len(c.rd.buf), c.opts.MaxHeaderBytes+readBufSize))
			continue
		}
		if err != nil {
			return err
		}
	}
}

// armRead sets the read deadline to now+d unless the armed one is close
// enough (keepDeadline).
func (c *conn) armRead(now int64, d time.Duration) {
	want := now + int64(d)
	if c.reqDeadline != 0 && want > c.reqDeadline {
		want = c.reqDeadline
	}
	if keepDeadline(c.rdl, want, d) {
		return
	}
	c.rdl = want
	c.nc.SetReadDeadline(time.Unix(0, want))
}

// armWrite keeps a write deadline of WriteTimeout ahead of now.
func (c *conn) armWrite() {
	if c.opts == nil || c.opts.WriteTimeout <= 0 {
		return
	}
	want := time.Now().UnixNano() + int64(c.opts.WriteTimeout)
	if keepDeadline(c.wdl, want, c.opts.WriteTimeout) {
		return
	}
	c.wdl = want
	c.nc.SetWriteDeadline(time.Unix(0, want))
}

// touchRead runs before request body reads that may block: each wait
// for body bytes gets IdleTimeout, capped by the request's ReadTimeout.
func (c *conn) touchRead() {
	d := c.opts.IdleTimeout
	if d <= 0 {
		if c.reqDeadline == 0 {
			// No body timeout: clear what the head phase armed.
			if c.rdl != 0 {
				c.rdl = 0
				c.nc.SetReadDeadline(time.Time{})
			}
			return
		}
		d = time.Duration(1 << 62)
	}
	c.armRead(time.Now().UnixNano(), d)
}

// headError answers a request that could not be read, when there is
// someone to answer.
func (c *conn) headError(err error) {
	var (
		se     *statusError
		status int
		msg    string
	)
	switch {
	case errors.As(err, &se):
		status, msg = se.status, se.msg
	case errors.Is(err, os.ErrDeadlineExceeded) && len(c.rd.buffered()) > 0 && !c.srv.draining.Load():
		status, msg = 408, "request timeout"
	default:
		return
	}
	// No exchange began: clear what the previous one on this connection
	// left (its start time for Date, its "response started" mark, which
	// would silently swallow this answer).
	c.start = time.Now()
	c.respStarted = false
	c.broken = false
	c.reqBody.reset(&c.rd, bodyNone, 0)
	c.req.keepAlive = false
	c.req.method = nil
	c.closeAfter = true
	c.armWrite()
	c.respondText(status, msg)
	c.wr.flush()
}

func (c *conn) begin() {
	c.start = time.Now()
	c.respStarted = false
	c.respStatus = 0
	c.respBytes = 0
	c.broken = false
	c.closeAfter = false
	c.bodySent = false
	c.reqDeadline = 0
	if c.opts.ReadTimeout > 0 {
		c.reqDeadline = c.start.Add(c.opts.ReadTimeout).UnixNano()
	}
	switch {
	case c.req.chunked:
		c.reqBody.reset(&c.rd, bodyChunked, 0)
	case c.req.contentLength > 0:
		c.reqBody.reset(&c.rd, bodyFixed, c.req.contentLength)
	default:
		c.reqBody.reset(&c.rd, bodyNone, 0)
	}
	c.reqBody.touch = c.touchFn
	if c.req.expect100 && c.req.hasBody() {
		c.reqBody.onFirstRead = c.contFn
	}
}

// sendContinue answers "Expect: 100-continue" when the body is first
// needed (RFC 9110 §10.1.1).
func (c *conn) sendContinue() {
	if c.respStarted {
		return
	}
	c.ensureWriter()
	c.wr.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
	c.flushFn()
}

// end finishes an exchange and reports whether the connection can carry
// another request.
func (c *conn) end() bool {
	if c.hijacked {
		return false
	}
	if !c.respStarted {
		c.respondText(502, "bad gateway")
	}
	if c.broken {
		c.wr.flush()
		return false
	}
	if !c.reqBody.done {
		if !c.drainBody() {
			c.wr.flush()
			return false
		}
	}
	c.rd.unpin()
	if !c.req.keepAlive || c.closeAfter || c.srv.draining.Load() {
		c.armWrite()
		c.wr.flush()
		return false
	}
	if len(c.rd.buffered()) == 0 {
		// Nothing pipelined behind this request: send now and give the
		// write buffer back while the connection idles.
		c.armWrite()
		if c.wr.flush() != nil {
			return false
		}
		c.releaseWriter()
	}
	return true
}

// drainBody reads and drops an unread request body if it is small.
func (c *conn) drainBody() bool {
	if c.reqBody.kind == bodyFixed && c.reqBody.remaining > maxDrainBody {
		return false
	}
	if c.reqBody.onFirstRead != nil {
		// The client is waiting for 100 Continue before it sends the body,
		// and the handler never wanted it: do not invite it now, and do
		// not wait for a body that may never come (RFC 9110 §10.1.1).
		return false
	}
	var total int64
	for {
		p, err := c.reqBody.next()
		total += int64(len(p))
		if err == io.EOF {
			return true
		}
		if err != nil || total > maxDrainBody {
			return false
		}
	}
}

func (c *conn) ensureWriter() {
	if c.wr.buf == nil {
		c.wbuf = c.srv.writeBufs.Get().(*[]byte)
		c.wr.buf = *c.wbuf
	}
}

func (c *conn) releaseWriter() {
	if c.wbuf != nil && c.wr.n == 0 {
		c.srv.writeBufs.Put(c.wbuf)
		c.wbuf = nil
		c.wr.buf = nil
	}
}

// closing reports whether the connection will close after this response.
func (c *conn) closing() bool {
	return !c.req.keepAlive || c.closeAfter || c.srv.draining.Load() || c.bodyWillBeDropped()
}

// bodyWillBeDropped reports whether, as things stand, end will close the
// connection rather than drain the request body: the client still waits
// for 100 Continue, or more than maxDrainBody is known to remain. The
// response then says "Connection: close" so the client knows in time.
func (c *conn) bodyWillBeDropped() bool {
	if c.up.pumpDone != nil {
		// A goroutine is streaming the body to a backend; it owns reqBody.
		return false
	}
	b := &c.reqBody
	return !b.done && (b.onFirstRead != nil || b.kind == bodyFixed && b.remaining > maxDrainBody)
}

// writeConnectionHeader writes the Connection field the response needs.
func (c *conn) writeConnectionHeader() {
	if c.closing() {
		c.closeAfter = true // what is announced is done
		c.wr.WriteString("Connection: close\r\n")
	} else if c.req.minor == 0 {
		c.wr.WriteString("Connection: keep-alive\r\n")
	}
}

// --- wire.Exchange ---

func (c *conn) Method() []byte { return c.req.method }
func (c *conn) Host() []byte   { return c.req.host }
func (c *conn) Path() []byte   { return c.req.path }

func (c *conn) ClientAddr() netip.Addr { return c.remote.Addr() }

func (c *conn) HasBody() bool     { return c.req.hasBody() }
func (c *conn) BodyStarted() bool { return c.bodySent || c.reqBody.read > 0 }

// Respond sends a complete response with a fixed body.
func (c *conn) Respond(status int, header []byte, body []byte) error {
	if c.respStarted {
		return errors.New("h1: response already started")
	}
	c.respStarted = true
	c.respStatus = status
	c.ensureWriter()
	// A large body goes straight to the socket: the write deadline must be
	// this response's, not one left from the last write, long past on a
	// kept connection.
	c.armWrite()
	w := &c.wr
	writeFixedHead(w, c.srv.status.line(status), c.srv.date.line(c.start), header, status, len(body))
	c.writeConnectionHeader()
	w.WriteString("\r\n")
	c.respBytes = writeFixedBody(w, status, c.req.method, body)
	if w.err != nil {
		c.broken = true
		return wrapClientErr(w.err)
	}
	return nil
}

// respondText answers with a short plain-text body (errors).
func (c *conn) respondText(status int, msg string) {
	c.Respond(status, textPlain, []byte(msg+"\n"))
}

var textPlain = []byte("Content-Type: text/plain; charset=utf-8\r\n")

func wrapClientErr(err error) error {
	if err == nil {
		return nil
	}
	return errors.Join(wire.ErrClientGone, err)
}
