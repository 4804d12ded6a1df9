package proxy

import (
	"bytes"
	"math/bits"
	"math/rand/v2"

	"github.com/helios-lb/helios/internal/upstream"
	"github.com/helios-lb/helios/internal/wire"
)

// Split shares a route's requests among upstreams by weight (a canary
// release: v1 95, v2 5), with pinned variants that testers can force with
// a header or a cookie.
type Split struct {
	// Variants are the upstreams, in configuration order.
	Variants []Variant
	// Key, when not KeyNone, makes the choice a function of the request's
	// key, so that a client (a user id header, a session cookie) stays on
	// one variant across requests, and a weight raised by a reload keeps
	// the clients the variant had. Requests without the key are drawn at
	// random.
	Key RequestKey
	// Rand supplies the random draws; it must be safe for concurrent use.
	// Nil means math/rand/v2's Uint64. Tests pass a deterministic source.
	Rand func() uint64
}

// Variant is one upstream of a Split.
type Variant struct {
	// Upstream receives the variant's requests.
	Upstream *Upstream
	// Weight is the variant's share of the requests that no pin decides,
	// relative to the other variants' weights; 0 means pinned requests
	// only.
	Weight uint64
	// Pin, when set, sends every request that carries it to this variant,
	// whatever the weights; the first variant whose pin matches wins.
	Pin *Pin
	// Stats counts the variant's requests; nil counts nothing.
	Stats *RouteStats
}

// Pin matches requests by a header or a cookie.
type Pin struct {
	// Key is where the value is read: KeyHeader or KeyCookie.
	Key RequestKey
	// Value is what it must equal exactly; nil matches any non-empty
	// value.
	Value []byte
}

// matches reports whether ex carries the pin.
func (p *Pin) matches(ex wire.Exchange) bool {
	v := p.Key.value(ex)
	if p.Value == nil {
		return len(v) > 0
	}
	return bytes.Equal(v, p.Value)
}

// saltSplit keeps a key's draw for a split independent of its hash for a
// consistent_hash upstream behind it: were they the same, each variant
// would get the keys of only some of its backends.
const saltSplit = 0xa54ff53a5f1d36f1

// choose returns the variant for ex: the first whose pin matches, or else
// the first whose sticky cookie names an available backend, or else one
// drawn by weight, from the request's key when the split has one and
// the request carries it, at random otherwise. It allocates nothing.
func (s *Split) choose(ex wire.Exchange) *Variant {
	var total uint64
	for i := range s.Variants {
		v := &s.Variants[i]
		if v.Pin != nil && v.Pin.matches(ex) {
			return v
		}
		total += v.Weight
	}
	if v := s.stickyVariant(ex); v != nil {
		return v
	}
	var x uint64
	if h, ok := s.Key.hash(ex); ok {
		x = upstream.Mix(h ^ saltSplit)
	} else if s.Rand != nil {
		x = s.Rand()
	} else {
		x = rand.Uint64()
	}
	// Variants lie side by side on [0, total) in order, so raising a
	// later variant's weight at the expense of an earlier one only moves
	// keys into it: its clients stay.
	r, _ := bits.Mul64(x, total)
	for i := range s.Variants {
		v := &s.Variants[i]
		if r < v.Weight {
			return v
		}
		r -= v.Weight
	}
	// Only when every weight is 0, which validation refuses.
	return &s.Variants[len(s.Variants)-1]
}
