package server

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/helios-lb/helios/internal/balancer"
	"github.com/helios-lb/helios/internal/config"
	"github.com/helios-lb/helios/internal/health"
	"github.com/helios-lb/helios/internal/httpmsg"
	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/route"
	"github.com/helios-lb/helios/internal/static"
	"github.com/helios-lb/helios/internal/tlsconf"
	"github.com/helios-lb/helios/internal/upstream"
	"github.com/helios-lb/helios/internal/wire"
)

// retryFloor is how many retries per second an upstream's budget allows
// whatever the traffic (Linkerd's min_retries_per_second), so that at low
// traffic a stall is still retried; harmless to a fleet at any scale.
const retryFloor = 10

// retryWindow is the retry budget's window for an upstream: twice the
// response-header timeout (at least 10s), so the credit that requests
// earned before a backend hung is still there when they time out on it
// (issue 9 item 4).
func retryWindow(responseHeaderTimeout time.Duration) time.Duration {
	return max(10*time.Second, 2*responseHeaderTimeout)
}

// generation is everything built from one configuration: the routing
// graph and the resources behind it. Building one changes nothing that is
// running; commit makes it live; close releases what it alone holds.
type generation struct {
	cfg   *config.Config
	graph *proxy.Graph
	// clientTLS is the TLS config of each upstream whose transport has a
	// tls block, by name, for the engine to dial its backends with.
	clientTLS map[string]*tlsconf.Client
	// Kept across generations, by stateKey: what is known about each
	// backend.
	states   map[string]*upstream.State
	trackers map[string]*health.Tracker
	// By upstream name, in backend order.
	upTrackers map[string][]*health.Tracker
	guards     map[string]*health.Guard
	checkers   []*health.Checker
	// Counters kept across generations for routes and upstreams that stay.
	routeStats map[string]*proxy.RouteStats // by route name + upstream
	upStats    map[string]*proxy.UpstreamStats
	statics    []*static.Handler
}

// stateKey identifies a backend across generations.
func stateKey(upstreamName, addr string) string { return upstreamName + "\x00" + addr }

// build turns a validated configuration into a generation. Backends that
// prev also had keep their state; the engine keeps warm connections for
// transports whose name, backend address and settings did not change.
// On error nothing is left open and nothing running has changed.
func (s *Server) build(cfg *config.Config, prev *generation) (_ *generation, err error) {
	g := &generation{
		cfg:        cfg,
		graph:      &proxy.Graph{},
		clientTLS:  make(map[string]*tlsconf.Client),
		states:     make(map[string]*upstream.State),
		trackers:   make(map[string]*health.Tracker),
		upTrackers: make(map[string][]*health.Tracker),
		guards:     make(map[string]*health.Guard),
		routeStats: make(map[string]*proxy.RouteStats),
		upStats:    make(map[string]*proxy.UpstreamStats),
	}
	defer func() {
		if err != nil {
			g.close()
		}
	}()
	byName := make(map[string]*proxy.Upstream)
	for i, uc := range cfg.Upstreams {
		up, err := s.buildUpstream(g, prev, uc)
		if err != nil {
			return nil, err
		}
		up.Index = i
		byName[uc.Name] = up
		g.graph.Upstreams = append(g.graph.Upstreams, up)
	}
	entries := make([]route.Entry[*proxy.Route], 0, len(cfg.Routes))
	for i, rc := range cfg.Routes {
		rt := &proxy.Route{Name: rc.Name, Index: i, NoHTTPSRedirect: !rc.HTTPSRedirects()}
		for _, u := range rc.Upgrades {
			rt.Upgrades = append(rt.Upgrades, []byte(strings.ToLower(u)))
		}
		rt.MaxBody = rc.MaxBodyBytes
		if rc.RequestBuffering == config.BufferingAuto || rc.RequestBuffering == config.BufferingOn {
			rt.Buffer = &wire.BufferLimits{
				Memory: rc.RequestBufferMemoryBytes,
				File:   rc.RequestBufferFileBytes,
				Stream: rc.RequestBuffering == config.BufferingAuto,
			}
		}
		for _, m := range rc.AllowMethods {
			switch m {
			case config.MethodTrace:
				rt.AllowTrace = true
			case config.MethodConnect:
				rt.AllowConnect = true
			}
		}
		switch rc.Action() {
		case config.ActionUpstream:
			rt.Upstream = byName[rc.Upstream]
			if rt.Upstream == nil {
				return nil, fmt.Errorf("route %s: upstream %q is not defined", rc.Name, rc.Upstream)
			}
		case config.ActionRespond:
			rt.Respond = renderFixed(rc.Respond)
		case config.ActionStatic:
			h, err := static.New(rc.Static.Root, rc.Static.Index, rc.Static.StripPrefix, static.Options{})
			if err != nil {
				return nil, fmt.Errorf("route %s: %w", rc.Name, err)
			}
			g.statics = append(g.statics, h)
			rt.Files = h
		default:
			return nil, fmt.Errorf("route %s: no action", rc.Name)
		}
		if s.metrics != nil {
			up := rc.Upstream
			key := rc.Name + "\x00" + up
			if prev != nil && prev.routeStats[key] != nil {
				rt.Stats = prev.routeStats[key]
			} else {
				rt.Stats = s.metrics.RouteStats(rc.Name, up)
			}
			g.routeStats[key] = rt.Stats
		}
		entries = append(entries, route.Entry[*proxy.Route]{
			Name: rc.Name, Host: rc.Match.Host, Path: rc.Match.Path, PathPrefix: rc.Match.PathPrefix, Value: rt,
		})
		g.graph.RouteList = append(g.graph.RouteList, rt)
	}
	if g.graph.Routes, err = route.New(entries); err != nil {
		return nil, err
	}
	g.graph.Recorder = s.recorder
	return g, nil
}

func (s *Server) buildUpstream(g, prev *generation, uc config.Upstream) (*proxy.Upstream, error) {
	up := &proxy.Upstream{Name: uc.Name, Strategy: uc.Strategy, Checked: uc.HealthCheck != nil}
	addrs := make([]string, len(uc.Backends))
	trackers := make([]*health.Tracker, len(uc.Backends))
	for i, bc := range uc.Backends {
		key := stateKey(uc.Name, bc.Address)
		var (
			st *upstream.State
			tr *health.Tracker
		)
		if prev != nil {
			st, tr = prev.states[key], prev.trackers[key]
		}
		if st == nil || tr == nil {
			st = upstream.NewState(s.clock)
			tr = health.NewTracker(st)
		}
		g.states[key], g.trackers[key] = st, tr
		trackers[i] = tr
		up.Backends = append(up.Backends, &upstream.Backend{State: st, Addr: bc.Address, Weight: bc.Weight, Index: i})
		addrs[i] = bc.Address
	}
	g.upTrackers[uc.Name] = trackers
	picker, err := balancer.New(uc.Strategy, up.Backends, nil)
	if err != nil {
		return nil, fmt.Errorf("upstream %s: %w", uc.Name, err)
	}
	up.Picker = picker
	up.HashClient = uc.Strategy == balancer.IPHash

	if err := s.buildClientTLS(g, prev, uc); err != nil {
		return nil, err
	}
	up.Transport = &wire.Transport{Name: uc.Name, Settings: wire.TransportSettings{
		MaxIdlePerBackend:     uc.Transport.MaxIdlePerBackend,
		IdleTimeout:           uc.Transport.IdleTimeout.D(),
		DialTimeout:           uc.Transport.DialTimeout.D(),
		ResponseHeaderTimeout: uc.Transport.ResponseHeaderTimeout.D(),
		ReadTimeout:           uc.Transport.ReadTimeout.D(),
		MaxConnsPerBackend:    uc.Transport.MaxConnsPerBackend,
		MaxQueuePerBackend:    uc.Transport.MaxQueuePerBackend,
		QueueTimeout:          uc.Transport.QueueTimeout.D(),
		Protocol:              wireProtocol(uc.Transport.Protocol),
		TLS:                   uc.Transport.TLS != nil,
	}}
	if ct := g.clientTLS[uc.Name]; ct != nil { // a nil *Client in the interface would not be nil
		up.Transport.TLS = ct
	}

	if rc := uc.Retries; rc != nil {
		cond := rc.Conditions()
		up.Retry = proxy.RetryPolicy{
			Attempts:       rc.Attempts,
			OnConnectError: cond.ConnectError,
			OnBackendError: cond.ConnectError,
			OnTimeout:      cond.Timeout,
			IdempotentOnly: rc.Idempotent(),
		}
		for code := 500; code <= 599; code++ {
			if cond.Statuses.Contains(code) {
				up.Retry.Statuses.Add(code)
			}
		}
		if rc.BudgetRatio > 0 {
			up.Budget = proxy.NewBudget(rc.BudgetRatio, retryFloor, retryWindow(uc.Transport.ResponseHeaderTimeout.D()))
		}
	}
	if prev != nil && prev.upStats[uc.Name] != nil {
		up.Stats = prev.upStats[uc.Name]
	} else {
		up.Stats = &proxy.UpstreamStats{}
	}
	g.upStats[uc.Name] = up.Stats

	guard := health.NewGuard(uc.Name, up.Backends, trackers, passivePolicy(uc.Passive), breakerPolicy(uc.CircuitBreaker))
	log := s.log.With(zap.String("upstream", uc.Name))
	guard.OnEject = func(addr string, d time.Duration) {
		if d == 0 {
			log.Warn("backend failing but not ejected: it is the last one available", zap.String("backend", addr))
			return
		}
		log.Warn("backend ejected after repeated failures", zap.String("backend", addr), zap.Duration("for", d))
	}
	g.guards[uc.Name] = guard
	if guard.Active() {
		up.Guard = guard
	}

	if hc := uc.HealthCheck; hc != nil {
		expect := hc.Expect()
		c := health.NewChecker(health.CheckPolicy{
			Path:     hc.Path,
			Interval: hc.Interval.D(),
			Timeout:  hc.Timeout.D(),
			Fails:    hc.Fails,
			Passes:   hc.Passes,
			Expect:   expect.Contains,
		}, addrs, trackers, nil)
		name := uc.Name
		if s.metrics != nil {
			m := s.metrics
			c.OnResult = func(addr string, pass bool) { m.HealthCheckResult(name, addr, pass) }
		}
		c.OnChange = func(addr string, down bool, reason string) {
			if down {
				log.Warn("backend down: health checks failing", zap.String("backend", addr), zap.String("reason", reason))
			} else {
				log.Info("backend up: health checks passing", zap.String("backend", addr))
			}
		}
		g.checkers = append(g.checkers, c)
	}
	return up, nil
}

func passivePolicy(p *config.Passive) *health.PassivePolicy {
	if p == nil {
		return nil
	}
	return &health.PassivePolicy{MaxFails: p.MaxFails, FailWindow: p.FailWindow.D(), EjectFor: p.EjectFor.D(), MaxEjectFor: p.MaxEjectFor.D()}
}

func breakerPolicy(c *config.CircuitBreaker) *health.BreakerPolicy {
	if c == nil {
		return nil
	}
	return &health.BreakerPolicy{
		ConsecutiveFailures: c.ConsecutiveFailures,
		FailureRatio:        c.FailureRatio,
		MinRequests:         c.MinRequests,
		Interval:            c.Interval.D(),
		OpenFor:             c.OpenFor.D(),
		HalfOpenRequests:    c.HalfOpenRequests,
	}
}

// commit makes a built generation's health machinery live: the previous
// generation's checks stop, breakers and ejection follow the new
// policies, backends of upstreams without checks are marked up, and the
// new checks start.
func (g *generation) commit(prev *generation) {
	if prev != nil {
		prev.stopChecks()
	}
	for _, up := range g.graph.Upstreams {
		g.guards[up.Name].Apply()
		if !up.Checked {
			health.Reset(g.upTrackers[up.Name])
		}
	}
	for _, c := range g.checkers {
		c.Start()
	}
}

func (g *generation) stopChecks() {
	for _, c := range g.checkers {
		c.Stop()
	}
	g.checkers = nil
}

// renderFixed pre-renders a respond action's header lines, sorted by name
// so the output is stable.
func renderFixed(r *config.Respond) *proxy.Fixed {
	names := make([]string, 0, len(r.Headers))
	hasType := false
	for k := range r.Headers {
		names = append(names, k)
		if http.CanonicalHeaderKey(k) == "Content-Type" {
			hasType = true
		}
	}
	sort.Strings(names)
	var hdr httpmsg.Header
	for _, k := range names {
		hdr.Add([]byte(k), []byte(r.Headers[k]))
	}
	if !hasType && r.Body != "" {
		hdr.Add([]byte("Content-Type"), []byte("text/plain; charset=utf-8"))
	}
	status := r.Status
	if status == 0 {
		status = 200
	}
	return &proxy.Fixed{Status: status, Header: hdr, Body: []byte(r.Body)}
}

// close releases a generation's resources. Requests still running on it
// must have finished (or be allowed to fail).
func (g *generation) close() {
	g.stopChecks()
	for _, h := range g.statics {
		h.Close()
	}
}

// describe names a generation for logs.
func (g *generation) describe() string {
	return strconv.Itoa(len(g.cfg.Listeners)) + " listeners, " + strconv.Itoa(len(g.cfg.Routes)) + " routes, " + strconv.Itoa(len(g.cfg.Upstreams)) + " upstreams"
}
