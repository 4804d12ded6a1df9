package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The strategy names that hash a request's key (Upstream.Strategy).
const (
	StrategyConsistentHash = "consistent_hash"
	StrategyIPHash         = "ip_hash"
)

// isHashStrategy reports whether strategy hashes a request key.
func isHashStrategy(strategy string) bool {
	return strategy == StrategyConsistentHash || strategy == StrategyIPHash
}

// The kinds of HashKey, as written before the colon of Upstream.HashKey
// and Route.SplitKey.
const (
	KeyClientIP = "client_ip"
	KeyHeader   = "header"
	KeyCookie   = "cookie"
	KeyPath     = "path"
	KeyQuery    = "query"
)

// hashKeyAllowed is the "what is allowed" part of a bad key's message.
const hashKeyAllowed = "client_ip, header:NAME, cookie:NAME, path or query:NAME"

// HashKey is Upstream.HashKey or Route.SplitKey parsed: where a request's
// key is read.
type HashKey struct {
	// Kind is KeyClientIP, KeyHeader, KeyCookie, KeyPath or KeyQuery.
	Kind string
	// Name is the header, cookie or query parameter name; "" for
	// client_ip and path.
	Name string
}

// ParseHashKey parses client_ip, header:NAME, cookie:NAME, path or
// query:NAME. Header and cookie names are HTTP tokens; a query parameter
// name is visible ASCII without "&", "=" or "#", compared as sent (not
// percent-decoded).
func ParseHashKey(s string) (HashKey, error) {
	kind, name, named := strings.Cut(s, ":")
	switch kind {
	case KeyClientIP, KeyPath:
		if named {
			return HashKey{}, fmt.Errorf("%s takes no name", kind)
		}
		return HashKey{Kind: kind}, nil
	case KeyHeader, KeyCookie:
		if !isToken(name) {
			return HashKey{}, fmt.Errorf("%s needs a name, a token such as %s:X-User", kind, kind)
		}
		return HashKey{Kind: kind, Name: name}, nil
	case KeyQuery:
		if name == "" || strings.ContainsAny(name, "&=#") || !isVisibleASCII(name) {
			return HashKey{}, errors.New("query needs a parameter name, visible ASCII without & = #")
		}
		return HashKey{Kind: kind, Name: name}, nil
	}
	return HashKey{}, errors.New("not a key")
}

// isVisibleASCII reports whether s is made of printable ASCII other than
// space.
func isVisibleASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// hashKey checks a hash_key or split_key value at path.
func (v *validator) hashKey(path, s string) {
	if _, err := ParseHashKey(s); err != nil {
		v.addf(path, "%q: %v (%s)", s, err, hashKeyAllowed)
	}
}

// balancing checks an upstream's strategy and the keys that tune it.
func (v *validator) balancing(u *Upstream, p string) {
	if !slices.Contains(strategies, u.Strategy) {
		v.addf(p+".strategy", "%q is not a strategy (%s)", u.Strategy, strings.Join(strategies, ", "))
		return
	}
	hash := isHashStrategy(u.Strategy)
	switch {
	case !hash && u.HashKey != "":
		v.addf(p+".hash_key", "set with strategy %s (only consistent_hash reads a key)", u.Strategy)
	case u.Strategy == StrategyIPHash && u.HashKey != KeyClientIP:
		v.addf(p+".hash_key", "%q with strategy ip_hash, which hashes client_ip (use consistent_hash for another key)", u.HashKey)
	case hash:
		v.hashKey(p+".hash_key", u.HashKey)
	}
	switch {
	case u.Strategy != StrategyConsistentHash && v.meta.present(p+".hash_fallback"):
		v.addf(p+".hash_fallback", "set with strategy %s (only consistent_hash falls back, for requests without the key)", u.Strategy)
	case u.Strategy == StrategyConsistentHash && (isHashStrategy(u.HashFallback) || !slices.Contains(strategies, u.HashFallback)):
		v.addf(p+".hash_fallback", "%q is not a strategy that can stand in for consistent_hash (%s)", u.HashFallback, strings.Join(fallbacks(), ", "))
	}
	switch {
	case !hash && u.BoundedLoad != 0:
		v.addf(p+".bounded_load", "set with strategy %s (only consistent_hash and ip_hash are bounded)", u.Strategy)
	case u.BoundedLoad != 0 && !(u.BoundedLoad >= 1 && u.BoundedLoad <= 100):
		v.addf(p+".bounded_load", "%g is out of range (1-100, such as 1.25; 0 turns the bound off)", u.BoundedLoad)
	}
	if u.SlowStart < 0 || u.SlowStart.D() > maxSlowStart {
		v.addf(p+".slow_start", "%s is out of range (0-1h, such as 30s; 0 turns slow start off)", u.SlowStart)
	}
	v.sticky(u, p)
}

// maxSlowStart bounds Upstream.SlowStart (which keeps the ramp's
// arithmetic far from overflow; a longer ramp is not a slow start).
const maxSlowStart = time.Hour

// fallbacks returns the strategies that may be a hash_fallback.
func fallbacks() []string {
	return slices.DeleteFunc(slices.Clone(strategies), isHashStrategy)
}

// split checks a route's split targets against the defined upstreams.
func (v *validator) split(r *Route, p string, upstreams []string) {
	if r.SplitKey != "" {
		if len(r.Split) == 0 {
			v.addf(p+".split_key", "set on a route without a split")
		} else {
			v.hashKey(p+".split_key", r.SplitKey)
		}
	}
	if r.Split == nil {
		return
	}
	sp := p + ".split"
	if len(r.Split) == 0 {
		v.addf(sp, "empty (upstreams with weights, such as [{upstream: v1, weight: 95}, {upstream: v2, weight: 5}])")
		return
	}
	seen := make(map[string]string)
	total := 0
	for i := range r.Split {
		t, tp := &r.Split[i], indexPath(sp, i)
		switch first, dup := seen[t.Upstream]; {
		case t.Upstream == "":
			v.addf(tp+".upstream", "missing (the name of an upstream)")
		case dup:
			v.addf(tp+".upstream", "%q is already in the split at %s (each upstream once)", t.Upstream, first)
		default:
			seen[t.Upstream] = tp
			v.upstreamRef(tp+".upstream", t.Upstream, upstreams)
		}
		v.intRange(tp+".weight", t.Weight, 0, 1000000)
		if t.Weight > 0 {
			total += t.Weight
		}
		if m := t.Match; m != nil {
			v.splitMatch(m, tp+".match")
		} else if t.Weight == 0 {
			v.addf(tp+".weight", "0 without a match: no request would reach %q (a weight, or a match)", t.Upstream)
		}
	}
	if total == 0 {
		v.addf(sp, "every weight is 0 (at least one upstream needs a weight)")
	}
}

// splitMatch checks a split target's match.
func (v *validator) splitMatch(m *SplitMatch, p string) {
	switch {
	case m.Header == "" && m.Cookie == "":
		v.addf(p, "neither header nor cookie is set (exactly one)")
	case m.Header != "" && m.Cookie != "":
		v.addf(p, "header and cookie are both set (exactly one)")
	case m.Header != "" && !isToken(m.Header):
		v.addf(p+".header", "%q is not a header name (letters, digits and !#$%%&'*+-.^_`|~)", m.Header)
	case m.Cookie != "" && !isToken(m.Cookie):
		v.addf(p+".cookie", "%q is not a cookie name (letters, digits and !#$%%&'*+-.^_`|~)", m.Cookie)
	}
	if strings.ContainsAny(m.Value, "\r\n\x00") {
		v.addf(p+".value", "%q has a line break or NUL (a value on one line)", m.Value)
	}
}

// upstreamRef checks that name, at path, is a defined upstream.
func (v *validator) upstreamRef(path, name string, upstreams []string) {
	if slices.Contains(upstreams, name) {
		return
	}
	defined := "no upstreams are defined"
	if len(upstreams) > 0 {
		defined = "defined: " + strings.Join(upstreams, ", ")
	}
	v.addf(path, "upstream %q is not defined (%s)", name, defined)
}
