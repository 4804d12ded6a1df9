package engine

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"time"

	"github.com/helios-lb/helios/internal/httpmsg"

	"golang.org/x/net/http2"
	"golang.org/x/sys/unix"

	"github.com/helios-lb/helios/internal/bodybuf"
	"github.com/helios-lb/helios/internal/upstream"
	"github.com/helios-lb/helios/internal/wire"
)

// lstate is where a loop connection is in its exchange.
type lstate uint8

const (
	lsIdle      lstate = iota // waiting for (the rest of) a request head
	lsBody                    // head read; waiting for the rest of a small body
	lsBuffer                  // reading the body before forwarding (request buffering)
	lsForward                 // waiting on a backend: connect, send, response head
	lsSend                    // streaming an answer
	lsTunnel                  // an upgraded connection: bytes both ways
	lsFile                    // sending a static file (file.go)
	lsFlush                   // answer done; output still pending
	lsHello                   // a TLS connection waiting for its ClientHello (tls.go)
	lsHandshake               // a TLS handshake runs on its goroutine (tls.go)
	lsClosing                 // closed while its handshake runs: closes when it ends
	lsH2                      // an HTTP/2 connection: its streams are exchanges of their own (h2conn.go)
	lsProxy                   // a new connection waiting for its PROXY protocol header (clientpolicy.go)
	lsClosed
)

// Deadline kinds: what a connection is waiting for when its deadline
// passes.
const (
	dlNone     uint8 = iota
	dlIdle           // a keep-alive connection between requests
	dlHead           // the rest of a request head
	dlBody           // the rest of a request body
	dlConnect        // a backend connection being set up
	dlUpHead         // a backend's response head
	dlUpBody         // a backend's response body
	dlWrite          // the client to take pending output
	dlTunnel         // a tunnel's idle or linger wait
	dlQueue          // a connection to a capped backend
	dlH2Tick         // an HTTP/2 connection's next tick
	dlH2Linger       // an ended HTTP/2 connection waiting for the client's close
	dlHello          // a TLS client's ClientHello
	dlBackoff        // a retry's backoff (wait.go)
	dlProxy          // a new connection's PROXY protocol header (clientpolicy.go)
)

// maxLoopBody is the largest request body the loop reads whole before the
// request begins; larger ones stream (or are buffered by the route).
const maxLoopBody = 64 << 10

// lconn is a client connection served by a loop. It implements
// wire.Exchange. Every idle keep-alive connection holds one (see
// TestIdleConnectionMemory): small fields sit beside others of their
// size, so that it fits an allocation class of 1,280 bytes.
type lconn struct {
	l    *loop
	ll   *LoopListener
	opts *Options
	fd   int

	// remote is the connection's address: its peer's, or the source its
	// PROXY header named. edge is the rest of the client policy's state
	// (clientpolicy.go: the client a trusted proxy names, the address the
	// client reached...), made for a connection that needs it and kept
	// with the lconn: every idle connection pays for what is here.
	remote netip.AddrPort
	edge   *connEdge
	fr     fdReader
	rd     reader
	fw     fdWriter
	wr     writer

	req     request
	reqBody body
	flow    wire.Flow
	scanned int // how far the current head has been scanned
	headOff int // where the current request's head starts in rd.buf

	deadline int64
	// reqDeadline caps the waits for a request's body when
	// Options.ReadTimeout is set (unix nanoseconds; 0: no cap).
	reqDeadline int64
	prev, next  *lconn
	// fresh is when the connection was accepted, until its first request
	// begins (then 0): a drain gives a fresh connection freshGrace for
	// that request (loop.closeIfIdle).
	fresh int64

	// The exchange in progress.
	start      int64
	respStatus int
	respBytes  int64
	bb         *bodybuf.Buffer
	// bodyDeadline bounds the wait for request body bytes (unix
	// nanoseconds; 0: none).
	bodyDeadline int64
	// rs holds the answer for a client that reads it more slowly than
	// its backend sends it (response buffering, respbuffer.go); nil while it
	// streams. spooled, spoolFull: the answer has been counted as
	// buffered, as stopped by a cap.
	rs *respSpool
	// arena is the memory Alloc lends the exchange's pipeline.
	arena []byte
	// continueFn is c.sendContinue, made once.
	continueFn func()
	// TLS: the connection's tls.Conn once handshaken, and the socket it
	// runs over.
	tls  *tls.Conn
	sock *tlsSock
	// HTTP/2: h2 is the session of a connection in state lsH2; h2s is
	// set while this lconn serves one stream of such a connection (it
	// has no socket of its own then).
	h2  *h2conn
	h2s *h2stream
	tr  *wire.Transport
	// local is the in-process backend of an ActServeHTTP (nil when
	// forwarding for the pipeline).
	local *localServer
	// queued is the pool whose connection cap this request waits at;
	// fdWait: it waits for the descriptor budget instead (descriptors.go).
	queued *lpool
	// file is the static answer in progress, made on the connection's
	// first file and kept (file.go).
	file  *fileSend
	be    *upstream.Backend
	up    *lupconn
	tries int
	// resolving: the attempt waits for this pool's host name lookup.
	resolving *lpool
	// tryDeadline ends the current attempt (the transport's TryTimeout,
	// wait.go); 0: none.
	tryDeadline int64
	// tm times the attempt's stages (timing.go).
	tm attemptClock

	// The flags and small numbers, together so that they pack.
	dkind uint8
	state lstate
	// headDeadline: a partial head's deadline is set once, when its first
	// bytes arrive, not moved by later ones.
	headDeadline bool
	respStarted  bool
	closeAfter   bool
	broken       bool
	// clientFailed: the exchange was given up for its client's own
	// failure (its body stalled, was malformed or too large) while its
	// answer was under way; an HTTP/2 stream is then cancelled, not
	// reset as the server's error.
	clientFailed bool
	bodySent     bool
	readPending  bool // input arrived while busy
	serving      bool // inside serveInput (no re-entry)
	nodelay      bool // TCP_NODELAY is set
	// The request body, when it does not fit the read buffer whole.
	// streaming: it goes to the backend as it arrives (pumpReq);
	// buffering: it is read first (bufferMore) into bb, under its caps
	// (bufDiscard: only to drop it; bufStream: what outgrows bb streams),
	// with a write to its temporary file under way while spilling
	// (bufferEOF: the body ended meanwhile); bodyBuf says what bb
	// holds once done; prefixCRLF: a buffered chunk's end is still to go.
	streaming, buffering, spilling bool
	bufferEOF, prefixCRLF          bool
	bodyBuf                        bodyBuffering
	bufDiscard, bufStream          bool
	spooled, spoolFull             bool
	// flowDone: the exchange's flow has been finished.
	flowDone bool
	// Forwarding (before the numbers: the flags fill what aligning them
	// would leave empty).
	replay, chunkOut bool
	// gen numbers the exchanges on this connection, so that a spill
	// write finishing late knows whether its exchange is still on.
	gen uint32
	// inc numbers the connections this lconn has served, so that a
	// handshake that ends late knows whether its connection is still on.
	inc uint32
	// tlsVer is the handshake's version (crypto/tls's; 0: cleartext).
	tlsVer uint16
	// A tunnel's sides: the client (in) or the backend (out) has
	// closed its sending side, and that close has been passed on.
	inClosed, outClosed, inShut, outShut bool
	fdWait                               bool
}

// allocConn returns a connection from the free list, or a new one.
func (l *loop) allocConn() *lconn {
	if n := len(l.freeConns); n > 0 {
		c := l.freeConns[n-1]
		l.freeConns = l.freeConns[:n-1]
		return c
	}
	c := &lconn{l: l, state: lsClosed}
	c.continueFn = c.sendContinue
	return c
}

// startConn makes c serve a newly accepted fd (registered already).
func (l *loop) startConn(c *lconn, ll *LoopListener, fd int, remote netip.AddrPort) {
	c.ll = ll
	c.fd = fd
	c.remote = remote
	if c.edge != nil {
		*c.edge = connEdge{}
	}
	c.fr = fdReader{fd: fd, p: l.poller}
	c.fw = fdWriter{fd: fd, p: l.poller, pending: c.fw.pending[:0], file: -1}
	c.state = lsIdle
	c.scanned = 0
	c.headDeadline = false
	c.nodelay = false
	c.flowDone = true // no exchange yet
	c.readPending = false
	c.tls, c.sock, c.tlsVer = nil, nil, 0
	c.h2, c.h2s = nil, nil
	// No deadline of the lconn's last use may fire on this one (a TLS
	// connection sets none until its handshake is done).
	c.deadline, c.dkind, c.bodyDeadline = 0, dlNone, 0
	c.fresh = l.now
	c.inc++
	l.conns.add(c)
	l.nconns.Add(1)
}

func (l *loop) freeConn(c *lconn) {
	if c.spilling {
		// The spill goroutine still writes c's buffer; c is left to the
		// garbage collector once it is done (spilled).
		return
	}
	c.ll = nil
	c.up = nil
	c.tr, c.be = nil, nil
	if cap(c.fw.pending) > maxIdlePending {
		c.fw.pending = nil
	}
	if len(l.freeConns) < 1024 {
		l.freeConns = append(l.freeConns, c)
	}
}

func (c *lconn) setDeadline(kind uint8, d time.Duration) {
	c.dkind = kind
	c.deadline = 0
	if d > 0 {
		c.deadline = c.l.now + int64(d)
	}
	c.boundTry()
}

// event handles readiness of the client socket.
func (c *lconn) event(ev uint32) {
	if c.h2s != nil {
		c.streamEvent(ev)
		return
	}
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

func (c *lconn) readable() {
	switch c.state {
	case lsIdle, lsBody:
		c.serveInput()
	case lsBuffer:
		c.bufferMore()
	case lsTunnel:
		c.tunnelIn()
	case lsForward, lsSend:
		if c.streaming {
			c.pumpReq()
			return
		}
		if c.fr.rdhup {
			// The client shut its side while its request is with a
			// backend, or its answer streams from one: it has gone
			// (nginx aborts such requests too). Waiting for the
			// backend's next bytes to find out could take for ever (a
			// long poll, an event stream), holding the backend.
			if c.clientClosed() {
				c.gone(errors.New("client closed the connection"))
				return
			}
		}
		c.readPending = true
	case lsFlush:
		c.readPending = true
	}
}

// clientClosed peeks at the socket: true when the client has closed its
// side and sent nothing more (pipelined bytes are not a close).
func (c *lconn) clientClosed() bool {
	if len(c.rd.buffered()) > 0 {
		return false
	}
	var b [1]byte
	n, _, err := unix.Recvfrom(c.fd, b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
	return err == nil && n == 0 || err != nil && err != unix.EAGAIN
}

// writable runs when the client can take more output.
func (c *lconn) writable() {
	done, err := c.fw.flushPending()
	if err != nil {
		c.gone(err)
		return
	}
	if !done {
		c.setDeadline(dlWrite, c.opts.WriteTimeout)
		return
	}
	switch c.state {
	case lsSend:
		c.pump()
	case lsFile:
		c.pumpFile()
	case lsTunnel:
		c.tunnelOut()
	case lsFlush:
		if c.closeAfter || c.broken {
			c.close()
			return
		}
		c.state = lsIdle
		c.releaseWriter()
		c.serveInput()
	}
}

// serveInput reads and serves requests until one has to wait.
func (c *lconn) serveInput() {
	if c.serving {
		return
	}
	c.serving = true
	defer func() { c.serving = false }()
	for c.state == lsIdle || c.state == lsBody {
		if c.rd.buf == nil {
			c.rd.reset(c.src(), c.l.headBufs.get())
		}
		if c.state == lsIdle {
			c.opts = c.ll.opts.Load()
			if c.h2s != nil {
				if !c.streamHead() {
					return
				}
			} else if !c.readHead() {
				return // waiting for more bytes, or refused, or closed
			}
		}
		if !c.readBody() {
			return
		}
		c.begin()
	}
}

// readHead gathers and parses a request head; false when it has to wait.
// On success the state is lsBody (with the body, if any, still to come).
func (c *lconn) readHead() bool {
	for {
		b := c.rd.buffered()
		if c.scanned == 0 {
			for len(b) > 0 && (b[0] == '\r' || b[0] == '\n') {
				c.rd.discard(1)
				b = b[1:]
			}
		}
		if c.opts.H2C && c.fresh != 0 && len(b) > 0 && b[0] == h2Preface[0] {
			// Prior knowledge: a connection that opens with the HTTP/2
			// preface (or what may still become it) speaks HTTP/2.
			n := min(len(b), len(h2Preface))
			if string(b[:n]) == h2Preface[:n] {
				if n == len(h2Preface) {
					c.takeH2(b)
					return false
				}
				b = nil // wait for the rest of the preface
			}
		}
		if len(b) > 0 {
			end, sc := findHeadEnd(b, c.scanned)
			if end > 0 && end > c.opts.MaxHeaderBytes {
				c.refuse(&statusError{431, "request header too large"}, false)
				return false
			}
			if end > 0 {
				c.scanned = 0
				c.headDeadline = false
				c.rd.pinHead(end)
				c.headOff = c.rd.pin - end
				head := c.rd.buf[c.headOff:c.rd.pin]
				if c.req.Header.Fields == nil {
					c.req.Header.Fields = c.l.fieldBufs.get()
				}
				if err := parseRequestLimits(head, &c.req, c.opts.limits()); err != nil {
					if c.opts.H2C && c.fresh != 0 && !bytes.Contains(head[:bytes.IndexByte(head, '\n')+1], []byte(" HTTP/1.")) {
						// The first bytes of an h2c listener's connection
						// that are no HTTP/1.x request line may be a
						// broken HTTP/2 preface: an HTTP/1.1 answer would
						// be garbage to that client, so it gets none.
						c.close()
						return false
					}
					c.refuse(err, false)
					return false
				}
				if c.opts.TLS != nil {
					c.req.Scheme = schemeHTTPS
				}
				c.reqDeadline = 0
				if rt := c.opts.ReadTimeout; rt > 0 {
					c.reqDeadline = c.l.now + int64(rt)
				}
				c.state = lsBody
				return true
			}
			c.scanned = sc
			if len(b) > c.opts.MaxHeaderBytes {
				c.refuse(&statusError{431, "request header too large"}, false)
				return false
			}
			if !c.headDeadline {
				c.headDeadline = true
				rht := c.opts.headerTimeout()
				switch {
				case rht > 0:
					c.setDeadline(dlHead, rht)
				case c.dkind == dlIdle:
					// No head timeout: the idle wait the first bytes
					// came in still bounds the head, so a stalled head
					// cannot hold the connection forever, and its end
					// is a 408.
					c.dkind = dlHead
				default:
					// A head that came right behind the last answer
					// (pipelined): no idle wait is running; start one.
					c.setDeadline(dlHead, c.opts.IdleTimeout)
				}
			}
		}
		err := c.rd.fill()
		switch {
		case err == nil:
		case err == errWouldBlock:
			if len(c.rd.buffered()) == 0 {
				// Idle keep-alive connection: it holds no buffer.
				c.l.headBufs.put(c.rd.buf)
				c.rd.reset(c.src(), nil)
				c.rd.buf = nil
				c.dropFields()
				c.setDeadline(dlIdle, c.opts.IdleTimeout)
			}
			return false
		case err == errBufferFull:
			if len(c.rd.buf) >= c.opts.MaxHeaderBytes+readBufSize {
				c.refuse(&statusError{431, "request header too large"}, false)
				return false
			}
			c.rd.grow(min(2*len(c.rd.buf), c.opts.MaxHeaderBytes+readBufSize))
		default:
			// EOF or reset: a client leaving between requests is normal;
			// one leaving mid-head gets nothing.
			c.close()
			return false
		}
	}
}

// readBody makes sure a small request body is whole in the buffer; any
// other body is read as the request goes on (streamingBody).
func (c *lconn) readBody() bool {
	r := &c.req
	if r.ContentLength <= 0 || c.streamingBody() || !c.holdSmallBody() {
		return true
	}
	need := c.rd.pin + int(r.ContentLength)
	if len(c.rd.buf) < need {
		c.rd.grow(need)
	}
	for len(c.rd.buffered()) < int(r.ContentLength) {
		err := c.rd.fill()
		switch {
		case err == nil:
		case err == errWouldBlock:
			// IdleTimeout bounds each wait for body bytes, ReadTimeout
			// the whole request.
			c.setDeadline(dlBody, c.opts.IdleTimeout)
			if c.reqDeadline != 0 && (c.deadline == 0 || c.reqDeadline < c.deadline) {
				c.deadline = c.reqDeadline
			}
			return false
		default:
			c.close()
			return false
		}
	}
	return true
}

// refuse answers a request that could not be read, records it, and
// closes. routed says the head was parsed (the body is what failed), so
// the record can name the route.
func (c *lconn) refuse(err error, routed bool) {
	var se *statusError
	if !errors.As(err, &se) {
		se = &statusError{400, "bad request"}
	}
	if !routed {
		c.req.Method = nil
		c.untrust()
	} else {
		c.resolveClient()
	}
	c.req.keepAlive = false
	c.closeAfter = true
	c.start = c.l.now
	c.respStarted = false
	c.respondText(se.status, se.msg)
	c.takeFlow()
	c.flow.Refused(c, se.status, err)
	c.l.putFlow(c)
	c.req.Method = nil
	c.endOutput()
}

// begin starts the exchange for a complete request.
func (c *lconn) begin() {
	c.state = lsForward
	c.start = c.l.now
	c.fresh = 0
	c.respStarted = false
	c.respStatus = 0
	c.respBytes = 0
	c.closeAfter = false
	c.broken = false
	c.clientFailed = false
	c.bodySent = false
	c.replay = false
	c.tries = 0
	c.tryDeadline = 0
	c.deadline, c.dkind = 0, dlNone
	c.gen++
	c.arena = c.arena[:0]
	c.flowDone = false
	c.streaming, c.buffering, c.bufferEOF, c.prefixCRLF = false, false, false, false
	c.inClosed, c.outClosed, c.inShut, c.outShut = false, false, false, false
	c.bodyBuf = notBuffered
	c.bodyDeadline = 0
	c.spooled, c.spoolFull = false, false
	switch {
	case c.req.chunked:
		c.reqBody.reset(&c.rd, bodyChunked, 0)
	case c.req.ContentLength > 0:
		c.reqBody.reset(&c.rd, bodyFixed, c.req.ContentLength)
	case c.req.ContentLength < 0:
		// A stream's body of undeclared length: as long as its DATA.
		c.reqBody.reset(&c.rd, bodyUntilClose, 0)
	default:
		c.reqBody.reset(&c.rd, bodyNone, 0)
	}
	if c.req.Expect100 && c.bodyPending() {
		c.reqBody.onFirstRead = c.continueFn
	}
	c.takeFlow()
	c.resolveClient()
	c.act(c.flow.Begin(c))
}

// act carries out what the pipeline asked for.
func (c *lconn) act(a wire.Action) {
	switch a {
	case wire.ActRespond:
		status, header, body := c.flow.Answer()
		err := c.Respond(status, header, body)
		c.flow.Sent(status, int64(len(body)), err)
		c.finish()
	case wire.ActServeHTTP:
		// A net/http handler, which may block, is forwarded to as an
		// in-process backend (local.go).
		c.serveLocal(c.flow.Handler())
	case wire.ActServeFile:
		// Files are sent by the loop itself (file.go).
		c.serveFile(c.flow.Files())
	case wire.ActForward:
		c.tr, c.be = c.flow.Target()
		c.tries = 0
		c.local = nil
		c.flushOut() // earlier pipelined answers go before we wait
		c.startTry()
		c.timeAttempt()
		c.attempt()
	case wire.ActWait:
		c.flushOut()
		c.wait()
	case wire.ActSend:
		c.startSend()
	case wire.ActBuffer:
		c.startBuffering(c.flow.BufferLimits())
	case wire.ActClose:
		c.dropUp(false)
		c.endFlow()
		c.close()
	}
}

// forwarded reports an attempt's result to the pipeline and acts on it.
func (c *lconn) forwarded(status int, err error) {
	c.resolving = nil
	if c.queued != nil {
		c.queued.unqueue(c)
	}
	c.timeEnd()
	a := c.flow.Forwarded(status, err)
	if a != wire.ActSend {
		c.dropUp(true)
	}
	c.act(a)
}

// startSend writes the backend's response head and starts its body.
func (c *lconn) startSend() {
	u := c.up
	r := &u.resp
	c.answerHeader(&r.Header, false)
	if r.Status == 101 {
		c.startTunnel()
		return
	}
	if c.h2s != nil {
		c.h2startSend()
		return
	}
	c.state = lsSend
	c.respStarted = true
	c.respStatus = r.Status
	c.ensureWriter()
	bodyOut, chunkOut, closeAfter := framing(&c.req, r)
	if closeAfter {
		c.closeAfter = true
	}
	c.chunkOut = chunkOut
	writeResponseHead(&c.wr, r, bodyOut, chunkOut)
	c.writeConnectionHeader()
	c.wr.WriteString("\r\n")
	// The head has been copied out: its bytes need not stay pinned.
	u.rd.unpin()
	if !bodyOut {
		u.body.done = true
		c.sendDone(nil)
		return
	}
	c.pump()
}

// pump moves response body from the backend to the client until one of
// them has to wait.
func (c *lconn) pump() {
	if c.rs != nil && c.spoolPump() {
		return // a buffered answer (respbuffer.go)
	}
	if c.h2s != nil {
		c.h2pump()
		return
	}
	u := c.up
	for {
		if len(c.fw.pending) > c.opts.outputLimit() {
			if c.startSpool() {
				return
			}
			c.setDeadline(dlWrite, c.opts.WriteTimeout)
			return // writable() resumes
		}
		p, err := c.l.bodyPiece(&u.body, c.opts.outputLimit()-len(c.fw.pending))
		if len(p) > 0 && !c.writePiece(p) {
			return
		}
		switch {
		case err == nil:
		case err == io.EOF:
			c.endChunks(u.respTrailer())
			c.sendDone(nil)
			return
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

// writePiece writes a piece of the answer's body to the client (a chunk
// when the answer goes out chunked); false when the client is gone (the
// exchange has ended).
func (c *lconn) writePiece(p []byte) bool {
	c.respBytes += int64(len(p))
	w := &c.wr
	if c.chunkOut {
		w.writeHex(int64(len(p)))
		w.WriteString("\r\n")
	}
	w.Write(p)
	if c.chunkOut {
		w.WriteString("\r\n")
	}
	if w.err != nil {
		c.sendDone(fmt.Errorf("%w: %w", wire.ErrClientGone, w.err))
		return false
	}
	return true
}

// endChunks ends an answer that goes out chunked, with its trailer.
func (c *lconn) endChunks(tr *trailerSection) {
	if c.chunkOut {
		w := &c.wr
		w.WriteString("0\r\n")
		httpmsg.TrailerFields(w, &tr.hdr)
		w.WriteString("\r\n")
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
		u.release(err == nil && u.resp.keepAlive && u.body.done && !c.streaming && !u.busy())
		c.releaseUpWriterOf(u)
	}
}

// finish ends the exchange and goes on to the next request when the
// connection allows it.
func (c *lconn) finish() {
	c.endFlow()
	c.streaming, c.buffering = false, false
	c.bodyDeadline = 0
	c.dropSpool()
	if !c.spilling {
		if c.bb != nil {
			c.bb.Close()
		}
	}
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
	c.endOutput()
}

// endOutput flushes the answer and moves to the next request, or closes.
func (c *lconn) endOutput() {
	if c.h2s != nil {
		c.streamDone()
		return
	}
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
		if c.rd.buf != nil {
			c.l.headBufs.put(c.rd.buf)
			c.rd.buf = nil
			c.rd.r, c.rd.w, c.rd.pin = 0, 0, 0
		}
		c.dropFields()
		c.setDeadline(dlIdle, c.opts.IdleTimeout)
	}
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
	return !c.req.keepAlive || c.closeAfter || c.bodyPending() || c.l.eng.draining.Load() || c.ll.draining.Load()
}

func (c *lconn) writeConnectionHeader() {
	if c.closing() {
		c.closeAfter = true
		c.wr.WriteString("Connection: close\r\n")
	} else if c.req.minor == 0 {
		c.wr.WriteString("Connection: keep-alive\r\n")
	}
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

// gone ends the connection because the client left or broke it.
func (c *lconn) gone(err error) {
	cerr := fmt.Errorf("%w: %w", wire.ErrClientGone, err)
	switch c.state {
	case lsForward:
		c.dropUp(false)
		c.forwarded(0, cerr)
		if c.state != lsClosed {
			c.close()
		}
	case lsSend:
		c.broken = true
		c.sendDone(cerr)
	case lsFile:
		c.fileDone(cerr)
	default:
		c.close()
	}
}

// errAborted ends the exchanges of connections closed before their time
// (a shutdown that ran out of time, Engine.Close).
var errAborted = errors.New("connection closed by the server")

// abort closes the connection now. An exchange in progress is ended
// first, as if the client had gone, so that the pipeline hears of it:
// its attempt is reported (the breaker's admission returned, the
// backend's in-flight count ended) and the request recorded. A tunnel
// ends as when it goes quiet (a WebSocket's sides told it goes away).
func (c *lconn) abort() {
	switch c.state {
	case lsForward, lsSend, lsFile:
		c.gone(errAborted)
	case lsTunnel:
		c.abortTunnel()
	}
	c.close()
}

// endFlow ends the exchange's flow (once: a panic in the flow itself does
// not get it called again).
func (c *lconn) endFlow() {
	c.flowDone = true
	c.flow.Finish()
	c.l.putFlow(c)
}

// takeFlow gives the connection a flow for its exchange: a connection
// holds one only while it has an exchange, so that an idle keep-alive
// connection costs the loop no flow (the pipeline's per-request state).
func (c *lconn) takeFlow() {
	if c.flow != nil {
		return
	}
	l := c.l
	if n := len(l.freeFlows); n > 0 {
		c.flow = l.freeFlows[n-1]
		l.freeFlows[n-1] = nil
		l.freeFlows = l.freeFlows[:n-1]
		return
	}
	c.flow = l.eng.stepper.NewFlow()
}

// putFlow takes back c's flow, its exchange over.
func (l *loop) putFlow(c *lconn) {
	if c.flow == nil {
		return
	}
	if len(l.freeFlows) < maxFreeFlows {
		l.freeFlows = append(l.freeFlows, c.flow)
	}
	c.flow = nil
}

// maxFreeFlows bounds the flows a loop keeps for its next exchanges.
const maxFreeFlows = 4096

// expired acts on the deadlines that have passed.
func (c *lconn) expired() {
	now := c.l.now
	if c.deadline != 0 && now >= c.deadline {
		c.timeout()
	}
	if c.bodyDeadline != 0 && now >= c.bodyDeadline && c.state != lsClosed {
		c.bodyTimeout()
	}
}

// crash closes a connection whose exchange panicked. The pipeline hears
// of it once (Finish returns the attempt's admission and records the
// request) unless it panics again; then the connection is closed.
func (c *lconn) crash() {
	func() {
		defer func() { recover() }()
		if !c.flowDone {
			c.endFlow()
		}
	}()
	defer func() {
		if recover() == nil {
			return
		}
		if c.h2s != nil {
			// A stream: forget it; its connection goes on.
			c.l.streams.remove(c)
			if s := c.h2s.s; s != nil {
				s.SetUser(nil)
				s.Reset(http2.ErrCodeInternal)
			}
			c.state = lsClosed
			return
		}
		if c.fd >= 0 {
			// Its state is beyond use: close the sockets and let the
			// garbage collector have the rest.
			c.l.closeFD(c.fd)
			c.l.conns.remove(c)
			c.l.nconns.Add(-1)
			c.releaseSlots()
			c.fd = -1
			c.state = lsClosed
		}
	}()
	c.close()
}

// timeout acts on a passed deadline.
func (c *lconn) timeout() {
	switch c.dkind {
	case dlIdle:
		c.close()
	case dlHead, dlBody:
		if c.state == lsIdle && len(c.rd.buffered()) == 0 {
			c.close()
			return
		}
		c.refuse(&statusError{408, "request timeout"}, c.state == lsBody)
	case dlConnect:
		c.upFailed(fmt.Errorf("%w: dialing %s: %w", wire.ErrConnect, c.be.Addr, os.ErrDeadlineExceeded), false)
	case dlUpHead:
		c.dropUp(false)
		c.forwarded(0, fmt.Errorf("%w: %s: no response head in time: %w", wire.ErrTimeout, c.be.Addr, os.ErrDeadlineExceeded))
	case dlUpBody:
		c.sendDone(fmt.Errorf("%w: %s: reading response body: %w", wire.ErrTimeout, c.be.Addr, os.ErrDeadlineExceeded))
	case dlWrite:
		c.gone(errors.New("write timeout"))
	case dlTunnel:
		c.endTunnel()
	case dlQueue:
		p, fdWait := c.queued, c.fdWait
		p.unqueue(c)
		if fdWait {
			c.forwarded(0, noFDErr(p, c))
			return
		}
		c.forwarded(0, fmt.Errorf("%w: %s: no connection free within %v", wire.ErrBackendBusy, p.addr, c.tr.Settings.QueueTimeout))
	case dlH2Tick, dlH2Linger:
		c.h2tick()
	case dlHello:
		c.noHello()
	case dlProxy:
		c.proxyRefused()
	case dlBackoff:
		c.act(c.flow.Resume())
	default:
		c.deadline = 0
	}
}

// close releases the connection.
func (c *lconn) close() {
	if c.h2s != nil {
		c.closeStream()
		return
	}
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
	if c.rd.buf != nil {
		c.l.headBufs.put(c.rd.buf)
		c.rd.buf = nil
	}
	c.dropFields()
	if c.wr.buf != nil {
		c.l.writeBufs.put(c.wr.buf)
	}
	c.wr.reset(nil, nil)
	c.rd.r, c.rd.w, c.rd.pin = 0, 0, 0
	c.nodelay = false
	c.tls, c.sock = nil, nil
	c.l.freeConn(c)
}

// dropExchange lets go of what an exchange holds when its connection (or
// stream) closes: its backend connection, its place in a lookup's or a
// capped backend's wait, its request body buffer and its file.
func (c *lconn) dropExchange() {
	c.releaseSmallBody()
	c.dropUp(false)
	c.resolving = nil
	if c.queued != nil {
		c.queued.unqueue(c)
	}
	c.streaming, c.buffering = false, false
	c.bodyDeadline = 0
	c.dropSpool()
	if !c.spilling {
		if c.bb != nil {
			c.bb.Close()
		}
	}
	if c.file != nil && c.file.File != nil {
		c.file.File.Release()
		c.file.File = nil
	}
}

// --- wire.Exchange ---

func (c *lconn) Method() []byte         { return c.req.Method }
func (c *lconn) Host() []byte           { return c.req.Host }
func (c *lconn) Path() []byte           { return c.req.Path }
func (c *lconn) ClientAddr() netip.Addr { return c.clientAddr() }

// Listener returns the listener's policy for the pipeline
// (wire.Exchange).
func (c *lconn) Listener() *wire.Listener { return c.opts.Listener }
func (c *lconn) HasBody() bool            { return c.req.HasBody() }
func (c *lconn) BodyStarted() bool        { return c.bodySent }
func (c *lconn) Upgrade() []byte          { return c.req.Upgrade }
func (c *lconn) RefuseUpgrade()           { c.req.Upgrade = nil }
func (c *lconn) BodyLength() int64        { return bodyLength(&c.req) }
func (c *lconn) BodyRead() int64          { return c.reqBody.read }

// Header returns the first value of the request field named name (any
// case); nil when absent (wire.Exchange, static.Request).
func (c *lconn) Header(name string) []byte {
	for i := range c.req.Header.Fields {
		if f := &c.req.Header.Fields[i]; httpmsg.EqualFoldBytes(f.Name, name) {
			return f.Value
		}
	}
	return nil
}

// Query returns the query of the request target, without the "?".
func (c *lconn) Query() []byte {
	if i := bytes.IndexByte(c.req.Target, '?'); i >= 0 {
		return c.req.Target[i+1:]
	}
	return nil
}

// Proto returns "HTTP/1.0" or "HTTP/1.1", as the client sent.
func (c *lconn) Proto() []byte {
	if c.h2s != nil {
		return proto20
	}
	if c.req.minor == 0 {
		return proto10
	}
	return proto11
}

// TLSVersion returns the version the connection's handshake agreed on,
// nil for cleartext.
func (c *lconn) TLSVersion() []byte {
	if c.tlsVer == 0 {
		return nil
	}
	return tlsVersionName(c.tlsVer)
}

// tlsVersionName names a crypto/tls version as the access log does.
func tlsVersionName(v uint16) []byte {
	switch v {
	case tls.VersionTLS13:
		return tls13
	case tls.VersionTLS12:
		return tls12
	}
	return tlsOther
}

var (
	tls12, tls13, tlsOther = []byte("1.2"), []byte("1.3"), []byte("other")
	proto10                = []byte("HTTP/1.0")
	proto11                = []byte("HTTP/1.1")
	proto20                = []byte("HTTP/2.0")
)

// Request returns the request head (wire.Exchange).
func (c *lconn) Request() *httpmsg.Request { return &c.req.Request }

// Response returns the backend's answer's head once it has come
// (wire.Exchange).
func (c *lconn) Response() *httpmsg.Response {
	if c.up == nil || c.up.state != upBody && c.up.state != upTunnel {
		return nil
	}
	return &c.up.resp.Response
}

// Alloc lends n bytes of the exchange's arena (wire.Exchange): from its
// current block, or a new block when that has no room (slices lent from
// the old one stay valid: the block lives as long as they do). The arena
// starts over with each exchange.
func (c *lconn) Alloc(n int) []byte {
	if cap(c.arena)-len(c.arena) < n {
		c.arena = make([]byte, 0, max(arenaBlock, n))
	}
	i := len(c.arena)
	c.arena = c.arena[:i+n]
	return c.arena[i : i+n : i+n]
}

// arenaBlock is the size of an exchange's arena block (Alloc).
const arenaBlock = 512

// hop says how the exchange's request is forwarded (ActForward, or an
// in-process handler's ActServeHTTP).
func (c *lconn) hop() httpmsg.Hop {
	return httpmsg.Hop{Peer: c.remote.Addr().Unmap(), Trusted: c.trusted(), TLS: c.opts.TLS != nil, Local: c.local != nil, Backend: c.be.Addr}
}

// LimitBody bounds what is read of the request body: past max it fails
// (a chunked body is counted as it arrives; a declared length the
// pipeline checks itself).
func (c *lconn) LimitBody(max int64) { c.reqBody.limit = max }

// checkBuffered checks a body the loop already holds whole in its read
// buffer against lim.
func (c *lconn) checkBuffered(lim wire.BufferLimits) error {
	if n := c.req.ContentLength; !lim.Stream && !lim.Discard && n > int64(lim.Memory)+lim.File {
		return fmt.Errorf("%w: %d bytes buffer at most %d", wire.ErrBodyTooLarge, n, int64(lim.Memory)+lim.File)
	}
	return nil
}

// Respond sends a complete answer with a fixed body.
func (c *lconn) Respond(status int, header *httpmsg.Header, body []byte) error {
	if c.respStarted {
		return errors.New("h1: response already started")
	}
	header = c.answerHeader(header, true)
	if c.h2s != nil {
		return c.h2respond(status, header, body)
	}
	c.respStarted = true
	c.respStatus = status
	c.ensureWriter()
	w := &c.wr
	writeFixedHead(w, c.l.eng.status.line(status), c.l.eng.date.line(time.Unix(0, c.l.now)), header, status, len(body))
	c.writeConnectionHeader()
	w.WriteString("\r\n")
	c.respBytes = writeFixedBody(w, status, c.req.Method, body)
	if w.err != nil {
		c.broken = true
		return wrapClientErr(w.err)
	}
	return nil
}

func (c *lconn) respondText(status int, msg string) {
	c.Respond(status, textPlain, []byte(msg+"\n"))
}

// lconnList is an intrusive list of a loop's client connections.
type lconnList struct{ head *lconn }

func (s *lconnList) add(c *lconn) {
	c.prev = nil
	c.next = s.head
	if s.head != nil {
		s.head.prev = c
	}
	s.head = c
}

func (s *lconnList) remove(c *lconn) {
	if c.prev != nil {
		c.prev.next = c.next
	} else if s.head == c {
		s.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	}
	c.prev, c.next = nil, nil
}
