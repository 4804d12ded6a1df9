package balancer

import (
	"math/bits"

	"github.com/helios-lb/helios/internal/upstream"
)

// randomDraws is how many independent draws a random pick makes before it
// counts the usable backends and draws among them. Each draw costs one
// check; the count costs two passes over the pool. With a fraction f of the
// backends unusable, the passes are needed with probability f^3.
const randomDraws = 3

// random picks a usable backend uniformly at random.
type random struct {
	backends []*upstream.Backend
	rnd      func() uint64
}

func newRandom(bs []*upstream.Backend, rnd func() uint64) *random {
	return &random{backends: bs, rnd: rnd}
}

// Pick returns a random usable backend, or nil when none is usable.
func (r *random) Pick(k upstream.Key) *upstream.Backend {
	return pickRandom(r.backends, k, r.rnd, -1)
}

// pickRandom returns a uniformly random usable backend other than bs[skip]
// (skip < 0 skips none), or nil when there is none. Random ignores
// weights, so a backend in slow start counts as weight 1 (slowstart.go).
//
// A draw that lands on a usable backend picks it uniformly among the usable
// ones, so retrying keeps the result uniform; only after randomDraws misses
// does it pay for counting. It does not scan forward from a missed draw:
// that would give a usable backend after a run of unusable ones the share of
// the whole run (with three of six down in a row, 42% instead of 33%).
func pickRandom(bs []*upstream.Backend, k upstream.Key, rnd func() uint64, skip int) *upstream.Backend {
	m := len(bs) // number of candidates
	if skip >= 0 {
		m--
	}
	if m <= 0 {
		return nil
	}
	f := filter{k: k, skip: skip}
	for range randomDraws {
		i := draw(rnd, m)
		if skip >= 0 && i >= skip {
			i++ // map [0, n-1) onto [0, n) without skip
		}
		b := bs[i]
		if !b.Usable(k) {
			continue
		}
		// The draw is made only for a backend in slow start.
		if b.SlowStart <= 0 || keeps(b, 1, int64(len(bs)), rnd()) {
			return b
		}
		// In slow start, and it gives the pick up: to a backend that
		// is not.
		break
	}
	return pickNth(bs, f, rnd())
}

// draw returns an index in [0, n) from one rnd value. The multiply-shift
// (Lemire) avoids a division; its bias, at most n/2^64, is immaterial.
func draw(rnd func() uint64, n int) int {
	hi, _ := bits.Mul64(rnd(), uint64(n))
	return int(hi)
}
