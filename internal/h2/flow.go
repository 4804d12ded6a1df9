package h2

// Flow control: credit given back to the peer, and streams waiting for
// window or output to write again.

// creditConn gives the peer back n bytes of connection window,
// batching WINDOW_UPDATE frames: one goes when a quarter of the
// window is owed, or when what is owed is more than the peer has left.
func (c *Conn) creditConn(n int32) {
	if n <= 0 {
		return
	}
	c.recvUnsent += n
	if c.recvUnsent >= c.set.connWindow/4 || c.recvUnsent >= c.recvAvail {
		c.writeWindowUpdate(0, uint32(c.recvUnsent))
		c.recvAvail += c.recvUnsent
		c.recvUnsent = 0
	}
}

// creditStream does for a stream what creditConn does for the
// connection; a stream whose body is complete needs no more window.
func (c *Conn) creditStream(s *Stream, n int32) {
	if n <= 0 || s.recvEnded || s.closed {
		return
	}
	s.recvUnsent += n
	if s.recvUnsent >= c.set.streamWindow/4 || s.recvUnsent >= s.recvAvail {
		c.writeWindowUpdate(s.id, uint32(s.recvUnsent))
		s.recvAvail += s.recvUnsent
		s.recvUnsent = 0
	}
}

// pruneWaiting drops closed streams from the waiting list, so that a
// peer that keeps windows shut while it opens and resets streams
// cannot grow it.
func (c *Conn) pruneWaiting() {
	live := c.waiting[:0]
	for _, s := range c.waiting {
		if !s.closed {
			live = append(live, s)
		}
	}
	clear(c.waiting[len(live):])
	c.waiting = live
	c.staleWaiting = 0
}

// SetOutputBlocked tells the machine whether the driver's backlog of
// output is high (true) or has drained (false). While blocked, Stream
// writes of DATA write nothing (WriteData returns 0) and the streams
// are told OnWritable when output opens again; frames that answer the
// peer still go, up to Limits.MaxQueuedControlFrames. Blocked for
// longer than Limits.WriteTimeout, the connection is closed.
func (c *Conn) SetOutputBlocked(blocked bool) {
	if blocked == c.outBlocked || c.err != nil {
		return
	}
	c.outBlocked = blocked
	if blocked {
		c.blockedSince = c.now
		c.queuedCtl = 0
		return
	}
	c.wakePending = true
	c.enter()
	c.exit()
}

// wakeWriters tells waiting streams that may write again.
func (c *Conn) wakeWriters() {
	c.wakePending = false
	if c.outBlocked || c.sendWindow <= 0 || len(c.waiting) == 0 {
		return
	}
	list := c.waiting
	c.waiting = c.waitScratch[:0]
	c.staleWaiting = 0
	for i, s := range list {
		list[i] = nil
		if s.closed || !s.waiting || c.err != nil {
			s.waiting = false
			continue
		}
		if s.sendWindow <= 0 || c.sendWindow <= 0 || c.outBlocked {
			c.waiting = append(c.waiting, s)
			continue
		}
		s.waiting = false
		s.stallSince = 0
		c.sh.OnWritable(s)
	}
	c.waitScratch = list[:0]
}
