package balancer

import "github.com/helios-lb/helios/internal/upstream"

// Slow start: a backend that comes back into rotation (from down, from an
// ejection, or as a newcomer on a reload) has, for the upstream's
// slow_start window, an effective weight that grows linearly from 0 to its
// weight: weight × Ramp()/RampFull (upstream.Backend.Ramp). Each strategy
// honours it in the way that fits how it picks:
//
//   - round_robin, weighted_round_robin and random (the strategies that
//     share out picks): a pick that lands on a backend in slow start is
//     kept with probability keep(), and otherwise handed to a backend that
//     is not in slow start, chosen as the strategy chooses a stand-in for
//     an unusable backend. keep() is set so that the backend's share is
//     its effective weight over the sum of effective weights.
//   - consistent_hash: the same keep(), drawn per key rather than per
//     pick, so that while the ramp grows the keys come back one by one and
//     stay (a key whose draw is below the ramp keeps the backend); the
//     others go to their next choice. With bounded_load, the bound is
//     relative to effective weights too.
//   - least_conn and p2c (the strategies that pick by load): in-flight
//     requests are compared relative to effective weights, so a backend in
//     slow start holds a share of the in-flight requests that grows with
//     its ramp; ties (an idle pool) are broken in proportion to the ramp.
//     p2c also draws its two candidates as random does.
//
// When every usable backend is in slow start, the picks they give up have
// nowhere else to go, and the backends take them: slow start never makes a
// pick fail.

// keep returns the share of the picks landing on b that b keeps, from 0 to
// RampFull: RampFull when b is not in slow start. w is b's weight as the
// strategy counts it (1 for one that ignores weights) and total the sum of
// the pool's weights counted alike. With ramp f, weight w and total S, the backend's
// effective weight is f·w against S - w + f·w for the pool, so it keeps
// g = f·S / (S - w·(1-f)) of the picks that land on it (a share w/S), the
// rest going to backends not in slow start. The formula is exact for one
// backend in slow start and all backends available, and close otherwise.
func keep(b *upstream.Backend, w, total int64) uint32 {
	f := b.Ramp()
	if f >= upstream.RampFull {
		return upstream.RampFull
	}
	ff := float64(f) / upstream.RampFull
	s := float64(total)
	den := s - float64(w)*(1-ff)
	if den <= 0 {
		// b is the whole pool: there is nowhere else to send its picks.
		return upstream.RampFull
	}
	return uint32(ff * s / den * upstream.RampFull)
}

// keeps reports whether a pick that lands on b stays there; seed is
// particular to the pick (a turn number, a key's hash, a random draw),
// and a hash of it is the pick's uniform draw. w and total are as for keep.
func keeps(b *upstream.Backend, w, total int64, seed uint64) bool {
	if b.SlowStart <= 0 {
		return true // the common case, inlined: no hashing, no call
	}
	return keepsDraw(b, w, total, seed)
}

// keepsDraw is keeps for a backend of an upstream with slow start.
func keepsDraw(b *upstream.Backend, w, total int64, seed uint64) bool {
	g := keep(b, w, total)
	return g >= upstream.RampFull || uint32(mix(seed)>>48) < g
}

// effWeight returns b's effective weight, its weight scaled by its ramp,
// for comparing loads. A backend at the very start of its ramp still
// weighs something, so that comparisons stay defined.
func effWeight(b *upstream.Backend) int64 {
	return int64(b.Weight) * int64(max(b.Ramp(), 1))
}

// sumWeights returns the sum of the backends' weights.
func sumWeights(bs []*upstream.Backend) int64 {
	var s int64
	for _, b := range bs {
		s += int64(b.Weight)
	}
	return s
}
