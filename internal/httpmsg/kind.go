package httpmsg

// Kind classifies a header field by name once, when the field is read, so
// that forwarding and policy decide what to drop or rewrite without
// comparing names again.
type Kind uint8

// The kinds of field Helios acts on; every other field is KindOther.
const (
	KindOther Kind = iota
	KindHost
	KindContentLength
	KindTransferEncoding
	KindConnection
	KindKeepAlive
	KindProxy // Proxy-* and the bare "Proxy" header (httpoxy)
	KindTE
	KindTrailer
	KindUpgrade
	KindExpect
	KindXForwardedFor
	KindXForwardedProto
	KindXForwardedHost
	KindCookie
	KindSetCookie
	KindContentType
	KindAcceptEncoding
	KindContentEncoding
	KindXRequestID
	KindForwarded
	KindXRealIP
)

// HopByHop reports whether a field of kind k belongs to one connection
// and is never forwarded as received (RFC 9110 §7.6.1): Connection and
// the fields it names, Keep-Alive, Proxy-*, TE, Transfer-Encoding and
// Upgrade (the last forwarded only for an upgrade, by the code that
// handles upgrades). Content-Length is framing too, but end-to-end:
// each sender regenerates it for its own framing.
func (k Kind) HopByHop() bool {
	switch k {
	case KindConnection, KindKeepAlive, KindProxy, KindTE, KindTransferEncoding, KindUpgrade:
		return true
	}
	return false
}

// AllowedInTrailer reports whether a field named name, of kind k, may be
// taken from a trailer section. RFC 9110 §6.5.1 forbids there what
// frames, routes or modifies a message, authenticates, controls a
// response or says how to handle the content; a recipient drops such a
// field rather than act on it or merge it into the head. The list is the
// one net/http keeps (badTrailer), with Set-Cookie and the Proxy-* and
// Upgrade fields besides, and the response control data (Age, Date,
// Expires, Location, Retry-After, Vary), the conditionals (If-*) and the
// content's Language and Location that RFC 7231 §7.1 and RFC 9110 §13
// and §8 name. Fields meant for trailers (Server-Timing, Content-Digest,
// grpc-status...) pass.
func AllowedInTrailer(name []byte, k Kind) bool {
	if k != KindOther {
		switch k {
		case KindXForwardedFor, KindXForwardedProto, KindXForwardedHost, KindXRequestID, KindForwarded, KindXRealIP:
			return true
		}
		return false
	}
	switch len(name) {
	case 3:
		return !EqualFold(name, "age")
	case 4:
		return !EqualFold(name, "date") && !EqualFold(name, "vary")
	case 5:
		return !EqualFold(name, "range") && !EqualFold(name, "realm")
	case 6:
		return !EqualFold(name, "pragma")
	case 7:
		return !EqualFold(name, "expires")
	case 8:
		return !EqualFold(name, "location") && !EqualFold(name, "if-match") && !EqualFold(name, "if-range")
	case 11:
		return !EqualFold(name, "retry-after")
	case 12:
		return !EqualFold(name, "max-forwards")
	case 13:
		return !EqualFold(name, "authorization") && !EqualFold(name, "cache-control") &&
			!EqualFold(name, "content-range") && !EqualFold(name, "if-none-match")
	case 16:
		return !EqualFold(name, "www-authenticate") && !EqualFold(name, "content-language") &&
			!EqualFold(name, "content-location")
	case 17:
		return !EqualFold(name, "if-modified-since")
	case 19:
		return !EqualFold(name, "if-unmodified-since")
	}
	return true
}

// Classify returns the kind of a header field name (ASCII
// case-insensitive).
func Classify(name []byte) Kind {
	switch len(name) {
	case 2:
		if EqualFold(name, "te") {
			return KindTE
		}
	case 4:
		if EqualFold(name, "host") {
			return KindHost
		}
	case 5:
		if EqualFold(name, "proxy") {
			return KindProxy
		}
	case 6:
		if EqualFold(name, "expect") {
			return KindExpect
		}
		if EqualFold(name, "cookie") {
			return KindCookie
		}
	case 7:
		if EqualFold(name, "upgrade") {
			return KindUpgrade
		}
		if EqualFold(name, "trailer") {
			return KindTrailer
		}
	case 9:
		if EqualFold(name, "forwarded") {
			return KindForwarded
		}
		if EqualFold(name, "x-real-ip") {
			return KindXRealIP
		}
	case 10:
		if EqualFold(name, "connection") {
			return KindConnection
		}
		if EqualFold(name, "keep-alive") {
			return KindKeepAlive
		}
		if EqualFold(name, "set-cookie") {
			return KindSetCookie
		}
	case 12:
		if EqualFold(name, "content-type") {
			return KindContentType
		}
		if EqualFold(name, "x-request-id") {
			return KindXRequestID
		}
	case 14:
		if EqualFold(name, "content-length") {
			return KindContentLength
		}
	case 15:
		if EqualFold(name, "x-forwarded-for") {
			return KindXForwardedFor
		}
		if EqualFold(name, "accept-encoding") {
			return KindAcceptEncoding
		}
	case 16:
		if EqualFold(name, "x-forwarded-host") {
			return KindXForwardedHost
		}
		if EqualFold(name, "content-encoding") {
			return KindContentEncoding
		}
	case 17:
		if EqualFold(name, "transfer-encoding") {
			return KindTransferEncoding
		}
		if EqualFold(name, "x-forwarded-proto") {
			return KindXForwardedProto
		}
	}
	if len(name) > 6 && EqualFold(name[:6], "proxy-") {
		return KindProxy
	}
	return KindOther
}
