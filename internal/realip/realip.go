// Package realip finds a request's real client address behind proxies
// that are trusted to say it: the immediate peer's address unless that
// peer is in the trusted set, in which case the forwarding field the
// listener names is read from the right, past every trusted address, and
// the first address not trusted is the client (a client can prepend what
// it likes to X-Forwarded-For, but cannot make a trusted proxy append a
// lie). It allocates nothing.
package realip

import (
	"net/netip"
	"unsafe"

	"github.com/helios-lb/helios/internal/httpmsg"
)

// Source is the field a listener reads the client from.
type Source uint8

// The fields a client address may come from.
const (
	// XForwardedFor reads X-Forwarded-For (all of its fields, in order,
	// as one list).
	XForwardedFor Source = iota
	// Forwarded reads the for= parameters of RFC 7239's Forwarded.
	Forwarded
	// XRealIP reads X-Real-IP, one address set by the proxy in front.
	XRealIP
)

// ParseSource returns the Source a configuration names:
// "x-forwarded-for", "forwarded" or "x-real-ip".
func ParseSource(s string) (Source, bool) {
	switch s {
	case "x-forwarded-for":
		return XForwardedFor, true
	case "forwarded":
		return Forwarded, true
	case "x-real-ip":
		return XRealIP, true
	}
	return 0, false
}

// Resolver finds client addresses for one listener. It is immutable and
// safe for concurrent use; the zero value trusts no one.
type Resolver struct {
	trusted []netip.Prefix
	source  Source
}

// New returns a Resolver that believes source from peers in trusted.
func New(trusted []netip.Prefix, source Source) *Resolver {
	r := &Resolver{source: source}
	for _, p := range trusted {
		r.trusted = append(r.trusted, p.Masked())
	}
	return r
}

// Trusts reports whether a is a trusted proxy.
func (r *Resolver) Trusts(a netip.Addr) bool {
	if r == nil {
		return false
	}
	a = a.Unmap()
	for _, p := range r.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Client returns the client address of a request that came from peer
// with head h: peer itself unless peer is trusted; otherwise the
// right-most address in the listener's field that is not trusted, or the
// left-most when every one is (a chain of trusted proxies). A field that
// cannot be read (a malformed address) ends the walk at the last address
// believed, the trusted proxy that sent it: what a proxy forwarded is
// never discarded for a client's garbage.
func (r *Resolver) Client(peer netip.Addr, h *httpmsg.Header) netip.Addr {
	peer = peer.Unmap()
	if !r.Trusts(peer) {
		return peer
	}
	last := peer
	// Walk the fields from the last, each one's list from its end.
	for i := len(h.Fields) - 1; i >= 0; i-- {
		f := &h.Fields[i]
		if f.Drop || !r.matches(f) {
			continue
		}
		v := f.Value
		for len(v) > 0 {
			var elem []byte
			elem, v = lastElement(v)
			a, ok := r.parse(elem)
			if !ok {
				return last
			}
			if !r.Trusts(a) {
				return a
			}
			last = a
		}
		if r.source == XRealIP {
			break // one field, one address
		}
	}
	return last
}

// matches reports whether f is the resolver's source field.
func (r *Resolver) matches(f *httpmsg.Field) bool {
	switch r.source {
	case XForwardedFor:
		return f.Kind == httpmsg.KindXForwardedFor
	case Forwarded:
		return f.Kind == httpmsg.KindForwarded
	default:
		return f.Kind == httpmsg.KindXRealIP
	}
}

// lastElement splits the last comma-separated element off v.
func lastElement(v []byte) (elem, rest []byte) {
	i := len(v) - 1
	for i >= 0 && v[i] != ',' {
		i--
	}
	elem = httpmsg.TrimOWS(v[i+1:])
	if i < 0 {
		return elem, nil
	}
	return elem, v[:i]
}

// parse reads one element of the source field as an address.
func (r *Resolver) parse(elem []byte) (netip.Addr, bool) {
	if r.source == Forwarded {
		var ok bool
		if elem, ok = forwardedFor(elem); !ok {
			return netip.Addr{}, false
		}
	}
	return parseAddr(elem)
}

// forwardedFor returns the node of the for= parameter of one Forwarded
// element ("for=192.0.2.1;proto=https", "for=\"[2001:db8::1]:443\""),
// unquoted.
func forwardedFor(elem []byte) ([]byte, bool) {
	for len(elem) > 0 {
		var pair []byte
		i := 0
		for i < len(elem) && elem[i] != ';' {
			i++
		}
		pair, elem = httpmsg.TrimOWS(elem[:i]), elem[min(i+1, len(elem)):]
		if len(pair) > 4 && httpmsg.EqualFold(pair[:4], "for=") {
			v := pair[4:]
			if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
				v = v[1 : len(v)-1]
			}
			return v, true
		}
	}
	return nil, false
}

// parseAddr reads an address, with or without a port ("192.0.2.1",
// "192.0.2.1:80", "2001:db8::1", "[2001:db8::1]:80"). Zones are refused.
func parseAddr(b []byte) (netip.Addr, bool) {
	if len(b) == 0 || len(b) > 64 {
		return netip.Addr{}, false
	}
	if b[0] == '[' {
		end := 0
		for end < len(b) && b[end] != ']' {
			end++
		}
		if end == len(b) || end+1 != len(b) && b[end+1] != ':' {
			return netip.Addr{}, false
		}
		b = b[1:end]
	} else if n := countByte(b, ':'); n == 1 {
		b = b[:indexByte(b, ':')] // IPv4 with a port
	}
	if len(b) == 0 || indexByte(b, '%') >= 0 {
		return netip.Addr{}, false
	}
	// Read in place: netip keeps no part of the string (no zone).
	a, err := netip.ParseAddr(unsafe.String(&b[0], len(b)))
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

func countByte(b []byte, c byte) int {
	n := 0
	for _, x := range b {
		if x == c {
			n++
		}
	}
	return n
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}
