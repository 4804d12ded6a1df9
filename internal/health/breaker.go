package health

import (
	"errors"
	"time"

	"github.com/sony/gobreaker/v2"
)

// BreakerPolicy configures a circuit breaker: it opens on
// ConsecutiveFailures failures in a row (0: this trigger off) or when at
// least MinRequests requests within Interval failed at a ratio of at least
// FailureRatio (0: this trigger off); it stays open for OpenFor, then lets
// HalfOpenRequests trial requests through; their success closes it, a
// failure opens it again.
type BreakerPolicy struct {
	ConsecutiveFailures int
	FailureRatio        float64
	MinRequests         int
	Interval            time.Duration
	OpenFor             time.Duration
	HalfOpenRequests    int
}

// Outcome errors handed to gobreaker's completion callback.
var (
	errFailed = errors.New("backend attempt failed")
	// errExcluded marks an attempt that says nothing about the backend
	// (the client went away): gobreaker neither counts it as a success nor
	// as a failure.
	errExcluded = errors.New("attempt excluded")
)

// breaker is one backend's gobreaker and the policy it was built with, so
// a reload with the same policy keeps it (and its state).
type breaker struct {
	cb     *gobreaker.TwoStepCircuitBreaker[struct{}]
	policy BreakerPolicy
}

// setBreaker installs a breaker with policy p, keeping the current one if
// its policy is the same; a nil p removes the breaker.
func (t *Tracker) setBreaker(name string, p *BreakerPolicy) {
	if p == nil {
		t.brk.Store(nil)
		t.state.SetBreakerOpen(false, time.Time{})
		return
	}
	if old := t.brk.Load(); old != nil && old.policy == *p {
		return
	}
	pol := *p
	st := t.state
	clk := t.clock
	settings := gobreaker.Settings{
		Name:        name,
		MaxRequests: uint32(pol.HalfOpenRequests),
		Interval:    pol.Interval,
		// A rolling window of ten buckets, so the ratio trigger sees the
		// last Interval rather than a window that resets all at once.
		BucketPeriod: pol.Interval / 10,
		Timeout:      pol.OpenFor,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			if pol.ConsecutiveFailures > 0 && c.ConsecutiveFailures >= uint32(pol.ConsecutiveFailures) {
				return true
			}
			return pol.FailureRatio > 0 && c.Requests >= uint32(pol.MinRequests) &&
				float64(c.TotalFailures) >= pol.FailureRatio*float64(c.Requests)
		},
		IsExcluded: func(err error) bool { return errors.Is(err, errExcluded) },
		OnStateChange: func(_ string, _, to gobreaker.State) {
			// Mirror the state into an atomic flag the balancer reads
			// without taking gobreaker's lock. Called with that lock held.
			st.SetBreakerOpen(to == gobreaker.StateOpen, clk.Now().Add(pol.OpenFor))
		},
	}
	t.brk.Store(&breaker{cb: gobreaker.NewTwoStepCircuitBreaker[struct{}](settings), policy: pol})
	t.state.SetBreakerOpen(false, time.Time{})
}

func stateName(s gobreaker.State) string {
	switch s {
	case gobreaker.StateHalfOpen:
		return "half-open"
	case gobreaker.StateOpen:
		return "open"
	}
	return "closed"
}
