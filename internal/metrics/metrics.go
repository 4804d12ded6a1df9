// Package metrics exposes Helios's Prometheus metrics. Nothing here is a
// global: collectors are registered on the registry the caller injects.
//
// The request path pays one atomic add per request for the request
// counter and one histogram observation; everything about backends
// (in-flight, requests, health, breakers) is read from the backends'
// atomic state when Prometheus scrapes, so it costs the request path
// nothing.
package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/helios-lb/helios/internal/acme"
	"github.com/helios-lb/helios/internal/bodybuf"
	"github.com/helios-lb/helios/internal/engine"
	"github.com/helios-lb/helios/internal/h2"
	"github.com/helios-lb/helios/internal/listener"
	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/redisstore"
	"github.com/helios-lb/helios/internal/tlsconf"
	"github.com/helios-lb/helios/internal/upstream"
	"github.com/helios-lb/helios/internal/wire"
)

// Source is what the collector reads at scrape time.
type Source interface {
	// Graph returns the routing graph being served.
	Graph() *proxy.Graph
	// BreakerState returns the breaker state of the backend at addr of
	// the named upstream: 0 closed, 1 half-open, 2 open, -1 no breaker
	// (or no such backend).
	BreakerState(upstreamName, addr string) int
	// OpenConnections returns open client connections by listener name.
	OpenConnections() map[string]int64
	// AcceptErrors returns failed accepts by reason (emfile, enfile,
	// enobufs, enomem, other).
	AcceptErrors() map[string]uint64
	// Panics returns the connections a panic on an event loop has cost.
	Panics() uint64
	// TLSProviders returns the TLS providers of the listeners that have
	// one.
	TLSProviders() []*tlsconf.Provider
	// HTTP2Stats returns the HTTP/2 counters of each listener, by name.
	HTTP2Stats() map[string]*h2.Stats
	// RequestBuffers returns what request buffering holds across the
	// process, in memory and in temporary files.
	RequestBuffers() bodybuf.BudgetStats
	// ACMEManagers returns the ACME managers of the listeners that have
	// one.
	ACMEManagers() []*acme.Manager
	// ResponseBuffers returns what response buffering holds and has
	// done across the process.
	ResponseBuffers() bodybuf.BudgetStats
	// Descriptors returns the process's descriptor budget: what clients
	// and backend connections hold of it, and what it refused.
	Descriptors() listener.DescriptorStats
	// ListenerStats returns what each listener's client policy refused,
	// by listener name.
	ListenerStats() map[string]*engine.ListenerStats
	// Stores returns the Redis stores in use (shared rate limits, ACME
	// storage).
	Stores() []*redisstore.Store
}

// Metrics holds Helios's collectors.
type Metrics struct {
	src       Source
	duration  *prometheus.HistogramVec
	checks    *prometheus.CounterVec
	discovery *prometheus.CounterVec
	noRoute   proxy.RouteStats

	requestsDesc, retriesDesc, noBackendDesc                    *prometheus.Desc
	upDesc, ejectedDesc, inflightDesc, backendReqDesc, failDesc *prometheus.Desc
	breakerDesc, openConnsDesc, acceptErrsDesc, panicsDesc      *prometheus.Desc
	adminDesc, weightDesc                                       *prometheus.Desc
	protocolDesc, reqBufDesc                                    *prometheus.Desc
	respBuffered, respFull, respSpilled, respHeld               *prometheus.Desc
	fdRoom, fdHeld, fdRefused, fdWaits                          *prometheus.Desc
	tls                                                         tlsDescs
	http2                                                       http2Descs
	acme                                                        acmeDescs
	mirror                                                      mirrorDescs
	policy                                                      policyDescs
	protocols                                                   Protocols
}

// Labels used for a request that matched no route.
const noRouteLabel = "none"

// New creates the collectors and registers them, with the Go and process
// collectors, on reg.
func New(reg prometheus.Registerer, src Source) (*Metrics, error) {
	m := &Metrics{
		src: src,
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "helios_request_duration_seconds",
			Help:    "Time from a complete request head to the end of the response, by route and upstream.",
			Buckets: durationBuckets,
		}, []string{"route", "upstream"}),
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "helios_health_checks_total",
			Help: "Active health checks by upstream, backend and result (pass, fail).",
		}, []string{"upstream", "backend", "result"}),
		discovery: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "helios_discovery_errors_total",
			Help: "Failed lookups of discovery sources (a DNS failure, an empty answer, a backends file that cannot be read or has a problem), by upstream and source; the last good set of backends stays.",
		}, []string{"upstream", "source"}),
		requestsDesc: prometheus.NewDesc("helios_requests_total",
			"Requests answered, by route, upstream and status code (499: the client went away).",
			[]string{"route", "upstream", "code"}, nil),
		retriesDesc: prometheus.NewDesc("helios_retries_total",
			"Attempts after the first, by upstream.", []string{"upstream"}, nil),
		noBackendDesc: prometheus.NewDesc("helios_no_backend_total",
			"Requests answered 503 because no backend of the upstream was available.", []string{"upstream"}, nil),
		upDesc: prometheus.NewDesc("helios_backend_up",
			"1 when active health checks consider the backend up (or there are none), 0 when down.",
			[]string{"upstream", "backend"}, nil),
		ejectedDesc: prometheus.NewDesc("helios_backend_ejected",
			"1 while the backend is passively ejected.", []string{"upstream", "backend"}, nil),
		inflightDesc: prometheus.NewDesc("helios_backend_inflight",
			"Requests being forwarded to the backend now.", []string{"upstream", "backend"}, nil),
		backendReqDesc: prometheus.NewDesc("helios_backend_requests_total",
			"Attempts sent to the backend.", []string{"upstream", "backend"}, nil),
		failDesc: prometheus.NewDesc("helios_backend_failures_total",
			"Attempts that failed (connect error, timeout, broken or failure-status response).", []string{"upstream", "backend"}, nil),
		breakerDesc: prometheus.NewDesc("helios_circuit_breaker_state",
			"Circuit breaker state: 0 closed, 1 half-open, 2 open (absent without a breaker).", []string{"upstream", "backend"}, nil),
		adminDesc: prometheus.NewDesc("helios_backend_admin_state",
			"What the admin API asked of the backend: 0 enabled, 1 draining, 2 disabled.", []string{"upstream", "backend"}, nil),
		weightDesc: prometheus.NewDesc("helios_backend_weight",
			"The backend's weight: the configured or discovered one, or the one set through the admin API.", []string{"upstream", "backend"}, nil),
		openConnsDesc: prometheus.NewDesc("helios_open_connections",
			"Open client connections by listener.", []string{"listener"}, nil),
		acceptErrsDesc: prometheus.NewDesc("helios_accept_errors_total",
			"Failed accepts of client connections by reason: emfile (process out of descriptors), enfile (system out), enobufs, enomem, other.",
			[]string{"reason"}, nil),
		panicsDesc: prometheus.NewDesc("helios_panics_total",
			"Connections closed because a panic happened while an event loop served them (the loop went on).", nil, nil),
		protocolDesc: prometheus.NewDesc("helios_requests_by_protocol_total",
			"Requests by the protocol the client spoke (HTTP/1.0, HTTP/1.1, HTTP/2.0) and its connection's TLS version (none, 1.2, 1.3).",
			[]string{"protocol", "tls"}, nil),
		reqBufDesc: prometheus.NewDesc("helios_request_buffer_bytes",
			"Request-body bytes request buffering holds across the process, by where: memory or file (request_buffers caps them).",
			[]string{"where"}, nil),
		fdRoom: prometheus.NewDesc("helios_descriptor_budget",
			"Descriptors client connections and backend connections share (RLIMIT_NOFILE less the listening sockets, files and a reserve); 0 when there is no limit.", nil, nil),
		fdHeld: prometheus.NewDesc("helios_descriptor_budget_used",
			"Descriptors of the budget in use, by what holds them: clients or backends.", []string{"by"}, nil),
		fdRefused: prometheus.NewDesc("helios_descriptor_budget_refused_total",
			"Client connections closed at once because the descriptor budget had no room for them.", nil, nil),
		fdWaits: prometheus.NewDesc("helios_descriptor_budget_waits_total",
			"Backend connections put off because the descriptor budget had no room: their requests waited for one to close.", nil, nil),
		respBuffered: prometheus.NewDesc("helios_response_buffered_total",
			"Answers response buffering took over because their client read more slowly than the backend sent.", nil, nil),
		respFull: prometheus.NewDesc("helios_response_buffer_full_total",
			"Answers whose buffering stopped at a cap (the answer's or the process's) or a failed disk write; they went on with backpressure.", nil, nil),
		respSpilled: prometheus.NewDesc("helios_response_buffer_spilled_bytes_total",
			"Bytes of answers written to temporary files by response buffering.", nil, nil),
		respHeld: prometheus.NewDesc("helios_response_buffer_bytes",
			"Bytes response buffering holds now (reserved for answers under way), in memory or in temporary files.", []string{"where"}, nil),
		tls:    newTLSDescs(),
		http2:  newHTTP2Descs(),
		acme:   newACMEDescs(),
		policy: newPolicyDescs(),
	}
	m.mirror = newMirrorDescs()
	m.noRoute.Duration = newDurations(m.duration.WithLabelValues(noRouteLabel, ""))
	for _, c := range []prometheus.Collector{
		m.duration, m.checks, m.discovery, m,
		prometheus.NewGoCollector(),
		prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}),
	} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// RouteStats returns counters for a route, with its duration histogram
// wired. The server keeps them across reloads for routes that stay.
func (m *Metrics) RouteStats(route, upstreamName string) *proxy.RouteStats {
	return &proxy.RouteStats{Duration: newDurations(m.duration.WithLabelValues(route, upstreamName))}
}

// HealthCheckResult counts one active check (an OnResult hook).
func (m *Metrics) HealthCheckResult(upstreamName, backend string, pass bool) {
	result := "fail"
	if pass {
		result = "pass"
	}
	m.checks.WithLabelValues(upstreamName, backend, result).Inc()
}

// DiscoveryError counts one failed lookup of a discovery source (a
// discovery.Options.OnError hook).
func (m *Metrics) DiscoveryError(upstreamName, source string) {
	m.discovery.WithLabelValues(upstreamName, source).Inc()
}

// Record counts a finished request; Metrics is a proxy.Recorder.
func (m *Metrics) Record(ex wire.Exchange, r proxy.Record) {
	m.protocols.count(ex)
	if r.Route != nil {
		if s := r.Route.StatsOf(r.Upstream); s != nil {
			count(s, &r)
		}
		return
	}
	count(&m.noRoute, &r)
}

// Describe is empty: the collector is unchecked, because its label sets
// follow the configuration, which reloads change.
func (m *Metrics) Describe(chan<- *prometheus.Desc) {}

// Collect reads the current graph and backend states.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	g := m.src.Graph()
	emitCodes(ch, m.requestsDesc, &m.noRoute, noRouteLabel, "")
	for _, rt := range g.RouteList {
		if rt.Stats == nil {
			continue
		}
		up := ""
		if rt.Upstream != nil {
			up = rt.Upstream.Name
		}
		emitCodes(ch, m.requestsDesc, rt.Stats, rt.Name, up)
		if rt.Split != nil {
			for i := range rt.Split.Variants {
				if v := &rt.Split.Variants[i]; v.Stats != nil {
					emitCodes(ch, m.requestsDesc, v.Stats, rt.Name, v.Upstream.Name)
				}
			}
		}
	}
	for _, up := range g.Upstreams {
		if up.Stats != nil {
			ch <- prometheus.MustNewConstMetric(m.retriesDesc, prometheus.CounterValue, float64(up.Stats.Retries.Load()), up.Name)
			ch <- prometheus.MustNewConstMetric(m.noBackendDesc, prometheus.CounterValue, float64(up.Stats.NoBackend.Load()), up.Name)
		}
		for _, b := range up.Members().Backends {
			m.collectBackend(ch, up.Name, b)
		}
	}
	for name, n := range m.src.OpenConnections() {
		ch <- prometheus.MustNewConstMetric(m.openConnsDesc, prometheus.GaugeValue, float64(n), name)
	}
	for reason, n := range m.src.AcceptErrors() {
		ch <- prometheus.MustNewConstMetric(m.acceptErrsDesc, prometheus.CounterValue, float64(n), reason)
	}
	ch <- prometheus.MustNewConstMetric(m.panicsDesc, prometheus.CounterValue, float64(m.src.Panics()))
	qb := m.src.RequestBuffers()
	ch <- prometheus.MustNewConstMetric(m.reqBufDesc, prometheus.GaugeValue, float64(qb.Memory), "memory")
	ch <- prometheus.MustNewConstMetric(m.reqBufDesc, prometheus.GaugeValue, float64(qb.File), "file")
	rb := m.src.ResponseBuffers()
	ch <- prometheus.MustNewConstMetric(m.respBuffered, prometheus.CounterValue, float64(rb.Buffered))
	ch <- prometheus.MustNewConstMetric(m.respFull, prometheus.CounterValue, float64(rb.Full))
	ch <- prometheus.MustNewConstMetric(m.respSpilled, prometheus.CounterValue, float64(rb.Spilled))
	ch <- prometheus.MustNewConstMetric(m.respHeld, prometheus.GaugeValue, float64(rb.Memory), "memory")
	ch <- prometheus.MustNewConstMetric(m.respHeld, prometheus.GaugeValue, float64(rb.File), "file")
	fd := m.src.Descriptors()
	ch <- prometheus.MustNewConstMetric(m.fdRoom, prometheus.GaugeValue, float64(fd.Room))
	ch <- prometheus.MustNewConstMetric(m.fdHeld, prometheus.GaugeValue, float64(fd.Clients), "clients")
	ch <- prometheus.MustNewConstMetric(m.fdHeld, prometheus.GaugeValue, float64(fd.Backends), "backends")
	ch <- prometheus.MustNewConstMetric(m.fdRefused, prometheus.CounterValue, float64(fd.Refused))
	ch <- prometheus.MustNewConstMetric(m.fdWaits, prometheus.CounterValue, float64(fd.Waited))
	m.collectTLS(ch, time.Now())
	m.protocols.collect(ch, m.protocolDesc)
	m.collectHTTP2(ch)
	m.collectACME(ch, time.Now())
	m.collectMirrors(ch, g)
	m.collectPolicy(ch)
}

func (m *Metrics) collectBackend(ch chan<- prometheus.Metric, upName string, b *upstream.Backend) {
	up := 1.0
	if b.Down() {
		up = 0
	}
	ejected := 0.0
	if _, ok := b.EjectedUntil(); ok {
		ejected = 1
	}
	ch <- prometheus.MustNewConstMetric(m.upDesc, prometheus.GaugeValue, up, upName, b.Addr)
	ch <- prometheus.MustNewConstMetric(m.ejectedDesc, prometheus.GaugeValue, ejected, upName, b.Addr)
	ch <- prometheus.MustNewConstMetric(m.inflightDesc, prometheus.GaugeValue, float64(b.Inflight()), upName, b.Addr)
	ch <- prometheus.MustNewConstMetric(m.backendReqDesc, prometheus.CounterValue, float64(b.Requests()), upName, b.Addr)
	ch <- prometheus.MustNewConstMetric(m.failDesc, prometheus.CounterValue, float64(b.Failures()), upName, b.Addr)
	ch <- prometheus.MustNewConstMetric(m.adminDesc, prometheus.GaugeValue, float64(b.Admin()), upName, b.Addr)
	ch <- prometheus.MustNewConstMetric(m.weightDesc, prometheus.GaugeValue, float64(b.Weight), upName, b.Addr)
	if s := m.src.BreakerState(upName, b.Addr); s >= 0 {
		ch <- prometheus.MustNewConstMetric(m.breakerDesc, prometheus.GaugeValue, float64(s), upName, b.Addr)
	}
}

// emitCodes sends one counter per status code seen.
func emitCodes(ch chan<- prometheus.Metric, d *prometheus.Desc, s *proxy.RouteStats, route, up string) {
	for code := range s.Codes {
		if n := s.Codes[code].Load(); n > 0 {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(n), route, up, strconv.Itoa(code))
		}
	}
}
