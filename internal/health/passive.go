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

// failure counts one failure at now and, when it makes MaxFails within
// FailWindow, ejects the backend and returns for how long (0: not now). The
// count and the ejection happen under one lock, so failures that arrive
// together eject once. spare reports whether the upstream can do without
// the backend; when it cannot, the count is forgotten (so the next failure
// asks again) and refused is true.
//
// A failure reported while the backend is ejected is ignored: it belongs
// to a request sent before the ejection (issue 9: one SIGKILL under load
// made six ejections in 6 ms, 30s to 5m, because each in-flight failure
// escalated it). Envoy's outlier detector ignores them too. So an ejection
// is doubled only when it follows the end of the previous one.
func (t *Tracker) failure(now time.Time, p *PassivePolicy, spare func() bool) (d time.Duration, refused bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if until, ejected := t.state.EjectedUntil(); ejected && now.Before(until) {
		return 0, false
	}
	if t.windowStart.IsZero() || now.Sub(t.windowStart) > p.FailWindow {
		t.windowStart = now
		t.fails = 0
	}
	t.fails++
	if t.fails < p.MaxFails {
		return 0, false
	}
	t.fails = 0
	t.windowStart = time.Time{}
	if !spare() {
		return 0, true
	}
	// A backend that has stayed in for MaxEjectFor since its last
	// ejection starts over at EjectFor.
	if !t.ejectedTill.IsZero() && now.Sub(t.ejectedTill) > p.MaxEjectFor {
		t.ejections = 0
	}
	d = p.EjectFor
	for i := 0; i < t.ejections && d < p.MaxEjectFor; i++ {
		d *= 2
	}
	d = min(d, p.MaxEjectFor)
	t.ejections++
	t.ejectedTill = now.Add(d)
	t.state.Eject(t.ejectedTill)
	return d, false
}
