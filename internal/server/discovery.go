package server

import (
	"context"
	"fmt"
	"sync"

	"go.uber.org/zap"

	"github.com/helios-lb/helios/internal/config"
	"github.com/helios-lb/helios/internal/discovery"
)

// discoveryResolver returns the resolver dns and srv backends are looked
// up on: discovery.resolver, or the name servers of /etc/resolv.conf.
func discoveryResolver(d config.Discovery) (*discovery.Resolver, error) {
	if d.Resolver != "" {
		addr, err := config.ResolverAddr(d.Resolver)
		if err != nil {
			return nil, fmt.Errorf("discovery.resolver: %q %w", d.Resolver, err)
		}
		return discovery.NewResolver(addr), nil
	}
	r, err := discovery.SystemResolver("")
	if err != nil {
		return nil, fmt.Errorf("discovery: the system's resolver (set discovery.resolver): %w", err)
	}
	return r, nil
}

// usesDNS reports whether some upstream has a dns or srv backend.
func usesDNS(cfg *config.Config) bool {
	for _, uc := range cfg.Upstreams {
		for _, b := range uc.Backends {
			if b.DNS != "" || b.SRV != "" {
				return true
			}
		}
	}
	return false
}

// watchedSource is a discovery source of an upstream, as the
// configuration describes it.
type watchedSource struct {
	src  discovery.Source
	opts discovery.Options
	// key identifies the source across generations: the upstream and
	// everything that shapes the source's answers, so that a reload
	// keeping them keeps the running watcher and its last good set.
	key string
}

// sources lists uc's discovery sources in configuration order: its dns
// and srv backends, then its backends file. r is nil when it has no dns
// or srv backend.
func sources(cfg *config.Config, uc config.Upstream, r *discovery.Resolver) []watchedSource {
	d := cfg.Discovery
	base := discovery.Options{Min: d.MinRefresh.D(), Timeout: d.Timeout.D(), AllowEmpty: uc.AllowEmpty}
	var out []watchedSource
	for _, b := range uc.Backends {
		o := base
		o.Every = b.Refresh.D()
		var src discovery.Source
		switch b.Kind() {
		case "dns":
			src = &discovery.DNS{Resolver: r, Name: b.DNS, Port: b.Port, Weight: b.Weight}
		case "srv":
			src = &discovery.SRV{Resolver: r, Name: b.SRV}
		default:
			continue
		}
		out = append(out, watchedSource{src: src, opts: o, key: fmt.Sprintf("%s\x00%s\x00%d\x00%v\x00%v", uc.Name, src, b.Weight, o, *r)})
	}
	if uc.BackendsFile != "" {
		o := base
		o.Every, o.Min = d.FileRefresh.D(), d.FileRefresh.D()
		src := &discovery.File{Path: uc.BackendsFile}
		out = append(out, watchedSource{src: src, opts: o, key: fmt.Sprintf("%s\x00%s\x00%v", uc.Name, src, o)})
	}
	return out
}

// buildWatchers returns the watchers of uc's discovery sources: those of
// prev (the generation being replaced; nil: none) that it had with the
// same key, and new ones, whose first lookup runs now, all at once, so
// that the upstream starts with what they find. After a first lookup that
// fails the upstream starts without those backends, and the watcher keeps
// trying. New watchers go into g.watchers (g owns them), carried ones
// into g.carried.
func (s *Server) buildWatchers(g, prev *generation, uc config.Upstream, r *discovery.Resolver) []*discovery.Watcher {
	var (
		out   []*discovery.Watcher
		fresh []*discovery.Watcher
	)
	for _, ws := range sources(g.cfg, uc, r) {
		if prev != nil {
			if w := prev.watchers[ws.key]; w != nil {
				g.carried[ws.key] = w
				out = append(out, w)
				continue
			}
		}
		w := discovery.NewWatcher(ws.src, s.watchOptions(uc.Name, ws.src.String(), ws.opts))
		g.watchers[ws.key] = w
		out = append(out, w)
		fresh = append(fresh, w)
	}
	var wg sync.WaitGroup
	for _, w := range fresh {
		wg.Go(func() { w.Refresh(context.Background()) }) // a failure is logged and counted by OnError
	}
	wg.Wait()
	return out
}

// watchOptions adds logging and the error counter to o.
func (s *Server) watchOptions(upstreamName, source string, o discovery.Options) discovery.Options {
	log := s.log.With(zap.String("upstream", upstreamName), zap.String("source", source))
	m := s.metrics
	o.OnError = func(err error, repeated bool) {
		if m != nil {
			m.DiscoveryError(upstreamName, source)
		}
		if !repeated {
			log.Warn("discovery: lookup failed; the last good set of backends stays (none before a first good lookup)", zap.Error(err))
		}
	}
	o.OnRecover = func() { log.Info("discovery: lookups work again") }
	return o
}
