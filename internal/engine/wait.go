package engine

// The engine's part of two retry policies of the pipeline, on the loop's
// deadlines (checked every sweepEvery, so both are exact to within it):
//
//   - a backoff before a retry (wire.ActWait): the exchange waits in
//     lsForward with no backend connection, so a client that goes away
//     meanwhile is reported as during an attempt (gone -> Forwarded);
//   - a bound on each attempt (wire.TransportSettings.TryTimeout): the
//     deadlines of an attempt's stages (connect, queue, response head) are
//     clamped to the attempt's end, and a stage cut short fails as its own
//     timeout would.

// wait starts a retry's backoff.
func (c *lconn) wait() {
	c.state = lsForward
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
