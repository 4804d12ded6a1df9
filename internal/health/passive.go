package health

import "time"

// PassivePolicy ejects a backend that fails MaxFails requests within
// FailWindow (nginx max_fails / fail_timeout). The first ejection lasts
// EjectFor; each ejection that follows the end of the previous one within
// MaxEjectFor doubles it (Envoy's outlier detection), up to MaxEjectFor.
type PassivePolicy struct {
	MaxFails    int
	FailWindow  time.Duration
	EjectFor    time.Duration
	MaxEjectFor time.Duration
}

// observeFailure counts one failure at now and reports how long to eject
// the backend for (0: not now). It does not eject: the guard decides,
// because an ejection must not leave the upstream empty.
func (t *Tracker) observeFailure(now time.Time, p *PassivePolicy) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.windowStart.IsZero() || now.Sub(t.windowStart) > p.FailWindow {
		t.windowStart = now
		t.fails = 0
	}
	t.fails++
	if t.fails < p.MaxFails {
		return 0
	}
	// A backend that has stayed in for MaxEjectFor since its last
	// ejection starts over at EjectFor.
	if !t.ejectedTill.IsZero() && now.Sub(t.ejectedTill) > p.MaxEjectFor {
		t.ejections = 0
	}
	d := p.EjectFor
	for i := 0; i < t.ejections && d < p.MaxEjectFor; i++ {
		d *= 2
	}
	return min(d, p.MaxEjectFor)
}

// eject takes the backend out until now+d and resets the failure count.
func (t *Tracker) eject(now time.Time, d time.Duration) {
	t.mu.Lock()
	t.ejections++
	t.ejectedTill = now.Add(d)
	t.fails = 0
	t.windowStart = time.Time{}
	t.mu.Unlock()
	t.state.Eject(now.Add(d))
}

// spareFailures forgets the failure count when an ejection was refused (it
// would have emptied the upstream), so the next failure asks again.
func (t *Tracker) spareFailures() {
	t.mu.Lock()
	t.fails = 0
	t.windowStart = time.Time{}
	t.mu.Unlock()
}
