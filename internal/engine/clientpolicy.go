package engine

import (
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/helios-lb/helios/internal/httpmsg"
	"github.com/helios-lb/helios/internal/proxyproto"
)

// The listener's client policy, on the loop: who the client of each
// connection and request is.
//
//   - PROXY protocol (Options.ProxyProtocol): a new connection first waits
//     (state lsProxy, bounded by Options.ProxyTimeout) for the header an L4
//     load balancer puts in front of the client's bytes; its source is the
//     connection's address from then on. A header that is missing where
//     one is required, malformed, late, or sent by a peer that is not a
//     trusted proxy closes the connection, counted in
//     ListenerStats.ProxyRefused. What came behind the header is the
//     client's first bytes (a request, or a ClientHello).
//   - Connections per address (Options.MaxConnsPerIP), counted by the
//     connection's address (after its PROXY header).
//   - Each request's client (resolveClient): the connection's address,
//     unless that is a trusted proxy (Options.RealIP), whose forwarding
//     field then says who the client is; a trusted proxy's
//     X-Forwarded-Proto also says the request's scheme.

// ProxyProtocol says whether a listener's connections start with a PROXY
// protocol header.
type ProxyProtocol uint8

// The PROXY protocol modes of a listener.
const (
	// ProxyOff: connections start with the client's own bytes.
	ProxyOff ProxyProtocol = iota
	// ProxyV1 requires a version 1 (text) header.
	ProxyV1
	// ProxyV2 requires a version 2 (binary) header.
	ProxyV2
	// ProxyOptional takes a header of either version when one comes, and
	// serves a connection without one as it is (a load balancer's own
	// health checks).
	ProxyOptional
)

// ListenerStats counts what a listener's client policy refused, for the
// metrics. The zero value is ready; it is safe for concurrent use.
type ListenerStats struct {
	// ProxyRefused counts connections closed for their PROXY header:
	// missing where one is required, malformed, too late, or from a peer
	// that is not a trusted proxy.
	ProxyRefused atomic.Uint64
	// PerIPRefused counts connections closed at once because their
	// address had Options.MaxConnsPerIP open already.
	PerIPRefused atomic.Uint64
}

// maxProxyHeader bounds a PROXY header (a version 2 header's TLVs
// included); a longer one is refused.
const maxProxyHeader = 4096

// defaultProxyTimeout bounds the wait for a PROXY header when
// Options.ProxyTimeout is zero.
const defaultProxyTimeout = 10 * time.Second

// awaitProxy makes a newly accepted connection wait for its PROXY
// header; a peer that may not send one is closed at once when one is
// required.
func (c *lconn) awaitProxy() {
	o := c.opts
	if o.ProxyProtocol != ProxyOptional && !o.RealIP.Trusts(c.remote.Addr()) {
		c.proxyRefused()
		return
	}
	c.state = lsProxy
	d := o.ProxyTimeout
	if d <= 0 {
		d = defaultProxyTimeout
	}
	c.setDeadline(dlProxy, d)
	c.readProxy()
}

// readProxy reads and parses the PROXY header, then starts the
// connection as its listener serves it.
func (c *lconn) readProxy() {
	if c.rd.buf == nil {
		c.rd.reset(&c.fr, c.l.headBufs.get())
	}
	o := c.opts
	for {
		b := c.rd.buffered()
		h, n, err := proxyproto.Parse(b)
		switch {
		case errors.Is(err, proxyproto.ErrNoHeader) && o.ProxyProtocol == ProxyOptional:
			c.proxyDone()
			return
		case err != nil:
			c.proxyRefused()
			return
		case n > 0:
			want := proxyproto.V1
			if o.ProxyProtocol == ProxyV2 {
				want = proxyproto.V2
			}
			if o.ProxyProtocol != ProxyOptional && h.Version != want || !o.RealIP.Trusts(c.remote.Addr()) {
				c.proxyRefused()
				return
			}
			c.rd.discard(n)
			if !h.Local {
				c.remote = h.Source
				c.edgeState().dest = h.Destination
			}
			c.proxyDone()
			return
		}
		if len(b) >= maxProxyHeader {
			c.proxyRefused()
			return
		}
		switch err := c.rd.fill(); {
		case err == nil:
		case err == errWouldBlock:
			return // the next event reads on
		case err == errBufferFull:
			c.rd.grow(maxProxyHeader)
		default:
			c.proxyRefused()
			return
		}
	}
}

// proxyDone starts a connection whose PROXY header (if any) has been
// read: the bytes behind it are its client's.
func (c *lconn) proxyDone() {
	if !c.admitAddr() {
		return
	}
	if c.opts.TLS != nil {
		rest := c.rd.buffered()
		c.awaitHello(c.opts.TLS)
		if len(rest) > 0 {
			c.sock.hello = append(c.sock.hello, rest...)
		}
		c.l.putClientBuf(c.rd.buf)
		c.rd.reset(nil, nil)
		c.rd.buf = nil
		// The handshake reads the socket itself; the first read on the
		// loop after it must not trust what the header's read found
		// (the portable poller waits for a read that finds the socket
		// empty before it watches it again).
		c.fr.drained = false
		c.readHello()
		return
	}
	c.state = lsIdle
	c.setDeadline(dlIdle, c.opts.IdleTimeout)
	c.serveInput()
}

// proxyRefused closes a connection refused for its PROXY header.
func (c *lconn) proxyRefused() {
	if s := c.opts.Stats; s != nil {
		s.ProxyRefused.Add(1)
	}
	c.close()
}

// connEdge is a connection's client policy state beyond its address:
// the address its client reached (a PROXY header's destination, or the
// socket's own, looked up when a backend needs it), the address it holds
// a place for under max_connections_per_ip (the zero Addr: none), and
// the client a trusted proxy named.
type connEdge struct {
	dest     netip.AddrPort
	addrHeld netip.Addr
	// trusted: the current request came from a trusted proxy; client is
	// the client its forwarding field named.
	trusted bool
	client  netip.Addr
	// waits numbers the exchange's waits (wait.go), so that a wake-up
	// knows its own.
	waits uint32
}

// trusted reports whether the current request came from a trusted
// proxy.
func (c *lconn) trusted() bool { return c.edge != nil && c.edge.trusted }

// untrust makes the current request's client the connection's address.
func (c *lconn) untrust() {
	if c.edge != nil {
		c.edge.trusted = false
	}
}

// clientAddr returns the current request's client: the connection's
// address, or the client its trusted proxy named.
func (c *lconn) clientAddr() netip.Addr {
	if c.trusted() {
		return c.edge.client
	}
	return c.remote.Addr().Unmap()
}

// edgeState returns the connection's connEdge, made the first time.
func (c *lconn) edgeState() *connEdge {
	if c.edge == nil {
		c.edge = new(connEdge)
	}
	return c.edge
}

// admitAddr takes a place for the connection's address under
// Options.MaxConnsPerIP, or closes the connection (counted) when its
// address has no place left; it reports whether the connection goes on.
func (c *lconn) admitAddr() bool {
	max := c.opts.MaxConnsPerIP
	if max <= 0 {
		return true
	}
	a := c.remote.Addr().Unmap()
	if !c.ll.perAddr.acquire(a, max) {
		if s := c.opts.Stats; s != nil {
			s.PerIPRefused.Add(1)
		}
		c.close()
		return false
	}
	c.edgeState().addrHeld = a
	return true
}

// releaseSlots gives back the connection's places: under the listener's
// max_connections and under its address's.
func (c *lconn) releaseSlots() {
	if e := c.edge; e != nil && e.addrHeld.IsValid() {
		c.ll.perAddr.release(e.addrHeld)
		e.addrHeld = netip.Addr{}
	}
	c.ll.release()
}

// addrCounts counts a listener's open connections by address, across its
// loops. A few locks, each over a part of the addresses, held for a map
// update: no I/O.
type addrCounts struct {
	parts [16]addrPart
}

type addrPart struct {
	mu sync.Mutex
	n  map[netip.Addr]int32
}

func (t *addrCounts) part(a netip.Addr) *addrPart {
	b := a.As16()
	return &t.parts[(b[15]^b[14]^b[13]^b[11])%uint8(len(t.parts))]
}

// acquire counts a connection from a, unless a has max already.
func (t *addrCounts) acquire(a netip.Addr, max int) bool {
	p := t.part(a)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n == nil {
		p.n = make(map[netip.Addr]int32)
	}
	if int(p.n[a]) >= max {
		return false
	}
	p.n[a]++
	return true
}

// release uncounts a connection from a.
func (t *addrCounts) release(a netip.Addr) {
	p := t.part(a)
	p.mu.Lock()
	if p.n[a] <= 1 {
		delete(p.n, a)
	} else {
		p.n[a]--
	}
	p.mu.Unlock()
}

// resolveClient finds the request's client: the connection's address,
// or, from a trusted proxy, the address its forwarding field names; and
// the request's scheme: the connection's, or a trusted proxy's
// X-Forwarded-Proto.
func (c *lconn) resolveClient() {
	peer := c.remote.Addr().Unmap()
	c.untrust()
	scheme := httpmsg.SchemeHTTP
	if c.opts.TLS != nil {
		scheme = httpmsg.SchemeHTTPS
	}
	if rip := c.opts.RealIP; rip.Trusts(peer) {
		e := c.edgeState()
		e.trusted, e.client = true, rip.Client(peer, &c.req.Header)
		if v, ok := c.req.Header.GetKind(httpmsg.KindXForwardedProto); ok {
			switch v, _ := httpmsg.NextToken(v); {
			case httpmsg.EqualFold(v, "https"):
				scheme = httpmsg.SchemeHTTPS
			case httpmsg.EqualFold(v, "http"):
				scheme = httpmsg.SchemeHTTP
			}
		}
	}
	c.req.Scheme = scheme
}
