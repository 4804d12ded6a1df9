package balancer

import (
	"math/bits"

	"github.com/helios-lb/helios/internal/upstream"
)

// leastConn picks the usable backend with the fewest in-flight requests
// relative to its weight, breaking ties uniformly at random.
//
// Ties are the common case under light load (all idle), and handing them to
// the first backend would send it all traffic. A rotating start offset
// spreads ties evenly only when every backend is tied: when some are busy,
// the tied backend right after them wins every scan that starts among them
// (one busy of three: 2:1 instead of 1:1). So the scan instead keeps the
// k-th tie it meets with probability 1/k (reservoir sampling), which is
// uniform over the tied backends, and needs no shared counter, whose
// cache line every core would otherwise write on every pick.
//
// Slow start (slowstart.go): loads are relative to effective weights, and
// a tie is kept in proportion to each backend's ramp rather than
// uniformly (the same thing when no backend is in slow start).
type leastConn struct {
	backends []*upstream.Backend
	rnd      func() uint64
}

func newLeastConn(bs []*upstream.Backend, rnd func() uint64) *leastConn {
	return &leastConn{backends: bs, rnd: rnd}
}

// Pick returns the least loaded usable backend, chosen at random among equal
// ones, or nil when none is usable.
func (l *leastConn) Pick(k upstream.Key) *upstream.Backend {
	var (
		best         *upstream.Backend
		bestInflight int64
		bestWeight   int64  // best's effective weight
		ties         uint64 // the sum of the ramps of the backends seen at best's load, best included
		x            uint64 // tie-break state, seeded from rnd at the first tie
	)
	for _, b := range l.backends {
		if !b.Usable(k) {
			continue
		}
		// Load each counter once: it moves under us, and comparing
		// against a value read twice could pick neither extreme.
		in := b.Inflight()
		r := b.Ramp()
		w := int64(b.Weight) * int64(max(r, 1)) // effWeight, with the ramp read once
		switch {
		case best == nil || lessLoaded(in, w, bestInflight, bestWeight):
			best, bestInflight, bestWeight, ties = b, in, w, uint64(r)
		case !lessLoaded(bestInflight, bestWeight, in, w):
			if x == 0 {
				x = l.rnd() | 1 // nonzero marks it seeded
			}
			ties += uint64(r)
			// One rnd call per pick at most; a 64-bit LCG step
			// (Knuth's MMIX constants) derives the next draw. Its high
			// bits, the ones the multiply-shift uses, are good enough
			// to break ties. The tie is kept with probability r/ties
			// (weighted reservoir sampling): 1/k for the k-th of k
			// backends at their full ramp.
			x = x*6364136223846793005 + 1442695040888963407
			if hi, _ := bits.Mul64(x, ties); hi < uint64(r) {
				best, bestInflight, bestWeight = b, in, w
			}
		}
	}
	return best
}
