package engine

import (
	"encoding/binary"
	"math/rand/v2"
	"time"

	"golang.org/x/sys/unix"

	"github.com/helios-lb/helios/internal/http1"
	"github.com/helios-lb/helios/internal/httpmsg"
	"github.com/helios-lb/helios/internal/netpoll"
)

// Upgraded connections (WebSocket) on the loop: once the backend has
// answered 101, bytes go both ways, each way with the same backpressure as
// an answer (a side whose pending output passes the limit stops the
// other's reading), until both sides have closed. A side that closes has
// its close passed on (shutdown of the other's write side); the other may
// go on for up to tunnelLinger. A tunnel that carries nothing either way
// for the backend's read timeout (nginx's proxy_read_timeout; 60 s by
// default, or tunnelIdle when it has none) is closed.
//
// A drain waits for tunnels like any exchange, up to its deadline. A
// tunnel still open then (abort) is ended; a WebSocket's two sides are
// told first, each with a close frame, 1001 going away (RFC 6455 §7.4.1):
// the client as a server tells it, the backend as a client does (masked).
// The loop follows the frames passing each way (wsFrames) so that its own
// goes between two of them, never into one; a side that is in the middle
// of a frame, or that sent its own close frame, sees the connection close
// without one.

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
	u.ws = nil
	if isWebSocket(&r.Header) {
		u.ws = &wsTunnel{}
	}
	u.sending = false
	c.streaming = false
	c.releaseUpWriter()
	c.respStarted = true
	c.respStatus = 101
	c.ensureWriter()
	w := &c.wr
	http1.WriteSwitching(w, &r.Response)
	u.rd.unpin()
	if b := u.rd.buffered(); len(b) > 0 {
		// What the backend sent right behind its head.
		w.Write(b)
		u.ws.toClient(b)
		c.respBytes += int64(len(b))
		u.rd.discard(len(b))
	}
	c.ensureNoDelay()
	c.flushOut()
	c.rd.unpin()
	c.reclaimBodyBuf()
	if b := c.rd.buffered(); len(b) > 0 {
		// What the client sent right behind its request.
		u.sink().Write(b)
		u.ws.toBackend(b)
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
			u.ws.toBackend(b)
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
			u.ws.toClient(b)
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

// isWebSocket reports whether a 101's fields say it switched to
// WebSocket (its Upgrade field, which hop-by-hop rules may have marked
// dropped, is read all the same).
func isWebSocket(h *httpmsg.Header) bool {
	for i := range h.Fields {
		if f := &h.Fields[i]; f.Kind == httpmsg.KindUpgrade && httpmsg.EqualFold(httpmsg.TrimOWS(f.Value), "websocket") {
			return true
		}
	}
	return false
}

// abortTunnel ends a tunnel before its time (a drain's deadline, the
// engine closing): a WebSocket's sides get their close frames first.
func (c *lconn) abortTunnel() {
	if u := c.up; u != nil && u.ws != nil {
		ws := u.ws
		if !c.outShut && ws.client.between() {
			c.sink().Write(wsGoingAway[:])
			c.fw.flushPending()
			c.l.discardInput(c.fd)
		}
		if !c.inShut && ws.backend.between() {
			var f [8]byte
			wsMaskedGoingAway(&f, rand.Uint32())
			u.sink().Write(f[:])
			u.flushPending()
			c.l.discardInput(u.fd)
		}
	}
	c.endTunnel()
}

// discardInput reads and drops what fd has received (up to a bound):
// closing a socket with unread input resets the connection, and a reset
// would destroy what was just written to it, a close frame included.
func (l *loop) discardInput(fd int) {
	buf := l.scratch()
	for range 8 {
		n, err := netpoll.Read(fd, buf)
		if err != nil || n < len(buf) {
			return
		}
	}
}

// wsTunnel follows the WebSocket frames passing each way through a tunnel
// (lupconn.ws; nil for a tunnel of another protocol).
type wsTunnel struct {
	client, backend wsFrames // what went to the client, to the backend
}

// toClient and toBackend follow p, gone to that side; on a nil t (no
// WebSocket) they do nothing.
func (t *wsTunnel) toClient(p []byte) {
	if t != nil {
		t.client.feed(p)
	}
}

func (t *wsTunnel) toBackend(p []byte) {
	if t != nil {
		t.backend.feed(p)
	}
}

// wsFrames follows WebSocket framing (RFC 6455 §5.2) through one
// direction's bytes, without keeping them: where a frame's header is,
// and how much payload is left to pass.
type wsFrames struct {
	// left is the current frame's payload still to pass.
	left uint64
	// hdr holds the next frame's header as far as it has passed (hn
	// bytes; 14 at most).
	hdr [14]byte
	hn  uint8
	// closed: a close frame has passed; nothing may follow it.
	closed bool
}

// feed follows p.
func (f *wsFrames) feed(p []byte) {
	for len(p) > 0 {
		if f.left > 0 {
			n := min(uint64(len(p)), f.left)
			f.left -= n
			p = p[n:]
			continue
		}
		f.hdr[f.hn] = p[0]
		f.hn++
		p = p[1:]
		if h := f.hdr[:f.hn]; len(h) == wsHeaderLen(h) {
			f.left = wsPayloadLen(h)
			f.closed = f.closed || h[0]&0x0f == wsOpClose
			f.hn = 0
		}
	}
}

// between reports whether what passed ends between two frames, before
// any close frame: a frame may be put there.
func (f *wsFrames) between() bool { return f.left == 0 && f.hn == 0 && !f.closed }

// wsOpClose is the close frame's opcode.
const wsOpClose = 0x8

// wsHeaderLen returns the length of the frame header h begins (at least
// its 2 bytes): 2, plus 2 or 8 for an extended payload length, plus 4 for
// a masking key.
func wsHeaderLen(h []byte) int {
	if len(h) < 2 {
		return 2
	}
	n := 2
	switch h[1] & 0x7f {
	case 126:
		n += 2
	case 127:
		n += 8
	}
	if h[1]&0x80 != 0 {
		n += 4
	}
	return n
}

// wsPayloadLen returns the payload length a whole frame header states.
func wsPayloadLen(h []byte) uint64 {
	switch n := h[1] & 0x7f; n {
	case 126:
		return uint64(binary.BigEndian.Uint16(h[2:]))
	case 127:
		return binary.BigEndian.Uint64(h[2:]) & (1<<63 - 1)
	default:
		return uint64(n)
	}
}

// wsGoingAway is the close frame a server sends, status 1001 going away.
var wsGoingAway = [4]byte{0x80 | wsOpClose, 2, 0x03, 0xe9}

// wsMaskedGoingAway makes f the close frame with status 1001 as a client
// sends it: masked with key (RFC 6455 §5.3).
func wsMaskedGoingAway(f *[8]byte, key uint32) {
	f[0], f[1] = 0x80|wsOpClose, 0x80|2
	binary.BigEndian.PutUint32(f[2:6], key)
	f[6] = wsGoingAway[2] ^ f[2]
	f[7] = wsGoingAway[3] ^ f[3]
}
