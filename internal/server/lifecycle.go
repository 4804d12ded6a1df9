package server

import (
	"context"
	"time"

	"github.com/helios-lb/helios/internal/upstream"
)

// HealthChecked reports whether every backend of every upstream with
// active health checks has been checked at least once since start: the
// first round is done, and /readyz tells the truth about them.
func (s *Server) HealthChecked() bool {
	g := s.cur.Load()
	for _, up := range g.graph.Upstreams {
		if !up.Checked {
			continue
		}
		members, _ := g.pools[up.Name].snapshot()
		for _, m := range members {
			// A disabled backend is not checked.
			if m.st.Admin() != upstream.AdminDisabled && m.tr.Snapshot().LastCheck.IsZero() {
				return false
			}
		}
	}
	return true
}

// WaitHealthChecked waits until HealthChecked, polling, or until ctx
// ends; it reports whether the round finished. A check takes at most its
// timeout and the first comes within a second of Start.
func (s *Server) WaitHealthChecked(ctx context.Context) bool {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !s.HealthChecked() {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	return true
}

// BeginDrain makes /readyz answer 503 "draining" while the listeners go
// on accepting: the shutdown delay, during which load balancers and
// Kubernetes endpoints notice and stop sending before Shutdown stops
// accepting.
func (s *Server) BeginDrain() { s.draining.Store(true) }

// LoopsStuck reports whether some event loop has been busy with one
// batch of events for longer than d (a handler or a blocking call holds
// it, and its connections wait): a systemd watchdog stops pinging while
// it does. Loops waiting for work are not stuck. It only reads a
// timestamp per loop (engine.Engine.Stuck), so it may be asked often.
func (s *Server) LoopsStuck(d time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, eng := range s.engines {
		if eng.Stuck(d) {
			return true
		}
	}
	return false
}
