package httpmsg

import "net/netip"

// FieldSink takes the fields of a head being written out, in order: an
// HTTP/1.1 writer renders each as a line, an HTTP/2 encoder packs it with
// HPACK. name and value are valid only during the call.
type FieldSink interface {
	Field(name, value []byte)
}

// Hop is what forwarding a request to the next hop needs beyond the
// request: who sent it and how, and where it goes.
type Hop struct {
	// Peer is the address the request came from: the connection's peer,
	// or the source of its PROXY header. It is appended to
	// X-Forwarded-For.
	Peer netip.Addr
	// Trusted says Peer is a trusted proxy: the forwarding fields it sent
	// (X-Forwarded-For, -Proto, -Host, Forwarded, X-Real-IP) are passed on,
	// X-Forwarded-For appended to. From any other peer they are replaced:
	// X-Forwarded-For is Peer alone, X-Forwarded-Proto and -Host are
	// Helios's, Forwarded and X-Real-IP are dropped.
	Trusted bool
	// TLS says the client connection is TLS (X-Forwarded-Proto: https).
	TLS bool
	// Local says the next hop is an in-process handler: no proxy hop
	// happens, so X-Forwarded-* fields are passed on as received rather
	// than added to.
	Local bool
	// Backend is the backend's address, the authority of a request that
	// named none (an HTTP/1.0 request without Host goes on as HTTP/1.1,
	// which requires one, RFC 9112 §3.2; net/http's ReverseProxy does the
	// same).
	Backend string
}

// Forwarder applies the forwarding rules to request heads: hop-by-hop
// fields dropped (RFC 9110 §7.6.1), X-Forwarded-For, -Proto and -Host
// set for the client (believed from trusted proxies only: Hop.Trusted). Framing is the codec's: each writes
// its own. It keeps scratch memory between calls, so one Forwarder serves
// one goroutine (an event loop); the zero value is ready.
type Forwarder struct {
	xff, joined []byte
}

// firstOf returns the index of the first field of kind k that is not
// dropped, -1 when there is none.
func firstOf(fs []Field, k Kind) int {
	for i := range fs {
		if fs[i].Kind == k && !fs[i].Drop {
			return i
		}
	}
	return -1
}

// join returns the values of the fields of kind k that are not dropped,
// joined with sep, in the Forwarder's scratch memory (valid until its
// next use); a single value is returned as it is.
func (fw *Forwarder) join(fs []Field, k Kind, sep string) []byte {
	b, n := fw.joined[:0], 0
	var one []byte
	for i := range fs {
		if f := &fs[i]; f.Kind == k && !f.Drop {
			if n > 0 {
				b = append(b, sep...)
			}
			b = append(b, f.Value...)
			one = f.Value
			n++
		}
	}
	fw.joined = b
	if n == 1 {
		return one
	}
	return b
}

// Authority returns the authority to forward r with: the client's, or
// the backend's address when the client named none.
func Authority(r *Request, hop *Hop) []byte {
	if len(r.Authority) > 0 {
		return r.Authority
	}
	return []byte(hop.Backend)
}

// Fields passes to s the fields r is forwarded with, Host and framing
// excepted (the codec writes the authority and the framing its way):
// end-to-end fields in their order, Upgrade for an upgrade, then
// X-Forwarded-For (a trusted peer's values, then the peer),
// X-Forwarded-Proto and X-Forwarded-Host (a trusted peer's, or
// Helios's). The rule lives here alone: an untrusted client's forwarding
// fields are never passed on nor appended to, so what a client claims
// never reaches a backend as something a proxy said.
func (fw *Forwarder) Fields(s FieldSink, r *Request, hop *Hop) {
	xffAt := -1
	proto, host := false, false // a trusted peer's are passed on
	for i := range r.Header.Fields {
		f := &r.Header.Fields[i]
		if f.Drop {
			continue
		}
		switch f.Kind {
		case KindHost, KindContentLength, KindTransferEncoding, KindConnection,
			KindKeepAlive, KindProxy, KindTE, KindExpect:
			// Written by the codec (authority, framing), hop-by-hop, or
			// answered here (100-continue has no meaning across the hop).
		case KindUpgrade:
			if r.Upgrade != nil {
				s.Field(f.Name, f.Value)
			}
		case KindXForwardedFor:
			if hop.Local {
				s.Field(f.Name, f.Value)
			} else if hop.Trusted && xffAt < 0 {
				xffAt = i
			}
		case KindXForwardedProto, KindXForwardedHost:
			if hop.Local || hop.Trusted {
				s.Field(f.Name, f.Value)
				proto = proto || f.Kind == KindXForwardedProto
				host = host || f.Kind == KindXForwardedHost
			}
		case KindForwarded, KindXRealIP:
			if hop.Local || hop.Trusted {
				s.Field(f.Name, f.Value)
			}
		case KindCookie:
			// Several Cookie fields (HTTP/2 splits them, RFC 9113 §8.2.3;
			// some HTTP/1.1 clients send more than one) go on as one,
			// in their order, where the first was: every backend gets
			// the same head whatever the client spoke.
			if i == firstOf(r.Header.Fields, KindCookie) {
				s.Field(f.Name, fw.join(r.Header.Fields[i:], KindCookie, "; "))
			}
		default:
			s.Field(f.Name, f.Value)
		}
	}
	if hop.Local {
		return
	}
	b := fw.xff[:0]
	if xffAt >= 0 {
		for i := xffAt; i < len(r.Header.Fields); i++ {
			f := &r.Header.Fields[i]
			if f.Kind == KindXForwardedFor && !f.Drop && len(f.Value) > 0 {
				b = append(b, f.Value...)
				b = append(b, ", "...)
			}
		}
	}
	b = hop.Peer.AppendTo(b)
	fw.xff = b
	s.Field(xffName, b)
	switch {
	case proto:
	case hop.TLS:
		s.Field(xfProtoName, httpsValue)
	default:
		s.Field(xfProtoName, httpValue)
	}
	if len(r.Authority) > 0 && !host {
		s.Field(xfHostName, r.Authority)
	}
}

// ResponseFields passes to s the fields of a response as it goes on to
// the client: end-to-end fields in their order (and Upgrade in a 101,
// whose tunnel the codec sets up); Content-Length only when the length
// is known (a body of unknown length is framed by the codec); Trailer
// only when withTrailers (the codec can carry trailers).
func ResponseFields(s FieldSink, r *Response, withTrailers bool) {
	switching := r.Status == 101
	for i := range r.Header.Fields {
		f := &r.Header.Fields[i]
		if f.Drop {
			continue
		}
		switch f.Kind {
		case KindUpgrade:
			if !switching {
				continue
			}
		case KindContentLength:
			// RFC 9110 §8.6: never in a 1xx or 204 answer (some backends
			// send one; a client may then wait for a body that never
			// comes); in a 304 or an answer to HEAD it describes the
			// representation, and stays.
			if r.ContentLength < 0 || r.Status < 200 || r.Status == 204 {
				continue
			}
		case KindTrailer:
			if !withTrailers {
				continue
			}
		default:
			if f.Kind.HopByHop() {
				continue
			}
		}
		s.Field(f.Name, f.Value)
	}
}

// TrailerFields passes to s the fields of a trailer section that may
// travel there (AllowedInTrailer); the others are dropped.
func TrailerFields(s FieldSink, h *Header) {
	for i := range h.Fields {
		f := &h.Fields[i]
		if !f.Drop && AllowedInTrailer(f.Name, f.Kind) {
			s.Field(f.Name, f.Value)
		}
	}
}

var (
	xffName     = []byte("X-Forwarded-For")
	xfProtoName = []byte("X-Forwarded-Proto")
	xfHostName  = []byte("X-Forwarded-Host")
	httpsValue  = []byte("https")
	httpValue   = []byte("http")
)
