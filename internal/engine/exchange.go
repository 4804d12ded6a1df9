package engine

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"net/netip"

	"github.com/helios-lb/helios/internal/httpmsg"
	"github.com/helios-lb/helios/internal/wire"
)

// The client connection as the pipeline sees it: wire.Exchange's methods,
// over whichever protocol the client speaks.

// --- wire.Exchange ---

func (c *lconn) Method() []byte         { return c.req.Method }
func (c *lconn) Host() []byte           { return c.req.Host }
func (c *lconn) Path() []byte           { return c.req.Path }
func (c *lconn) ClientAddr() netip.Addr { return c.clientAddr() }

// Listener returns the listener's policy for the pipeline
// (wire.Exchange).
func (c *lconn) Listener() *wire.Listener { return c.opts.Listener }
func (c *lconn) HasBody() bool            { return c.req.HasBody() }
func (c *lconn) BodyStarted() bool        { return c.bodySent }
func (c *lconn) Upgrade() []byte          { return c.req.Upgrade }
func (c *lconn) RefuseUpgrade()           { c.req.Upgrade = nil }
func (c *lconn) BodyLength() int64        { return bodyLength(&c.req) }
func (c *lconn) BodyRead() int64          { return c.reqBody.read }

// Header returns the first value of the request field named name (any
// case); nil when absent (wire.Exchange, static.Request).
func (c *lconn) Header(name string) []byte {
	for i := range c.req.Header.Fields {
		if f := &c.req.Header.Fields[i]; httpmsg.EqualFoldBytes(f.Name, name) {
			return f.Value
		}
	}
	return nil
}

// Query returns the query of the request target, without the "?".
func (c *lconn) Query() []byte {
	if i := bytes.IndexByte(c.req.Target, '?'); i >= 0 {
		return c.req.Target[i+1:]
	}
	return nil
}

// Proto returns "HTTP/1.0" or "HTTP/1.1", as the client sent.
func (c *lconn) Proto() []byte {
	return c.client().proto(c)
}

// TLSVersion returns the version the connection's handshake agreed on,
// nil for cleartext.
func (c *lconn) TLSVersion() []byte {
	if c.tlsVer == 0 {
		return nil
	}
	return tlsVersionName(c.tlsVer)
}

// tlsVersionName names a crypto/tls version as the access log does.
func tlsVersionName(v uint16) []byte {
	switch v {
	case tls.VersionTLS13:
		return tls13
	case tls.VersionTLS12:
		return tls12
	}
	return tlsOther
}

var (
	tls12, tls13, tlsOther = []byte("1.2"), []byte("1.3"), []byte("other")
	proto10                = []byte("HTTP/1.0")
	proto11                = []byte("HTTP/1.1")
	proto20                = []byte("HTTP/2.0")
)

// Request returns the request head (wire.Exchange).
func (c *lconn) Request() *httpmsg.Request { return &c.req.Request }

// Response returns the backend's answer's head once it has come
// (wire.Exchange).
func (c *lconn) Response() *httpmsg.Response {
	if c.up == nil || c.up.state != upBody && c.up.state != upTunnel {
		return nil
	}
	return &c.up.resp.Response
}

// Alloc lends n bytes of the exchange's arena (wire.Exchange): from its
// current block, or a new block when that has no room (slices lent from
// the old one stay valid: the block lives as long as they do). The arena
// starts over with each exchange.
func (c *lconn) Alloc(n int) []byte {
	if cap(c.arena)-len(c.arena) < n {
		c.arena = make([]byte, 0, max(arenaBlock, n))
	}
	i := len(c.arena)
	c.arena = c.arena[:i+n]
	return c.arena[i : i+n : i+n]
}

// arenaBlock is the size of an exchange's arena block (Alloc).
const arenaBlock = 512

// hop says how the exchange's request is forwarded (ActForward, or an
// in-process handler's ActServeHTTP).
func (c *lconn) hop() httpmsg.Hop {
	return httpmsg.Hop{Peer: c.remote.Addr().Unmap(), Trusted: c.trusted(), TLS: c.opts.TLS != nil, Local: c.local != nil, Backend: c.be.Addr}
}

// LimitBody bounds what is read of the request body: past max it fails
// (a chunked body is counted as it arrives; a declared length the
// pipeline checks itself).
func (c *lconn) LimitBody(max int64) { c.reqBody.limit = max }

// checkBuffered checks a body the loop already holds whole in its read
// buffer against lim.
func (c *lconn) checkBuffered(lim wire.BufferLimits) error {
	if n := c.req.ContentLength; !lim.Stream && !lim.Discard && n > int64(lim.Memory)+lim.File {
		return fmt.Errorf("%w: %d bytes buffer at most %d", wire.ErrBodyTooLarge, n, int64(lim.Memory)+lim.File)
	}
	return nil
}

// Respond sends a complete answer with a fixed body.
func (c *lconn) Respond(status int, header *httpmsg.Header, body []byte) error {
	if c.respStarted {
		return errors.New("h1: response already started")
	}
	header = c.answerHeader(header, true)
	return c.client().respond(c, status, header, body)
}

func (c *lconn) respondText(status int, msg string) {
	c.Respond(status, textPlain, []byte(msg+"\n"))
}
