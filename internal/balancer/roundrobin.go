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
	total    int64 // the number of backends (each counts as weight 1), for slow start
	// turn is the position of the next pick.
	turn counter
	// spare counts the turns handed out in place of unusable backends.
	spare counter
}

func newRoundRobin(bs []*upstream.Backend) *roundRobin {
	return &roundRobin{backends: bs, total: int64(len(bs))}
}

// Pick returns the backend whose turn it is or, when it is unusable (or in
// slow start and gives the turn up), the next backend of the second
// rotation; nil when none is usable.
func (r *roundRobin) Pick(k upstream.Key) *upstream.Backend {
	n := uint64(len(r.backends))
	t := r.turn.next()
	// Round robin ignores weights: each backend counts as weight 1.
	if b := r.backends[t%n]; b.Usable(k) && keeps(b, 1, r.total, t) {
		return b
	}
	return pickNth(r.backends, filter{k: k, skip: -1}, r.spare.next())
}
