// Package health keeps bad backends out of rotation: active health checks,
// passive ejection on observed failures, and a circuit breaker per backend.
// It writes backend state (upstream.State flags); the balancer only reads
// it.
package health

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/helios-lb/helios/internal/clock"
	"github.com/helios-lb/helios/internal/upstream"
)

// Tracker is the health bookkeeping of one backend: active-check streaks,
// passive-ejection counters and the circuit breaker. Like upstream.State,
// a Tracker outlives configuration generations, so a reload keeps what it
// knows about a backend.
type Tracker struct {
	state *upstream.State
	clock clock.Clock

	mu sync.Mutex
	// Active checks.
	okStreak, failStreak int
	lastCheck            time.Time
	lastCheckErr         string
	// Passive ejection.
	fails       int
	windowStart time.Time
	ejections   int       // ejections in a row, for the growing ejection time
	ejectedTill time.Time // end of the last ejection

	brk atomic.Pointer[breaker]
}

// NewTracker returns the tracker of the backend whose state is st.
func NewTracker(st *upstream.State) *Tracker {
	return &Tracker{state: st, clock: st.Clock()}
}

// State returns the backend state the tracker writes.
func (t *Tracker) State() *upstream.State { return t.state }

// Snapshot is what a tracker knows, for the admin API.
type Snapshot struct {
	Down          bool
	LastCheck     time.Time
	LastCheckErr  string
	Ejected       bool
	EjectedUntil  time.Time
	Ejections     int
	RecentFails   int
	Breaker       string // "closed", "half-open", "open", or "" when there is no breaker
	BreakerCounts gobreaker.Counts
}

// Snapshot returns the tracker's current view of its backend.
func (t *Tracker) Snapshot() Snapshot {
	t.mu.Lock()
	s := Snapshot{
		Down:         t.state.Down(),
		LastCheck:    t.lastCheck,
		LastCheckErr: t.lastCheckErr,
		Ejections:    t.ejections,
		RecentFails:  t.fails,
	}
	t.mu.Unlock()
	s.EjectedUntil, s.Ejected = t.state.EjectedUntil()
	if b := t.brk.Load(); b != nil {
		s.Breaker = stateName(b.cb.State())
		s.BreakerCounts = b.cb.Counts()
	}
	return s
}

// BreakerState returns the breaker's state as 0 closed, 1 half-open,
// 2 open, or -1 when the backend has no breaker.
func (t *Tracker) BreakerState() int {
	b := t.brk.Load()
	if b == nil {
		return -1
	}
	switch b.cb.State() {
	case gobreaker.StateHalfOpen:
		return 1
	case gobreaker.StateOpen:
		return 2
	}
	return 0
}

// observeCheck records one active check result and applies the fails and
// passes thresholds. It returns whether the backend changed between up and
// down, and whether it is down now.
func (t *Tracker) observeCheck(ok bool, errText string, fails, passes int) (changed, down bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lastCheck = t.clock.Now()
	t.lastCheckErr = errText
	down = t.state.Down()
	if ok {
		t.failStreak = 0
		t.okStreak++
		if down && t.okStreak >= passes {
			// Passing checks are evidence of recovery: they end a passive
			// ejection too (as Envoy's successful_active_health_check_
			// uneject_host does by default).
			if _, ejected := t.state.EjectedUntil(); ejected {
				t.ejectedTill = t.lastCheck // the ejection ended now
			}
			t.state.ClearEjection()
			t.state.SetDown(false)
			return true, false
		}
		return false, down
	}
	t.okStreak = 0
	t.failStreak++
	if !down && t.failStreak >= fails {
		t.state.SetDown(true)
		return true, true
	}
	return false, down
}

// resetChecks forgets check streaks and marks the backend up; used when an
// upstream's active checks are turned off, so no backend stays down on a
// verdict nobody will revise.
func (t *Tracker) resetChecks() {
	t.mu.Lock()
	t.okStreak, t.failStreak = 0, 0
	t.lastCheck, t.lastCheckErr = time.Time{}, ""
	t.mu.Unlock()
	t.state.SetDown(false)
}
