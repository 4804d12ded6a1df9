package systemd

import (
	"context"
	"time"
)

// Watchdog pings the service manager's watchdog every Interval, but only
// while Healthy says the process is making progress: a process whose
// event loops are stuck must stop pinging, so that systemd kills and
// restarts it (WatchdogSec=, Restart=on-watchdog or on-failure).
type Watchdog struct {
	// Notifier receives the pings.
	Notifier *Notifier
	// Interval is the time between pings; half of WATCHDOG_USEC
	// (WatchdogInterval). It must be more than 0.
	Interval time.Duration
	// Healthy is asked before each ping and may take up to about
	// Interval; false skips the ping. Nil: always healthy.
	Healthy func() bool
	// OnSkip is told of each skipped ping; nil: nothing is told.
	OnSkip func()
}

// Run pings until ctx ends. The first ping goes out at once.
func (w *Watchdog) Run(ctx context.Context) {
	t := time.NewTicker(w.Interval)
	defer t.Stop()
	for {
		if w.Healthy == nil || w.Healthy() {
			w.Notifier.Watchdog()
		} else if w.OnSkip != nil {
			w.OnSkip()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
