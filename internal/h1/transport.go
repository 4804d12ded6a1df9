package h1

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/helios-lb/helios/internal/upstream"
	"github.com/helios-lb/helios/internal/wire"
)

// TransportOptions tune the connections to one upstream's backends. The
// zero value of each field is noted.
type TransportOptions struct {
	// MaxIdlePerBackend caps the idle keep-alive connections kept per
	// backend. Zero: none are kept (every request dials).
	MaxIdlePerBackend int
	// IdleTimeout closes pooled connections idle for longer. Zero: kept
	// until the backend closes them.
	IdleTimeout time.Duration
	// DialTimeout bounds connecting. Zero: the operating system's limit.
	DialTimeout time.Duration
	// ResponseHeaderTimeout bounds the wait for the response head after
	// the request has been sent. Zero: no bound.
	ResponseHeaderTimeout time.Duration
	// ReadTimeout bounds each wait for response body bytes (like nginx
	// proxy_read_timeout). Zero: no bound.
	ReadTimeout time.Duration
}

// maxResponseHead bounds a backend's response head.
const maxResponseHead = 64 << 10

// spliceThreshold is the body size from which a fixed-length body moves
// between sockets with splice(2) instead of through user space.
const spliceThreshold = 64 << 10

// Transport forwards requests to the backends of one upstream over pooled
// keep-alive connections. It implements wire.Transport for exchanges of
// this package's Server.
type Transport struct {
	opts   TransportOptions
	pools  []*hostPool // by upstream.Backend.Index
	bufs   *sync.Pool
	dialer net.Dialer
	stop   context.CancelFunc
	done   chan struct{}
}

// NewTransport returns a transport to the backends at addrs (in the order
// of their Index). Pools of prev whose address and options match are
// shared rather than rebuilt, so a reload keeps warm connections; prev
// may be nil and stays usable until it is closed.
func NewTransport(o TransportOptions, addrs []string, prev *Transport) *Transport {
	t := &Transport{opts: o, pools: make([]*hostPool, len(addrs)), done: make(chan struct{})}
	if prev != nil && prev.opts == o {
		t.bufs = prev.bufs
	} else {
		t.bufs = &sync.Pool{New: func() any { b := make([]byte, readBufSize); return &b }}
	}
	t.dialer.Timeout = o.DialTimeout
	for i, a := range addrs {
		if prev != nil && prev.opts == o {
			for _, p := range prev.pools {
				if p.addr == a {
					p.mu.Lock()
					if !p.closed {
						p.refs++
						t.pools[i] = p
					}
					p.mu.Unlock()
					break
				}
			}
		}
		if t.pools[i] == nil {
			t.pools[i] = &hostPool{addr: a, maxIdle: o.MaxIdlePerBackend, idleTTL: o.IdleTimeout, bufs: t.bufs, refs: 1}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.stop = cancel
	go t.reapLoop(ctx)
	return t
}

func (t *Transport) reapLoop(ctx context.Context) {
	defer close(t.done)
	if t.opts.IdleTimeout <= 0 {
		<-ctx.Done()
		return
	}
	every := t.opts.IdleTimeout / 2
	if every < 100*time.Millisecond {
		every = 100 * time.Millisecond
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			for _, p := range t.pools {
				p.reap(now.UnixNano())
			}
		}
	}
}

// Close stops the transport's housekeeping and closes the idle
// connections of pools no newer transport shares. In-flight requests
// finish; their connections are closed instead of pooled.
func (t *Transport) Close() {
	t.stop()
	<-t.done
	for _, p := range t.pools {
		p.mu.Lock()
		p.refs--
		last := p.refs == 0
		if last {
			p.closed = true
		}
		p.mu.Unlock()
		if last {
			p.closeIdle()
		}
	}
}

// IdleConns returns the number of idle pooled connections to the backend
// with the given index.
func (t *Transport) IdleConns(index int) int {
	if index < 0 || index >= len(t.pools) {
		return 0
	}
	return t.pools[index].idleCount()
}

// dial opens a new connection to the pool's backend.
func (t *Transport) dial(p *hostPool) (*upConn, error) {
	nc, err := t.dialer.Dial("tcp", p.addr)
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, fmt.Errorf("%w: dialing %s: %w", wire.ErrConnect, p.addr, err)
		}
		return nil, fmt.Errorf("%w: dialing %s: %w", wire.ErrConnect, p.addr, err)
	}
	u := &upConn{nc: nc, pool: p}
	u.rbuf = t.bufs.Get().(*[]byte)
	u.rd.reset(nc, *u.rbuf)
	return u, nil
}

// upExchange is the transport side of one exchange: the backend
// connection and its parsed response. It lives inside the client conn and
// is reused, so RoundTrip allocates nothing on the common path. It
// implements wire.Response.
type upExchange struct {
	c    *conn
	t    *Transport
	pool *hostPool
	uc   *upConn
	resp response
	body body
	// w writes to the backend; its buffer is borrowed from the server.
	w    writer
	wbuf *[]byte
	// pumpDone is non-nil while a goroutine streams the request body.
	pumpDone chan error
	// pumpProgress is when the pump last moved body bytes to the backend
	// (unix nanoseconds), and pumpReading whether it is waiting for the
	// client; the response header timeout runs from the former and not
	// during the latter, so a slow upload is not a slow backend.
	pumpProgress atomic.Int64
	pumpReading  atomic.Bool
	// replay holds a fully buffered request body not yet consumed.
	replay []byte
}

// RoundTrip sends ex's request to b and reads the response head.
func (t *Transport) RoundTrip(ex wire.Exchange, b *upstream.Backend) (wire.Response, error) {
	c, ok := ex.(*conn)
	if !ok {
		return nil, fmt.Errorf("%w: h1 transport used with a foreign exchange", wire.ErrBadRequest)
	}
	if b.Index < 0 || b.Index >= len(t.pools) {
		return nil, fmt.Errorf("%w: backend %s is not in this transport", wire.ErrConnect, b.Addr)
	}
	u := &c.up
	*u = upExchange{c: c, t: t, pool: t.pools[b.Index], resp: u.resp, body: u.body}
	now := time.Now().UnixNano()
	for try := 0; ; try++ {
		var uc *upConn
		if try == 0 {
			// A request that cannot be sent again if the connection turns
			// out stale (a body, or a method that is not idempotent) is
			// worth a syscall to see whether the backend closed it: the
			// usual case after a backend's keep-alive timeout, and
			// otherwise a 502.
			uc = u.pool.get(now, c.req.hasBody() || !idempotent(c.req.method))
		}
		if uc == nil {
			var err error
			if uc, err = t.dial(u.pool); err != nil {
				return nil, err
			}
		}
		u.uc = uc
		wrote, err := u.send()
		if err == nil {
			if c.wr.buffered() > 0 {
				// Answers to earlier pipelined requests are waiting in the
				// client buffer: send them now, not after this backend
				// answers, however long it takes.
				c.wrFlush()
			}
			err = u.readHead()
			if err == nil {
				if u.replay != nil {
					c.reqBody.consumeBuffered()
					u.replay = nil
				}
				return u, nil
			}
		}
		u.abort()
		// A pooled connection the backend closed meanwhile fails at once:
		// try a fresh one when nothing can have been processed twice
		// (nothing written, or an idempotent request that can be replayed).
		stale := uc.used && try == 0 && isStale(err) && !c.bodySent &&
			(!wrote || idempotent(c.req.method)) && !errors.Is(err, wire.ErrClientGone)
		if stale {
			continue
		}
		return nil, classifyErr(err, b.Addr)
	}
}

// isStale reports whether err looks like a reused connection the backend
// had already closed: EOF or reset before any response byte.
func isStale(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || isReset(err)
}

func idempotent(m []byte) bool {
	switch string(m) {
	case "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE":
		return true
	}
	return false
}

// classifyErr wraps a raw error with the wire sentinel the pipeline acts on.
func classifyErr(err error, addr string) error {
	switch {
	case errors.Is(err, wire.ErrClientGone), errors.Is(err, wire.ErrBadRequest),
		errors.Is(err, wire.ErrConnect), errors.Is(err, wire.ErrTimeout), errors.Is(err, wire.ErrBackend):
		return err
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("%w: %s: %w", wire.ErrTimeout, addr, err)
	default:
		return fmt.Errorf("%w: %s: %w", wire.ErrBackend, addr, err)
	}
}

// send writes the request head and, when it is already buffered, the
// body; a larger body is streamed by a goroutine while the response head
// is awaited. wrote reports whether any byte reached the socket.
func (u *upExchange) send() (wrote bool, err error) {
	c := u.c
	if u.wbuf == nil {
		u.wbuf = c.srv.writeBufs.Get().(*[]byte)
	}
	u.w.reset(u.uc.nc, *u.wbuf)
	u.writeHead()
	rb := &c.reqBody
	switch {
	case rb.done:
	case rb.kind == bodyFixed:
		if p, ok := rb.fullyBuffered(); ok {
			u.w.Write(p)
			u.replay = p
		}
	}
	if u.replay == nil && !rb.done {
		// Ask for the body now (100 Continue goes out on this goroutine,
		// before any response can), then stream it concurrently so a
		// backend that answers while reading cannot deadlock with us.
		if err := u.w.flush(); err != nil {
			return false, fmt.Errorf("%w: writing request: %w", wire.ErrBackend, err)
		}
		if rb.onFirstRead != nil {
			f := rb.onFirstRead
			rb.onFirstRead = nil
			f()
		}
		c.bodySent = true
		c.rd.beforeBlock = nil
		u.pumpDone = make(chan error, 1)
		u.pumpProgress.Store(time.Now().UnixNano())
		go u.pump()
		return true, nil
	}
	if err := u.w.flush(); err != nil {
		return false, err
	}
	u.releaseWriteBuf()
	return true, nil
}

func (u *upExchange) releaseWriteBuf() {
	if u.wbuf != nil {
		u.c.srv.writeBufs.Put(u.wbuf)
		u.wbuf = nil
		u.w.reset(nil, nil)
	}
}

// writeHead renders the request head for the backend.
func (u *upExchange) writeHead() {
	c := u.c
	writeRequestHead(&u.w, &c.req, c.remote.Addr(), c.srv.opts.Load().TLS, u.pool.addr)
}

// writeRequestHead renders r's head for a backend at backendAddr:
// hop-by-hop fields dropped, X-Forwarded-* set for the client at remote,
// framing regenerated. Both engines use it.
func writeRequestHead(w *writer, r *request, remote netip.Addr, tls bool, backendAddr string) {
	w.Write(r.method)
	w.WriteString(" ")
	w.Write(r.uri)
	w.WriteString(" HTTP/1.1\r\n")
	if r.hostOverride {
		w.field(hostName, r.authority)
	} else if !r.hasHost {
		// An HTTP/1.0 request may come without Host, but the request goes
		// on as HTTP/1.1, which requires one (RFC 9112 §3.2): name the
		// backend, as net/http's ReverseProxy does.
		w.WriteString("Host: ")
		w.WriteString(backendAddr)
		w.WriteString("\r\n")
	}
	xffAt := -1
	for i := range r.hdr.fields {
		f := &r.hdr.fields[i]
		if f.drop {
			continue
		}
		switch f.kind {
		case kOther, kTrailer:
			w.field(f.name, f.value)
		case kHost:
			if !r.hostOverride {
				w.field(f.name, f.value)
			}
		case kUpgrade:
			if r.upgrade {
				w.field(f.name, f.value)
			}
		case kXForwardedFor:
			if xffAt < 0 {
				xffAt = i
			}
		}
		// Everything else is hop-by-hop, framing, or rewritten below.
	}
	// X-Forwarded-For: prior values in order, then this client.
	w.WriteString("X-Forwarded-For: ")
	if xffAt >= 0 {
		for i := xffAt; i < len(r.hdr.fields); i++ {
			f := &r.hdr.fields[i]
			if f.kind == kXForwardedFor && !f.drop && len(f.value) > 0 {
				w.Write(f.value)
				w.WriteString(", ")
			}
		}
	}
	if w.reserve(64) {
		w.n += len(remote.AppendTo(w.buf[w.n:w.n]))
	}
	if tls {
		w.WriteString("\r\nX-Forwarded-Proto: https\r\n")
	} else {
		w.WriteString("\r\nX-Forwarded-Proto: http\r\n")
	}
	if len(r.authority) > 0 {
		w.field(xfHostName, r.authority)
	}
	switch {
	case r.chunked:
		w.WriteString("Transfer-Encoding: chunked\r\n")
	case r.contentLength > 0:
		w.WriteString("Content-Length: ")
		w.writeInt(r.contentLength)
		w.WriteString("\r\n")
	case r.contentLength == 0 && !methodWithoutBody(r.method):
		w.WriteString("Content-Length: 0\r\n")
	}
	if r.upgrade {
		w.WriteString("Connection: Upgrade\r\n")
	}
	w.WriteString("\r\n")
}

var (
	hostName   = []byte("Host")
	xfHostName = []byte("X-Forwarded-Host")
)

func methodWithoutBody(m []byte) bool {
	switch string(m) {
	case "GET", "HEAD", "DELETE", "OPTIONS", "TRACE":
		return true
	}
	return false
}

// pump streams the rest of the request body to the backend. It runs on
// its own goroutine and touches only the client reader and u.w.
func (u *upExchange) pump() {
	c := u.c
	rb := &c.reqBody
	chunked := rb.kind == bodyChunked
	var err error
	for {
		u.pumpReading.Store(true)
		p, rerr := rb.next()
		u.pumpReading.Store(false)
		if len(p) > 0 {
			if chunked {
				u.w.writeHex(int64(len(p)))
				u.w.WriteString("\r\n")
			}
			if _, werr := u.w.Write(p); werr != nil {
				err = fmt.Errorf("%w: writing request body: %w", wire.ErrBackend, werr)
				break
			}
			if chunked {
				u.w.WriteString("\r\n")
			}
		}
		if rerr == io.EOF {
			if chunked {
				u.w.WriteString("0\r\n")
				u.w.Write(rb.trailer)
				u.w.WriteString("\r\n")
			}
			if werr := u.w.flush(); werr != nil {
				err = fmt.Errorf("%w: writing request body: %w", wire.ErrBackend, werr)
			}
			break
		}
		if rerr != nil {
			if errors.Is(rerr, errMalformedChunk) || errors.Is(rerr, errTrailerTooLarge) {
				err = fmt.Errorf("%w: %w", wire.ErrBadRequest, rerr)
			} else {
				err = fmt.Errorf("%w: reading request body: %w", wire.ErrClientGone, rerr)
			}
			break
		}
		// Flush what has been gathered when the client has nothing more
		// buffered, so the backend sees the body as it arrives.
		if len(c.rd.buffered()) == 0 {
			if werr := u.w.flush(); werr != nil {
				err = fmt.Errorf("%w: writing request body: %w", wire.ErrBackend, werr)
				break
			}
		}
		u.pumpProgress.Store(time.Now().UnixNano())
	}
	u.pumpProgress.Store(time.Now().UnixNano())
	if err != nil && !errors.Is(err, wire.ErrBackend) {
		// The client failed: unblock the response read, since the
		// backend waits for the rest of the body. When the backend failed
		// instead, leave its connection be: it often answered before it
		// stopped reading (a 413, a 401), and that answer is in flight.
		u.uc.nc.Close()
	}
	u.pumpDone <- err
}

// waitPump ends a body-streaming goroutine, interrupting it when it does
// not finish at once (the response is done, or failed, before the body
// was read); the client connection then cannot be reused. intact reports
// whether the whole body reached the backend, so that the backend
// connection can carry another request. err is the pump's own failure;
// nil when it was interrupted, since its error then only echoes ours.
func (u *upExchange) waitPump() (intact bool, err error) {
	if u.pumpDone == nil {
		return true, nil
	}
	// The body may be a moment from done (the backend answered as it
	// read the last bytes); give it that moment before cutting it off.
	t := time.NewTimer(50 * time.Millisecond)
	select {
	case err := <-u.pumpDone:
		t.Stop()
		u.afterPump()
		return err == nil, err
	case <-t.C:
	}
	u.c.broken = true
	u.uc.nc.Close()
	u.c.nc.SetReadDeadline(time.Unix(1, 0))
	<-u.pumpDone
	u.afterPump()
	return false, nil
}

func (u *upExchange) afterPump() {
	u.pumpDone = nil
	u.c.rd.beforeBlock = u.c.flushFn
	u.c.rdl = -1 // unknown now: the next arm sets it
	u.releaseWriteBuf()
}

// readHead reads the response head, skipping interim 1xx responses other
// than 101.
func (u *upExchange) readHead() error {
	uc := u.uc
	now := time.Now().UnixNano()
	uc.armRead(now, u.t.opts.ResponseHeaderTimeout)
	head := equalFold(u.c.req.method, "head")
	for {
		end, err := u.readHeadBytes()
		if err != nil {
			if u.pumpDone != nil {
				if errors.Is(err, os.ErrDeadlineExceeded) && u.extendHeadWait() {
					continue
				}
				if _, perr := u.waitPump(); perr != nil && !errors.Is(perr, wire.ErrBackend) {
					// The client's failure (gone, malformed body) caused
					// ours: report it, not the backend.
					return perr
				}
			}
			return err
		}
		// Pin first: pinning may move the buffer, and the parsed fields
		// point into it.
		uc.rd.pinHead(end)
		if err := parseResponse(uc.rd.buf[uc.rd.pin-end:uc.rd.pin], &u.resp, head); err != nil {
			return fmt.Errorf("%w: %w", wire.ErrBackend, err)
		}
		if u.resp.status >= 100 && u.resp.status < 200 && u.resp.status != 101 {
			uc.rd.pin = 0 // an interim head is not kept
			continue
		}
		break
	}
	switch {
	case u.resp.status == 101:
		u.body.reset(&uc.rd, bodyNone, 0)
	case u.resp.chunked:
		u.body.reset(&uc.rd, bodyChunked, 0)
	case u.resp.untilClose:
		u.body.reset(&uc.rd, bodyUntilClose, 0)
	default:
		u.body.reset(&uc.rd, bodyFixed, max(u.resp.contentLength, 0))
	}
	u.body.touch = nil
	if u.t.opts.ReadTimeout > 0 || u.t.opts.ResponseHeaderTimeout > 0 {
		u.body.touch = u.c.upTouchFn
	}
	return nil
}

// extendHeadWait re-arms the response header timeout while a request
// body is still streaming: the timeout runs from the last body bytes the
// backend was given, and not while the client is slow to send them. It
// reports false when the backend really is late.
func (u *upExchange) extendHeadWait() bool {
	rht := u.t.opts.ResponseHeaderTimeout
	if rht <= 0 {
		return false
	}
	now := time.Now().UnixNano()
	want := u.pumpProgress.Load() + int64(rht)
	if u.pumpReading.Load() {
		// Waiting for the client: its own timeouts bound this.
		want = now + int64(rht)
	}
	if want <= now {
		return false
	}
	// A deadline error leaves the connection usable; clear the reader's
	// sticky copy of it.
	u.uc.rd.err = nil
	u.uc.rdl = want
	u.uc.nc.SetReadDeadline(time.Unix(0, want))
	return true
}

func (u *upExchange) touchBody() {
	u.uc.armRead(time.Now().UnixNano(), u.t.opts.ReadTimeout)
}

// readHeadBytes reads until the buffer holds a complete head and returns
// its length.
func (u *upExchange) readHeadBytes() (int, error) {
	rd := &u.uc.rd
	scanned := 0
	for {
		b := rd.buffered()
		if end, sc := findHeadEnd(b, scanned); end > 0 {
			return end, nil
		} else {
			scanned = sc
		}
		if len(b) > maxResponseHead {
			return 0, fmt.Errorf("%w: response head too large", wire.ErrBackend)
		}
		err := rd.fill()
		if err == errBufferFull {
			rd.grow(min(2*len(rd.buf), maxResponseHead+readBufSize))
			continue
		}
		if err != nil {
			if err == io.EOF && len(b) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
	}
}

// abort closes the backend connection after a failed attempt.
func (u *upExchange) abort() {
	u.waitPump()
	u.releaseWriteBuf()
	if u.uc != nil {
		u.uc.close()
		u.uc = nil
	}
}

// StatusCode returns the backend's status.
func (u *upExchange) StatusCode() int { return u.resp.status }

// Discard drops the response; the backend connection is kept when the
// rest of a small body can be read at once, closed otherwise.
func (u *upExchange) Discard() {
	intact, _ := u.waitPump()
	u.finish(intact && u.resp.keepAlive && u.drainSmall())
}

// drainSmall reads the rest of a small fixed-length body and reports
// whether the body is done.
func (u *upExchange) drainSmall() bool {
	if u.body.done {
		return true
	}
	if u.body.kind != bodyFixed || u.body.remaining > 16<<10 {
		return false
	}
	for !u.body.done {
		if _, err := u.body.next(); err != nil {
			return false
		}
	}
	return true
}

// finish returns the backend connection to its pool or closes it.
func (u *upExchange) finish(reusable bool) {
	uc := u.uc
	u.uc = nil
	if uc == nil {
		return
	}
	uc.rd.unpin()
	if reusable && len(uc.rd.buffered()) == 0 {
		u.pool.put(uc, time.Now().UnixNano())
	} else {
		uc.close()
	}
}
