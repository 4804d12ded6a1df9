package h1

import (
	"net"
	"sync"
	"syscall"
	"time"
)

// upConn is one connection to a backend.
type upConn struct {
	nc        net.Conn
	rd        reader
	rbuf      *[]byte
	pool      *hostPool
	idleSince int64 // unix nanoseconds, while idle in the pool
	used      bool  // has carried a request before (may have gone stale)
	rdl       int64 // armed read deadline, unix nanoseconds
}

func (u *upConn) close() {
	u.nc.Close()
	if u.rbuf != nil && len(u.rd.buf) == readBufSize {
		u.pool.bufs.Put(u.rbuf)
	}
	u.rbuf = nil
	u.rd.reset(nil, nil)
}

// armRead keeps the read deadline d ahead of now, re-arming only when it
// has drifted too far (keepDeadline).
func (u *upConn) armRead(now int64, d time.Duration) {
	if d <= 0 {
		if u.rdl != 0 {
			u.rdl = 0
			u.nc.SetReadDeadline(time.Time{})
		}
		return
	}
	want := now + int64(d)
	if keepDeadline(u.rdl, want, d) {
		return
	}
	u.rdl = want
	u.nc.SetReadDeadline(time.Unix(0, want))
}

// hostPool keeps the idle keep-alive connections to one backend address.
// It is shared by the transports of successive configuration generations
// while their options agree, so a reload keeps warm connections.
type hostPool struct {
	addr    string
	maxIdle int
	idleTTL time.Duration
	bufs    *sync.Pool

	mu     sync.Mutex
	idle   []*upConn // a stack: the most recently used on top
	refs   int
	closed bool
}

// get returns an idle connection, most recently used first, or nil.
// Connections idle past the TTL are closed; ones idle for more than a
// second, or all when check is set, are checked for a close by the
// backend before reuse.
func (p *hostPool) get(now int64, check bool) *upConn {
	for {
		p.mu.Lock()
		n := len(p.idle)
		if n == 0 {
			p.mu.Unlock()
			return nil
		}
		u := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		idle := now - u.idleSince
		if p.idleTTL > 0 && idle > int64(p.idleTTL) {
			u.close()
			continue
		}
		if (check || idle > int64(time.Second)) && !peerOpen(u.nc) {
			u.close()
			continue
		}
		return u
	}
}

// put returns a connection to the pool, or closes it when the pool is
// full or closed.
func (p *hostPool) put(u *upConn, now int64) {
	u.idleSince = now
	u.used = true
	p.mu.Lock()
	if p.closed || len(p.idle) >= p.maxIdle {
		p.mu.Unlock()
		u.close()
		return
	}
	p.idle = append(p.idle, u)
	p.mu.Unlock()
}

// reap closes connections idle for longer than the TTL. The oldest sit at
// the bottom of the stack.
func (p *hostPool) reap(now int64) {
	if p.idleTTL <= 0 {
		return
	}
	var stale []*upConn
	p.mu.Lock()
	i := 0
	for i < len(p.idle) && now-p.idle[i].idleSince > int64(p.idleTTL) {
		i++
	}
	if i > 0 {
		stale = append(stale, p.idle[:i]...)
		n := copy(p.idle, p.idle[i:])
		for j := n; j < len(p.idle); j++ {
			p.idle[j] = nil
		}
		p.idle = p.idle[:n]
	}
	p.mu.Unlock()
	for _, u := range stale {
		u.close()
	}
}

// closeIdle closes every idle connection (after a backend was seen to
// restart, or when the pool is released).
func (p *hostPool) closeIdle() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, u := range idle {
		u.close()
	}
}

// idleCount returns the number of idle connections.
func (p *hostPool) idleCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

// peerOpen reports whether the backend has not closed an idle
// connection: a non-blocking peek sees neither EOF nor stray bytes.
func peerOpen(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	open := true
	err = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case err == syscall.EAGAIN:
		case err != nil, n == 0, n > 0:
			// EOF, an error, or bytes nobody asked for: not reusable.
			open = false
		}
		return true
	})
	return open && err == nil
}
