package balancer

import "github.com/helios-lb/helios/internal/upstream"

// roundRobin hands requests to the backends in turn.
//
// When the backend whose turn it is cannot be used, the turn is handed out
// by a second rotation over the usable backends only. The simpler rule, the
// next usable backend after it (nginx, Caddy), gives that neighbour a double
// share while the backend is out, just when the pool has lost capacity, and
// can push the neighbour over in turn.
type roundRobin struct {
	backends []*upstream.Backend
	// turn is the position of the next pick.
	turn counter
	// spare counts the turns handed out in place of unusable backends.
	spare counter
}

func newRoundRobin(bs []*upstream.Backend) *roundRobin {
	return &roundRobin{backends: bs}
}

// Pick returns the backend whose turn it is or, when it is unusable, the next
// usable backend of the second rotation; nil when none is usable.
func (r *roundRobin) Pick(k upstream.Key) *upstream.Backend {
	n := uint64(len(r.backends))
	if b := r.backends[r.turn.next()%n]; b.Usable(k) {
		return b
	}
	m := countUsable(r.backends, k, -1)
	if m == 0 {
		return nil
	}
	return nthUsable(r.backends, k, -1, int(r.spare.next()%uint64(m)))
}
