package engine

import (
	"time"

	"github.com/helios-lb/helios/internal/wire"
)

// attemptClock times the stages of the attempt in progress for
// wire.Exchange.Timing, with the loop's clock (l.now: the time its
// current batch of events began), so timing costs no system call. The
// pipeline reads it in Flow.Forwarded; a stale pooled connection replaced
// transparently (upFailed) stays within the same attempt.
type attemptClock struct {
	t wire.Timing
	// queuedAt and dialAt: a wait for a connection at the cap, or a
	// connect, is under way since then (0: none).
	queuedAt, dialAt int64
}

// timeAttempt starts timing an attempt.
func (c *lconn) timeAttempt() {
	c.tm = attemptClock{t: wire.Timing{Start: c.l.now}}
}

// timeQueued: the attempt waits for a connection at the backend's cap.
func (c *lconn) timeQueued() { c.tm.queuedAt = c.l.now }

// timeDequeued: the wait for a connection is over.
func (c *lconn) timeDequeued() {
	if c.tm.queuedAt != 0 {
		c.tm.t.Queue += time.Duration(c.l.now - c.tm.queuedAt)
		c.tm.queuedAt = 0
	}
}

// timeDial: the attempt waits for a connection being opened (its own, or
// an HTTP/2 one another stream opened).
func (c *lconn) timeDial() {
	if c.tm.dialAt == 0 {
		c.tm.dialAt = c.l.now
	}
}

// timeConnected: the connection is open (and TLS done); the request goes.
func (c *lconn) timeConnected() {
	if c.tm.dialAt != 0 {
		c.tm.t.Connect += time.Duration(c.l.now - c.tm.dialAt)
		c.tm.dialAt = 0
	}
}

// timeHead: the response head came.
func (c *lconn) timeHead() {
	c.tm.t.FirstByte = time.Duration(c.l.now - c.tm.t.Start)
}

// timeEnd: the attempt is being reported; a wait or connect that it ended
// counts up to now.
func (c *lconn) timeEnd() {
	c.timeDequeued()
	c.timeConnected()
	c.tm.t.End = c.l.now
}

// Timing returns how the attempt being reported went (wire.Exchange).
func (c *lconn) Timing() wire.Timing { return c.tm.t }
