package config

import (
	"slices"
	"strings"
)

// Quick is the one-line mode (helios proxy, like caddy reverse-proxy):
// one listener in front of one upstream, every other key at its default.
type Quick struct {
	// From is the listening address (--from). Required.
	From string
	// To are the backends' addresses (--to). At least one.
	To []string
	// Strategy is the balancing strategy (--strategy); "" means
	// round_robin.
	Strategy string
	// HealthPath turns on active health checks of this path (--health),
	// with passive ejection; "" means neither.
	HealthPath string
	// Admin is the admin listener's address (--admin), or "off"; ""
	// means the default, 127.0.0.1:9901.
	Admin string
	// AccessLog is logging.access_log (--access-log); "" means stdout.
	AccessLog string
}

// quickFlags names the flag behind each key path Quick fills, longest
// prefix first, so that problems speak of flags rather than keys.
var quickFlags = []struct{ path, flag string }{
	{"listeners[0]", "--from"},
	{"upstreams[0].backends", "--to"},
	{"upstreams[0].strategy", "--strategy"},
	{"upstreams[0].health_check", "--health"},
	{"admin", "--admin"},
	{"logging.access_log", "--access-log"},
}

// Config returns the configuration q describes, with defaults, validated.
// Its problems (Problems) name the flags, as --to[1]: "x" is not host:port.
func (q Quick) Config() (*Config, error) {
	c := &Config{
		Listeners: []Listener{{Name: "web", Address: q.From}},
		Routes:    []Route{{Name: "proxy", Match: Match{PathPrefix: "/"}, Upstream: "app"}},
		Upstreams: []Upstream{{Name: "app", Strategy: q.Strategy}},
		Admin:     Admin{Address: q.Admin},
		Logging:   Logging{AccessLog: q.AccessLog},
	}
	if c.Logging.AccessLog == "" {
		c.Logging.AccessLog = AccessLogStdout
	}
	for _, to := range q.To {
		c.Upstreams[0].Backends = append(c.Upstreams[0].Backends, Backend{Address: strings.TrimSpace(to)})
	}
	if q.HealthPath != "" {
		c.Upstreams[0].HealthCheck = &HealthCheck{Path: q.HealthPath}
		c.Upstreams[0].Passive = &Passive{}
	}
	SetDefaults(c)
	ps, _ := c.validate() // no TLS here, so no warnings
	for i := range ps {
		ps[i].Path = flagPath(ps[i].Path)
	}
	if len(q.To) == 0 {
		// Said in flag terms rather than as the config's "no backends".
		ps = slices.DeleteFunc(ps, func(p Problem) bool { return p.Path == "--to" })
		ps = append(ps, Problem{Path: "--to", Msg: "missing (one or more backend addresses, comma-separated, such as 127.0.0.1:9001,127.0.0.1:9002)"})
	}
	if err := ps.err(); err != nil {
		return nil, err
	}
	return c, nil
}

// flagPath rewrites a key path Quick filled as its flag:
// upstreams[0].backends[1].address becomes --to[1].
func flagPath(path string) string {
	for _, f := range quickFlags {
		rest, ok := strings.CutPrefix(path, f.path)
		if !ok {
			continue
		}
		if f.flag == "--to" {
			if i := strings.IndexByte(rest, ']'); strings.HasPrefix(rest, "[") && i > 0 {
				return f.flag + rest[:i+1]
			}
		}
		return f.flag
	}
	return path
}
