package accesslog

import (
	"sync/atomic"
	"time"

	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/wire"
)

// Switch is a proxy.Recorder that passes each record to the current
// Logger, if any; a reload that changes the access log swaps in another.
// It is safe for concurrent use.
type Switch struct {
	cur     atomic.Pointer[Logger]
	retired atomic.Uint64 // lines dropped by loggers swapped out
}

// Record passes r to the current logger.
func (s *Switch) Record(ex wire.Exchange, r proxy.Record) {
	if l := s.cur.Load(); l != nil {
		l.Record(ex, r)
	}
}

// Current returns the logger in use; nil when the access log is off.
func (s *Switch) Current() *Logger { return s.cur.Load() }

// Swap makes l (nil: none) the logger in use and closes the previous one
// after grace, so that records that picked it up just before the swap
// still reach it; its dropped lines keep counting in Dropped. It returns
// at once; done, when not nil, is called once the old logger is closed
// with its Close error.
func (s *Switch) Swap(l *Logger, grace time.Duration, done func(error)) {
	old := s.cur.Swap(l)
	if old == nil {
		if done != nil {
			done(nil)
		}
		return
	}
	time.AfterFunc(grace, func() {
		err := old.Close()
		s.retired.Add(old.Dropped())
		if done != nil {
			done(err)
		}
	})
}

// Dropped returns the lines dropped by every logger this switch has
// held (helios_access_log_dropped_total).
func (s *Switch) Dropped() uint64 {
	n := s.retired.Load()
	if l := s.cur.Load(); l != nil {
		n += l.Dropped()
	}
	return n
}
