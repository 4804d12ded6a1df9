package proxy

import (
	"errors"
	"math/bits"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/helios-lb/helios/internal/wire"
)

// RetryPolicy says when a failed attempt is tried again on another
// backend. The zero value never retries.
type RetryPolicy struct {
	// Attempts is the number of retries after the first attempt.
	Attempts int
	// OnConnectError retries requests that never reached a backend.
	OnConnectError bool
	// OnBackendError retries idempotent requests whose backend broke the
	// connection before sending a response head (reset, early close,
	// unparsable answer), like nginx's proxy_next_upstream error: the
	// configuration's reset. Nothing of the answer has reached the client
	// then (an engine relays the head as soon as it has it).
	OnBackendError bool
	// OnTimeout retries requests whose backend timed out.
	OnTimeout bool
	// Statuses lists backend statuses (500..599) that are retried; they
	// also count as backend failures for breakers and ejection.
	Statuses StatusSet
	// IdempotentOnly limits timeout and status retries to idempotent
	// methods (connect errors are always safe to retry).
	IdempotentOnly bool
	// Backoff spaces the retries out; the zero Backoff retries at once.
	Backoff Backoff
}

// Backoff spaces retries out: before the n-th retry (from 1) of a request
// the pipeline waits a random time in [0, min(Max, Base·2^(n-1))] ("full
// jitter"), so that requests that failed together do not all come back
// together. The wait runs on the engine's timers (wire.ActWait), never
// blocking. A retry for a backend at its connection cap
// (wire.ErrBackendBusy) does not wait: nothing failed.
type Backoff struct {
	// Base is the ceiling of the first wait; zero or less: no waiting.
	Base time.Duration
	// Max caps the ceiling as it doubles; at least Base.
	Max time.Duration
	// Rand supplies the draws and must be safe for concurrent use; nil
	// means math/rand/v2's Uint64. Tests pass a deterministic source.
	Rand func() uint64
}

// delay returns the wait before the n-th retry (n from 1).
func (b *Backoff) delay(n int) time.Duration {
	if b.Base <= 0 {
		return 0
	}
	ceil := b.Max
	if n >= 1 && n < 32 {
		if c := b.Base << (n - 1); c > 0 && c < ceil {
			ceil = c
		}
	}
	x := b.Rand
	if x == nil {
		x = rand.Uint64
	}
	hi, _ := bits.Mul64(x(), uint64(ceil)+1)
	return time.Duration(hi)
}

// StatusSet is a set of 5xx statuses; bit i is status 500+i.
type StatusSet uint128

// uint128 is two words, enough for statuses 500..599.
type uint128 [2]uint64

// Add puts status s (500..599) in the set; others are ignored.
func (s *StatusSet) Add(code int) {
	if code < 500 || code > 599 {
		return
	}
	i := code - 500
	s[i/64] |= 1 << (i % 64)
}

// Has reports whether status code is in the set.
func (s StatusSet) Has(code int) bool {
	if code < 500 || code > 599 {
		return false
	}
	i := code - 500
	return s[i/64]&(1<<(i%64)) != 0
}

// retryable reports whether err (from RoundTrip) may be retried under p
// given the method's idempotency. It does not look at attempts, budget or
// the request body.
func (p *RetryPolicy) retryableErr(err error, idempotent bool) bool {
	switch {
	case errors.Is(err, wire.ErrConnect):
		return p.OnConnectError
	case errors.Is(err, wire.ErrTimeout):
		return p.OnTimeout && (idempotent || !p.IdempotentOnly)
	case errors.Is(err, wire.ErrBackend):
		// The backend may have acted on the request before it broke, so
		// only idempotent methods, whatever IdempotentOnly says.
		return p.OnBackendError && idempotent
	}
	return false
}

// retryableStatus reports whether a response with status may be retried.
func (p *RetryPolicy) retryableStatus(status int, idempotent bool) bool {
	return p.Statuses.Has(status) && (idempotent || !p.IdempotentOnly)
}

// Budget limits retries to a share of recent requests, so that retrying
// cannot multiply the load on an upstream that is failing (the retry
// storms of SRE lore), while a stall of one backend is still retried in
// full. Over any window, retries may be Ratio of the requests seen in the
// window plus a floor of MinPerSecond per second of it, whatever the
// traffic (Finagle's and Linkerd's retry budget: ttl, percent_can_retry,
// min_retries_per_second).
//
// A fixed token bucket cannot do both (issue 9 item 4): with a burst of
// 10, a hundred requests that timed out together on a hung backend got
// 59 504s where nginx retried them all. The window's credit grows with
// traffic, and requests that time out together draw on what the requests
// of the whole window earned.
//
// Counts live in a ring of time slots, each an atomic word holding the
// slot's epoch and its count: lock-free and allocation-free.
type Budget struct {
	ratio    int64 // milli-retries earned per request
	floor    int64 // milli-retries allowed per window whatever the traffic
	slotNano int64
	requests [budgetSlots]atomic.Uint64 // epoch<<32 | count
	retries  [budgetSlots]atomic.Uint64 // epoch<<32 | count
}

// budgetSlots is how many slots a window is cut into; the window slides
// by one slot at a time.
const budgetSlots = 12

// NewBudget returns a budget that allows, over any window of the given
// length, ratio retries per request of the window (0.2: one retry per five
// requests) plus minPerSecond retries per second of the window. A window
// of zero or less means 10s.
func NewBudget(ratio float64, minPerSecond int, window time.Duration) *Budget {
	if window <= 0 {
		window = 10 * time.Second
	}
	return &Budget{
		ratio:    int64(ratio * 1000),
		floor:    int64(minPerSecond) * window.Milliseconds(),
		slotNano: max(int64(window)/budgetSlots, 1),
	}
}

func (b *Budget) epoch(now time.Time) uint32 { return uint32(now.UnixNano() / b.slotNano) }

// Earn credits one request at now.
func (b *Budget) Earn(now time.Time) {
	if b.ratio == 0 {
		return
	}
	e := b.epoch(now)
	w := &b.requests[e%budgetSlots]
	for {
		v := w.Load()
		ve := uint32(v >> 32)
		if ve == e {
			w.Add(1)
			return
		}
		if ve-e < budgetSlots {
			return // the slot moved on already: a request from the past
		}
		if w.CompareAndSwap(v, uint64(e)<<32|1) {
			return
		}
	}
}

// Spend takes one retry at now and reports whether the window allowed it.
func (b *Budget) Spend(now time.Time) bool {
	e := b.epoch(now)
	w := &b.retries[e%budgetSlots]
	for {
		v := w.Load()
		n := uint64(0)
		if uint32(v>>32) == e {
			n = v & (1<<32 - 1)
		}
		if b.allowance(e) < 1000 {
			return false
		}
		// A CAS on the current slot: two retries cannot both take the
		// window's last one.
		if w.CompareAndSwap(v, uint64(e)<<32|(n+1)) {
			return true
		}
	}
}

// allowance returns the milli-retries the window ending in epoch e has
// left.
func (b *Budget) allowance(e uint32) int64 {
	var reqs, tries int64
	for i := range budgetSlots {
		if v := b.requests[i].Load(); e-uint32(v>>32) < budgetSlots {
			reqs += int64(v & (1<<32 - 1))
		}
		if v := b.retries[i].Load(); e-uint32(v>>32) < budgetSlots {
			tries += int64(v & (1<<32 - 1))
		}
	}
	return b.floor + b.ratio*reqs - 1000*tries
}

// Available returns the whole retries the window ending at now has left.
func (b *Budget) Available(now time.Time) int64 { return max(b.allowance(b.epoch(now)), 0) / 1000 }
