// Package balancer implements the strategies that choose a backend of an
// upstream for one request: round_robin, weighted_round_robin, least_conn,
// ip_hash, random and p2c.
//
// Every strategy is an upstream.Picker built once per configuration
// generation. Pick runs on the request path of every request, so it takes no
// lock, allocates nothing and shares state between goroutines only through
// atomics; whatever can be computed in advance (weighted schedules, address
// hashes) is computed by New.
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
	// IPHash maps each client (upstream.Key.Hash) to a backend by weighted
	// rendezvous hashing, so that a client keeps its backend and losing one
	// backend moves only that backend's clients.
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

// ErrInvalidBackend is returned (wrapped) by New when a backend is nil, has no
// state, has a weight outside 1..MaxWeight, or has an Index that is not its
// position in the slice.
var ErrInvalidBackend = errors.New("invalid backend")

// Names returns the strategy names in documentation order. The slice is new
// on every call, so the caller may keep or modify it.
func Names() []string {
	return []string{RoundRobin, WeightedRoundRobin, LeastConn, IPHash, Random, P2C}
}

// New builds the named strategy over backends, whose Index fields must be
// 0..n-1 in slice order and whose weights must lie in 1..MaxWeight. New keeps
// its own copy of the slice, so later changes to backends do not reach the
// picker. An empty slice is accepted; its picker always returns nil.
//
// rnd supplies the randomness of random, p2c and least_conn's tie-breaking
// and must be safe for concurrent use; nil means math/rand/v2's Uint64,
// which is safe and lock-free. Tests pass a deterministic source.
//
// An unknown strategy name yields an error wrapping ErrUnknownStrategy; a
// malformed backend yields one wrapping ErrInvalidBackend.
func New(strategy string, backends []*upstream.Backend, rnd func() uint64) (upstream.Picker, error) {
	if !slices.Contains(Names(), strategy) {
		return nil, fmt.Errorf("strategy %q: %w (want one of %v)", strategy, ErrUnknownStrategy, Names())
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
	if rnd == nil {
		rnd = rand.Uint64
	}
	bs := slices.Clone(backends)
	switch strategy {
	case RoundRobin:
		return newRoundRobin(bs), nil
	case WeightedRoundRobin:
		return newWeighted(bs), nil
	case LeastConn:
		return newLeastConn(bs, rnd), nil
	case IPHash:
		return newIPHash(bs), nil
	case Random:
		return newRandom(bs, rnd), nil
	case P2C:
		return newP2C(bs, rnd), nil
	}
	// Reached only if Names and this switch disagree; TestNames catches it.
	return nil, fmt.Errorf("strategy %q: %w", strategy, ErrUnknownStrategy)
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

// lessLoaded reports whether a backend with inflight ia and weight wa is less
// loaded than one with ib and wb, that is ia/wa < ib/wb, compared without
// division. MaxWeight keeps the products far from overflow.
func lessLoaded(ia int64, wa int, ib int64, wb int) bool {
	return ia*int64(wb) < ib*int64(wa)
}

// countUsable returns how many backends other than bs[skip] (skip < 0 skips
// none) are usable for k.
func countUsable(bs []*upstream.Backend, k upstream.Key, skip int) int {
	m := 0
	for i, b := range bs {
		if i != skip && b.Usable(k) {
			m++
		}
	}
	return m
}

// nthUsable returns the usable backend of rank r (from 0) among those other
// than bs[skip]. Usability may change after the caller counted; if fewer
// than r+1 are usable now, it returns the last usable one, or nil if none is.
func nthUsable(bs []*upstream.Backend, k upstream.Key, skip, r int) *upstream.Backend {
	var last *upstream.Backend
	for i, b := range bs {
		if i == skip || !b.Usable(k) {
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
