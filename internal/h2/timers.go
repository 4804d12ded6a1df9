package h2

// What runs on time: Tick's timeouts and limits, pings, and the two
// steps of a graceful shutdown.

import (
	"encoding/binary"
	"time"

	"golang.org/x/net/http2"
)

// Shutdown starts a graceful close (drain, reload). A server sends
// GOAWAY with the largest stream id and a PING, and once the PING
// comes back (or after Config.GoAwayGrace) a second GOAWAY naming the
// last stream it will process, as RFC 9113 §6.8 suggests: requests
// already on their way are not lost. Open streams finish; the
// connection is Done when the last one is over. A client sends GOAWAY
// and opens no more streams. The driver bounds the drain in time with
// Close.
func (c *Conn) Shutdown() {
	if c.err != nil || c.shutdownPhase > 0 {
		return
	}
	c.enter()
	if c.client {
		c.shutdownPhase = 2
		c.writeGoAway(0, http2.ErrCodeNo, "")
		c.checkDone()
	} else {
		c.shutdownPhase = 1
		c.shutdownAt = c.now
		c.writeGoAway(maxWindow, http2.ErrCodeNo, "")
		c.writePing(shutdownPing)
	}
	c.exit()
}

// finalGoAway sends the second GOAWAY of a server's graceful shutdown.
func (c *Conn) finalGoAway() {
	if c.shutdownPhase != 1 {
		return
	}
	c.shutdownPhase = 2
	c.goAwayLast = c.maxPeerStream
	c.writeGoAway(c.goAwayLast, http2.ErrCodeNo, "")
	c.checkDone()
}

// Tick gives the machine the time, for its timeouts: call it about
// once a second (the timeouts are as exact as the calls are
// frequent). It returns the connection's error once it is over.
func (c *Conn) Tick(now time.Time) error {
	if c.err != nil {
		return c.err
	}
	c.enter()
	c.now = now.UnixNano()
	if err := c.tick(); err != nil {
		c.fail(err)
	}
	c.exit()
	return c.err
}

func (c *Conn) tick() error {
	t, set := c.now, &c.set
	if t-c.win.start >= set.window {
		c.win = floodWindow{start: t}
	}
	if c.unackedSettings > 0 && set.settingsTimeout > 0 && t-c.settingsAt > set.settingsTimeout {
		c.stats.SettingsTimeouts.Add(1)
		return connErr(http2.ErrCodeSettingsTimeout, "SETTINGS not acknowledged")
	}
	if c.hb.active && set.headerTimeout > 0 && t-c.hb.since > set.headerTimeout {
		// A header block left unfinished holds the connection (nothing
		// else may come until it ends) and what it kept so far.
		c.stats.HeaderTimeoutCloses.Add(1)
		return connErr(http2.ErrCodeEnhanceYourCalm, "header block not finished in time")
	}
	if c.outBlocked && set.writeTimeout > 0 && t-c.blockedSince > set.writeTimeout {
		c.stats.SlowReaderCloses.Add(1)
		return connErr(http2.ErrCodeEnhanceYourCalm, "peer reads too slowly")
	}
	if err := c.checkStalls(); err != nil {
		return err
	}
	if c.shutdownPhase == 1 && t-c.shutdownAt >= set.goAwayGrace {
		c.finalGoAway()
	}
	if c.pingOut && t-c.pingAt > set.pingTimeout {
		c.stats.PingTimeouts.Add(1)
		c.end(ErrPingTimeout)
		return nil
	}
	if !c.pingOut && set.pingInterval > 0 && t-c.lastRead > set.pingInterval {
		c.sendPing()
	}
	if c.err == nil && len(c.streams) == 0 && set.idleTimeout > 0 && t-c.idleSince > set.idleTimeout {
		c.stats.IdleCloses.Add(1)
		c.writeGoAway(c.lastStreamID(), http2.ErrCodeNo, "idle")
		c.end(ErrClosed)
	}
	return nil
}

// checkStalls resets streams, or fails the connection, whose send
// window has stayed shut longer than Limits.StallTimeout.
func (c *Conn) checkStalls() error {
	limit := c.set.stallTimeout
	if limit <= 0 || len(c.waiting) == 0 {
		c.connStallSince = 0
		return nil
	}
	t := c.now
	if c.sendWindow <= 0 {
		if c.connStallSince == 0 {
			c.connStallSince = t
		} else if t-c.connStallSince > limit {
			c.stats.StalledConnCloses.Add(1)
			return connErr(http2.ErrCodeEnhanceYourCalm, "connection window shut too long")
		}
	} else {
		c.connStallSince = 0
	}
	for i := 0; i < len(c.waiting); i++ {
		s := c.waiting[i]
		if s.closed || s.sendWindow > 0 {
			s.stallSince = 0
			continue
		}
		if s.stallSince == 0 {
			s.stallSince = t
			continue
		}
		if t-s.stallSince > limit {
			c.stats.StalledStreamResets.Add(1)
			c.writeRST(s.id, http2.ErrCodeCancel)
			c.closeStream(s)
			c.sh.OnReset(s, ErrStalled)
			if c.err != nil {
				return nil
			}
		}
	}
	return nil
}

// Ping sends a PING unless one is already waiting for its answer; an
// answer that does not come within Config.PingTimeout ends the
// connection with ErrPingTimeout. Clients use it to check that a
// backend connection is alive before trusting it with a request.
func (c *Conn) Ping() {
	if c.err != nil || c.pingOut {
		return
	}
	c.enter()
	c.sendPing()
	c.exit()
}

func (c *Conn) sendPing() {
	c.pingSeq++
	binary.BigEndian.PutUint64(c.pingData[:], c.pingSeq)
	c.pingOut, c.pingAt = true, c.now
	c.writePing(c.pingData)
}
