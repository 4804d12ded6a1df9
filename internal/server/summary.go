package server

import (
	"strconv"
	"strings"

	"github.com/helios-lb/helios/internal/admin"
	"github.com/helios-lb/helios/internal/config"
)

// Summary says in one line what is served where, for the line the log
// opens with once Helios serves (issue 18 item 7; Caddy prints "Caddy
// proxying http://:8080 -> 127.0.0.1:9001"): "proxying
// http://127.0.0.1:8080 -> 127.0.0.1:9001,127.0.0.1:9002" when every route
// forwards to one upstream, "serving URL, URL: /ping respond 200, /* ->
// ..." otherwise, then the admin listener.
func (s *Server) Summary() string {
	cfg := s.Config()
	var urls []string
	for _, lc := range cfg.Listeners {
		addr := lc.Address
		if a := s.Addr(lc.Name); a != nil {
			addr = a.String()
		}
		u := "http://" + addr
		switch {
		case lc.TLS != nil:
			u = "https://" + addr
		case lc.H2C:
			u += " (and h2c)"
		}
		urls = append(urls, u)
	}
	var b strings.Builder
	upstreams := make(map[string][]string, len(cfg.Upstreams))
	for _, uc := range cfg.Upstreams {
		for _, be := range uc.Backends {
			upstreams[uc.Name] = append(upstreams[uc.Name], be.Address)
		}
	}
	if one := soleUpstream(cfg.Routes); one != "" {
		b.WriteString("proxying " + strings.Join(urls, ", ") + " -> " + list(upstreams[one], 6, ","))
	} else {
		routes := make([]string, len(cfg.Routes))
		for i, rc := range cfg.Routes {
			routes[i] = routeSummary(rc, upstreams)
		}
		b.WriteString("serving " + strings.Join(urls, ", ") + ": " + list(routes, 8, ", "))
	}
	if a := s.AdminAddr(); a != nil {
		b.WriteString("; admin on http://" + a.String())
	}
	return b.String()
}

// soleUpstream returns the upstream every route forwards to, or "" when
// some route does something else.
func soleUpstream(routes []config.Route) string {
	one := ""
	for _, rc := range routes {
		if rc.Upstream == "" || (one != "" && rc.Upstream != one) {
			return ""
		}
		one = rc.Upstream
	}
	return one
}

// routeSummary is one route in a Summary: what it matches and what it
// does.
func routeSummary(rc config.Route, upstreams map[string][]string) string {
	m := rc.Match.Path
	switch {
	case m != "":
	case rc.Match.PathPrefix != "":
		m = rc.Match.PathPrefix + "*"
	default:
		m = "/*"
	}
	if h := rc.Match.Host; h != "" && h != "*" {
		m = h + m
	}
	switch {
	case rc.Upstream != "":
		return m + " -> " + list(upstreams[rc.Upstream], 6, ",")
	case rc.Respond != nil:
		return m + " respond " + strconv.Itoa(rc.Respond.Status)
	case rc.Static != nil:
		return m + " files in " + rc.Static.Root
	}
	return m
}

// list joins the first n of items with sep, and says how many there are
// when there are more.
func list(items []string, n int, sep string) string {
	if len(items) <= n {
		return strings.Join(items, sep)
	}
	return strings.Join(items[:n], sep) + sep + "... (" + strconv.Itoa(len(items)) + " in all)"
}

// ListenerMemory returns what the client connections of the listener
// configured as lc may hold in memory with conns of them open: the figures
// README's "Memory per connection" explains, for helios validate and the
// admin API's /api/v1/listeners.
func ListenerMemory(lc config.Listener, conns int) admin.Memory {
	o := engineOptions(lc)
	worst, slow := o.ConnMemory()
	return admin.Memory{
		WorstKiB:            worst >> 10,
		SlowReaderKiB:       slow >> 10,
		Connections:         conns,
		WorstTotalMiB:       int(int64(worst) * int64(conns) >> 20),
		SlowReadersTotalMiB: int(int64(slow) * int64(conns) >> 20),
	}
}

// Listeners describes every listener (admin.Source), in config order.
func (s *Server) Listeners() []admin.Listener {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []admin.Listener{}
	for _, lc := range s.gen.cfg.Listeners {
		bl := s.listeners[lc.Address]
		if bl == nil {
			continue
		}
		capped := s.fds.Cap(lc.MaxConnections)
		out = append(out, admin.Listener{
			Name:            lc.Name,
			Address:         bl.pool.Addr().String(),
			TLS:             lc.TLS != nil,
			HTTP2:           lc.OffersHTTP2(),
			H2C:             lc.H2C,
			Sockets:         bl.pool.Sockets(),
			MaxConnections:  lc.MaxConnections,
			ConnectionCap:   capped,
			OpenConnections: bl.pool.OpenConnections(),
			Memory:          ListenerMemory(lc, capped),
		})
	}
	return out
}
