package engine

import (
	"io"
	"net/netip"

	"github.com/helios-lb/helios/internal/httpmsg"
	"github.com/helios-lb/helios/internal/wire"
	"golang.org/x/net/http2"
)

func (h2client) event(c *lconn, ev uint32) { c.streamEvent(ev) }

func (h2client) close(c *lconn) { c.closeStream() }

func (h2client) proto(c *lconn) []byte { return proto20 }

func (h2client) respond(c *lconn, status int, header *httpmsg.Header, body []byte) error {
	return c.h2respond(status, header, body)
}

func (h2client) serveFile(c *lconn, a *wire.FileAnswer) { c.h2serveFile(a) }

func (h2client) pumpFile(c *lconn) { c.h2pumpFile() }

func (h2client) startSend(c *lconn) { c.h2startSend() }

func (h2client) pump(c *lconn) { c.h2pump() }

func (h2client) endOutput(c *lconn) { c.streamDone() }

func (h2client) src(c *lconn) io.Reader { return h2src{c} }

func (h2client) maybeMore(c *lconn) bool { return c.h2s.inR < len(c.h2s.in) }

func (h2client) reqTrailer(c *lconn) *trailerSection { return &c.h2s.trailer }

func (h2client) destAddr(c *lconn) netip.AddrPort { return c.h2s.parent.destAddr() }

func (h2client) readHead(c *lconn) bool { return c.streamHead() }

func (h2client) abandon(c *lconn) {
	// Forget the stream; its connection goes on.
	c.l.streams.remove(c)
	if s := c.h2s.s; s != nil {
		s.SetUser(nil)
		s.Reset(http2.ErrCodeInternal)
	}
	c.state = lsClosed
}

func (h2client) flush(c *lconn) bool { return true } // frames leave with the loop's batch

func (h2client) waitWritable(c *lconn) {
	// The client's windows bound this wait (the connection's stall
	// timeout), as in h2pump.
	if len(c.h2s.carry) == 0 && c.h2s.s != nil {
		c.h2s.s.WaitWritable()
	}
	c.deadline, c.dkind = 0, dlNone
}

func (h2client) room(c *lconn) (int, bool, error) {
	st := c.h2s
	if !c.h2flushCarry() || st.s == nil {
		if st.s == nil {
			return 0, false, errStreamGone
		}
		return 0, false, nil
	}
	return st.s.SendWindow(), true, nil
}

func (h2client) writePiece(c *lconn, p []byte) bool {
	c.respBytes += int64(len(p))
	if len(p) > 0 {
		c.h2data(p, false)
	}
	return true
}

func (h2client) endBody(c *lconn, tr *trailerSection) { c.h2endBody(tr) }

func (h2client) hold(c *lconn) {
	if c.h2s.s != nil {
		c.l.hold(c.h2s.parent.h2)
	}
}

func (h2client) wrote(c *lconn) bool {
	// A stream reset meanwhile is ended by its reset (OnReset).
	return c.h2s.s != nil && len(c.h2s.carry) == 0
}
