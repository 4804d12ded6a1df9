package health

import (
	"time"

	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/upstream"
)

// Guard is an upstream's admission control and outcome learning: the
// breakers of its backends and passive ejection. It implements
// proxy.Guard.
type Guard struct {
	name     string
	addrs    []string
	trackers []*Tracker // by backend Index
	passive  *PassivePolicy
	breaker  *BreakerPolicy
	// OnEject, when set, is told of each ejection (and each refused one,
	// with d == 0) for logging.
	OnEject func(addr string, d time.Duration)
}

// NewGuard returns the guard of an upstream whose backends' trackers are
// trackers (in backend Index order). A nil passive policy turns ejection
// off; a nil breaker policy means no breakers. upstreamName names the
// breakers. Nothing changes on the trackers until Apply.
func NewGuard(upstreamName string, backends []*upstream.Backend, trackers []*Tracker, passive *PassivePolicy, brk *BreakerPolicy) *Guard {
	g := &Guard{name: upstreamName, trackers: trackers, passive: passive, breaker: brk}
	for _, b := range backends {
		g.addrs = append(g.addrs, b.Addr)
	}
	return g
}

// Apply makes the trackers follow the guard's policies: breakers built
// (or kept, when the policy did not change) or removed, and ejections
// lifted when passive ejection is off. The server calls it when the guard's
// configuration goes live.
func (g *Guard) Apply() {
	for i, t := range g.trackers {
		t.setBreaker(g.name+"/"+g.addrs[i], g.breaker)
		if g.passive == nil {
			t.state.ClearEjection()
		}
	}
}

// Active reports whether the guard has anything to do on the request
// path (a breaker or passive ejection).
func (g *Guard) Active() bool { return g.passive != nil || g.breaker != nil }

// Admit asks the backend's breaker whether it takes an attempt.
func (g *Guard) Admit(b *upstream.Backend) (func(error), bool) {
	if g.breaker == nil {
		return nil, true
	}
	br := g.trackers[b.Index].brk.Load()
	if br == nil {
		return nil, true
	}
	done, err := br.cb.Allow()
	if err != nil {
		return nil, false
	}
	return done, true
}

// Done feeds an attempt's outcome to the breaker and to passive ejection.
func (g *Guard) Done(b *upstream.Backend, ticket func(error), o proxy.Outcome) {
	if ticket != nil {
		switch o {
		case proxy.Success:
			ticket(nil)
		case proxy.Failure:
			ticket(errFailed)
		default:
			ticket(errExcluded)
		}
	}
	if o != proxy.Failure || g.passive == nil {
		return
	}
	t := g.trackers[b.Index]
	// Never eject the last available backend: with none left every
	// request would fail at once, which is worse than a bad backend.
	d, refused := t.failure(t.clock.Now(), g.passive, func() bool { return g.othersAvailable(b.Index) })
	if (d != 0 || refused) && g.OnEject != nil {
		g.OnEject(b.Addr, d)
	}
}

func (g *Guard) othersAvailable(except int) bool {
	for i, t := range g.trackers {
		if i != except && t.state.Available() {
			return true
		}
	}
	return false
}

// Tracker returns the tracker of the backend with the given index.
func (g *Guard) Tracker(i int) *Tracker { return g.trackers[i] }
