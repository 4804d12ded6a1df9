package config

import "time"

// Mirror sends a copy of a share of a route's requests to a shadow
// upstream (shadow traffic, to try a new version with real requests). The
// copy's answer is read and dropped; its latency and errors never reach
// the client's request. A copy goes with the request's body only when
// Helios holds the whole body in memory (request_buffering buffers it,
// or it came with the head); a request whose body streams, or was
// buffered into a file, is not copied. Copies are the first thing shed:
// past MaxInflight in flight, they are dropped and counted.
type Mirror struct {
	// Upstream names the shadow upstream. Required.
	Upstream string `yaml:"upstream"`
	// Percent is the share of the route's requests copied, 0-100
	// (fractions such as 0.5 allowed); 0 copies none. Default 100.
	Percent float64 `yaml:"percent"`
	// MaxInflight bounds the copies of the route in flight at once,
	// 1-10000; more are dropped. Default 32.
	MaxInflight int `yaml:"max_inflight"`
	// Timeout bounds each copy from its send to the end of its answer,
	// 1ms-10m. Default 10s.
	Timeout Duration `yaml:"timeout"`
}

// maxMirrorTimeout is the longest Mirror.Timeout.
const maxMirrorTimeout = 10 * time.Minute

// setMirrorDefaults fills the absent keys of the mirror block of the
// route at p.
func setMirrorDefaults(m *meta, r *Route, p string) {
	mi := r.Mirror
	if mi == nil {
		return
	}
	p += ".mirror"
	setDefault(m, p+".percent", &mi.Percent, 100)
	setDefault(m, p+".max_inflight", &mi.MaxInflight, 32)
	setDefault(m, p+".timeout", &mi.Timeout, seconds(10))
}

// mirror checks the mirror block of the route r at p.
func (v *validator) mirror(r *Route, p string, upstreams []string) {
	mi := r.Mirror
	if mi == nil {
		return
	}
	p += ".mirror"
	if !r.Forwards() {
		v.addf(p, "set on a route without an upstream (only forwarded requests are mirrored)")
		return
	}
	if mi.Upstream == "" {
		v.addf(p+".upstream", "missing (the name of the shadow upstream)")
	} else {
		v.upstreamRef(p+".upstream", mi.Upstream, upstreams)
	}
	if !(mi.Percent >= 0 && mi.Percent <= 100) {
		v.addf(p+".percent", "%g is out of range (0-100, such as 10)", mi.Percent)
	}
	v.intRange(p+".max_inflight", mi.MaxInflight, 1, 10000)
	if mi.Timeout.D() < time.Millisecond || mi.Timeout.D() > maxMirrorTimeout {
		v.addf(p+".timeout", "%s is out of range (1ms-10m, such as 10s)", mi.Timeout)
	}
}
