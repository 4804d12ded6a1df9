package server

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/helios-lb/helios/internal/balancer"
	"github.com/helios-lb/helios/internal/config"
	"github.com/helios-lb/helios/internal/discovery"
	"github.com/helios-lb/helios/internal/health"
	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/upstream"
)

// sourceConfig names the backends an upstream's configuration lists by
// address (member.source).
const sourceConfig = "config"

// pool is an upstream's membership in one generation: the backends its
// configuration lists, those its discovery sources found, and what is
// known about each (state and tracker), by address. It builds the
// proxy.Members the pipeline picks from, and builds and swaps in new ones
// when a source changes the set or the admin API a backend's weight; the
// pick path never waits for it.
//
// Members that stay keep their state, so health, breakers, counters,
// admin states and warm connections carry over; members that leave are
// marked removed (requests in flight finish, none start) and the engine
// closes their idle connections.
type pool struct {
	s   *Server
	uc  config.Upstream
	up  *proxy.Upstream
	log *zap.Logger
	// static are the backends the configuration lists by address.
	static []discovery.Target
	// watchers are the upstream's discovery sources, in configuration
	// order.
	watchers []*discovery.Watcher

	mu sync.Mutex
	// members are the backends being served, by address; order holds
	// them in the order of up.Members().Backends.
	members map[string]*member
	order   []*member
	checker *health.Checker
	// live: the generation is committed; checks run, guards apply and
	// departures reach the engine. retired: a later generation took
	// over, and changes are its business.
	live, retired bool
}

// member is one backend of a pool. Members are replaced, never changed:
// a new Members gets new ones.
type member struct {
	addr string
	// weight is the configured or discovered weight (the admin API's
	// override is in st); source names where the backend came from.
	weight int
	source string
	st     *upstream.State
	tr     *health.Tracker
}

// newPool returns the pool of up, built from uc, its discovery watchers
// and (for the state of backends that stay) prev, the same upstream's
// pool in the generation being replaced (nil: none). up's members are
// set; nothing running changes until goLive.
func (s *Server) newPool(uc config.Upstream, up *proxy.Upstream, watchers []*discovery.Watcher, prev *pool) (*pool, error) {
	p := &pool{s: s, uc: uc, up: up, watchers: watchers, log: s.log.With(zap.String("upstream", uc.Name)), members: map[string]*member{}}
	for _, b := range uc.Backends {
		if b.Kind() == "address" {
			p.static = append(p.static, discovery.Target{Addr: b.Address, Weight: b.Weight})
		}
	}
	var lookup func(addr string) *member
	if prev != nil {
		lookup = prev.member
	}
	if _, _, err := p.rebuild(lookup, true); err != nil {
		return nil, err
	}
	// The members the upstream is built with (proxy.Upstream's fields).
	m := up.Members()
	up.Backends, up.Picker, up.Guard = m.Backends, m.Picker, m.Guard
	return p, nil
}

// member returns the member at addr, or nil.
func (p *pool) member(addr string) *member {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.members[addr]
}

// wanted returns the backends the pool should have now: the configured
// ones, then each source's last good set, each address once (the first
// to name it decides its weight and source).
func (p *pool) wanted() []member {
	var out []member
	seen := make(map[string]bool)
	add := func(ts []discovery.Target, source string) {
		for _, t := range ts {
			if !seen[t.Addr] {
				seen[t.Addr] = true
				out = append(out, member{addr: t.Addr, weight: t.Weight, source: source})
			}
		}
	}
	add(p.static, sourceConfig)
	for _, w := range p.watchers {
		ts, _ := w.Targets()
		add(ts, w.String())
	}
	return out
}

// rebuild makes the members what wanted says, keeping the state of the
// backends the pool has (or that lookup finds, for a new generation), and
// installs new proxy.Members when the set changed or force says to. It
// returns the members that came (nothing was known of them) and those
// that left. On error nothing changed. The caller holds p.mu, or has p to
// itself.
func (p *pool) rebuild(lookup func(addr string) *member, force bool) (added, left []*member, err error) {
	want := p.wanted()
	next := make(map[string]*member, len(want))
	order := make([]*member, 0, len(want))
	same := len(want) == len(p.order)
	for i, w := range want {
		old := p.members[w.addr]
		if old == nil && lookup != nil {
			old = lookup(w.addr)
		}
		m := &member{addr: w.addr, weight: w.weight, source: w.source}
		if old != nil && !old.st.Removed() {
			m.st, m.tr = old.st, old.tr
		} else {
			// New, or gone and back: a backend nothing is known of. One
			// that joins an upstream already serving (a reload kept the
			// upstream, or discovery found it) starts slow (slow_start);
			// the backends of a new upstream, or of the first
			// generation, all start at once, with nothing to spare them
			// from.
			m.st = upstream.NewState(p.s.clock)
			m.tr = health.NewTracker(m.st)
			if lookup != nil || p.live {
				m.st.StartRamp(m.st.Clock().Now())
			}
			added = append(added, m)
		}
		next[w.addr] = m
		order = append(order, m)
		same = same && *p.order[i] == *m
	}
	if !same || force {
		if err := p.install(order); err != nil {
			return nil, nil, err
		}
	}
	for addr, m := range p.members {
		if next[addr] == nil {
			left = append(left, m)
		}
	}
	p.members, p.order = next, order
	return added, left, nil
}

// reinstall installs new proxy.Members for the same members (a weight
// changed). The caller holds p.mu.
func (p *pool) reinstall() error { return p.install(p.order) }

// install builds proxy.Members from order, with a picker and a guard over
// them, and swaps them in.
func (p *pool) install(order []*member) error {
	backends := make([]*upstream.Backend, len(order))
	trackers := make([]*health.Tracker, len(order))
	for i, m := range order {
		w := m.weight
		if o := m.st.WeightOverride(); o > 0 {
			w = o
		}
		backends[i] = &upstream.Backend{State: m.st, Addr: m.addr, Weight: w, Index: i, SlowStart: p.uc.SlowStart.D()}
		trackers[i] = m.tr
	}
	picker, err := balancer.New(p.uc.Strategy, backends, balancer.Options{Fallback: p.uc.HashFallback, BoundedLoad: p.uc.BoundedLoad})
	if err != nil {
		return fmt.Errorf("upstream %s: %w", p.uc.Name, err)
	}
	guard := health.NewGuard(p.uc.Name, backends, trackers, passivePolicy(p.uc.Passive), breakerPolicy(p.uc.CircuitBreaker))
	log := p.log
	guard.OnEject = func(addr string, d time.Duration) {
		if d == 0 {
			log.Warn("backend failing but not ejected: it is the last one available", zap.String("backend", addr))
			return
		}
		log.Warn("backend ejected after repeated failures", zap.String("backend", addr), zap.Duration("for", d))
	}
	m := &proxy.Members{Backends: backends, Picker: picker, Sticky: p.up.Sticky.Table(backends)}
	if guard.Active() {
		m.Guard = guard
	}
	if p.live {
		guard.Apply()
	}
	p.up.SetMembers(m)
	return nil
}

// trackers returns the members' trackers, in order. p.mu is held.
func (p *pool) trackers() []*health.Tracker {
	ts := make([]*health.Tracker, len(p.order))
	for i, m := range p.order {
		ts[i] = m.tr
	}
	return ts
}

// goLive makes the pool the one serving its upstream: prev (the same
// upstream's pool in the generation replaced; nil: none) retires, the
// watchers tell this pool of changes from now on, the guard's policies
// apply, checks start, and what the sources found since the build is
// taken in.
func (p *pool) goLive(prev *pool) {
	if prev != nil {
		prev.retire()
	}
	for _, w := range p.watchers {
		w.SetNotify(p.changed)
	}
	p.mu.Lock()
	p.live = true
	_, left, err := p.rebuild(nil, true)
	if err != nil {
		// The members built with the generation stay; their guard
		// still needs its policies.
		p.log.Error("discovery: the backends found since the configuration was built could not be taken in", zap.Error(err))
		p.reinstall()
	}
	if !p.up.Checked {
		// No verdict of an earlier generation's checks stays, since
		// nobody would revise it.
		health.Reset(p.trackers())
	}
	p.startChecks()
	p.mu.Unlock()
	p.drain(left, "its source no longer lists it")
	for _, w := range p.watchers {
		w.Start()
	}
}

// changed takes in a change of a source's set (a watcher's notify).
func (p *pool) changed() {
	p.mu.Lock()
	if !p.live || p.retired {
		p.mu.Unlock()
		return
	}
	added, left, err := p.rebuild(nil, false)
	if err != nil {
		p.mu.Unlock()
		p.log.Error("discovery: the new backends could not be taken in; the current ones stay", zap.Error(err))
		return
	}
	if len(added) > 0 || len(left) > 0 {
		p.startChecks()
	}
	p.mu.Unlock()
	for _, m := range added {
		p.log.Info("backend added", zap.String("backend", m.addr), zap.String("source", m.source))
	}
	p.drain(left, "its source no longer lists it")
}

// drain takes members that left out for good: requests that started on
// them finish, none start (not even retries of requests that started
// before), and the engine closes their idle connections. why is logged.
func (p *pool) drain(left []*member, why string) {
	for _, m := range left {
		m.st.SetRemoved()
		p.s.retireBackend(p.uc.Name, m.addr)
		p.log.Info("backend removed; requests in flight finish", zap.String("backend", m.addr), zap.String("source", m.source), zap.String("why", why))
	}
}

// drainLeft drains the members of p, a retired pool, that next (the same
// upstream's pool in the generation that replaced p; nil when the
// upstream is gone) does not have.
func (p *pool) drainLeft(next *pool) {
	p.mu.Lock()
	had := append([]*member(nil), p.order...)
	p.mu.Unlock()
	var left []*member
	for _, m := range had {
		if next == nil {
			left = append(left, m)
			continue
		}
		if n := next.member(m.addr); n == nil || n.st != m.st {
			left = append(left, m)
		}
	}
	p.drain(left, "the configuration no longer lists it")
}

// startChecks starts (or restarts, for a new set of members) the active
// health checks. p.mu is held.
func (p *pool) startChecks() {
	if p.checker != nil {
		p.checker.Stop()
		p.checker = nil
	}
	hc := p.uc.HealthCheck
	if hc == nil || !p.live || p.retired {
		return
	}
	addrs := make([]string, len(p.order))
	for i, m := range p.order {
		addrs[i] = m.addr
	}
	expect := hc.Expect()
	c := health.NewChecker(health.CheckPolicy{
		Path:     hc.Path,
		Interval: hc.Interval.D(),
		Timeout:  hc.Timeout.D(),
		Fails:    hc.Fails,
		Passes:   hc.Passes,
		Expect:   expect.Contains,
	}, addrs, p.trackers(), nil)
	name, log := p.uc.Name, p.log
	if m := p.s.metrics; m != nil {
		c.OnResult = func(addr string, pass bool) { m.HealthCheckResult(name, addr, pass) }
	}
	c.OnChange = func(addr string, down bool, reason string) {
		if down {
			log.Warn("backend down: health checks failing", zap.String("backend", addr), zap.String("reason", reason))
		} else {
			log.Info("backend up: health checks passing", zap.String("backend", addr))
		}
	}
	p.checker = c
	c.Start()
}

// retire stops the pool, when a later generation's pool takes the
// upstream over or the generation is released: checks stop and changes
// are no longer applied here.
func (p *pool) retire() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.retired = true
	if p.checker != nil {
		p.checker.Stop()
		p.checker = nil
	}
}

// Errors of control.
var (
	errNoBackend = errors.New("no such backend in the upstream")
	errRetired   = errors.New("the upstream's pool was replaced")
)

// control applies f to the member at addr and installs new members when
// f says the weight changed.
func (p *pool) control(addr string, f func(m *member) (reweigh bool)) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.retired {
		return errRetired
	}
	m := p.members[addr]
	if m == nil {
		return errNoBackend
	}
	if f(m) {
		return p.reinstall()
	}
	return nil
}

// snapshot returns the members in order and the watchers' statuses.
func (p *pool) snapshot() ([]*member, []discovery.Status) {
	p.mu.Lock()
	ms := append([]*member(nil), p.order...)
	p.mu.Unlock()
	ss := make([]discovery.Status, len(p.watchers))
	for i, w := range p.watchers {
		ss[i] = w.Status()
	}
	return ms, ss
}
