package server

import (
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/helios-lb/helios/internal/config"
	"github.com/helios-lb/helios/internal/listener"
	"github.com/helios-lb/helios/internal/static"
)

// descriptorReserve is how many descriptors are kept back from clients,
// besides one per backend (its health check), for the admin API, log
// files, reloads and the runtime (issue 9 item 7: at the limit, the admin
// API was unreachable).
const descriptorReserve = 128

// acceptWarnEvery is how often, at most, a failed accept is logged.
const acceptWarnEvery = 10 * time.Second

// descriptorNeed is what cfg may ask of the descriptor limit.
func descriptorNeed(cfg *config.Config) listener.DescriptorNeed {
	n := listener.DescriptorNeed{Reserve: descriptorReserve, BackendsCapped: true}
	for _, lc := range cfg.Listeners {
		n.Clients += lc.MaxConnections
		n.Fixed += lc.Sockets
	}
	if cfg.Admin.Enabled() {
		n.Fixed++
	}
	for _, uc := range cfg.Upstreams {
		// A dns or srv entry, or a backends file, counts as one backend:
		// how many it stands for is known only once it answers.
		n.Reserve += len(uc.Backends)
		if uc.BackendsFile != "" {
			n.Reserve++
		}
		// What the backend pools can hold: their caps (a backend's cap
		// holds across the loops), when every upstream has one and
		// knows its backends; else one per client.
		capped := uc.Transport.MaxConnsPerBackend > 0 && uc.BackendsFile == ""
		for _, b := range uc.Backends {
			capped = capped && b.Kind() == "address"
		}
		if capped {
			n.Backends += len(uc.Backends) * uc.Transport.MaxConnsPerBackend
		} else {
			n.BackendsCapped = false
		}
	}
	for _, rc := range cfg.Routes {
		if rc.Static != nil {
			// What the open-file cache may hold (static.Options{}).
			n.Fixed += static.DefaultCacheEntries
		}
	}
	return n
}

// planDescriptors compares cfg's needs with RLIMIT_NOFILE (raising the
// soft limit to the hard one first) and logs what it found; the plan caps
// client connections so that the reserve stays free. At start and on
// every reload.
func (s *Server) planDescriptors(cfg *config.Config) listener.DescriptorPlan {
	need := descriptorNeed(cfg)
	p, err := listener.PlanDescriptors(s.rlimit, need)
	if err != nil {
		s.log.Warn("cannot check the descriptor limit; client connections are capped by max_connections only", zap.Error(err))
		return listener.DescriptorPlan{Need: need.Total(), Clients: need.Clients, ClientCap: need.Clients, Soft: ^uint64(0)}
	}
	s.nofile.Store(p.Soft)
	if p.RaisedFrom != 0 {
		s.log.Debug("raised the descriptor limit (RLIMIT_NOFILE) to the hard limit", zap.Uint64("from", p.RaisedFrom), zap.Uint64("to", p.Soft))
	}
	if p.RaiseErr != nil {
		s.log.Warn("cannot raise the descriptor limit", zap.Error(p.RaiseErr))
	}
	if !p.Short() {
		return p
	}
	fields := []zap.Field{zap.Uint64("limit", p.Soft), zap.Uint64("hard_limit", p.Hard), zap.Uint64("needed", p.Need),
		zap.Int("max_connections", p.Clients), zap.Int("client_cap", p.ClientCap), zap.Int("reserve", need.Reserve)}
	// A warning only when a max_connections the file sets cannot be met:
	// the default (20,000 per listener) exceeds many machines' limits,
	// and warning about it at every start taught people to ignore the
	// log (issue 18 item 7). /api/v1/listeners shows the cap either way.
	var short []string
	for i, lc := range cfg.Listeners {
		if cfg.IsSet("listeners["+strconv.Itoa(i)+"].max_connections") && p.Cap(lc.MaxConnections) < lc.MaxConnections {
			short = append(short, lc.Name)
		}
	}
	if len(short) == 0 {
		s.log.Debug("client connections capped below the default max_connections by the descriptor limit (RLIMIT_NOFILE)", fields...)
		return p
	}
	s.log.Warn("the descriptor limit (RLIMIT_NOFILE) is below what max_connections needs: client connections are capped "+
		"so the admin API and health checks keep descriptors; raise the limit (systemd LimitNOFILE=, ulimit -n, docker --ulimit nofile=)",
		append(fields, zap.Strings("listeners", short))...)
	return p
}

// newAcceptErrors returns the counters every engine (one per poller in
// use) reports failed accepts to, with a warning at most every
// acceptWarnEvery.
func (s *Server) newAcceptErrors() *listener.AcceptErrors {
	return listener.NewAcceptErrors(s.clock, acceptWarnEvery, func(err error, reason string, suppressed uint64) {
		s.log.Warn("accept failed; new clients wait in the listen backlog",
			zap.String("reason", reason), zap.Uint64("failures_since_last_warning", suppressed),
			zap.Uint64("descriptor_limit", s.nofile.Load()), zap.Error(err))
	})
}

// AcceptErrors returns the failed accepts by reason, for the metrics.
func (s *Server) AcceptErrors() map[string]uint64 {
	out := make(map[string]uint64, len(listener.AcceptReasons))
	for _, r := range listener.AcceptReasons {
		out[r] = s.acceptErrs.Count(r)
	}
	return out
}

// Panics returns the connections panics on the event loops have cost, for
// the metrics.
func (s *Server) Panics() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n uint64
	for _, eng := range s.engines {
		n += eng.Panics()
	}
	return n
}

// Descriptors returns the process's descriptor budget, for the metrics.
func (s *Server) Descriptors() listener.DescriptorStats { return s.fdBudget.Stats() }
