package listener

import (
	"errors"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/helios-lb/helios/internal/clock"
)

// AcceptReasons are the reasons AcceptErrors counts failed accepts by, the
// values of helios_accept_errors_total's reason label.
var AcceptReasons = [...]string{"emfile", "enfile", "enobufs", "enomem", "other"}

// AcceptErrors counts failed accepts by reason and rate-limits the warning
// about them: a process out of descriptors fails every accept, and a line
// per failure (1,170 in 30 s in issue 9) buries the log. Every engine
// reports to it. Safe for concurrent use; Observe takes no lock.
type AcceptErrors struct {
	clock      clock.Clock
	every      time.Duration
	warn       func(err error, reason string, suppressed uint64)
	counts     [len(AcceptReasons)]atomic.Uint64
	next       atomic.Int64 // unix nanoseconds before which no warning is given
	suppressed atomic.Uint64
}

// NewAcceptErrors returns counters that call warn for the first failure
// and then at most once per every, with the number of failures not warned
// about since the last call. A nil clock is the wall clock.
func NewAcceptErrors(c clock.Clock, every time.Duration, warn func(err error, reason string, suppressed uint64)) *AcceptErrors {
	if c == nil {
		c = clock.Real{}
	}
	return &AcceptErrors{clock: c, every: every, warn: warn}
}

// Observe counts one failed accept.
func (a *AcceptErrors) Observe(err error) {
	r := acceptReason(err)
	a.counts[r].Add(1)
	now := a.clock.Now().UnixNano()
	next := a.next.Load()
	if now < next || !a.next.CompareAndSwap(next, now+int64(a.every)) {
		a.suppressed.Add(1)
		return
	}
	if a.warn != nil {
		a.warn(err, AcceptReasons[r], a.suppressed.Swap(0))
	}
}

// Count returns the failed accepts counted for reason (one of
// AcceptReasons; 0 for any other).
func (a *AcceptErrors) Count(reason string) uint64 {
	for i, r := range AcceptReasons {
		if r == reason {
			return a.counts[i].Load()
		}
	}
	return 0
}

// acceptReason returns the index in AcceptReasons of err's reason.
func acceptReason(err error) int {
	for i, errno := range [...]syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM} {
		if errors.Is(err, errno) {
			return i
		}
	}
	return len(AcceptReasons) - 1
}
