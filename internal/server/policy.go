package server

import (
	"fmt"
	"net"
	"sort"
	"sync"

	"github.com/helios-lb/helios/internal/auth"
	"github.com/helios-lb/helios/internal/config"
	"github.com/helios-lb/helios/internal/engine"
	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/ratelimit"
	"github.com/helios-lb/helios/internal/realip"
	"github.com/helios-lb/helios/internal/redisstore"
	"github.com/helios-lb/helios/internal/route"
	"github.com/helios-lb/helios/internal/rules"
	"github.com/helios-lb/helios/internal/wire"
)

// routeCond compiles a route's match conditions beyond host and path;
// nil when it has none.
func routeCond(m config.Match) (*route.Cond, error) {
	c := &route.Cond{Methods: m.Methods, Headers: pairs(m.Headers), Query: pairs(m.Query)}
	var err error
	if c.ClientCIDRs, err = config.ParsePrefixes(m.ClientCIDRs); err != nil {
		return nil, err
	}
	if n := m.Not; n != nil {
		nc, err := routeCond(*n)
		if err != nil {
			return nil, err
		}
		c.Not = &route.Not{Host: n.Host, Path: n.Path, PathPrefix: n.PathPrefix}
		if nc != nil {
			c.Not.Cond = *nc
		}
	}
	if len(c.Methods) == 0 && len(c.Headers) == 0 && len(c.Query) == 0 && len(c.ClientCIDRs) == 0 && c.Not == nil {
		return nil, nil
	}
	return c, nil
}

// pairs returns m's entries sorted by name, so that a route's conditions
// are checked in one order whatever the map's.
func pairs(m map[string]string) []route.Pair {
	var out []route.Pair
	for k, v := range m {
		out = append(out, route.Pair{Name: k, Value: v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// clientPolicy sets the engine options of the listener lc's client
// policy: trusted proxies, PROXY protocol, connections per address, and
// what the pipeline learns of the listener (redirect_https, to port
// httpsPort).
func clientPolicy(o *engine.Options, lc config.Listener, stats *engine.ListenerStats, httpsPort int) {
	if len(lc.TrustedProxies) > 0 {
		trusted, _ := config.ParsePrefixes(lc.TrustedProxies) // validated
		src, _ := realip.ParseSource(lc.ClientIPHeader)
		o.RealIP = realip.New(trusted, src)
	}
	switch lc.ProxyProtocol {
	case config.ProxyProtocolV1:
		o.ProxyProtocol = engine.ProxyV1
	case config.ProxyProtocolV2:
		o.ProxyProtocol = engine.ProxyV2
	case config.ProxyProtocolOptional:
		o.ProxyProtocol = engine.ProxyOptional
	}
	o.ProxyTimeout = lc.ReadHeaderTimeout.D()
	o.MaxConnsPerIP = lc.MaxConnectionsPerIP
	o.Stats = stats
	o.Listener = &wire.Listener{Name: lc.Name, RedirectHTTPS: lc.RedirectHTTPS, HTTPSPort: httpsPort}
}

// setHTTPSPorts tells the listeners ls where redirect_https sends their
// clients: the port the first TLS listener of cfg is bound to (443 when
// there is none).
func (s *Server) setHTTPSPorts(cfg *config.Config, ls map[string]*boundListener) {
	port := 443
	for _, lc := range cfg.Listeners {
		if lc.TLS == nil {
			continue
		}
		if bl := ls[lc.Address]; bl != nil {
			if a, ok := bl.pool.Addr().(*net.TCPAddr); ok {
				port = a.Port
			}
		}
		break
	}
	for _, bl := range ls {
		if bl.httpsPort == port {
			continue
		}
		bl.httpsPort = port
		if bl.loop != nil {
			bl.loop.SetOptions(bl.engineOptions(bl.cfg))
		}
	}
}

// ListenerStats returns the client policy counters of each listener, by
// name (metrics.Source).
func (s *Server) ListenerStats() map[string]*engine.ListenerStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]*engine.ListenerStats, len(s.listeners))
	for _, bl := range s.listeners {
		out[bl.cfg.Name] = bl.stats
	}
	return out
}

// Stores returns the Redis stores in use (metrics.Source).
func (s *Server) Stores() []*redisstore.Store { return s.stores.Stores() }

// buildPolicy compiles route rc's edge policy; nil when it has none. A
// route's rate limiter is kept from prev when prev had a route of the
// same name: a reload does not hand every client a fresh allowance.
func (g *generation) buildPolicy(prev *generation, rc config.Route) (*proxy.Policy, error) {
	var p proxy.Policy
	var err error
	if p.Allow, err = config.ParsePrefixes(rc.Allow); err != nil {
		return nil, fmt.Errorf("allow: %w", err)
	}
	if p.Deny, err = config.ParsePrefixes(rc.Deny); err != nil {
		return nil, fmt.Errorf("deny: %w", err)
	}
	if rl := rc.RateLimit; rl != nil {
		l, err := g.routeLimiter(prev, rc.Name, rl)
		if err != nil {
			return nil, fmt.Errorf("rate_limit: %w", err)
		}
		kind, name, _ := config.ParseRateKey(rl.Key)
		key := proxy.RateKeyClientIP
		switch kind {
		case config.RateKeyRoute:
			key = proxy.RateKeyRoute
		case "header":
			key = proxy.RateKeyHeader
		}
		p.RateLimit = proxy.NewRateLimit(l.limiter(), ratelimit.Limit{Requests: rl.Requests, Per: rl.Per.D(), Burst: rl.Burst}, key, name)
	}
	if b := rc.BasicAuth; b != nil {
		users, err := auth.LoadUsers(b.UsersFile)
		if err != nil {
			return nil, fmt.Errorf("basic_auth: %w", err)
		}
		p.BasicAuth = proxy.NewBasicAuth(users, b.Realm)
	}
	if f := rc.ForwardAuth; f != nil {
		p.ForwardAuth = proxy.NewForwardAuth(f.Address, f.CopyHeaders, f.Timeout.D())
		g.forwardAuths = append(g.forwardAuths, p.ForwardAuth)
	}
	if rw := rc.Rewrite; rw != nil {
		if p.Rewrite, err = rules.CompileRewrite(rules.RewriteConfig{
			StripPrefix: rw.StripPrefix, AddPrefix: rw.AddPrefix, Regex: rw.Regex, Replacement: rw.Replacement, KeepQuery: rw.KeepQuery,
		}); err != nil {
			return nil, fmt.Errorf("rewrite: %w", err)
		}
	}
	if h := rc.RequestHeaders; h != nil {
		if p.RequestHeaders, err = rules.CompileHeaderRules(h.Set, h.Add, h.Remove); err != nil {
			return nil, fmt.Errorf("request_headers: %w", err)
		}
	}
	if h := rc.ResponseHeaders; h != nil {
		if p.ResponseHeaders, err = rules.CompileHeaderRules(h.Set, h.Add, h.Remove); err != nil {
			return nil, fmt.Errorf("response_headers: %w", err)
		}
	}
	if p.Allow == nil && p.Deny == nil && p.RateLimit == nil && p.BasicAuth == nil && p.ForwardAuth == nil &&
		p.Rewrite == nil && p.RequestHeaders.Empty() && p.ResponseHeaders.Empty() {
		return nil, nil
	}
	return &p, nil
}

// routeLimiter is a route's rate limiter: in this process, or shared
// through a Redis store.
type routeLimiter struct {
	local  *ratelimit.Local
	shared *redisstore.Limiter
	// store is shared's, given back to the registry when it closes; key
	// is what the limiter was made from (store and instances), "" for a
	// local one.
	store  *redisstore.Store
	key    string
	closed sync.Once
}

// limiter returns the ratelimit.Limiter the pipeline asks.
func (r *routeLimiter) limiter() ratelimit.Limiter {
	if r.shared != nil {
		return r.shared
	}
	return r.local
}

// close stops a shared limiter (its unspent tokens go back) and gives
// back its store.
func (r *routeLimiter) close() {
	r.closed.Do(func() {
		if r.shared != nil {
			r.shared.Close()
			r.store.Release()
		}
	})
}

// routeLimiter returns the limiter of the route called name: prev's when
// prev had one for a route of that name made from the same store and
// instances, else a new one.
func (g *generation) routeLimiter(prev *generation, name string, rl *config.RateLimit) (*routeLimiter, error) {
	key := ""
	var o redisstore.Options
	if rl.Store != "" {
		u, err := config.ParseStoreURL(rl.Store)
		if err != nil {
			return nil, err
		}
		o = redisstore.URLOptions(u, rl.StorePassword)
		key = fmt.Sprintf("%s|%s|%s|%d", u.Redacted(), o.Username, o.Password, rl.Instances)
	}
	if prev != nil {
		if l := prev.limiters[name]; l != nil && l.key == key {
			g.limiters[name] = l
			g.carriedLimiters[name] = true
			return l, nil
		}
	}
	l := &routeLimiter{key: key}
	if key == "" {
		l.local = ratelimit.New(0)
	} else {
		o.Logger = g.log
		l.store = g.stores.Get(o)
		l.shared = l.store.Limiter(redisstore.LimiterOptions{Name: name, Instances: rl.Instances})
	}
	g.limiters[name] = l
	return l, nil
}

// proxyVersion returns a transport.proxy_protocol as the engine's
// setting (0: none).
func proxyVersion(s string) uint8 {
	switch s {
	case config.ProxyProtocolV1:
		return wire.ProxyV1
	case config.ProxyProtocolV2:
		return wire.ProxyV2
	}
	return 0
}
