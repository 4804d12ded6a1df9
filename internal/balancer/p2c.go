package balancer

import "github.com/helios-lb/helios/internal/upstream"

// p2c is the power of two choices: draw two distinct usable backends at
// random and take the less loaded. It spreads load almost as well as
// least_conn while reading only two in-flight counters, and, unlike
// least_conn, it does not send every new request to the same momentarily
// idlest backend when many proxies or goroutines decide at once.
type p2c struct {
	backends []*upstream.Backend
	rnd      func() uint64
}

func newP2C(bs []*upstream.Backend, rnd func() uint64) *p2c {
	return &p2c{backends: bs, rnd: rnd}
}

// Pick returns the less loaded (in-flight relative to effective weight) of
// two random usable backends; the only usable one when there is one; nil
// when none is. Ties go to the first draw, which is itself random. The
// draws honour slow start as random's do, and the comparison through the
// effective weight (slowstart.go).
func (p *p2c) Pick(k upstream.Key) *upstream.Backend {
	a := pickRandom(p.backends, k, p.rnd, -1)
	if a == nil {
		return nil
	}
	// Backends are at their Index positions (New checks it).
	b := pickRandom(p.backends, k, p.rnd, a.Index)
	if b == nil {
		return a
	}
	if lessLoaded(b.Inflight(), effWeight(b), a.Inflight(), effWeight(a)) {
		return b
	}
	return a
}
