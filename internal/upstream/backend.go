// Package upstream holds the backends of an upstream pool and the state that
// health checks, passive ejection and circuit breakers write and that the
// balancing strategies read.
//
// State is kept in atomics so that the request path never takes a lock to
// decide whether a backend may be picked.
package upstream

import (
	"sync/atomic"
	"time"

	"github.com/helios-lb/helios/internal/clock"
)

// Flag bits of State.flags. A backend with no flag set is available.
const (
	flagDown        uint32 = 1 << iota // marked down by active health checks
	flagEjected                        // passively ejected until ejectUntil
	flagBreakerOpen                    // circuit breaker open until openUntil
)

// State is the part of a backend that outlives a configuration generation:
// counters, health, ejection and breaker state. A reload that keeps a backend
// (same upstream, same address) hands the same *State to the new Backend.
type State struct {
	clock clock.Clock

	inflight atomic.Int64
	requests atomic.Uint64
	failures atomic.Uint64

	flags      atomic.Uint32
	ejectUntil atomic.Int64 // unix nanoseconds; meaningful while flagEjected is set
	openUntil  atomic.Int64 // unix nanoseconds; meaningful while flagBreakerOpen is set
}

// NewState returns the state of a new backend, initially up. A nil clock
// means the real clock.
func NewState(c clock.Clock) *State {
	if c == nil {
		c = clock.Real{}
	}
	return &State{clock: c}
}

// Available reports whether the backend may be picked: not marked down, not
// ejected, and its breaker not open. An ejection or open breaker whose time
// has passed no longer counts (the breaker is then half-open and admission
// decides). The common case is one atomic load.
func (s *State) Available() bool {
	f := s.flags.Load()
	if f == 0 {
		return true
	}
	if f&flagDown != 0 {
		return false
	}
	now := s.clock.Now().UnixNano()
	if f&flagEjected != 0 && now < s.ejectUntil.Load() {
		return false
	}
	if f&flagBreakerOpen != 0 && now < s.openUntil.Load() {
		return false
	}
	return true
}

// Inflight returns the number of requests being forwarded to the backend now.
func (s *State) Inflight() int64 { return s.inflight.Load() }

// Requests returns the number of requests forwarded to the backend so far.
func (s *State) Requests() uint64 { return s.requests.Load() }

// Failures returns the number of forwarded requests that failed so far
// (connect errors, timeouts, statuses the upstream counts as failures).
func (s *State) Failures() uint64 { return s.failures.Load() }

// Begin records the start of a request to the backend.
func (s *State) Begin() {
	s.inflight.Add(1)
	s.requests.Add(1)
}

// End records the end of a request started with Begin; failed says whether it
// counts as a failure of the backend.
func (s *State) End(failed bool) {
	s.inflight.Add(-1)
	if failed {
		s.failures.Add(1)
	}
}

// Down reports whether active health checks have marked the backend down.
func (s *State) Down() bool { return s.flags.Load()&flagDown != 0 }

// SetDown marks the backend down (true) or up (false).
func (s *State) SetDown(down bool) { s.setFlag(flagDown, down) }

// Eject takes the backend out of rotation until the given time.
func (s *State) Eject(until time.Time) {
	s.ejectUntil.Store(until.UnixNano())
	s.setFlag(flagEjected, true)
}

// EjectedUntil returns the end of the current ejection and whether one is in
// force at the clock's current time.
func (s *State) EjectedUntil() (time.Time, bool) {
	if s.flags.Load()&flagEjected == 0 {
		return time.Time{}, false
	}
	until := s.ejectUntil.Load()
	if s.clock.Now().UnixNano() >= until {
		return time.Time{}, false
	}
	return time.Unix(0, until), true
}

// ClearEjection ends any ejection at once.
func (s *State) ClearEjection() { s.setFlag(flagEjected, false) }

// SetBreakerOpen records that the backend's breaker is open until the given
// time (open true) or is closed or half-open (open false).
func (s *State) SetBreakerOpen(open bool, until time.Time) {
	if open {
		s.openUntil.Store(until.UnixNano())
	}
	s.setFlag(flagBreakerOpen, open)
}

// Clock returns the clock the state was built with.
func (s *State) Clock() clock.Clock { return s.clock }

func (s *State) setFlag(bit uint32, on bool) {
	for {
		old := s.flags.Load()
		nv := old &^ bit
		if on {
			nv = old | bit
		}
		if old == nv || s.flags.CompareAndSwap(old, nv) {
			return
		}
	}
}

// Backend is one origin server of an upstream in one configuration
// generation. Addr, Weight and Index never change after construction; the
// embedded *State is shared with the same backend in later generations.
type Backend struct {
	*State

	// Addr is the backend's host:port.
	Addr string
	// Weight is its relative share for weighted strategies; at least 1.
	Weight int
	// Index is its position in the pool's backend list, used by Set.
	Index int
}

// Usable reports whether the backend may be picked for the request described
// by k: available and not already tried.
func (b *Backend) Usable(k Key) bool {
	return !k.Exclude.Has(b.Index) && b.Available()
}
