package server

import (
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/helios-lb/helios/internal/admin"
	"github.com/helios-lb/helios/internal/config"
	"github.com/helios-lb/helios/internal/proxy"
)

// Graph returns the routing graph being served (metrics.Source).
func (s *Server) Graph() *proxy.Graph { return s.pipeline.Graph() }

// BreakerState returns backend i's breaker state of the named upstream:
// 0 closed, 1 half-open, 2 open, -1 none (metrics.Source).
func (s *Server) BreakerState(upstreamName string, i int) int {
	ts := s.cur.Load().upTrackers[upstreamName]
	if i < 0 || i >= len(ts) {
		return -1
	}
	return ts[i].BreakerState()
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
		for _, b := range up.Backends {
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
		ts := g.upTrackers[up.Name]
		for i, b := range up.Backends {
			snap := ts[i].Snapshot()
			ab := admin.Backend{
				Address:        b.Addr,
				Weight:         b.Weight,
				Available:      b.Available(),
				Health:         "unchecked",
				LastCheckError: snap.LastCheckErr,
				Ejected:        snap.Ejected,
				Ejections:      snap.Ejections,
				Breaker:        snap.Breaker,
				Inflight:       b.Inflight(),
				Requests:       b.Requests(),
				Failures:       b.Failures(),
			}
			if up.Checked {
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
			au.Backends = append(au.Backends, ab)
		}
		out = append(out, au)
	}
	return out
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
