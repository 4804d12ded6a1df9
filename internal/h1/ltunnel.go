package h1

import (
	"time"

	"github.com/helios-lb/helios/internal/httpmsg"

	"golang.org/x/sys/unix"
)

// Upgraded connections (WebSocket) on the loop: once the backend has
// answered 101, bytes go both ways, each way with the same backpressure as
// an answer (a side whose pending output passes the limit stops the
// other's reading), until both sides have closed. A side that closes has
// its close passed on (shutdown of the other's write side); the other may
// go on for up to tunnelLinger. A tunnel that carries nothing either way
// for the backend's read timeout (nginx's proxy_read_timeout; 60 s by
// default, or tunnelIdle when it has none) is closed.

// tunnelLinger is how long one way of a tunnel may go on after the other
// has closed; tunnelIdle bounds a quiet tunnel whose transport sets no
// read timeout.
const (
	tunnelLinger = 30 * time.Second
	tunnelIdle   = 10 * time.Minute
)

// startTunnel relays the backend's 101 and starts the tunnel.
func (c *lconn) startTunnel() {
	u := c.up
	r := &u.resp
	c.state = lsTunnel
	u.state = upTunnel
	u.sending = false
	c.streaming = false
	c.releaseUpWriter()
	c.respStarted = true
	c.respStatus = 101
	c.ensureWriter()
	w := &c.wr
	w.WriteString("HTTP/1.1 101 Switching Protocols\r\n")
	httpmsg.ResponseFields(w, &r.Response, true)
	w.WriteString("Connection: Upgrade\r\n\r\n")
	u.rd.unpin()
	if b := u.rd.buffered(); len(b) > 0 {
		// What the backend sent right behind its head.
		w.Write(b)
		c.respBytes += int64(len(b))
		u.rd.discard(len(b))
	}
	c.ensureNoDelay()
	c.flushOut()
	c.rd.unpin()
	if b := c.rd.buffered(); len(b) > 0 {
		// What the client sent right behind its request.
		u.sink().Write(b)
		c.rd.discard(len(b))
	}
	c.tunnelAlive()
	c.tunnelIn()
	if c.state == lsTunnel {
		c.tunnelFromBackend()
	}
}

// tunnelAlive restarts the tunnel's idle wait.
func (c *lconn) tunnelAlive() {
	d := tunnelIdle
	if c.tr != nil && c.tr.Settings.ReadTimeout > 0 {
		d = c.tr.Settings.ReadTimeout
	}
	if c.inClosed || c.outClosed {
		d = min(d, tunnelLinger)
	}
	c.setDeadline(dlTunnel, d)
}

// tunnelIn moves bytes from the client to the backend until one of them
// has to wait.
func (c *lconn) tunnelIn() {
	u := c.up
	if c.inClosed || u == nil {
		return
	}
	if c.rd.buf == nil {
		c.rd.reset(c.src(), c.l.headBufs.get())
	}
	for len(u.fw.pending) <= c.opts.outputLimit() {
		c.rd.r, c.rd.w, c.rd.pin = 0, 0, 0
		err := c.rd.fill()
		if b := c.rd.buffered(); len(b) > 0 {
			if _, werr := u.sink().Write(b); werr != nil {
				c.endTunnel()
				return
			}
			c.rd.discard(len(b))
			c.tunnelAlive()
		}
		switch {
		case err == nil:
		case err == errWouldBlock:
			return
		default:
			// The client is done sending: pass its close on once
			// what it sent has gone out.
			c.inClosed = true
			c.tunnelHalfClose()
			return
		}
	}
}

// tunnelFromBackend moves bytes from the backend to the client until one
// of them has to wait.
func (c *lconn) tunnelFromBackend() {
	u := c.up
	if c.outClosed || u == nil {
		return
	}
	for len(c.fw.pending) <= c.opts.outputLimit() {
		u.rd.r, u.rd.w, u.rd.pin = 0, 0, 0
		err := u.rd.fill()
		if b := u.rd.buffered(); len(b) > 0 {
			if _, werr := c.sink().Write(b); werr != nil {
				c.endTunnel()
				return
			}
			c.respBytes += int64(len(b))
			u.rd.discard(len(b))
			c.tunnelAlive()
		}
		switch {
		case err == nil:
		case err == errWouldBlock:
			return
		default:
			c.outClosed = true
			c.tunnelHalfClose()
			return
		}
	}
}

// tunnelOut goes on once the client has taken pending output.
func (c *lconn) tunnelOut() {
	c.tunnelFromBackend()
	if c.state == lsTunnel {
		c.tunnelHalfClose()
	}
}

// tunnelUpWritable goes on once the backend has taken pending input.
func (c *lconn) tunnelUpWritable() {
	c.tunnelIn()
	if c.state == lsTunnel {
		c.tunnelHalfClose()
	}
}

// tunnelHalfClose passes each side's close on to the other once what it
// sent has gone out, and ends the tunnel when both are done.
func (c *lconn) tunnelHalfClose() {
	u := c.up
	if c.inClosed && !c.inShut && !u.busy() {
		c.inShut = true
		unix.Shutdown(u.fd, unix.SHUT_WR)
	}
	if c.outClosed && !c.outShut && !c.fw.busy() {
		c.outShut = true
		unix.Shutdown(c.fd, unix.SHUT_WR)
	}
	if c.inShut && c.outShut {
		c.endTunnel()
		return
	}
	c.tunnelAlive()
}

// endTunnel closes both sides and records the exchange.
func (c *lconn) endTunnel() {
	if c.state != lsTunnel {
		return
	}
	c.broken = true // the connection carries no more HTTP
	c.sendDone(nil)
}
