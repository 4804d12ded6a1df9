package proxy

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"time"

	"github.com/helios-lb/helios/internal/upstream"
	"github.com/helios-lb/helios/internal/wire"
)

// Sticky keeps each client of an upstream on one backend with a cookie
// (sticky sessions, upstreams[].sticky). A request whose cookie names a
// backend that is usable goes there, whatever the strategy would pick,
// before any other; any other request is balanced as usual, and its
// answer sets the cookie to the backend that served it.
//
// A backend's cookie value is a keyed hash of the upstream's name and
// the backend's address (the first 96 bits of HMAC-SHA256, in base64url:
// 16 characters), so it tells a client nothing about the address, cannot
// be forged to name a backend without the secret, and stays the same
// across reloads, discovery changes and restarts as long as the secret
// does.
type Sticky struct {
	// Cookie is the cookie's name.
	Cookie   string
	upstream string
	secret   []byte
	// attrs are written after the value in Set-Cookie.
	attrs string
}

// StickyOptions describe the cookie of an upstream's sticky sessions.
type StickyOptions struct {
	// Cookie is the cookie's name, an HTTP token.
	Cookie string
	// Path is the cookie's Path attribute; "" writes none.
	Path string
	// MaxAge is the cookie's Max-Age, in whole seconds; zero or less
	// writes none (a session cookie).
	MaxAge time.Duration
	// Secure and HTTPOnly add those attributes.
	Secure, HTTPOnly bool
	// SameSite is the SameSite attribute's value as written (Lax,
	// Strict, None); "" writes none.
	SameSite string
	// Secret keys the values; it must not be empty.
	Secret []byte
}

// NewSticky returns the sticky sessions of the upstream named
// upstreamName.
func NewSticky(upstreamName string, o StickyOptions) *Sticky {
	attrs := ""
	if o.Path != "" {
		attrs += "; Path=" + o.Path
	}
	if s := int64(o.MaxAge / time.Second); s > 0 {
		attrs += "; Max-Age=" + strconv.FormatInt(s, 10)
	}
	if o.Secure {
		attrs += "; Secure"
	}
	if o.HTTPOnly {
		attrs += "; HttpOnly"
	}
	if o.SameSite != "" {
		attrs += "; SameSite=" + o.SameSite
	}
	return &Sticky{Cookie: o.Cookie, upstream: upstreamName, secret: append([]byte(nil), o.Secret...), attrs: attrs}
}

// stickyValueBytes is how much of the HMAC a value keeps: 96 bits, far
// beyond guessing, in 16 base64 characters.
const stickyValueBytes = 12

// Value returns the cookie value that names the backend at addr.
func (s *Sticky) Value(addr string) string {
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte(s.upstream))
	m.Write([]byte{0})
	m.Write([]byte(addr))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:stickyValueBytes])
}

// Table returns the lookup table of backends (Members.Sticky); nil when
// s is nil.
func (s *Sticky) Table(bs []*upstream.Backend) *StickyTable {
	if s == nil {
		return nil
	}
	t := &StickyTable{s: s, byValue: make(map[string]int, len(bs)), setCookie: make([][]byte, len(bs))}
	for i, b := range bs {
		v := s.Value(b.Addr)
		if _, dup := t.byValue[v]; !dup {
			t.byValue[v] = i
		}
		t.setCookie[i] = []byte(s.Cookie + "=" + v + s.attrs)
	}
	return t
}

// StickyTable maps the cookie values of one Members' backends to them,
// and holds each backend's Set-Cookie value, made once so that an answer
// that sets the cookie allocates nothing. Built when the Members are, it
// never changes.
type StickyTable struct {
	s       *Sticky
	byValue map[string]int
	// setCookie[i] is the Set-Cookie value for backend i.
	setCookie [][]byte
}

// setCookieName is the field an answer sets the cookie with.
var setCookieName = []byte("Set-Cookie")

// stuck returns the backend the request's cookie names among m's, nil
// when it names none (no cookie, a backend that left, another upstream's
// or a forged value). It allocates nothing.
func (m *Members) stuck(ex wire.Exchange) *upstream.Backend {
	t := m.Sticky
	if t == nil {
		return nil
	}
	v := cookieValue(ex.Header("Cookie"), t.s.Cookie)
	if len(v) != base64.RawURLEncoding.EncodedLen(stickyValueBytes) {
		return nil
	}
	i, ok := t.byValue[string(v)] // compiled without a copy
	if !ok {
		return nil
	}
	return m.Backends[i]
}

// stickyVariant returns the first variant of a split whose upstream has
// sticky sessions and whose cookie in ex names a backend that is
// available, so that a client stays on its version whatever the weights
// (a reload that shifts them keeps it there); nil when there is none.
func (s *Split) stickyVariant(ex wire.Exchange) *Variant {
	for i := range s.Variants {
		v := &s.Variants[i]
		if v.Upstream.Sticky == nil {
			continue
		}
		if b := v.Upstream.Members().stuck(ex); b != nil && b.Available() {
			return v
		}
	}
	return nil
}

// stick sets the sticky cookie on the answer about to be sent when the
// backend that gave it is not the one the request's cookie named.
func (f *flow) stick() {
	t := f.m.Sticky
	if t == nil || f.b == f.stuck {
		return
	}
	if r := f.ex.Response(); r != nil {
		r.Header.Add(setCookieName, t.setCookie[f.b.Index])
	}
}
