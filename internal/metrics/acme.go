package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// acmeDescs are the ACME series, read from the listeners' managers when
// Prometheus scrapes.
type acmeDescs struct {
	expiry, issuances, onDemandRefused *prometheus.Desc
}

func newACMEDescs() acmeDescs {
	return acmeDescs{
		expiry: prometheus.NewDesc("helios_acme_certificate_expiry_seconds",
			"Seconds until the ACME certificate of the name expires (negative once expired; absent while the name has none), by listener and name.",
			[]string{"listener", "name"}, nil),
		issuances: prometheus.NewDesc("helios_acme_issuances_total",
			"ACME orders by listener, kind (obtain: a name's first certificate, renew) and result (success, failure).",
			[]string{"listener", "kind", "result"}, nil),
		onDemandRefused: prometheus.NewDesc("helios_acme_on_demand_refused_total",
			"On-demand certificates refused, by listener and reason (ask: the ask endpoint said no or did not answer; rate: over the rate limit).",
			[]string{"listener", "reason"}, nil),
	}
}

// collectACME sends the series of every ACME manager.
func (m *Metrics) collectACME(ch chan<- prometheus.Metric, now time.Time) {
	for _, am := range m.src.ACMEManagers() {
		l := am.Listener()
		for _, c := range am.Certificates() {
			if !c.NotAfter.IsZero() {
				ch <- prometheus.MustNewConstMetric(m.acme.expiry, prometheus.GaugeValue, c.NotAfter.Sub(now).Seconds(), l, c.Name)
			}
		}
		st := am.Stats()
		for _, s := range []struct {
			kind, result string
			n            uint64
		}{
			{"obtain", "success", st.Obtained.Load()},
			{"obtain", "failure", st.ObtainFailed.Load()},
			{"renew", "success", st.Renewed.Load()},
			{"renew", "failure", st.RenewFailed.Load()},
		} {
			ch <- prometheus.MustNewConstMetric(m.acme.issuances, prometheus.CounterValue, float64(s.n), l, s.kind, s.result)
		}
		if am.OnDemand() {
			ch <- prometheus.MustNewConstMetric(m.acme.onDemandRefused, prometheus.CounterValue, float64(st.AskRefused.Load()), l, "ask")
			ch <- prometheus.MustNewConstMetric(m.acme.onDemandRefused, prometheus.CounterValue, float64(st.RateLimited.Load()), l, "rate")
		}
	}
}
