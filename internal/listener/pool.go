// Package listener owns listening sockets: a pool of SO_REUSEPORT sockets
// per address, the listen backlog, and the cap on open connections. The
// engine (internal/engine) accepts on the sockets itself.
package listener

import (
	"fmt"
	"net"
	"sync/atomic"
	"syscall"
)

// Config describes one listener. Zero values: Sockets 1, Backlog 4096,
// MaxConnections unlimited.
type Config struct {
	Name           string
	Address        string
	Sockets        int
	Backlog        int
	MaxConnections int
}

// Pool is a set of sockets bound to one address with SO_REUSEPORT, so the
// kernel spreads new connections across them and the engine's loops each
// accept on their own. It is safe for concurrent use.
type Pool struct {
	name string
	addr net.Addr
	lns  []net.Listener

	maxConns atomic.Int64
	open     atomic.Int64
	// fds is the process's descriptor budget the pool's clients draw
	// on; nil: none.
	fds      *Descriptors
	refused  atomic.Uint64
	accepted atomic.Uint64

	closed atomic.Bool
}

// Listen binds cfg.Sockets sockets to cfg.Address. Nothing is accepted
// until an engine attaches to the sockets (FDs).
func Listen(cfg Config) (*Pool, error) {
	if cfg.Sockets <= 0 {
		cfg.Sockets = 1
	}
	if cfg.Backlog <= 0 {
		cfg.Backlog = 4096
	}
	ta, err := net.ResolveTCPAddr("tcp", cfg.Address)
	if err != nil {
		return nil, fmt.Errorf("listener %s: resolving %s: %w", cfg.Name, cfg.Address, err)
	}
	p := &Pool{name: cfg.Name}
	p.SetMaxConnections(cfg.MaxConnections)
	for i := 0; i < cfg.Sockets; i++ {
		ln, err := sysListen(ta, cfg.Backlog)
		if err != nil {
			p.closeSockets()
			return nil, fmt.Errorf("listener %s: binding %s: %w", cfg.Name, cfg.Address, err)
		}
		if i == 0 {
			// With port 0 the kernel picked a port: the other sockets of
			// the pool join that one.
			p.addr = ln.Addr()
			ta = ln.Addr().(*net.TCPAddr)
		}
		p.lns = append(p.lns, ln)
	}
	return p, nil
}

// Name returns the listener's configured name.
func (p *Pool) Name() string { return p.name }

// Addr returns the bound address (with the actual port when 0 was asked).
func (p *Pool) Addr() net.Addr { return p.addr }

// Sockets returns the number of sockets in the pool.
func (p *Pool) Sockets() int { return len(p.lns) }

// SetMaxConnections changes the cap on open connections; n <= 0 removes
// it. Connections already open are never closed by a lower cap.
func (p *Pool) SetMaxConnections(n int) {
	if n <= 0 {
		p.maxConns.Store(1<<62 - 1)
		return
	}
	p.maxConns.Store(int64(n))
}

// SetBacklog changes the listen backlog of every socket in place: listen(2)
// on a listening socket updates its backlog, so no socket is closed and no
// queued connection is lost.
func (p *Pool) SetBacklog(n int) error {
	for _, ln := range p.lns {
		sc, ok := ln.(syscall.Conn)
		if !ok {
			return fmt.Errorf("listener %s: socket does not expose its descriptor", p.name)
		}
		rc, err := sc.SyscallConn()
		if err != nil {
			return err
		}
		var lerr error
		if err := rc.Control(func(fd uintptr) { lerr = syscall.Listen(int(fd), n) }); err != nil {
			return err
		}
		if lerr != nil {
			return fmt.Errorf("listener %s: setting backlog %d: %w", p.name, n, lerr)
		}
	}
	return nil
}

// FDs returns the descriptors of the pool's listening sockets, for an
// engine that accepts on them itself (the event loops). The pool still
// owns and closes them; such an engine admits each connection with Admit
// and ends it with Release.
func (p *Pool) FDs() ([]int, error) {
	var fds []int
	for _, ln := range p.lns {
		sc, ok := ln.(syscall.Conn)
		if !ok {
			return nil, fmt.Errorf("listener %s: socket does not expose its descriptor", p.name)
		}
		rc, err := sc.SyscallConn()
		if err != nil {
			return nil, err
		}
		if err := rc.Control(func(fd uintptr) { fds = append(fds, int(fd)) }); err != nil {
			return nil, err
		}
	}
	return fds, nil
}

// SetDescriptors makes the pool's clients draw on d, the process's
// descriptor budget (nil: none). Set it before the pool serves.
func (p *Pool) SetDescriptors(d *Descriptors) { p.fds = d }

// Admit counts a connection accepted by an engine on the pool's sockets
// and reports whether it may be served; false means the pool is at
// max_connections, or the process's descriptor budget has no room, and
// the connection must be closed at once.
func (p *Pool) Admit() bool {
	if p.open.Add(1) > p.maxConns.Load() {
		p.open.Add(-1)
		p.refused.Add(1)
		return false
	}
	if p.fds != nil && !p.fds.AdmitClient() {
		p.open.Add(-1)
		p.refused.Add(1)
		return false
	}
	p.accepted.Add(1)
	return true
}

// Release ends a connection admitted with Admit.
func (p *Pool) Release() {
	p.open.Add(-1)
	if p.fds != nil {
		p.fds.ReleaseClient()
	}
}

// OpenConnections returns the number of connections being served.
func (p *Pool) OpenConnections() int64 { return p.open.Load() }

// Refused returns how many connections were closed at once because the
// pool was at its cap.
func (p *Pool) Refused() uint64 { return p.refused.Load() }

// Accepted returns how many connections were accepted and served.
func (p *Pool) Accepted() uint64 { return p.accepted.Load() }

// Close closes the sockets (stop the engine accepting on them first);
// connections being served go on.
func (p *Pool) Close() {
	if p.closed.Swap(true) {
		return
	}
	p.closeSockets()
}

func (p *Pool) closeSockets() {
	for _, ln := range p.lns {
		ln.Close()
	}
}
