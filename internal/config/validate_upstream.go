package config

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Validation of upstreams: backends, discovery, health checks, breakers
// and retries.

// upstreams checks us and returns the names it defines, in order.
func (v *validator) upstreams(us []Upstream, d *Discovery) []string {
	names := make(map[string]string)
	var defined []string
	for i := range us {
		u, p := &us[i], indexPath("upstreams", i)
		v.name(names, p+".name", p, u.Name, "upstreams")
		if u.Name != "" && names[u.Name] == p {
			defined = append(defined, u.Name)
		}
		v.balancing(u, p)
		v.backends(u, p, d)

		t, tp := &u.Transport, p+".transport"
		v.intRange(tp+".max_idle_per_backend", t.MaxIdlePerBackend, 0, 100000)
		v.positive(tp+".idle_timeout", t.IdleTimeout)
		v.positive(tp+".dial_timeout", t.DialTimeout)
		v.positive(tp+".response_header_timeout", t.ResponseHeaderTimeout)
		v.nonNegative(tp+".read_timeout", t.ReadTimeout)
		v.intRange(tp+".max_conns_per_backend", t.MaxConnsPerBackend, 0, 1000000)
		v.intRange(tp+".max_queue_per_backend", t.MaxQueuePerBackend, 0, 1000000)
		v.positive(tp+".queue_timeout", t.QueueTimeout)
		v.transportTLS(t, tp)
		switch t.ProxyProtocol {
		case "", ProxyProtocolV1, ProxyProtocolV2:
		default:
			v.addf(tp+".proxy_protocol", "%q is not a PROXY protocol version (%s, %s)", t.ProxyProtocol, ProxyProtocolV1, ProxyProtocolV2)
		}

		if u.HealthCheck != nil {
			v.healthCheck(u.HealthCheck, p+".health_check")
		}
		if u.Passive != nil {
			v.passive(u.Passive, p+".passive")
		}
		if u.CircuitBreaker != nil {
			v.circuitBreaker(u.CircuitBreaker, p+".circuit_breaker")
		}
		if u.Retries != nil {
			v.retries(u.Retries, p+".retries")
		}
	}
	return defined
}

// backends checks an upstream's backend entries, its backends_file and
// allow_empty. d is the configuration's discovery block (for the minimum
// refresh).
func (v *validator) backends(u *Upstream, p string, d *Discovery) {
	path := p + ".backends"
	if len(u.Backends) == 0 && u.BackendsFile == "" && !v.meta.isBad(p+".backends_file") {
		v.addf(path, "no backends (at least one, or a backends_file)")
	}
	seen := make(map[string]string)
	discovered := u.BackendsFile != ""
	for i := range u.Backends {
		b, bp := &u.Backends[i], indexPath(path, i)
		var kinds []string
		for _, k := range []struct{ name, value string }{{"address", b.Address}, {"dns", b.DNS}, {"srv", b.SRV}} {
			if k.value != "" || v.meta.present(bp+"."+k.name) {
				kinds = append(kinds, k.name)
			}
		}
		switch len(kinds) {
		case 0:
			v.addf(bp, "no address, dns or srv (exactly one: address host:port, dns NAME with a port, or srv NAME)")
			continue
		case 2:
			v.addf(bp, "%s and %s are both set (exactly one of address, dns, srv)", kinds[0], kinds[1])
			continue
		case 3:
			v.addf(bp, "address, dns and srv are all set (exactly one of them)")
			continue
		}
		var key string
		switch kinds[0] {
		case "address":
			v.uniqueAddress(seen, bp, b.Address, " within an upstream")
			v.intRange(bp+".weight", b.Weight, 1, 1000)
			v.only(bp, "an address", "dns", "port")
			v.only(bp, "an address", "dns and srv", "refresh")
		case "dns":
			discovered = true
			name := strings.TrimSuffix(b.DNS, ".")
			if !isHostname(name) {
				v.addf(bp+".dns", "%q is not a host name (a DNS name such as app.internal)", b.DNS)
			} else {
				key = "dns " + strings.ToLower(name) + ":" + strconv.Itoa(b.Port)
			}
			if !v.meta.present(bp+".port") && b.Port == 0 {
				v.addf(bp+".port", "missing (the port of the name's addresses, 1-65535)")
			} else {
				v.intRange(bp+".port", b.Port, 1, 65535)
			}
			v.intRange(bp+".weight", b.Weight, 1, 1000)
			v.refresh(bp+".refresh", b.Refresh, d.MinRefresh)
		case "srv":
			discovered = true
			if !isServiceName(strings.TrimSuffix(b.SRV, ".")) {
				v.addf(bp+".srv", "%q is not a service name (such as _http._tcp.app.internal)", b.SRV)
			} else {
				key = "srv " + strings.ToLower(strings.TrimSuffix(b.SRV, "."))
			}
			v.only(bp, "an srv", "dns", "port")
			if b.Weight != 0 || v.meta.present(bp+".weight") {
				v.addf(bp+".weight", "set on an srv entry (its records carry the weights)")
			}
			v.refresh(bp+".refresh", b.Refresh, d.MinRefresh)
		}
		if key == "" {
			continue
		}
		if first, dup := seen[key]; dup {
			v.addf(bp+"."+kinds[0], "%q is already used by %s (each name once per upstream)", b.DNS+b.SRV, first)
		} else {
			seen[key] = bp
		}
	}
	if u.BackendsFile != "" {
		v.backendsFile(p+".backends_file", u.BackendsFile)
	}
	if u.AllowEmpty && !discovered {
		v.addf(p+".allow_empty", "set on an upstream without dns, srv or backends_file (it is about what they answer)")
	}
}

// backendsFile warns about a backends file that cannot be read or has
// problems: not an error, since the file is data that may come later or
// be fixed while Helios runs (it starts without its backends and keeps
// checking), but worth saying before it starts.
func (v *validator) backendsFile(path, file string) {
	fi, err := v.stat(file)
	var data []byte
	if err == nil {
		data, err = ReadBackendsFile(file, fi)
	}
	if err != nil {
		v.warnf(path, "%v: the upstream starts without this file's backends and reads it once it can", unwrapPathError(err))
		return
	}
	_, err = ParseBackends(data, file)
	var ps Problems
	if errors.As(err, &ps) {
		more := ""
		if len(ps) > 1 {
			more = fmt.Sprintf(" (and %d more)", len(ps)-1)
		}
		v.warnf(path, "%s%s: the upstream starts without this file's backends and reads it again when it changes", ps[0], more)
	}
}

// uniqueAddress checks that addr, the address of the item at p, is
// host:port and not already in seen (in any spelling), which maps
// addresses to the item that used them first; within says where they must
// be unique (" within an upstream", or "" for everywhere).
func (v *validator) uniqueAddress(seen map[string]string, p, addr, within string) {
	if !v.hostPort(p+".address", addr, hostPortAllowed) {
		return
	}
	key := canonicalHostPort(addr)
	if first, dup := seen[key]; dup {
		v.addf(p+".address", "%q is already used by %s (addresses must be unique%s)", addr, first, within)
		return
	}
	seen[key] = p
}

// only reports the keys of the backend entry at p, an entry of the kind
// named, that are set although they belong to the kinds in owners.
func (v *validator) only(p, kind, owners string, keys ...string) {
	for _, k := range keys {
		if v.meta.present(p + "." + k) {
			v.addf(p+"."+k, "set on %s entry (only for %s entries)", kind, owners)
		}
	}
}

// refresh checks a dns or srv entry's refresh against the minimum.
func (v *validator) refresh(path string, d, minRefresh Duration) {
	if d < minRefresh || d <= 0 {
		v.addf(path, "%s is out of range (at least discovery.min_refresh, %s)", d, minRefresh)
	}
}

// discovery checks the discovery block.
func (v *validator) discovery(d *Discovery) {
	if d.Resolver != "" {
		if _, err := ResolverAddr(d.Resolver); err != nil {
			v.addf("discovery.resolver", "%q %v (an IP address, with a port or not: 10.0.0.2, 10.0.0.2:53, [fd00::2]:53)", d.Resolver, err)
		}
	}
	v.positive("discovery.timeout", d.Timeout)
	v.positive("discovery.min_refresh", d.MinRefresh)
	v.positive("discovery.file_refresh", d.FileRefresh)
}

// ResolverAddr returns discovery.resolver as ip:port, port 53 when it has
// none, or what is wrong with it.
func ResolverAddr(s string) (string, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.AddrPortFrom(a, 53).String(), nil
	}
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return "", errors.New("is not an IP address or IP:port")
	}
	if ap.Port() == 0 {
		return "", errors.New("has port 0")
	}
	return ap.String(), nil
}

func (v *validator) healthCheck(h *HealthCheck, p string) {
	if !strings.HasPrefix(h.Path, "/") {
		v.addf(p+".path", "%q does not start with / (a path such as /healthz)", h.Path)
	}
	v.positive(p+".interval", h.Interval)
	v.positive(p+".timeout", h.Timeout)
	if h.Interval > 0 && h.Timeout > h.Interval {
		v.addf(p+".timeout", "%s is longer than the interval %s (at most the interval)", h.Timeout, h.Interval)
	}
	v.atLeast(p+".fails", h.Fails, 1)
	v.atLeast(p+".passes", h.Passes, 1)
	if _, err := ParseStatusRanges(h.ExpectStatus); err != nil {
		v.addf(p+".expect_status", "%q is not a status list: %v (%s)", h.ExpectStatus, err, statusAllowed)
	}
}

func (v *validator) passive(pa *Passive, p string) {
	v.atLeast(p+".max_fails", pa.MaxFails, 1)
	v.positive(p+".fail_window", pa.FailWindow)
	v.positive(p+".eject_for", pa.EjectFor)
	if pa.EjectFor > 0 && pa.MaxEjectFor < pa.EjectFor {
		v.addf(p+".max_eject_for", "%s is shorter than eject_for %s (at least eject_for)", pa.MaxEjectFor, pa.EjectFor)
	}
}

func (v *validator) circuitBreaker(b *CircuitBreaker, p string) {
	if b.ConsecutiveFailures < 0 {
		v.addf(p+".consecutive_failures", "%d is out of range (at least 0; 0 turns this trigger off)", b.ConsecutiveFailures)
	}
	v.ratio(p+".failure_ratio", b.FailureRatio, "0 turns this trigger off")
	if b.ConsecutiveFailures == 0 && b.FailureRatio == 0 {
		v.addf(p, "consecutive_failures and failure_ratio are both 0 (at least one trigger must be on)")
	}
	v.atLeast(p+".min_requests", b.MinRequests, 1)
	v.positive(p+".interval", b.Interval)
	v.positive(p+".open_for", b.OpenFor)
	v.intRange(p+".half_open_requests", b.HalfOpenRequests, 1, 1000)
}

func (v *validator) retries(r *Retries, p string) {
	if r.Attempts < 0 || r.Attempts > 10 {
		v.addf(p+".attempts", "%d is out of range (0-10; 0 disables retries)", r.Attempts)
	}
	if len(r.On) == 0 && r.Attempts > 0 {
		v.addf(p+".on", "empty (at least one of %s; attempts: 0 disables retries)", retryOnAllowed)
	}
	for i, on := range r.On {
		if _, ok := retryStatus(on); !ok && on != RetryOnConnectError && on != RetryOnReset && on != RetryOnTimeout {
			v.addf(indexPath(p+".on", i), "%q is not a retry condition (%s)", on, retryOnAllowed)
		}
	}
	v.ratio(p+".budget_ratio", r.BudgetRatio, "0 turns the budget off")
	if b := r.Backoff; b != nil {
		if b.Base < Duration(time.Millisecond) || b.Base > Duration(time.Minute) {
			v.addf(p+".backoff.base", "%s is out of range (1ms-1m, such as 25ms)", b.Base)
		}
		if b.Max > Duration(time.Minute) || b.Base > 0 && b.Max < b.Base {
			v.addf(p+".backoff.max", "%s is out of range (base %s-1m, such as 250ms)", b.Max, b.Base)
		}
	}
	if r.PerTryTimeout < 0 || r.PerTryTimeout.D() > time.Hour {
		v.addf(p+".per_try_timeout", "%s is out of range (0-1h, such as 2s; 0 for no bound)", r.PerTryTimeout)
	}
}
