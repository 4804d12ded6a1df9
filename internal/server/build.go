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
	"github.com/helios-lb/helios/internal/discovery"
	"github.com/helios-lb/helios/internal/health"
	"github.com/helios-lb/helios/internal/httpmsg"
	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/redisstore"
	"github.com/helios-lb/helios/internal/route"
	"github.com/helios-lb/helios/internal/rules"
	"github.com/helios-lb/helios/internal/static"
	"github.com/helios-lb/helios/internal/tlsconf"
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
	// pools are the upstreams' memberships, by upstream name; what is
	// known about each backend is carried to the next generation by
	// upstream name and address.
	pools map[string]*pool
	// watchers are the discovery sources this generation owns (stops
	// when it closes), by key (watchedSource.key); carried are those it
	// uses that the generation it replaces still owns until commit hands
	// them over.
	watchers, carried map[string]*discovery.Watcher
	// Counters kept across generations for routes and upstreams that stay.
	routeStats map[string]*proxy.RouteStats // by route name + upstream
	upStats    map[string]*proxy.UpstreamStats
	statics    []*static.Handler
	// limiters are the routes' rate limiters, by route name, kept across
	// generations for a route of the same name (and store); carriedLimiters
	// names those taken over from the generation replaced, which it
	// closes unless commit hands them over. forwardAuths are the routes'
	// authentication services' clients.
	limiters        map[string]*routeLimiter
	carriedLimiters map[string]bool
	forwardAuths    []*proxy.ForwardAuth
	// stores hands out the shared stores of rate limits (the server's);
	// log is the server's logger.
	stores *redisstore.Registry
	log    *zap.Logger

	// mirrorStats are the routes' mirror counters, by route name +
	// shadow upstream (server/mirror.go).
	mirrorStats map[string]*proxy.MirrorStats
}

// build turns a validated configuration into a generation. Backends that
// prev also had keep their state; the engine keeps warm connections for
// transports whose name, backend address and settings did not change.
// On error nothing is left open and nothing running has changed.
func (s *Server) build(cfg *config.Config, prev *generation) (_ *generation, err error) {
	g := &generation{
		cfg:             cfg,
		graph:           &proxy.Graph{},
		clientTLS:       make(map[string]*tlsconf.Client),
		pools:           make(map[string]*pool),
		watchers:        make(map[string]*discovery.Watcher),
		carried:         make(map[string]*discovery.Watcher),
		routeStats:      make(map[string]*proxy.RouteStats),
		upStats:         make(map[string]*proxy.UpstreamStats),
		limiters:        make(map[string]*routeLimiter),
		carriedLimiters: make(map[string]bool),
		stores:          s.stores,
		log:             s.log,
	}
	defer func() {
		if err != nil {
			g.close()
		}
	}()
	var resolver *discovery.Resolver
	if usesDNS(cfg) {
		if resolver, err = discoveryResolver(cfg.Discovery); err != nil {
			return nil, err
		}
	}
	byName := make(map[string]*proxy.Upstream)
	for i, uc := range cfg.Upstreams {
		up, err := s.buildUpstream(g, prev, uc, resolver)
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
		if rc.ResponseBuffering == config.BufferingAuto {
			rt.ResponseBuffer = &wire.ResponseBuffer{
				Memory: rc.ResponseBufferMemoryBytes,
				File:   rc.ResponseBufferFileBytes,
				Budget: s.respBufs,
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
		case config.ActionSplit:
			if rt.Split, err = s.buildSplit(g, prev, rc, byName); err != nil {
				return nil, err
			}
		case config.ActionRespond:
			rt.Respond = renderFixed(rc.Respond)
		case config.ActionStatic:
			h, err := static.New(rc.Static.Root, rc.Static.Index, rc.Static.StripPrefix,
				static.Options{Precompressed: config.Codings(rc.Static.Precompressed)})
			if err != nil {
				return nil, fmt.Errorf("route %s: %w", rc.Name, err)
			}
			g.statics = append(g.statics, h)
			rt.Files = h
		case config.ActionRedirect:
			if rt.Redirect, err = rules.CompileRedirect(rc.Redirect.To, rc.Redirect.Status); err != nil {
				return nil, fmt.Errorf("route %s: redirect: %w", rc.Name, err)
			}
		default:
			return nil, fmt.Errorf("route %s: no action", rc.Name)
		}
		if rt.Mirror, err = s.buildMirror(g, prev, rc, byName); err != nil {
			return nil, err
		}
		if rt.Compress, err = compressPolicy(rc.Compress); err != nil {
			return nil, fmt.Errorf("route %s: compress: %w", rc.Name, err)
		}
		rt.Stats = s.routeStats(g, prev, rc.Name, rc.Upstream)
		if rt.Policy, err = g.buildPolicy(prev, rc); err != nil {
			return nil, fmt.Errorf("route %s: %w", rc.Name, err)
		}
		cond, err := routeCond(rc.Match)
		if err != nil {
			return nil, fmt.Errorf("route %s: match: %w", rc.Name, err)
		}
		entries = append(entries, route.Entry[*proxy.Route]{
			Name: rc.Name, Host: rc.Match.Host, Path: rc.Match.Path, PathPrefix: rc.Match.PathPrefix, Cond: cond, Value: rt,
		})
		g.graph.RouteList = append(g.graph.RouteList, rt)
	}
	if g.graph.Routes, err = route.New(entries); err != nil {
		return nil, err
	}
	g.graph.Recorder = s.recorder
	g.graph.Tracing = tracingPolicy(cfg.Tracing)
	return g, nil
}

// routeStats returns the counters of a route's requests to the named
// upstream ("" for a route that does not forward, or for a split's
// requests that reached no upstream): those of the previous generation
// when it had them, so that counts survive a reload. Nil when metrics are
// off.
func (s *Server) routeStats(g, prev *generation, route, upstreamName string) *proxy.RouteStats {
	if s.metrics == nil {
		return nil
	}
	key := route + "\x00" + upstreamName
	st := prev.keptRouteStats(key)
	if st == nil {
		st = s.metrics.RouteStats(route, upstreamName)
	}
	g.routeStats[key] = st
	return st
}

// keptRouteStats returns the generation's counters under key; nil when
// there is no generation or it had none.
func (g *generation) keptRouteStats(key string) *proxy.RouteStats {
	if g == nil {
		return nil
	}
	return g.routeStats[key]
}

// buildSplit compiles a split route's targets.
func (s *Server) buildSplit(g, prev *generation, rc config.Route, byName map[string]*proxy.Upstream) (*proxy.Split, error) {
	sp := &proxy.Split{}
	if rc.SplitKey != "" {
		k, err := requestKey(rc.SplitKey)
		if err != nil {
			return nil, fmt.Errorf("route %s: split_key: %w", rc.Name, err)
		}
		sp.Key = k
	}
	for _, t := range rc.Split {
		up := byName[t.Upstream]
		if up == nil {
			return nil, fmt.Errorf("route %s: split upstream %q is not defined", rc.Name, t.Upstream)
		}
		v := proxy.Variant{Upstream: up, Weight: uint64(max(t.Weight, 0)), Stats: s.routeStats(g, prev, rc.Name, t.Upstream)}
		if m := t.Match; m != nil {
			v.Pin = &proxy.Pin{Key: proxy.RequestKey{Kind: proxy.KeyHeader, Name: m.Header}}
			if m.Cookie != "" {
				v.Pin.Key = proxy.RequestKey{Kind: proxy.KeyCookie, Name: m.Cookie}
			}
			if m.Value != "" {
				v.Pin.Value = []byte(m.Value)
			}
		}
		sp.Variants = append(sp.Variants, v)
	}
	return sp, nil
}

// requestKey turns a hash_key or split_key into the pipeline's RequestKey.
func requestKey(s string) (proxy.RequestKey, error) {
	k, err := config.ParseHashKey(s)
	if err != nil {
		return proxy.RequestKey{}, err
	}
	kind := proxy.KeyClientIP
	switch k.Kind {
	case config.KeyHeader:
		kind = proxy.KeyHeader
	case config.KeyCookie:
		kind = proxy.KeyCookie
	case config.KeyPath:
		kind = proxy.KeyPath
	case config.KeyQuery:
		kind = proxy.KeyQuery
	}
	return proxy.RequestKey{Kind: kind, Name: k.Name}, nil
}

func (s *Server) buildUpstream(g, prev *generation, uc config.Upstream, r *discovery.Resolver) (*proxy.Upstream, error) {
	up := &proxy.Upstream{Name: uc.Name, Strategy: uc.Strategy, Checked: uc.HealthCheck != nil, Sticky: s.buildSticky(uc)}
	if balancer.IsHash(uc.Strategy) {
		k, err := requestKey(uc.HashKey)
		if err != nil {
			return nil, fmt.Errorf("upstream %s: hash_key: %w", uc.Name, err)
		}
		up.Key = k
	}
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
		ProxyProtocol:         proxyVersion(uc.Transport.ProxyProtocol),
	}}
	if uc.Retries != nil {
		up.Transport.Settings.TryTimeout = uc.Retries.PerTryTimeout.D()
	}
	if ct := g.clientTLS[uc.Name]; ct != nil { // a nil *Client in the interface would not be nil
		up.Transport.TLS = ct
	}

	if rc := uc.Retries; rc != nil {
		cond := rc.Conditions()
		up.Retry = proxy.RetryPolicy{
			Attempts:       rc.Attempts,
			OnConnectError: cond.ConnectError,
			OnBackendError: cond.Reset,
			OnTimeout:      cond.Timeout,
			IdempotentOnly: rc.Idempotent(),
		}
		if b := rc.Backoff; b != nil {
			up.Retry.Backoff = proxy.Backoff{Base: b.Base.D(), Max: b.Max.D()}
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

	var prevPool *pool
	if prev != nil {
		prevPool = prev.pools[uc.Name]
	}
	p, err := s.newPool(uc, up, s.buildWatchers(g, prev, uc, r), prevPool)
	if err != nil {
		return nil, err
	}
	g.pools[uc.Name] = p
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

// commit makes a built generation's membership live: the previous
// generation's pools retire (their checks stop), this one's take in what
// discovery found since the build, apply their breaker and ejection
// policies, mark up the backends of upstreams without checks and start
// their checks and watchers; backends the previous generation had and
// this one does not are drained, and its watchers that this one does not
// use stop.
func (g *generation) commit(prev *generation) {
	for _, up := range g.graph.Upstreams {
		var old *pool
		if prev != nil {
			old = prev.pools[up.Name]
		}
		g.pools[up.Name].goLive(old)
	}
	if prev == nil {
		return
	}
	for name, old := range prev.pools {
		old.retire() // an upstream the new configuration dropped
		old.drainLeft(g.pools[name])
	}
	g.adopt(prev)
}

// adopt takes over the discovery watchers of prev (the generation
// replaced) that g uses, and stops the others.
func (g *generation) adopt(prev *generation) {
	for key, w := range g.carried {
		delete(prev.watchers, key)
		g.watchers[key] = w
	}
	g.carried = nil
	for _, w := range prev.watchers {
		w.Stop()
	}
	prev.watchers = nil
	// Rate limiters: prev closes those g does not use when it closes
	// (requests on its graph may still ask them until then).
	for name := range g.carriedLimiters {
		delete(prev.limiters, name)
	}
	g.carriedLimiters = nil
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
	for _, p := range g.pools {
		p.retire()
	}
	for _, w := range g.watchers {
		w.Stop()
	}
	for _, h := range g.statics {
		h.Close()
	}
	for _, fa := range g.forwardAuths {
		fa.CloseIdle()
	}
	for name, rl := range g.limiters {
		if !g.carriedLimiters[name] {
			rl.close()
		}
	}
}

// describe names a generation for logs.
func (g *generation) describe() string {
	return strconv.Itoa(len(g.cfg.Listeners)) + " listeners, " + strconv.Itoa(len(g.cfg.Routes)) + " routes, " + strconv.Itoa(len(g.cfg.Upstreams)) + " upstreams"
}
