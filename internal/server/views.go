package server

import (
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/helios-lb/helios/internal/admin"
	"github.com/helios-lb/helios/internal/bodybuf"
	"github.com/helios-lb/helios/internal/config"
	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/upstream"
)

// Graph returns the routing graph being served (metrics.Source).
func (s *Server) Graph() *proxy.Graph { return s.pipeline.Graph() }

// ResponseBuffers returns what response buffering holds and has done
// across the process (metrics.Source).
func (s *Server) ResponseBuffers() bodybuf.BudgetStats { return s.respBufs.Stats() }

// BreakerState returns the breaker state of the backend at addr of the
// named upstream: 0 closed, 1 half-open, 2 open, -1 none or no such
// backend (metrics.Source).
func (s *Server) BreakerState(upstreamName, addr string) int {
	p := s.cur.Load().pools[upstreamName]
	if p == nil {
		return -1
	}
	m := p.member(addr)
	if m == nil {
		return -1
	}
	return m.tr.BreakerState()
}

// OpenConnections returns the open client connections per listener
// (metrics.Source).
func (s *Server) OpenConnections() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int64, len(s.listeners))
	for _, bl := range s.listeners {
		out[bl.cfg.Name] += bl.pool.OpenConnections()
	}
	return out
}

// Ready reports whether Helios should receive traffic: not draining, and
// every upstream has a backend available (admin.Source).
func (s *Server) Ready() (bool, string) {
	if s.draining.Load() {
		return false, "draining"
	}
	for _, up := range s.pipeline.Graph().Upstreams {
		ok := false
		for _, b := range up.Members().Backends {
			if b.Available() {
				ok = true
				break
			}
		}
		if !ok {
			return false, fmt.Sprintf("upstream %s has no available backend", up.Name)
		}
	}
	return true, ""
}

// Upstreams describes every upstream and backend (admin.Source).
func (s *Server) Upstreams() []admin.Upstream {
	g := s.cur.Load()
	var out []admin.Upstream
	for _, up := range g.graph.Upstreams {
		au := admin.Upstream{Name: up.Name, Strategy: up.Strategy, Checked: up.Checked, Backends: []admin.Backend{}}
		members, sources := g.pools[up.Name].snapshot()
		for _, m := range members {
			au.Backends = append(au.Backends, backendView(up.Checked, m))
		}
		for _, st := range sources {
			ds := admin.DiscoverySource{Source: st.Source, Backends: len(st.Targets), Answered: st.Good, LastError: st.LastError, Errors: st.Errors}
			if !st.LastLookup.IsZero() {
				ds.LastLookup = timePtr(st.LastLookup)
			}
			if !st.LastChange.IsZero() {
				ds.LastChange = timePtr(st.LastChange)
			}
			au.Discovery = append(au.Discovery, ds)
		}
		out = append(out, au)
	}
	return out
}

// backendView describes a member for the admin API; checked says its
// upstream has active health checks.
func backendView(checked bool, m *member) admin.Backend {
	snap := m.tr.Snapshot()
	ab := admin.Backend{
		Address:        m.addr,
		Source:         m.source,
		Weight:         m.weight,
		AdminState:     m.st.Admin().String(),
		Available:      m.st.Available(),
		Health:         "unchecked",
		LastCheckError: snap.LastCheckErr,
		Ejected:        snap.Ejected,
		Ejections:      snap.Ejections,
		Breaker:        snap.Breaker,
		Inflight:       m.st.Inflight(),
		Requests:       m.st.Requests(),
		Failures:       m.st.Failures(),
	}
	if w := m.st.WeightOverride(); w > 0 {
		ab.Weight, ab.ConfiguredWeight = w, m.weight
	}
	if checked {
		ab.Health = "up"
		if snap.Down {
			ab.Health = "down"
		}
	}
	if !snap.LastCheck.IsZero() {
		ab.LastCheck = timePtr(snap.LastCheck)
	}
	if snap.Ejected {
		ab.EjectedUntil = timePtr(snap.EjectedUntil)
	}
	return ab
}

// ChangeBackend applies an operator's change to the backend at addr of
// the named upstream and describes it after (admin.Source). Admin states
// and weights live in the backend's state, so they last as long as the
// backend stays in its upstream, across reloads; draining or disabling
// also closes the engine's idle connections to it, so that none is
// reused after the backend stops.
func (s *Server) ChangeBackend(upstreamName, addr string, c admin.BackendChange) (admin.Backend, error) {
	for {
		g := s.cur.Load()
		p := g.pools[upstreamName]
		if p == nil {
			return admin.Backend{}, fmt.Errorf("%w: no upstream %q", admin.ErrNotFound, upstreamName)
		}
		var view admin.Backend
		err := p.control(addr, func(m *member) bool {
			switch c.State {
			case admin.StateDrain:
				m.st.SetAdmin(upstream.AdminDraining)
			case admin.StateDisable:
				m.st.SetAdmin(upstream.AdminDisabled)
			case admin.StateEnable:
				m.st.SetAdmin(upstream.AdminEnabled)
			}
			reweigh := true
			switch {
			case c.Weight > 0:
				m.st.SetWeightOverride(c.Weight)
			case c.ResetWeight:
				m.st.SetWeightOverride(0)
			default:
				reweigh = false
			}
			view = backendView(p.up.Checked, m)
			return reweigh
		})
		if errors.Is(err, errRetired) {
			continue // a reload took over meanwhile: ask its pool
		}
		if errors.Is(err, errNoBackend) {
			return admin.Backend{}, fmt.Errorf("%w: upstream %q has no backend %q", admin.ErrNotFound, upstreamName, addr)
		}
		if err != nil {
			return admin.Backend{}, err
		}
		if c.State == admin.StateDrain || c.State == admin.StateDisable {
			s.retireBackend(upstreamName, addr)
		}
		s.log.Info("backend changed through the admin API", zap.String("upstream", upstreamName), zap.String("backend", addr),
			zap.String("admin_state", view.AdminState), zap.Int("weight", view.Weight))
		return view, nil
	}
}

func timePtr(t time.Time) *time.Time { return &t }

// ReloadFile re-reads the configuration file given in Options.ConfigPath
// and applies it (admin.Source's Reload). When the file is invalid, the
// problems come back one per line and nothing changes.
func (s *Server) ReloadFile() (problems []string, err error) {
	defer func() {
		if err != nil {
			s.log.Error("reload refused; the running config stays", zap.String("config", s.configPath),
				zap.Error(err), zap.Strings("problems", problems))
		}
		if s.onReload != nil {
			s.onReload(s.Config(), err)
		}
	}()
	if s.configPath == "" {
		return nil, errors.New("no config file to reload from")
	}
	cfg, err := config.Load(s.configPath, nil)
	if err != nil {
		var ps config.Problems
		if errors.As(err, &ps) {
			// The errors first, so that problems[0] says why the
			// reload was refused (systemd's STATUS= shows it).
			errs := ps.Errors()
			lines := make([]string, 0, len(ps))
			for _, p := range errs {
				lines = append(lines, p.String())
			}
			for _, p := range ps {
				if p.Warning {
					lines = append(lines, p.String())
				}
			}
			return lines, fmt.Errorf("%s: %d problem(s)", s.configPath, len(errs))
		}
		return nil, err
	}
	for _, w := range cfg.Warnings {
		s.log.Warn(w.String())
	}
	return nil, s.Reload(cfg)
}

// adminSource adapts Server to admin.Source (whose Reload is ReloadFile).
type adminSource struct{ *Server }

func (a adminSource) Reload() ([]string, error) { return a.ReloadFile() }
