package config

import (
	"runtime"
	"time"
)

// Named defaults; the others are written where SetDefaults applies them.
const (
	// maxSockets is the largest Listener.Sockets; the default, the CPUs
	// the Go runtime may use, is capped at it.
	maxSockets = 1024
	// defaultAdminAddress is the default Admin.Address.
	defaultAdminAddress = "127.0.0.1:9901"
)

// defaultRetryOn is the default Retries.On. Read only: SetDefaults copies it.
var defaultRetryOn = []string{RetryOnConnectError, RetryOnReset, "502", "503", "504"}

// SetDefaults fills every absent key of c with the default documented on its
// field. For a Config from Parse or Load, absent means the key was not in the
// YAML (or was null), so an explicit weight: 0 stays 0 for Validate to
// reject. For a Config built in code, absent means zero: a zero number gets
// its default, so to turn off a trigger whose "off" is 0 (such as
// CircuitBreaker.ConsecutiveFailures) set it after calling SetDefaults. An
// empty string always counts as absent. Optional blocks (HealthCheck,
// Passive, CircuitBreaker) are filled only when non-nil; a nil Retries
// becomes the default retry policy. SetDefaults may be called more than once.
func SetDefaults(c *Config) {
	m := c.meta
	// GOMAXPROCS, not NumCPU: since Go 1.25 it follows the cgroup CPU
	// limit, so `docker run --cpus=1` on a 16-CPU host gets one socket
	// (and one event loop), not sixteen competing for one CPU.
	numCPU := min(runtime.GOMAXPROCS(0), maxSockets)
	for i := range c.Listeners {
		l, p := &c.Listeners[i], indexPath("listeners", i)
		setDefault(m, p+".sockets", &l.Sockets, numCPU)
		setDefault(m, p+".backlog", &l.Backlog, 4096)
		setDefault(m, p+".max_connections", &l.MaxConnections, 20000)
		setDefault(m, p+".read_header_timeout", &l.ReadHeaderTimeout, seconds(10))
		setDefault(m, p+".idle_timeout", &l.IdleTimeout, seconds(60))
		setDefault(m, p+".max_header_bytes", &l.MaxHeaderBytes, 65536)
		setDefault(m, p+".max_header_count", &l.MaxHeaderCount, 100)
		setDefault(m, p+".max_method_bytes", &l.MaxMethodBytes, 32)
		setDefault(m, p+".output_buffer_bytes", &l.OutputBufferBytes, 65536)
		if l.Poller == "" {
			// The deprecated key's value, where it has one this key
			// can take (validate says what is wrong with another).
			switch l.Engine {
			case EngineLoop, "":
				l.Poller = PollerNative
			case EnginePortable:
				l.Poller = PollerPortable
			}
		}
		if len(l.TrustedProxies) > 0 {
			setString(&l.ClientIPHeader, ClientIPXForwardedFor)
		}
		setDefault(m, p+".write_timeout", &l.WriteTimeout, seconds(60))
		// ReadTimeout defaults to 0, no limit.
		setListenerTLSDefaults(m, l, p)
		setACMEDefaults(c, i, p+".tls.acme")
	}
	for i := range c.Routes {
		r, p := &c.Routes[i], indexPath("routes", i)
		if r.Respond != nil {
			setDefault(m, p+".respond.status", &r.Respond.Status, 200)
		}
		if r.Static != nil {
			setString(&r.Static.Index, "index.html")
		}
		setRoutePolicyDefaults(m, r, p)
		if r.Forwards() {
			if absent(m, p+".upgrades", r.Upgrades == nil) {
				r.Upgrades = append([]string(nil), DefaultUpgrades...)
			}
			setString(&r.RequestBuffering, BufferingAuto)
			setDefault(m, p+".max_body_bytes", &r.MaxBodyBytes, 100<<20)
			setDefault(m, p+".request_buffer_memory_bytes", &r.RequestBufferMemoryBytes, 64<<10)
			setDefault(m, p+".request_buffer_file_bytes", &r.RequestBufferFileBytes, 16<<20)
			setMirrorDefaults(m, r, p)
			setString(&r.ResponseBuffering, BufferingAuto)
			setDefault(m, p+".response_buffer_memory_bytes", &r.ResponseBufferMemoryBytes, 64<<10)
			setDefault(m, p+".response_buffer_file_bytes", &r.ResponseBufferFileBytes, 64<<20)
		}
	}
	for i := range c.Upstreams {
		setUpstreamDefaults(m, &c.Upstreams[i], indexPath("upstreams", i))
	}
	d := &c.Discovery
	setDefault(m, "discovery.timeout", &d.Timeout, seconds(5))
	setDefault(m, "discovery.min_refresh", &d.MinRefresh, seconds(1))
	setDefault(m, "discovery.file_refresh", &d.FileRefresh, seconds(1))
	rb := &c.RequestBuffers
	setDefault(m, "request_buffers.connection_bytes", &rb.ConnectionBytes, 32<<20)
	setDefault(m, "request_buffers.memory_bytes", &rb.MemoryBytes, 256<<20)
	setDefault(m, "request_buffers.file_bytes", &rb.FileBytes, 1<<30)
	setDefault(m, "response_buffers.memory_bytes", &c.ResponseBuffers.MemoryBytes, 64<<20)
	setDefault(m, "response_buffers.file_bytes", &c.ResponseBuffers.FileBytes, 1<<30)
	setString(&c.Admin.Address, defaultAdminAddress)
	setString(&c.Logging.Level, "info")
	setString(&c.Logging.Format, "json")
	setString(&c.Logging.AccessLog, AccessLogOff)
	setTracingDefaults(m, c.Tracing)
}

// setUpstreamDefaults fills the absent keys of the upstream u at path p.
func setUpstreamDefaults(m *meta, u *Upstream, p string) {
	setString(&u.Strategy, "round_robin")
	if isHashStrategy(u.Strategy) {
		setString(&u.HashKey, KeyClientIP)
		setString(&u.HashFallback, "round_robin")
	}
	// BoundedLoad and SlowStart default to 0, off.
	setStickyDefaults(u)
	for j := range u.Backends {
		b, bp := &u.Backends[j], indexPath(p+".backends", j)
		if b.SRV == "" {
			// An SRV entry's weights come from its records.
			setDefault(m, bp+".weight", &b.Weight, 1)
		}
		if b.DNS != "" || b.SRV != "" {
			setDefault(m, bp+".refresh", &b.Refresh, seconds(5))
		}
	}

	t := &u.Transport
	setDefault(m, p+".transport.max_idle_per_backend", &t.MaxIdlePerBackend, 256)
	setDefault(m, p+".transport.idle_timeout", &t.IdleTimeout, seconds(90))
	setDefault(m, p+".transport.dial_timeout", &t.DialTimeout, seconds(2))
	setDefault(m, p+".transport.response_header_timeout", &t.ResponseHeaderTimeout, seconds(30))
	setDefault(m, p+".transport.read_timeout", &t.ReadTimeout, seconds(60))
	setDefault(m, p+".transport.max_queue_per_backend", &t.MaxQueuePerBackend, 256)
	setDefault(m, p+".transport.queue_timeout", &t.QueueTimeout, seconds(10))
	setTransportTLSDefaults(t)
	// ProxyProtocol defaults to "", none sent.

	if h := u.HealthCheck; h != nil {
		hp := p + ".health_check"
		setString(&h.Path, "/healthz")
		setDefault(m, hp+".interval", &h.Interval, seconds(2))
		setDefault(m, hp+".timeout", &h.Timeout, seconds(1))
		setDefault(m, hp+".fails", &h.Fails, 2)
		setDefault(m, hp+".passes", &h.Passes, 2)
		setString(&h.ExpectStatus, "200-399")
	}

	if pa := u.Passive; pa != nil {
		pp := p + ".passive"
		setDefault(m, pp+".max_fails", &pa.MaxFails, 3)
		setDefault(m, pp+".fail_window", &pa.FailWindow, seconds(10))
		setDefault(m, pp+".eject_for", &pa.EjectFor, seconds(30))
		setDefault(m, pp+".max_eject_for", &pa.MaxEjectFor, seconds(300))
	}

	if b := u.CircuitBreaker; b != nil {
		bp := p + ".circuit_breaker"
		setDefault(m, bp+".consecutive_failures", &b.ConsecutiveFailures, 5)
		setDefault(m, bp+".failure_ratio", &b.FailureRatio, 0.5)
		setDefault(m, bp+".min_requests", &b.MinRequests, 20)
		setDefault(m, bp+".interval", &b.Interval, seconds(10))
		setDefault(m, bp+".open_for", &b.OpenFor, seconds(10))
		setDefault(m, bp+".half_open_requests", &b.HalfOpenRequests, 1)
	}

	// An absent retries block still retries: see Upstream.Retries.
	if u.Retries == nil {
		u.Retries = &Retries{}
	}
	r, rp := u.Retries, p+".retries"
	setDefault(m, rp+".attempts", &r.Attempts, 2)
	if absent(m, rp+".on", r.On == nil) {
		r.On = append([]string(nil), defaultRetryOn...)
	}
	if r.IdempotentOnly == nil {
		t := true
		r.IdempotentOnly = &t
	}
	setDefault(m, rp+".budget_ratio", &r.BudgetRatio, 0.2)
	if b := r.Backoff; b != nil {
		setDefault(m, rp+".backoff.base", &b.Base, Duration(25*time.Millisecond))
		setDefault(m, rp+".backoff.max", &b.Max, Duration(250*time.Millisecond))
	}
	// PerTryTimeout defaults to 0, no bound.
}

// setDefault sets *v to def when the key at path is absent.
func setDefault[T comparable](m *meta, path string, v *T, def T) {
	var zero T
	if absent(m, path, *v == zero) {
		*v = def
	}
}

// absent reports whether the key at path counts as absent: not in the YAML
// when m knows the file, zero (as told by isZero) when it does not.
func absent(m *meta, path string, isZero bool) bool {
	if m == nil {
		return isZero
	}
	return !m.present(path)
}

// setString sets *v to def when it is empty.
func setString(v *string, def string) {
	if *v == "" {
		*v = def
	}
}

// seconds returns n seconds as a Duration.
func seconds(n int) Duration { return Duration(time.Duration(n) * time.Second) }
