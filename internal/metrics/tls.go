package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// tlsDescs are the TLS series, read from the listeners' providers when
// Prometheus scrapes: handshakes cost the engine one atomic add each.
type tlsDescs struct {
	expiry, stapled, handshakes, inProgress, waiting *prometheus.Desc
}

func newTLSDescs() tlsDescs {
	return tlsDescs{
		expiry: prometheus.NewDesc("helios_tls_certificate_expiry_seconds",
			"Seconds until the certificate's notAfter (negative once expired), by listener and certificate file.",
			[]string{"listener", "name"}, nil),
		stapled: prometheus.NewDesc("helios_tls_ocsp_stapled",
			"1 while an OCSP response is stapled to the certificate, 0 otherwise (no responder, or none reachable).",
			[]string{"listener", "name"}, nil),
		handshakes: prometheus.NewDesc("helios_tls_handshakes_total",
			"TLS handshakes by listener, result (ok, failed, timeout, refused, shed, no_hello), version (1.2, 1.3, unknown) and resumed (true, false).",
			[]string{"listener", "result", "version", "resumed"}, nil),
		inProgress: prometheus.NewDesc("helios_tls_handshakes_in_progress",
			"TLS handshakes under way (ClientHello received), by listener (capped by tls.max_handshakes).",
			[]string{"listener"}, nil),
		waiting: prometheus.NewDesc("helios_tls_handshakes_waiting",
			"TLS handshakes under way that wait for their client, by listener: those shed, oldest first, at tls.max_handshakes.",
			[]string{"listener"}, nil),
	}
}

// collectTLS sends the series of every TLS listener.
func (m *Metrics) collectTLS(ch chan<- prometheus.Metric, now time.Time) {
	for _, p := range m.src.TLSProviders() {
		name := p.Name()
		for _, c := range p.Certificates() {
			ch <- prometheus.MustNewConstMetric(m.tls.expiry, prometheus.GaugeValue, c.NotAfter.Sub(now).Seconds(), name, c.File)
			stapled := 0.0
			if c.Stapled {
				stapled = 1
			}
			ch <- prometheus.MustNewConstMetric(m.tls.stapled, prometheus.GaugeValue, stapled, name, c.File)
		}
		p.Stats().Each(func(result, version string, resumed bool, n uint64) {
			ch <- prometheus.MustNewConstMetric(m.tls.handshakes, prometheus.CounterValue, float64(n), name, result, version, strconv.FormatBool(resumed))
		})
		ch <- prometheus.MustNewConstMetric(m.tls.inProgress, prometheus.GaugeValue, float64(p.HandshakesInProgress()), name)
		ch <- prometheus.MustNewConstMetric(m.tls.waiting, prometheus.GaugeValue, float64(p.HandshakesWaiting()), name)
	}
}
