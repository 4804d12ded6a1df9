package server

import (
	"fmt"
	"math"

	"github.com/helios-lb/helios/internal/config"
	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/shadow"
)

// buildMirror compiles a route's mirror block; nil when it has none. Its
// counters (and the count of copies in flight, which the bound reads)
// are the previous generation's for a route of the same name and shadow.
func (s *Server) buildMirror(g, prev *generation, rc config.Route, byName map[string]*proxy.Upstream) (*proxy.Mirror, error) {
	mc := rc.Mirror
	if mc == nil {
		return nil, nil
	}
	up := byName[mc.Upstream]
	if up == nil {
		return nil, fmt.Errorf("route %s: mirror upstream %q is not defined", rc.Name, mc.Upstream)
	}
	key := rc.Name + "\x00" + mc.Upstream
	var st *proxy.MirrorStats
	if prev != nil {
		st = prev.mirrorStats[key]
	}
	if st == nil {
		st = &proxy.MirrorStats{}
	}
	if g.mirrorStats == nil {
		g.mirrorStats = make(map[string]*proxy.MirrorStats)
	}
	g.mirrorStats[key] = st
	return &proxy.Mirror{
		Upstream:    up,
		PerMillion:  uint64(math.Round(mc.Percent * 10_000)),
		MaxInflight: int64(mc.MaxInflight),
		Timeout:     mc.Timeout.D(),
		Sender:      s.shadowPool(),
		Stats:       st,
	}, nil
}

// shadowPool returns the process's sender of mirrored copies, made on
// first use; Shutdown closes it. The caller holds s.mu, or has s to
// itself (New).
func (s *Server) shadowPool() *shadow.Pool {
	if s.shadows == nil {
		s.shadows = shadow.New()
	}
	return s.shadows
}
