package h1

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"syscall"
	"time"

	"github.com/helios-lb/helios/internal/wire"
)

// lpool is one loop's idle keep-alive connections to one backend. Pools
// are per loop, so taking and returning a connection needs no lock.
type lpool struct {
	l    *loop
	addr string
	idle []*lupconn
	opts TransportOptions

	// The backend's socket address. An IP address is taken as it is; a
	// host name is looked up on another goroutine (a loop must not
	// block on DNS), again every resolveEvery, and connections wait
	// for the first answer (waiters).
	host       string
	port       int
	literal    bool
	sa         syscall.Sockaddr
	family     int
	err        error // the last lookup failed and there is no address
	resolvedAt int64 // when the last lookup ended (unix nanoseconds)
	resolving  bool
	waiters    []*lconn
}

// pool returns the loop's pool for a backend address with the
// transport's current options.
func (l *loop) pool(addr string, t *Transport) *lpool {
	p := l.pools[addr]
	if p == nil {
		p = &lpool{l: l, addr: addr}
		p.parse()
		l.pools[addr] = p
	}
	p.opts = t.opts
	return p
}

// parse splits the address; an IP address (or none: the local system)
// is the socket address for good.
func (p *lpool) parse() {
	host, port, err := net.SplitHostPort(p.addr)
	if err == nil {
		p.port, err = net.LookupPort("tcp", port)
	}
	if err != nil {
		p.literal, p.err = true, err
		return
	}
	p.host = host
	if host == "" {
		p.literal = true
		p.setAddr(netip.IPv4Unspecified())
		return
	}
	if a, err := netip.ParseAddr(host); err == nil {
		p.literal = true
		p.setAddr(a)
	}
}

func (p *lpool) setAddr(a netip.Addr) {
	a = a.Unmap()
	if a.Is4() {
		p.sa, p.family = &syscall.SockaddrInet4{Port: p.port, Addr: a.As4()}, syscall.AF_INET
	} else {
		p.sa, p.family = &syscall.SockaddrInet6{Port: p.port, Addr: a.As16()}, syscall.AF_INET6
	}
	p.err = nil
}

// How often a backend's host name is looked up again, and how soon
// after a failed lookup that left no address (Engine fields override
// them in tests).
const (
	resolveEvery   = 30 * time.Second
	resolveRetry   = time.Second
	resolveTimeout = 10 * time.Second
)

// ready reports whether c can go on to dial: the address is known, or
// known to be unknown for now (the dial then fails with the lookup's
// error). Otherwise c waits for the lookup under way, its dial timeout
// running, and resumes in resolved.
func (p *lpool) ready(c *lconn) bool {
	if p.literal {
		return true
	}
	e := p.l.eng
	age := p.l.now - p.resolvedAt
	switch {
	case p.sa != nil:
		// Known: use it, and look again in the background when due.
		if age >= int64(e.resolveEvery) && !p.resolving {
			p.resolve()
		}
		return true
	case p.err != nil && age < int64(e.resolveRetry):
		return true
	}
	if !p.resolving {
		p.resolve()
	}
	p.waiters = append(p.waiters, c)
	c.resolving = p
	c.setDeadline(dlConnect, c.tr.opts.DialTimeout)
	return false
}

// resolve looks the host name up on another goroutine.
func (p *lpool) resolve() {
	p.resolving = true
	e := p.l.eng
	host := p.host
	go func() {
		ctx, cancel := context.WithTimeout(e.ctx, resolveTimeout)
		addrs, err := e.lookup(ctx, host)
		cancel()
		p.l.post(func() { p.resolved(addrs, err) })
	}()
}

// resolved takes a lookup's result (on the loop) and resumes the
// connections waiting for it.
func (p *lpool) resolved(addrs []netip.Addr, err error) {
	p.resolving = false
	p.resolvedAt = p.l.now
	if err == nil && len(addrs) == 0 {
		err = fmt.Errorf("no address for %s", p.host)
	}
	if err == nil {
		a := addrs[0]
		for _, x := range addrs {
			if x.Unmap().Is4() { // as Go's dialer prefers, absent happy eyeballs
				a = x
				break
			}
		}
		p.setAddr(a)
	} else if p.sa == nil {
		p.err = err
	} else {
		// Keep the address that worked; look again soon.
		p.resolvedAt = p.l.now - int64(p.l.eng.resolveEvery) + int64(p.l.eng.resolveRetry)
	}
	ws := p.waiters
	p.waiters = nil
	for _, c := range ws {
		// A connection that stopped waiting (timed out, gone, or
		// closed and reused) is not resumed.
		if c.resolving == p && c.state == lsForward {
			c.resolving = nil
			c.connect(p)
		}
	}
	clear(ws)
}

// lookupHost is the default Engine.lookup.
func lookupHost(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// get returns an idle connection, most recently used first.
func (p *lpool) get() *lupconn {
	for n := len(p.idle); n > 0; n = len(p.idle) {
		u := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		if p.opts.IdleTimeout > 0 && p.l.now-u.idleSince > int64(p.opts.IdleTimeout) {
			u.close()
			continue
		}
		return u
	}
	return nil
}

// put keeps a connection for reuse, or closes it when the pool is full.
func (p *lpool) put(u *lupconn) {
	if len(p.idle) >= p.opts.MaxIdlePerBackend || p.l.eng.stopped.Load() {
		u.close()
		return
	}
	u.state = upIdle
	u.client = nil
	u.used = true
	u.idleSince = p.l.now
	if u.rd.buf != nil {
		p.l.readBufs.put(u.rd.buf)
		u.rd.buf = nil
		u.rd.r, u.rd.w, u.rd.pin = 0, 0, 0
	}
	p.idle = append(p.idle, u)
}

// reap closes connections idle past the timeout (the oldest are first).
func (p *lpool) reap(now int64) {
	if p.opts.IdleTimeout <= 0 {
		return
	}
	i := 0
	for i < len(p.idle) && now-p.idle[i].idleSince > int64(p.opts.IdleTimeout) {
		i++
	}
	if i == 0 {
		return
	}
	for _, u := range p.idle[:i] {
		u.closeFD()
	}
	n := copy(p.idle, p.idle[i:])
	clear(p.idle[n:])
	p.idle = p.idle[:n]
}

func (p *lpool) remove(u *lupconn) {
	for i, x := range p.idle {
		if x == u {
			copy(p.idle[i:], p.idle[i+1:])
			p.idle[len(p.idle)-1] = nil
			p.idle = p.idle[:len(p.idle)-1]
			return
		}
	}
}

func (p *lpool) closeIdle() {
	for _, u := range p.idle {
		u.closeFD()
	}
	clear(p.idle)
	p.idle = p.idle[:0]
}

type upState uint8

const (
	upIdle upState = iota
	upConnecting
	upSending
	upWaitHead
	upBody
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
	// wfailed: writing the request failed; the backend may still have
	// answered.
	wfailed   error
	idleSince int64
	resp      response
	body      body
}

// dial starts a non-blocking connect to the pool's backend.
func (l *loop) dial(p *lpool) (*lupconn, error) {
	if p.sa == nil {
		return nil, fmt.Errorf("%w: resolving %s: %w", wire.ErrConnect, p.addr, p.err)
	}
	fd, err := syscall.Socket(p.family, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, syscall.IPPROTO_TCP)
	if err != nil {
		return nil, fmt.Errorf("%w: dialing %s: %w", wire.ErrConnect, p.addr, os.NewSyscallError("socket", err))
	}
	syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1)
	if l.eng.dialControl != nil {
		l.eng.dialControl(fd)
	}
	err = syscall.Connect(fd, p.sa)
	if err != nil && err != syscall.EINPROGRESS && err != syscall.EINTR {
		syscall.Close(fd)
		return nil, fmt.Errorf("%w: dialing %s: %w", wire.ErrConnect, p.addr, os.NewSyscallError("connect", err))
	}
	u := &lupconn{l: l, pool: p, fd: fd, state: upConnecting}
	u.fr = fdReader{fd: fd}
	u.fw = fdWriter{fd: fd}
	if err == nil {
		u.state = upSending
	}
	if err := l.register(fd, u); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("%w: dialing %s: %w", wire.ErrConnect, p.addr, err)
	}
	return u, nil
}

// attempt sends the request to the chosen backend: a pooled connection,
// or a new one.
func (c *lconn) attempt() {
	p := c.l.pool(c.be.Addr, c.tr)
	c.state = lsForward
	if !p.ready(c) {
		return // resolved() resumes
	}
	c.connect(p)
}

// connect goes on with an attempt once the backend's address is known
// (or known to be unknown).
func (c *lconn) connect(p *lpool) {
	var u *lupconn
	if c.tries == 0 {
		u = p.get()
	}
	if u == nil {
		var err error
		if u, err = c.l.dial(p); err != nil {
			c.forwarded(0, err)
			return
		}
	}
	u.client = c
	c.up = u
	c.state = lsForward
	if u.state == upConnecting {
		c.setDeadline(dlConnect, c.tr.opts.DialTimeout)
		return // event() continues once connected
	}
	c.sendRequest()
}

// sendRequest writes the request head and its buffered body.
func (c *lconn) sendRequest() {
	u := c.up
	u.state = upSending
	if u.rd.buf == nil {
		u.rd.reset(&u.fr, c.l.readBufs.get())
	}
	// sent counts this request's bytes, so that a failure can tell
	// whether any of them reached the backend.
	u.fw.sent = 0
	u.wfailed = nil
	wbuf := c.l.writeBufs.get()
	var w writer
	w.reset(&u.fw, wbuf)
	writeRequestHead(&w, &c.req, c.remote.Addr(), c.opts.TLS, c.be.Addr)
	if p, ok := c.reqBody.fullyBuffered(); ok && len(p) > 0 {
		w.Write(p)
		c.replay = true
	}
	err := w.flush()
	c.l.writeBufs.put(wbuf)
	if err != nil {
		c.upFailed(err, true)
		return
	}
	if len(u.fw.pending) > 0 {
		c.setDeadline(dlUpHead, c.tr.opts.ResponseHeaderTimeout)
		return // event() finishes the write
	}
	c.waitHead()
}

func (c *lconn) waitHead() {
	c.up.state = upWaitHead
	c.setDeadline(dlUpHead, c.tr.opts.ResponseHeaderTimeout)
	// The answer may be in already (an edge seen while sending).
	c.readUpHead()
}

// event handles readiness of a backend socket.
func (u *lupconn) event(ev uint32) {
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
		// backend (or it sent something unasked): it is not reusable.
		if readable {
			u.pool.remove(u)
			u.close()
		}
	case upConnecting:
		if ev&(evOut|evErr|evHup) == 0 {
			return
		}
		c := u.client
		soerr, err := syscall.GetsockoptInt(u.fd, syscall.SOL_SOCKET, syscall.SO_ERROR)
		if err == nil && soerr != 0 {
			err = syscall.Errno(soerr)
		}
		if err != nil {
			c.upFailed(fmt.Errorf("%w: dialing %s: %w", wire.ErrConnect, u.pool.addr, os.NewSyscallError("connect", err)), false)
			return
		}
		c.sendRequest()
	case upSending:
		if ev&evOut != 0 && len(u.fw.pending) > 0 {
			done, err := u.fw.flushPending()
			if err == nil && done {
				u.client.waitHead()
				return
			}
			if err != nil {
				// The backend stopped taking the request. It may
				// have answered first (an early 413): look for the
				// answer before blaming the write.
				u.wfailed = err
				readable = true
			}
		}
		if readable {
			// An answer while the request is still going out: take
			// it (the connection is not reused: its request was cut
			// short). A read error fails the attempt.
			u.client.readUpHead()
		}
	case upWaitHead:
		if readable {
			u.client.readUpHead()
		}
	case upBody:
		if readable {
			c := u.client
			if len(c.fw.pending) <= highWater {
				c.pump()
			}
		}
	}
}

// readUpHead reads the backend's response head.
func (c *lconn) readUpHead() {
	u := c.up
	head := equalFold(c.req.method, "head")
	for {
		b := u.rd.buffered()
		if end, _ := findHeadEnd(b, 0); end > 0 {
			// Pin first: pinning may move the bytes (to make room for the
			// body), and the parsed fields point into them.
			u.rd.pinHead(end)
			if err := parseResponse(u.rd.buf[u.rd.pin-end:u.rd.pin], &u.resp, head); err != nil {
				c.upFailed(fmt.Errorf("%w: %w", wire.ErrBackend, err), true)
				return
			}
			if u.resp.status < 200 && u.resp.status != 101 {
				u.rd.pin = 0 // interim answers are not relayed, nor kept
				continue
			}
			if u.resp.status == 101 {
				// Upgrades go to the goroutine engine before they get here.
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
	u.state = upBody
	if c.replay {
		c.reqBody.consumeBuffered()
		c.bodySent = true
		c.replay = false
	}
	switch {
	case u.resp.chunked:
		u.body.reset(&u.rd, bodyChunked, 0)
	case u.resp.untilClose:
		u.body.reset(&u.rd, bodyUntilClose, 0)
	default:
		u.body.reset(&u.rd, bodyFixed, max(u.resp.contentLength, 0))
	}
	c.deadline, c.dkind = 0, dlNone
	c.forwarded(u.resp.status, nil)
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
		(!wrote || idempotent(c.req.method))
	if stale {
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
	if reuse && u.state == upBody && u.resp.keepAlive {
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
	if reusable && u.state == upBody && !u.fr.rdhup && len(u.rd.buffered()) == 0 && len(u.fw.pending) == 0 {
		u.rd.unpin()
		u.pool.put(u)
		return
	}
	u.close()
}

// close closes the connection and frees its buffers.
func (u *lupconn) close() {
	if u.state == upClosed {
		return
	}
	u.closeFD()
}

func (u *lupconn) closeFD() {
	u.state = upClosed
	u.l.forget(u.fd, false)
	rawClose(u.fd)
	u.fd = -1
	if u.rd.buf != nil {
		u.l.readBufs.put(u.rd.buf)
		u.rd.buf = nil
	}
	u.client = nil
}
