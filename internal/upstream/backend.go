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
	flagDraining                       // drained through the admin API
	flagDisabled                       // disabled through the admin API
	flagRemoved                        // no longer a member of its upstream
)

// flagsOut are the flags that take a backend out of rotation whatever the
// time.
const flagsOut = flagDown | flagDraining | flagDisabled | flagRemoved

// AdminState is what an operator asked of a backend through the admin
// API. The zero AdminState is AdminEnabled.
type AdminState uint8

// The admin states.
const (
	// AdminEnabled: the backend takes requests when it is available.
	AdminEnabled AdminState = iota
	// AdminDraining: no new requests; those in flight finish. Health
	// checks go on, so the view shows whether it would be up.
	AdminDraining
	// AdminDisabled: no new requests, those in flight finish, and no
	// health checks either (maintenance).
	AdminDisabled
)

// String returns the state's name in the admin API: enabled, draining,
// disabled.
func (a AdminState) String() string {
	switch a {
	case AdminDraining:
		return "draining"
	case AdminDisabled:
		return "disabled"
	}
	return "enabled"
}

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
	// weight set through the admin API in place of the configured one; 0
	// when none is.
	weight atomic.Int32
}

// NewState returns the state of a new backend, initially up. A nil clock
// means the real clock.
func NewState(c clock.Clock) *State {
	if c == nil {
		c = clock.Real{}
	}
	return &State{clock: c}
}

// Available reports whether the backend may be picked: not marked down,
// drained, disabled or removed from its upstream, not ejected, and its
// breaker not open. An ejection or open breaker whose time has passed no
// longer counts (the breaker is then half-open and admission decides). The
// common case is one atomic load.
func (s *State) Available() bool {
	f := s.flags.Load()
	if f == 0 {
		return true
	}
	if f&flagsOut != 0 {
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

// Admin returns what the admin API asked of the backend.
func (s *State) Admin() AdminState {
	switch f := s.flags.Load(); {
	case f&flagDisabled != 0:
		return AdminDisabled
	case f&flagDraining != 0:
		return AdminDraining
	}
	return AdminEnabled
}

// SetAdmin records what the admin API asks of the backend.
func (s *State) SetAdmin(a AdminState) {
	var set uint32
	switch a {
	case AdminDraining:
		set = flagDraining
	case AdminDisabled:
		set = flagDisabled
	}
	s.changeFlags(flagDraining|flagDisabled, set)
}

// Removed reports whether the backend has left its upstream (a reload or
// discovery took it out); its requests in flight finish.
func (s *State) Removed() bool { return s.flags.Load()&flagRemoved != 0 }

// SetRemoved marks the backend as no longer a member of its upstream, so
// that requests that started before it left do not retry on it. A backend
// that comes back gets a new State.
func (s *State) SetRemoved() { s.setFlag(flagRemoved, true) }

// WeightOverride returns the weight set through the admin API, or 0 when
// the configured one applies.
func (s *State) WeightOverride() int { return int(s.weight.Load()) }

// SetWeightOverride sets the weight the backend gets in place of the
// configured one; 0 goes back to the configured one. The caller rebuilds
// the upstream's picker: a Backend's Weight never changes.
func (s *State) SetWeightOverride(w int) { s.weight.Store(int32(w)) }

// Clock returns the clock the state was built with.
func (s *State) Clock() clock.Clock { return s.clock }

func (s *State) setFlag(bit uint32, on bool) {
	if on {
		s.changeFlags(0, bit)
	} else {
		s.changeFlags(bit, 0)
	}
}

// changeFlags clears the bits of clear and sets those of set, at once.
func (s *State) changeFlags(clear, set uint32) {
	for {
		old := s.flags.Load()
		nv := old&^clear | set
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
