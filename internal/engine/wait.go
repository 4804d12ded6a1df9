package engine

import "github.com/helios-lb/helios/internal/httpmsg"

// The engine's part of two retry policies of the pipeline, on the loop's
// deadlines (checked every sweepEvery, so both are exact to within it),
// and of the pipeline's work off the loop:
//
//   - a wait (wire.ActWait): a backoff before a retry, or the wait for
//     work the flow runs on another goroutine (an authentication), which
//     ends it early through the Waker's function, posted to the loop;
//     the exchange waits in lsForward with no backend connection, so a
//     client that goes away meanwhile is reported as during an attempt
//     (gone -> Forwarded);
//   - a bound on each attempt (wire.TransportSettings.TryTimeout): the
//     deadlines of an attempt's stages (connect, queue, response head) are
//     clamped to the attempt's end, and a stage cut short fails as its own
//     timeout would.

// wait starts a wait (ActWait): a retry's backoff, or a check the flow
// runs off the loop, which ends it early through Waker.
func (c *lconn) wait() {
	c.state = lsForward
	c.edgeState().waits++
	c.tryDeadline = 0
	d := c.flow.Delay()
	if d <= 0 {
		c.act(c.flow.Resume())
		return
	}
	c.setDeadline(dlBackoff, d)
}

// startTry starts the bound of an attempt to c.tr's backends.
func (c *lconn) startTry() {
	c.tryDeadline = 0
	if d := c.tr.Settings.TryTimeout; d > 0 {
		c.tryDeadline = c.l.now + int64(d)
	}
}

// boundTry clamps the deadline just set for one of an attempt's stages to
// the attempt's end.
func (c *lconn) boundTry() {
	if c.tryDeadline == 0 {
		return
	}
	switch c.dkind {
	case dlConnect, dlQueue, dlUpHead:
		if c.deadline == 0 || c.deadline > c.tryDeadline {
			c.deadline = c.tryDeadline
		}
	}
}

// Waker returns the function that ends the wait the flow is about to ask
// for (wire.Exchange): posted to the loop, it moves the wait's deadline
// to now, so the wait ends as a backoff does. A wake-up for a wait that
// is over (its exchange, or the wait, is not the one it was made for)
// does nothing.
func (c *lconn) Waker() func() {
	e := c.edgeState()
	l, gen, wait := c.l, c.gen, e.waits+1
	return func() {
		l.post(func() {
			if c.gen == gen && c.edge == e && e.waits == wait && c.dkind == dlBackoff && c.state == lsForward {
				c.deadline = l.now
				l.deliver(c, evTimeout)
			}
		})
	}
}

// answerHeader hands the head of an answer about to be written to the
// flow (wire.Flow.AnswerHeader: the route's response header rules), and
// returns the head to write; outside an exchange (a request refused before
// it began) it is h.
func (c *lconn) answerHeader(h *httpmsg.Header, shared bool) *httpmsg.Header {
	if c.flowDone {
		return h
	}
	return c.flow.AnswerHeader(h, shared)
}
