package engine

import (
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/helios-lb/helios/internal/netpoll"
	"github.com/helios-lb/helios/internal/proxyproto"
	"github.com/helios-lb/helios/internal/wire"
)

// PROXY protocol to backends (wire.TransportSettings.ProxyProtocol): a
// new connection to a backend opens with a header naming the client of
// the request it was made for (the address the listener found) and the
// address that client reached Helios at, before anything else (a TLS
// handshake, the HTTP/2 preface). The header is the connection's for
// good, so a connection is reused only for requests of the same client:
// an idle HTTP/1.1 connection is taken, and an HTTP/2 one shared, only by
// a request whose client it names.

// proxyHeaderFor returns the PROXY header a new connection to p's backend
// opens with for c's request; nil when p's transport sends none.
func (c *lconn) proxyHeaderFor(p *lpool) []byte {
	v := p.opts.ProxyProtocol
	if v == 0 || p.local != nil {
		return nil
	}
	var port uint16
	if c.clientAddr() == c.remote.Addr().Unmap() {
		port = c.remote.Port() // a client named by a forwarding field has none
	}
	src, dst := netip.AddrPortFrom(c.clientAddr(), port), c.destAddr()
	if v == wire.ProxyV1 {
		return proxyproto.AppendV1(nil, src, dst)
	}
	return proxyproto.AppendV2(nil, src, dst)
}

// destAddr returns the address the client reached Helios at: what its
// PROXY header said, or the socket's own (looked up once per
// connection).
func (c *lconn) destAddr() netip.AddrPort {
	return c.client().destAddr(c)
}

// writeProxyHeader writes a connection's PROXY header straight to its
// socket, just connected (its send buffer empty: the few bytes go at
// once, or the attempt fails).
func writeProxyHeader(fd int, h []byte, addr string) error {
	n, err := netpoll.Write(fd, h)
	if err == nil && n < len(h) {
		err = unix.EAGAIN
	}
	if err != nil {
		return fmt.Errorf("%w: %s: sending the PROXY header: %w", wire.ErrConnect, addr, err)
	}
	return nil
}

// getFor returns an idle connection c's request may take: any, or, when
// the transport sends PROXY headers, one whose header names c's client.
func (p *lpool) getFor(c *lconn) *lupconn {
	if p.opts.ProxyProtocol == 0 {
		return p.get()
	}
	for i := len(p.idle) - 1; i >= 0; i-- {
		u := p.idle[i]
		if u.ppFor != c.clientAddr() {
			continue
		}
		copy(p.idle[i:], p.idle[i+1:])
		p.idle[len(p.idle)-1] = nil
		p.idle = p.idle[:len(p.idle)-1]
		if p.opts.IdleTimeout > 0 && p.l.now-u.idleSince > int64(p.opts.IdleTimeout) {
			u.close()
			return nil
		}
		return u
	}
	return nil
}

// dequeueFor takes the first request waiting for a connection when it
// may use u, just released; keep says u may go back to the pool when no
// request takes it. When the transport sends PROXY headers and the first
// waiting request is another client's, keep is false: u is closed, and
// its place at the connection cap goes to that request (freed).
func (p *lpool) dequeueFor(u *lupconn) (c *lconn, keep bool) {
	if p.opts.ProxyProtocol == 0 {
		return p.dequeue(), true
	}
	for _, w := range p.queue {
		if w.queued != p {
			continue
		}
		if w.clientAddr() != u.ppFor {
			return nil, false
		}
		return p.dequeue(), true
	}
	return nil, true
}
