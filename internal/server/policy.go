package server

import (
	"sort"

	"github.com/helios-lb/helios/internal/config"
	"github.com/helios-lb/helios/internal/route"
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
