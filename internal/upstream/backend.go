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
	// rampFrom is when the backend last came back into rotation (unix
	// nanoseconds): from down, from an ejection, or as a newcomer on a
	// reload. 0: never, or its slow start is over.
	rampFrom atomic.Int64
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

// SetDown marks the backend down (true) or up (false). A backend that
// comes up from down starts its slow start (see Backend.Ramp).
func (s *State) SetDown(down bool) {
	if was := s.setFlag(flagDown, down); was && !down {
		s.StartRamp(s.clock.Now())
	}
}

// Eject takes the backend out of rotation until the given time; its slow
// start begins then (see Backend.Ramp).
func (s *State) Eject(until time.Time) {
	s.ejectUntil.Store(until.UnixNano())
	s.rampFrom.Store(until.UnixNano())
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

// ClearEjection ends any ejection at once; a backend whose ejection had
// not run out yet starts its slow start now.
func (s *State) ClearEjection() {
	now := s.clock.Now()
	until := s.ejectUntil.Load()
	if was := s.setFlag(flagEjected, false); was && now.UnixNano() < until {
		s.StartRamp(now)
	}
}

// StartRamp starts the backend's slow start at the given time: from then
// on, for the upstream's slow_start window, Backend.Ramp grows linearly
// from 0 to RampFull. The server calls it for a backend that joins an
// upstream on a reload; State calls it when a backend comes back from
// down or from an ejection.
func (s *State) StartRamp(at time.Time) { s.rampFrom.Store(max(at.UnixNano(), 1)) }

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

// setFlag sets or clears bit and reports whether it was set before.
func (s *State) setFlag(bit uint32, on bool) (was bool) {
	if on {
		return s.changeFlags(0, bit)&bit != 0
	}
	return s.changeFlags(bit, 0)&bit != 0
}

// changeFlags clears the bits of clear and sets those of set, at once,
// and returns the flags as they were.
func (s *State) changeFlags(clear, set uint32) (old uint32) {
	for {
		old := s.flags.Load()
		nv := old&^clear | set
		if old == nv || s.flags.CompareAndSwap(old, nv) {
			return old
		}
	}
}

// Backend is one origin server of an upstream in one configuration
// generation. Addr, Weight, Index and SlowStart never change after
// construction; the embedded *State is shared with the same backend in
// later generations.
type Backend struct {
	*State

	// Addr is the backend's host:port.
	Addr string
	// Weight is its relative share for weighted strategies; at least 1.
	Weight int
	// Index is its position in the pool's backend list, used by Set.
	Index int
	// SlowStart is the upstream's slow start window: how long a backend
	// that comes back into rotation takes to reach its full share (see
	// Ramp). Zero or negative: no slow start.
	SlowStart time.Duration
}

// RampFull is what Ramp returns for a backend at its full share.
const RampFull = 1 << 16

// Ramp returns the share of its weight the backend takes now, from 0 to
// RampFull: RampFull when there is no slow start or it is over, else the
// time since the backend came back into rotation (State.StartRamp) over
// SlowStart, scaled to RampFull, so its effective weight grows linearly.
// The common case (no slow start, or none in progress) reads a field and
// at most one atomic; only a backend in slow start reads the clock.
func (b *Backend) Ramp() uint32 {
	if b.SlowStart <= 0 {
		return RampFull // inlined: the common case costs a comparison
	}
	return b.ramp()
}

// ramp is Ramp for an upstream with slow start.
func (b *Backend) ramp() uint32 {
	from := b.rampFrom.Load()
	if from == 0 {
		return RampFull
	}
	el := b.clock.Now().UnixNano() - from
	switch {
	case el >= int64(b.SlowStart):
		// Over: later picks need not read the clock. The swap fails,
		// harmlessly, if the ramp restarted meanwhile.
		b.rampFrom.CompareAndSwap(from, 0)
		return RampFull
	case el <= 0:
		return 0
	}
	// SlowStart is at most an hour (the configuration's bound), so
	// el*RampFull stays far below the int64 limit.
	return uint32(el * RampFull / int64(b.SlowStart))
}

// Usable reports whether the backend may be picked for the request described
// by k: available and not already tried.
func (b *Backend) Usable(k Key) bool {
	return !k.Exclude.Has(b.Index) && b.Available()
}
