package engine

import (
	"bytes"
	"crypto/tls"
	"errors"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"github.com/helios-lb/helios/internal/bodybuf"
	"github.com/helios-lb/helios/internal/http1"
	"github.com/helios-lb/helios/internal/httpmsg"
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
	// xf holds the transform the answer's body goes through
	// (transform.go); nil until the connection's first. One pointer,
	// not the 24 bytes of the transform and its state.
	xf *xform

	// The flags and small numbers, together so that they pack: the
	// four-byte ones first, then the two-byte one, then the bytes, so
	// that nothing between them is padding (lconn must stay within its
	// allocation class with Go's malloc header: 1016 bytes at most,
	// TestIdleConnectionMemory).
	// gen numbers the exchanges on this connection, so that a spill
	// write finishing late knows whether its exchange is still on.
	gen uint32
	// inc numbers the connections this lconn has served, so that a
	// handshake that ends late knows whether its connection is still on.
	inc uint32
	// tlsVer is the handshake's version (crypto/tls's; 0: cleartext).
	tlsVer uint16
	dkind  uint8
	state  lstate
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
	// A tunnel's sides: the client (in) or the backend (out) has
	// closed its sending side, and that close has been passed on.
	inClosed, outClosed, inShut, outShut bool
	// Forwarding.
	replay, chunkOut bool
	fdWait           bool
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
	c.client().event(c, ev)
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
		if c.fr.rdhup || c.tls != nil {
			// The client shut its side while its request is with a
			// backend, or its answer streams from one: it has gone
			// (nginx aborts such requests too). Waiting for the
			// backend's next bytes to find out could take for ever (a
			// long poll, an event stream), holding the backend. A TLS
			// client's close_notify comes before its FIN, as bytes to
			// read (the portable poller reports no shutdown then).
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

// clientClosed peeks at the socket (a TLS client's: reads its records):
// true when the client has closed its side and sent nothing more
// (pipelined bytes are not a close).
func (c *lconn) clientClosed() bool {
	if len(c.rd.buffered()) > 0 {
		return false
	}
	if c.tls != nil {
		// The socket holds records, not the client's bytes: a client
		// that goes away sends a close_notify alert before its FIN,
		// which only decrypting tells from a pipelined request. Read
		// through TLS into the connection's reader, where a request
		// stays for its turn.
		if c.rd.buf == nil {
			c.rd.reset(c.src(), c.l.headBufs.get())
		}
		err := c.rd.fill()
		return err != nil && err != errWouldBlock && err != errBufferFull
	}
	if pr := c.fr.pre; pr != nil {
		// A batched read took the socket's next bytes (preload.go):
		// they, or the end it found, are what a peek would see.
		return len(pr.b) == 0 && pr.err != nil
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
			if !c.client().readHead(c) {
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
			end, sc := http1.FindHeadEnd(b, c.scanned)
			if end > 0 && end > c.opts.MaxHeaderBytes {
				c.refuse(httpmsg.NewStatusError(431, "request header too large"), false)
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
				if err := http1.ParseRequest(head, &c.req, c.opts.limits()); err != nil {
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
					c.req.Scheme = httpmsg.SchemeHTTPS
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
				c.refuse(httpmsg.NewStatusError(431, "request header too large"), false)
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
				c.l.putClientBuf(c.rd.buf)
				c.rd.reset(c.src(), nil)
				c.rd.buf = nil
				c.dropFields()
				c.setDeadline(dlIdle, c.opts.IdleTimeout)
			}
			return false
		case err == errBufferFull:
			if len(c.rd.buf) >= c.opts.MaxHeaderBytes+readBufSize {
				c.refuse(httpmsg.NewStatusError(431, "request header too large"), false)
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
	switch {
	case len(c.rd.buf) >= need:
	case need <= bodyBufSize && len(c.rd.buf) < bodyBufSize:
		// Into a kept buffer of the loop's; the head moves with its
		// bytes, and the old buffer goes back at once.
		old := c.rd.buf
		nb := c.l.bodyBufs.get()
		copy(nb, old[:c.rd.w])
		c.rd.buf = nb
		c.req.Rebase(old, nb)
		c.l.putClientBuf(old)
	default:
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
	var se *httpmsg.StatusError
	if !errors.As(err, &se) {
		se = &httpmsg.StatusError{Status: 400, Msg: "bad request"}
	}
	if !routed {
		c.req.Method = nil
		c.untrust()
	} else {
		c.resolveClient()
	}
	c.req.KeepAlive = false
	c.closeAfter = true
	c.start = c.l.now
	c.respStarted = false
	c.respondText(se.Status, se.Msg)
	c.takeFlow()
	c.flow.Refused(c, se.Status, err)
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
	case c.req.Chunked:
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
