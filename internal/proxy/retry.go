package proxy

import (
	"errors"
	"sync/atomic"

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
	// unparsable answer), like nginx's proxy_next_upstream error.
	OnBackendError bool
	// OnTimeout retries requests whose backend timed out.
	OnTimeout bool
	// Statuses lists backend statuses (500..599) that are retried; they
	// also count as backend failures for breakers and ejection.
	Statuses StatusSet
	// IdempotentOnly limits timeout and status retries to idempotent
	// methods (connect errors are always safe to retry).
	IdempotentOnly bool
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

// Budget limits retries to a share of requests, so that retrying cannot
// multiply the load on an upstream that is failing (the retry storms of
// SRE lore). It is a token bucket: every request earns Ratio of a token,
// every retry spends one, and at most Burst tokens are kept. Lock-free.
type Budget struct {
	ratio  int64 // milli-tokens earned per request
	burst  int64 // milli-tokens
	tokens atomic.Int64
}

// NewBudget returns a full budget. ratio is retries per request (0.2
// allows one retry per five requests over time); burst is how many
// retries may happen back to back (at least 1).
func NewBudget(ratio float64, burst int) *Budget {
	if burst < 1 {
		burst = 1
	}
	b := &Budget{ratio: int64(ratio * 1000), burst: int64(burst) * 1000}
	b.tokens.Store(b.burst)
	return b
}

// Earn credits one request.
func (b *Budget) Earn() {
	if b.ratio == 0 {
		return
	}
	// Skip the write when full: a shared cache line written by every
	// request on every core costs more than the check.
	if b.tokens.Load() >= b.burst {
		return
	}
	if t := b.tokens.Add(b.ratio); t > b.burst {
		b.tokens.CompareAndSwap(t, b.burst)
	}
}

// Spend takes one retry's token and reports whether there was one.
func (b *Budget) Spend() bool {
	for {
		t := b.tokens.Load()
		if t < 1000 {
			return false
		}
		if b.tokens.CompareAndSwap(t, t-1000) {
			return true
		}
	}
}

// Tokens returns the whole retries currently available.
func (b *Budget) Tokens() int64 { return b.tokens.Load() / 1000 }
