package proxy

import (
	"bytes"
	"net/netip"

	"github.com/helios-lb/helios/internal/upstream"
	"github.com/helios-lb/helios/internal/wire"
)

// KeyKind says which part of a request a RequestKey reads.
type KeyKind uint8

// The parts of a request a key can be read from.
const (
	// KeyNone: no key; the request is not hashed.
	KeyNone KeyKind = iota
	// KeyClientIP: the client's address, as the listener's policy found
	// it (Exchange.ClientAddr).
	KeyClientIP
	// KeyHeader: the value of the first header field named Name.
	KeyHeader
	// KeyCookie: the value of the cookie named Name in the Cookie header.
	KeyCookie
	// KeyPath: the path of the request target, without the query.
	KeyPath
	// KeyQuery: the value of the first query parameter named Name.
	KeyQuery
)

// RequestKey says where a request's key is read from, for consistent
// hashing and for deterministic splits. The zero RequestKey is KeyNone.
//
// Values are compared and hashed as the client sent them: a query
// parameter is not percent-decoded, a header value is the first field's
// (HTTP/2's split cookie fields arrive joined into one). An empty value is
// no value: the request has no key.
type RequestKey struct {
	// Kind is the part of the request read.
	Kind KeyKind
	// Name is the header, cookie or query parameter name; empty for the
	// other kinds. Header names are compared without case, cookie and
	// query names exactly.
	Name string
}

// value returns the key's bytes in ex: nil when the request has none, and
// for KeyNone and KeyClientIP, which have no bytes. The slice is ex's.
func (k RequestKey) value(ex wire.Exchange) []byte {
	switch k.Kind {
	case KeyHeader:
		return ex.Header(k.Name)
	case KeyCookie:
		return cookieValue(ex.Header("Cookie"), k.Name)
	case KeyPath:
		return ex.Path()
	case KeyQuery:
		return queryValue(ex.Query(), k.Name)
	}
	return nil
}

// hash returns the hash of the key in ex and whether ex has the key.
// It allocates nothing.
func (k RequestKey) hash(ex wire.Exchange) (uint64, bool) {
	switch k.Kind {
	case KeyNone:
		return 0, false
	case KeyClientIP:
		a := ex.ClientAddr()
		if !a.IsValid() {
			return 0, false
		}
		return hashAddr(a), true
	}
	v := k.value(ex)
	if len(v) == 0 {
		return 0, false
	}
	return upstream.HashBytes(v), true
}

// cookieValue returns the value of the cookie named name in a Cookie
// header value ("a=1; b=2", RFC 6265 §4.2.1), without the double quotes
// of a quoted value; nil or empty when there is none or it is empty (an
// empty value is no key, RequestKey.hash). Names are compared exactly,
// as browsers send them; blanks around pairs are tolerated. It allocates
// nothing: the value is a slice of h.
func cookieValue(h []byte, name string) []byte {
	for len(h) > 0 {
		var pair []byte
		pair, h = cutAt(h, ';')
		eq := bytes.IndexByte(pair, '=')
		if eq < 0 {
			continue
		}
		if string(bytes.Trim(pair[:eq], blanks)) != name { // compiled without a copy
			continue
		}
		v := bytes.Trim(pair[eq+1:], blanks)
		if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
			v = v[1 : len(v)-1]
		}
		return v
	}
	return nil
}

// queryValue returns the value of the first parameter named name in a
// query ("a=1&b=2"), as sent (not percent-decoded); nil when there is
// none. A parameter without "=" has an empty value.
func queryValue(q []byte, name string) []byte {
	for len(q) > 0 {
		var param []byte
		param, q = cutAt(q, '&')
		key, v := param, param[len(param):]
		if eq := bytes.IndexByte(param, '='); eq >= 0 {
			key, v = param[:eq], param[eq+1:]
		}
		if string(key) == name {
			return v
		}
	}
	return nil
}

// blanks are the spaces a Cookie header may have around its pairs.
const blanks = " \t"

// cutAt returns b up to the first sep, and what follows it (nil when
// there is no sep).
func cutAt(b []byte, sep byte) (item, rest []byte) {
	if i := bytes.IndexByte(b, sep); i >= 0 {
		return b[:i], b[i+1:]
	}
	return b, nil
}

// hashAddr hashes a client address for consistent strategies (over the
// 16-byte form, so IPv4 and IPv4-mapped IPv6 agree).
func hashAddr(a netip.Addr) uint64 {
	b := a.As16()
	return upstream.HashBytes(b[:])
}
