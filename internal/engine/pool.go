package engine

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/helios-lb/helios/internal/wire"
	"golang.org/x/sys/unix"
)

// lpool is one loop's idle keep-alive connections to one backend of one
// transport. Pools are per loop, so taking and returning a connection
// needs no lock; they are found by poolKey, so that a reload keeping an
// upstream's name, a backend's address and the settings keeps them, and
// two upstreams naming one backend never share one.
type lpool struct {
	l     *loop
	key   poolKey
	addr  string
	idle  []*lupconn
	opts  wire.TransportSettings
	local *localServer // an in-process backend (nil: a network one)
	// lastUsed is when an attempt last took the pool.
	lastUsed int64
	// retired: the backend left its upstream (Engine.RetireBackend);
	// connections close as their exchanges end, and the sweep drops the
	// pool once nothing uses it. An attempt that takes the pool again
	// (the backend came back) clears it.
	retired bool
	// The connection cap (wire.TransportSettings.MaxConnsPerBackend),
	// shared out among the loops (shareOf; each gets one at least, so a
	// cap below the number of loops is exceeded, as nginx's max_conns is
	// across workers): open counts this loop's connections (busy and idle),
	// capped at maxOpen (0: no cap); queue holds the requests waiting for
	// one, in order, up to maxQueue.
	open, maxOpen, maxQueue int
	queue                   []*lconn
	// fdWaiting counts the requests in queue that wait for the
	// descriptor budget rather than the cap (descriptors.go).
	fdWaiting int
	// h2 are the loop's HTTP/2 connections to the backend (transport
	// protocol h2c, h2upstream.go); open counts them. h2max is the backend's
	// SETTINGS_MAX_CONCURRENT_STREAMS as last seen (0: not yet).
	h2    []*h2up
	h2max int

	// The backend's socket address. An IP address is taken as it is; a
	// host name is looked up on another goroutine (a loop must not
	// block on DNS), again every resolveEvery, and connections wait
	// for the first answer (waiters).
	host       string
	port       int
	literal    bool
	sa         unix.Sockaddr
	family     int
	err        error // the last lookup failed and there is no address
	resolvedAt int64 // when the last lookup ended (unix nanoseconds)
	resolving  bool
	waiters    []*lconn
}

// poolKey finds a loop's pool.
type poolKey struct {
	name     string
	addr     string
	settings wire.TransportSettings
	local    *localServer
}

// pool returns the loop's pool for backend addr of transport t (and the
// in-process backend local, if any).
func (l *loop) pool(t *wire.Transport, addr string, local *localServer) *lpool {
	k := poolKey{name: t.Name, addr: addr, settings: t.Settings, local: local}
	p := l.pools[k]
	if p == nil {
		p = &lpool{l: l, key: k, addr: addr, opts: t.Settings, local: local}
		if n := t.Settings.MaxConnsPerBackend; n > 0 {
			loops := len(l.eng.loops)
			p.maxOpen = shareOf(n, loops, l.id)
			// The queue is no promise to the backend: round up.
			p.maxQueue = (t.Settings.MaxQueuePerBackend + loops - 1) / loops
			if p.maxOpen == 0 {
				// A cap below the number of loops: every loop still
				// needs one connection, so the backend may see loops.
				p.maxOpen = 1
			}
		}
		if local == nil {
			p.parse()
		} else {
			p.literal = true
		}
		l.pools[k] = p
	}
	p.lastUsed = l.now
	p.retired = false
	return p
}

// shareOf is loop id's share of n shared out among loops: the shares
// differ by one at most and add up to n exactly.
func shareOf(n, loops, id int) int {
	s := n / loops
	if id < n%loops {
		s++
	}
	return s
}

// parse splits the address; an IP address (or none: the local system)
// is the socket address for good.
func (p *lpool) parse() {
	host, port, err := net.SplitHostPort(p.addr)
	if err == nil {
		// Numeric, as validation requires: a service name would be
		// looked up in a file, on the loop.
		p.port, err = strconv.Atoi(port)
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
		p.sa, p.family = &unix.SockaddrInet4{Port: p.port, Addr: a.As4()}, unix.AF_INET
	} else {
		p.sa, p.family = &unix.SockaddrInet6{Port: p.port, Addr: a.As16()}, unix.AF_INET6
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
	c.setDeadline(dlConnect, c.tr.Settings.DialTimeout)
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
	if len(p.idle) >= p.opts.MaxIdlePerBackend || p.l.eng.stopped.Load() || p.retired || p.l.eng.squeezed() {
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

// RetireBackend drains the connections every loop keeps to backend addr
// of the transport named name, for a backend that left its upstream (a
// reload, DNS or file discovery took it out) or that an operator drains:
// idle connections, HTTP/2 ones without a stream included, close now;
// busy ones close when their exchange ends instead of going back to the
// pool. An attempt that uses the backend again keeps its connections
// again. It returns at once; the loops do the work.
func (e *Engine) RetireBackend(name, addr string) {
	for _, l := range e.loops {
		l.post(func() {
			for k, p := range l.pools {
				if k.name == name && k.addr == addr {
					p.retire()
				}
			}
		})
	}
}

// retire closes the pool's idle connections and marks it retired.
func (p *lpool) retire() {
	p.retired = true
	p.closeIdle()
	for i := 0; i < len(p.h2); i++ {
		if hu := p.h2[i]; !hu.connecting && !hu.closed && hu.conn.ActiveStreams() == 0 {
			hu.close(nil) // takes hu out of p.h2
			i--
		}
	}
}

// unused reports whether nothing refers to the pool any more: no
// connection, nobody queued or waiting for its address.
func (p *lpool) unused() bool {
	return p.open == 0 && len(p.idle) == 0 && len(p.h2) == 0 && len(p.queue) == 0 && len(p.waiters) == 0 && !p.resolving
}

// dequeue takes the first request waiting for a connection, if any.
func (p *lpool) dequeue() *lconn {
	for len(p.queue) > 0 {
		c := p.queue[0]
		p.queue[0] = nil
		p.queue = p.queue[1:]
		if c.queued == p {
			c.queued = nil
			c.deadline, c.dkind = 0, dlNone
			p.unwaitFD(c)
			c.timeDequeued()
			return c
		}
	}
	return nil
}

// unqueue takes c out of the queue it waits in (it left, or timed out).
func (p *lpool) unqueue(c *lconn) {
	for i, x := range p.queue {
		if x == c {
			p.queue = append(p.queue[:i], p.queue[i+1:]...)
			break
		}
	}
	c.queued = nil
	p.unwaitFD(c)
}

// freed runs when a connection of the pool closes: a request waiting for
// one may open one now.
func (p *lpool) freed() {
	p.open--
	if c := p.dequeue(); c != nil {
		c.connect(p)
	}
}

// waitForRoom handles an attempt to a pool at its connection cap (for an
// HTTP/2 backend, with every connection's streams in use): the request
// waits in order for room, within its queue timeout, or fails at once
// when the queue is full. It returns false when the pool is under its cap.
// inUse says more of the open connections in the error (", their streams
// in use,").
func (c *lconn) waitForRoom(p *lpool, inUse string) bool {
	if p.maxOpen <= 0 || p.open < p.maxOpen {
		return false
	}
	if len(p.queue) >= p.maxQueue {
		c.forwarded(0, fmt.Errorf("%w: %s: %d connections open%s and %d requests waiting", wire.ErrBackendBusy, p.addr, p.open, inUse, len(p.queue)))
		return true
	}
	p.queue = append(p.queue, c)
	c.queued = p
	c.timeQueued()
	c.setDeadline(dlQueue, c.tr.Settings.QueueTimeout)
	return true
}
