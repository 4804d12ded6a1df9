package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// policyDescs are the edge policy's series: connections the listeners'
// client policy refused, and requests rate limits refused.
type policyDescs struct {
	connRefused, rateLimited *prometheus.Desc
	storeErrors, storeDown   *prometheus.Desc
}

func newPolicyDescs() policyDescs {
	return policyDescs{
		connRefused: prometheus.NewDesc("helios_connections_refused_total",
			"Client connections a listener's policy closed before serving them, by listener and reason: proxy_protocol (a PROXY header missing where one is required, malformed, late, or from a peer not in trusted_proxies), max_connections_per_ip.",
			[]string{"listener", "reason"}, nil),
		rateLimited: prometheus.NewDesc("helios_rate_limited_total",
			"Requests answered 429 by a route's rate limit, by route.", []string{"route"}, nil),
		storeErrors: prometheus.NewDesc("helios_rate_limit_store_errors_total",
			"Operations of shared rate limits on their Redis store that failed (unreachable, timed out, or an error answer), and probes of a store that is down that failed, by store.",
			[]string{"store"}, nil),
		storeDown: prometheus.NewDesc("helios_rate_limit_store_fallback",
			"1 while a Redis store of shared rate limits is taken as unreachable and each instance limits alone with its share (limit / instances), by store; 0 otherwise.",
			[]string{"store"}, nil),
	}
}

// collectPolicy sends the edge policy's series.
func (m *Metrics) collectPolicy(ch chan<- prometheus.Metric) {
	for name, s := range m.src.ListenerStats() {
		ch <- prometheus.MustNewConstMetric(m.policy.connRefused, prometheus.CounterValue, float64(s.ProxyRefused.Load()), name, "proxy_protocol")
		ch <- prometheus.MustNewConstMetric(m.policy.connRefused, prometheus.CounterValue, float64(s.PerIPRefused.Load()), name, "max_connections_per_ip")
	}
	for _, rt := range m.src.Graph().RouteList {
		if rt.Stats != nil && rt.Policy != nil && rt.Policy.RateLimit != nil {
			ch <- prometheus.MustNewConstMetric(m.policy.rateLimited, prometheus.CounterValue, float64(rt.Stats.RateLimited.Load()), rt.Name)
		}
	}
	// Two stores may share a name (one server, two passwords): one series.
	type storeState struct {
		errors uint64
		down   float64
	}
	stores := make(map[string]storeState)
	for _, st := range m.src.Stores() {
		ss := stores[st.Name()]
		ss.errors += st.Errors()
		if st.Down() {
			ss.down = 1
		}
		stores[st.Name()] = ss
	}
	for name, ss := range stores {
		ch <- prometheus.MustNewConstMetric(m.policy.storeErrors, prometheus.CounterValue, float64(ss.errors), name)
		ch <- prometheus.MustNewConstMetric(m.policy.storeDown, prometheus.GaugeValue, ss.down, name)
	}
}
