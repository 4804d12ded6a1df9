package server

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"

	"github.com/helios-lb/helios/internal/balancer"
	"github.com/helios-lb/helios/internal/config"
	"github.com/helios-lb/helios/internal/h1"
	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/route"
	"github.com/helios-lb/helios/internal/static"
	"github.com/helios-lb/helios/internal/upstream"
)

// retryBurst is how many retries an upstream's budget allows back to back
// before the ratio applies.
const retryBurst = 10

// generation is everything built from one configuration: the routing
// graph and the resources behind it that must be closed when a newer
// generation has replaced it and its requests have finished.
type generation struct {
	cfg        *config.Config
	graph      *proxy.Graph
	transports map[string]*h1.Transport // by upstream name
	states     map[string]*upstream.State
	statics    []*static.Handler
}

// stateKey identifies a backend across generations.
func stateKey(upstreamName, addr string) string { return upstreamName + "\x00" + addr }

// build turns a validated configuration into a generation. Backends that
// prev also had keep their state; transports share warm pools with prev's.
// On error nothing is left open.
func (s *Server) build(cfg *config.Config, prev *generation) (_ *generation, err error) {
	g := &generation{
		cfg:        cfg,
		graph:      &proxy.Graph{},
		transports: make(map[string]*h1.Transport),
		states:     make(map[string]*upstream.State),
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
		rt := &proxy.Route{Name: rc.Name, Index: i}
		switch rc.Action() {
		case config.ActionUpstream:
			rt.Upstream = byName[rc.Upstream]
			if rt.Upstream == nil {
				return nil, fmt.Errorf("route %s: upstream %q is not defined", rc.Name, rc.Upstream)
			}
		case config.ActionRespond:
			rt.Respond = renderFixed(rc.Respond)
		case config.ActionStatic:
			h, err := static.New(rc.Static.Root, rc.Static.Index, rc.Static.StripPrefix)
			if err != nil {
				return nil, fmt.Errorf("route %s: %w", rc.Name, err)
			}
			g.statics = append(g.statics, h)
			rt.Static = h
		default:
			return nil, fmt.Errorf("route %s: no action", rc.Name)
		}
		entries = append(entries, route.Entry[*proxy.Route]{
			Name: rc.Name, Host: rc.Match.Host, Path: rc.Match.Path, PathPrefix: rc.Match.PathPrefix, Value: rt,
		})
	}
	if g.graph.Routes, err = route.New(entries); err != nil {
		return nil, err
	}
	g.graph.Recorder = s.recorder
	return g, nil
}

func (s *Server) buildUpstream(g, prev *generation, uc config.Upstream) (*proxy.Upstream, error) {
	up := &proxy.Upstream{Name: uc.Name}
	addrs := make([]string, len(uc.Backends))
	for i, bc := range uc.Backends {
		key := stateKey(uc.Name, bc.Address)
		st := (*upstream.State)(nil)
		if prev != nil {
			st = prev.states[key]
		}
		if st == nil {
			st = upstream.NewState(s.clock)
		}
		g.states[key] = st
		up.Backends = append(up.Backends, &upstream.Backend{State: st, Addr: bc.Address, Weight: bc.Weight, Index: i})
		addrs[i] = bc.Address
	}
	picker, err := balancer.New(uc.Strategy, up.Backends, nil)
	if err != nil {
		return nil, fmt.Errorf("upstream %s: %w", uc.Name, err)
	}
	up.Picker = picker
	up.HashClient = uc.Strategy == balancer.IPHash

	var prevTr *h1.Transport
	if prev != nil {
		prevTr = prev.transports[uc.Name]
	}
	tr := h1.NewTransport(h1.TransportOptions{
		MaxIdlePerBackend:     uc.Transport.MaxIdlePerBackend,
		IdleTimeout:           uc.Transport.IdleTimeout.D(),
		DialTimeout:           uc.Transport.DialTimeout.D(),
		ResponseHeaderTimeout: uc.Transport.ResponseHeaderTimeout.D(),
		ReadTimeout:           uc.Transport.ReadTimeout.D(),
	}, addrs, prevTr)
	g.transports[uc.Name] = tr
	up.Transport = tr

	if rc := uc.Retries; rc != nil {
		cond := rc.Conditions()
		up.Retry = proxy.RetryPolicy{
			Attempts:       rc.Attempts,
			OnConnectError: cond.ConnectError,
			OnTimeout:      cond.Timeout,
			IdempotentOnly: rc.Idempotent(),
		}
		for code := 500; code <= 599; code++ {
			if cond.Statuses.Contains(code) {
				up.Retry.Statuses.Add(code)
			}
		}
		if rc.BudgetRatio > 0 {
			up.Budget = proxy.NewBudget(rc.BudgetRatio, retryBurst)
		}
	}
	return up, nil
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
	var hdr []byte
	for _, k := range names {
		hdr = append(hdr, k...)
		hdr = append(hdr, ": "...)
		hdr = append(hdr, r.Headers[k]...)
		hdr = append(hdr, "\r\n"...)
	}
	if !hasType && r.Body != "" {
		hdr = append(hdr, "Content-Type: text/plain; charset=utf-8\r\n"...)
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
	for _, t := range g.transports {
		t.Close()
	}
	for _, h := range g.statics {
		h.Close()
	}
}

// describe names a generation for logs.
func (g *generation) describe() string {
	return strconv.Itoa(len(g.cfg.Listeners)) + " listeners, " + strconv.Itoa(len(g.cfg.Routes)) + " routes, " + strconv.Itoa(len(g.cfg.Upstreams)) + " upstreams"
}
