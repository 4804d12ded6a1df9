package engine

import (
	"errors"
	"fmt"

	"github.com/helios-lb/helios/internal/wire"
)

// The descriptor budget (EngineOptions.Descriptors). A backend connection
// takes a descriptor from the process's budget before it is opened, and
// gives it back when it closes. When the budget has no room, the request
// waits in its pool's queue, as at a backend's connection cap, but for as
// long as its queue timeout whatever the queue's length (each waiting
// request is a client connection the budget counts already): a loop that
// gives a descriptor back, or finds one free at its sweep, starts the
// first waiter. So a process at its descriptor limit makes requests wait
// for a backend connection rather than fail with EMFILE, and refuses
// clients only at the real limit (listener.Descriptors).

// errNoDescriptor is why a backend connection was not opened: the budget
// had no room.
var errNoDescriptor = errors.New("no descriptor left for a backend connection")

// takeFD counts a backend connection about to be opened; false when the
// budget has no room.
func (e *Engine) takeFD() bool { return e.fds == nil || e.fds.TakeBackend() }

// releaseFD gives back what takeFD took, and lets the loop start a
// request that waited for a descriptor.
func (l *loop) releaseFD() {
	if l.eng.fds == nil {
		return
	}
	l.eng.fds.ReleaseBackend()
	l.wakeFDWaiter()
}

// waitFD queues c's request at p until a descriptor is free (its queue
// timeout bounds the wait).
func (c *lconn) waitFD(p *lpool) {
	p.queue = append(p.queue, c)
	p.fdWaiting++
	c.queued = p
	c.fdWait = true
	c.setDeadline(dlQueue, c.tr.Settings.QueueTimeout)
	c.l.fdWaiters++
}

// unwaitFD counts c out of the waiters for a descriptor, if it was one.
func (p *lpool) unwaitFD(c *lconn) {
	if c.fdWait {
		c.fdWait = false
		p.fdWaiting--
		c.l.fdWaiters--
	}
}

// wakeFDWaiter starts the first request that waits for a descriptor in
// one of the loop's pools, when there is one and the budget has room.
func (l *loop) wakeFDWaiter() {
	if l.fdWaiters == 0 {
		return
	}
	for _, p := range l.pools {
		if p.fdWaiting == 0 {
			continue
		}
		c := p.dequeue()
		if c == nil {
			continue
		}
		c.connect(p)
		return
	}
}

// noFDErr is the error of a request whose wait for a descriptor ran out.
func noFDErr(p *lpool, c *lconn) error {
	return fmt.Errorf("%w: %s: %w within %v", wire.ErrBackendBusy, p.addr, errNoDescriptor, c.tr.Settings.QueueTimeout)
}

// squeezed reports whether idle backend connections should close rather
// than wait in their pools (clients want their descriptors back).
func (e *Engine) squeezed() bool { return e.fds != nil && e.fds.Squeezed() }
