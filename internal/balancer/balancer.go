// Package balancer implements the strategies that choose a backend of an
// upstream for one request: round_robin, weighted_round_robin, least_conn,
// consistent_hash (ip_hash is consistent_hash on the client address),
// random and p2c.
//
// Every strategy is an upstream.Picker built once per configuration
// generation. Pick runs on the request path of every request, so it takes no
// lock, allocates nothing and shares state between goroutines only through
// atomics; whatever can be computed in advance (weighted schedules, address
// hashes, the Maglev table) is computed by New.
//
// Every strategy honours slow start (upstream.Backend.Ramp): see
// slowstart.go for how each one ramps a backend's share.
package balancer

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"

	"github.com/helios-lb/helios/internal/upstream"
)

// Strategy names, as written in the configuration's strategy key.
const (
	// RoundRobin hands requests to the backends in turn.
	RoundRobin = "round_robin"
	// WeightedRoundRobin hands requests to the backends in turn, in
	// proportion to their weights, interleaved as nginx's smooth weighted
	// round robin does.
	WeightedRoundRobin = "weighted_round_robin"
	// LeastConn picks the backend with the fewest in-flight requests
	// relative to its weight, at random among equally loaded ones.
	LeastConn = "least_conn"
	// ConsistentHash maps each request key (upstream.Key.Hash) to a
	// backend through a Maglev table, so that a key keeps its backend and
	// a backend joining or leaving moves about 1/N of the keys; a request
	// without a key goes to Options.Fallback. See chash.go.
	ConsistentHash = "consistent_hash"
	// IPHash is the older name of ConsistentHash, kept as an alias; the
	// server hashes the client address for it.
	IPHash = "ip_hash"
	// Random picks a usable backend uniformly at random.
	Random = "random"
	// P2C draws two usable backends at random and picks the one with fewer
	// in-flight requests relative to its weight (power of two choices).
	P2C = "p2c"
)

// MaxWeight is the largest backend weight New accepts. The bound keeps
// weight arithmetic (sums of weights, in-flight counts times weights) far
// from int64 overflow, so that no strategy needs to guard against it on the
// request path.
const MaxWeight = 1_000_000

// ErrUnknownStrategy is returned (wrapped) by New for a strategy name that is
// not one of Names().
var ErrUnknownStrategy = errors.New("unknown balancing strategy")

// ErrInvalidOption is returned (wrapped) by New for an Options field out of
// its range.
var ErrInvalidOption = errors.New("invalid balancing option")

// maxBoundedLoad is the largest Options.BoundedLoad: beyond it the bound
// would hardly ever act.
const maxBoundedLoad = 100

// ErrInvalidBackend is returned (wrapped) by New when a backend is nil, has no
// state, has a weight outside 1..MaxWeight, or has an Index that is not its
// position in the slice.
var ErrInvalidBackend = errors.New("invalid backend")

// Names returns the strategy names in documentation order. The slice is new
// on every call, so the caller may keep or modify it.
func Names() []string {
	return []string{RoundRobin, WeightedRoundRobin, LeastConn, ConsistentHash, IPHash, Random, P2C}
}

// IsHash reports whether strategy picks by the request's key
// (consistent_hash or its alias ip_hash).
func IsHash(strategy string) bool { return strategy == ConsistentHash || strategy == IPHash }

// Options tune a strategy. The zero Options is valid and documented field
// by field.
type Options struct {
	// Rand supplies the randomness of random, p2c and the tie-breaking of
	// least_conn (and of a fallback strategy that needs it); it must be
	// safe for concurrent use. Nil means math/rand/v2's Uint64, which is
	// safe and lock-free. Tests pass a deterministic source.
	Rand func() uint64
	// Fallback is the strategy consistent_hash uses for a request without
	// a key (upstream.Key.Hashed false); it may not be a hash strategy.
	// Empty means round_robin. Other strategies ignore it.
	Fallback string
	// BoundedLoad, when at least 1, bounds consistent_hash: no backend
	// takes a request that would leave it with more than BoundedLoad times
	// its weighted share of the requests in flight (rounded up); the key
	// goes to its next choice instead. Zero means no bound; values between
	// 0 and 1 cannot be met and New refuses them. Other strategies ignore
	// it.
	BoundedLoad float64
}

// New builds the named strategy over backends, whose Index fields must be
// 0..n-1 in slice order and whose weights must lie in 1..MaxWeight. New keeps
// its own copy of the slice, so later changes to backends do not reach the
// picker. An empty slice is accepted; its picker always returns nil.
//
// An unknown strategy name (or fallback) yields an error wrapping
// ErrUnknownStrategy; a malformed backend yields one wrapping
// ErrInvalidBackend; a bad Options.BoundedLoad one wrapping ErrInvalidOption.
func New(strategy string, backends []*upstream.Backend, o Options) (upstream.Picker, error) {
	if !slices.Contains(Names(), strategy) {
		return nil, fmt.Errorf("strategy %q: %w (want one of %v)", strategy, ErrUnknownStrategy, Names())
	}
	if o.Fallback == "" {
		o.Fallback = RoundRobin
	}
	if IsHash(strategy) {
		if IsHash(o.Fallback) || !slices.Contains(Names(), o.Fallback) {
			return nil, fmt.Errorf("fallback strategy %q: %w (want one that does not hash)", o.Fallback, ErrUnknownStrategy)
		}
		if o.BoundedLoad != 0 && !(o.BoundedLoad >= 1 && o.BoundedLoad <= maxBoundedLoad) {
			return nil, fmt.Errorf("bounded load %g: %w (0 for none, or 1-%d)", o.BoundedLoad, ErrInvalidOption, maxBoundedLoad)
		}
	}
	for i, b := range backends {
		if err := checkBackend(i, b); err != nil {
			return nil, err
		}
	}
	if len(backends) == 0 {
		// A dedicated picker spares every strategy a guard against
		// dividing by zero on the request path.
		return none{}, nil
	}
	if o.Rand == nil {
		o.Rand = rand.Uint64
	}
	return build(strategy, slices.Clone(backends), o), nil
}

// build makes the picker of a strategy New checked, over its own copy of
// a valid, non-empty backend slice.
func build(strategy string, bs []*upstream.Backend, o Options) upstream.Picker {
	switch strategy {
	case RoundRobin:
		return newRoundRobin(bs)
	case WeightedRoundRobin:
		return newWeighted(bs)
	case LeastConn:
		return newLeastConn(bs, o.Rand)
	case ConsistentHash, IPHash:
		return newConsistentHash(bs, build(o.Fallback, bs, o), o.BoundedLoad)
	case Random:
		return newRandom(bs, o.Rand)
	case P2C:
		return newP2C(bs, o.Rand)
	}
	// Reached only if Names and this switch disagree; TestNames catches it.
	panic("balancer: strategy " + strategy + " is named but not built")
}

func checkBackend(i int, b *upstream.Backend) error {
	switch {
	case b == nil:
		return fmt.Errorf("backend %d: %w: nil", i, ErrInvalidBackend)
	case b.State == nil:
		return fmt.Errorf("backend %d (%s): %w: nil state", i, b.Addr, ErrInvalidBackend)
	case b.Weight < 1 || b.Weight > MaxWeight:
		return fmt.Errorf("backend %d (%s): %w: weight %d outside 1..%d", i, b.Addr, ErrInvalidBackend, b.Weight, MaxWeight)
	case b.Index != i:
		// Key.Exclude names backends by Index; a mismatch would make
		// retries skip the wrong backend.
		return fmt.Errorf("backend %d (%s): %w: index %d, want %d", i, b.Addr, ErrInvalidBackend, b.Index, i)
	}
	return nil
}

// none is the picker of an empty pool.
type none struct{}

func (none) Pick(upstream.Key) *upstream.Backend { return nil }

// counter is an atomic counter alone on its cache line. Every Pick of the
// round robin strategies increments one; the padding keeps those writes from
// invalidating the line that holds the read-only backend slice that all
// cores read on every Pick (false sharing).
type counter struct {
	_ [64]byte
	n atomic.Uint64
	_ [56]byte
}

// next returns the counter's value before this call's increment.
func (c *counter) next() uint64 { return c.n.Add(1) - 1 }

// lessLoaded reports whether a backend with inflight ia and (effective)
// weight wa is less loaded than one with ib and wb, that is ia/wa < ib/wb,
// compared without division. Effective weights are at most
// MaxWeight*RampFull (below 2^36), so the products stay below the int64
// limit for any in-flight count under 2^27.
func lessLoaded(ia int64, wa int64, ib int64, wb int64) bool {
	return ia*wb < ib*wa
}

// filter says which backends a second-chance pick (the turn of an
// unusable backend, a missed random draw) may choose from.
type filter struct {
	k upstream.Key
	// skip is the position of a backend left out; negative: none.
	skip int
	// warm leaves out backends in slow start: the picks they give up go
	// to the others (see slowstart.go).
	warm bool
}

func (f filter) ok(i int, b *upstream.Backend) bool {
	return i != f.skip && b.Usable(f.k) && (!f.warm || b.Ramp() >= upstream.RampFull)
}

// countUsable returns how many backends f lets through.
func countUsable(bs []*upstream.Backend, f filter) int {
	m := 0
	for i, b := range bs {
		if f.ok(i, b) {
			m++
		}
	}
	return m
}

// nthUsable returns the backend of rank r (from 0) among those f lets
// through. Usability may change after the caller counted; if fewer than r+1
// pass now, it returns the last that does, or nil if none does.
func nthUsable(bs []*upstream.Backend, f filter, r int) *upstream.Backend {
	var last *upstream.Backend
	for i, b := range bs {
		if !f.ok(i, b) {
			continue
		}
		if r == 0 {
			return b
		}
		r--
		last = b
	}
	return last
}

// pickNth returns the backend of rank seed mod m among those f lets
// through, preferring backends not in slow start (f.warm) and falling back
// to any usable one when every usable backend is in slow start; nil when
// none is usable.
func pickNth(bs []*upstream.Backend, f filter, seed uint64) *upstream.Backend {
	f.warm = true
	m := countUsable(bs, f)
	if m == 0 {
		f.warm = false
		if m = countUsable(bs, f); m == 0 {
			return nil
		}
	}
	return nthUsable(bs, f, int(seed%uint64(m)))
}
