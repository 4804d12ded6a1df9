package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// BuildInfo labels helios_build_info.
type BuildInfo struct {
	// Version is the release version ("dev" for a local build).
	Version string
	// Revision is the VCS revision the binary was built from; "" unknown.
	Revision string
	// GoVersion is the Go release that built it (runtime.Version()).
	GoVersion string
}

// Process holds the metrics about the process rather than its traffic:
// what build runs, how reloads went, and lines the access log lost.
type Process struct {
	reloads     *prometheus.CounterVec
	lastSuccess prometheus.Gauge
}

// NewProcess registers helios_build_info, helios_config_reloads_total,
// helios_config_last_reload_success_timestamp_seconds and
// helios_access_log_dropped_total on reg. accessDropped reads the access
// log's dropped lines at scrape time (nil: always 0). The timestamp
// starts at now: loading the configuration at start counts as a
// successful load, as Prometheus's own
// prometheus_config_last_reload_success_timestamp_seconds does.
func NewProcess(reg prometheus.Registerer, b BuildInfo, accessDropped func() uint64, now time.Time) (*Process, error) {
	p := &Process{
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "helios_config_reloads_total",
			Help: "Configuration reloads (SIGHUP or the admin API) by result: success or failure.",
		}, []string{"result"}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "helios_config_last_reload_success_timestamp_seconds",
			Help: "Unix time of the last configuration load that succeeded (start counts).",
		}),
	}
	// Both results exist from the start, so rate() and alerts see a 0.
	p.reloads.WithLabelValues("success")
	p.reloads.WithLabelValues("failure")
	p.lastSuccess.Set(float64(now.UnixNano()) / 1e9)
	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "helios_build_info",
		Help:        "Always 1; the labels say which build of Helios runs.",
		ConstLabels: prometheus.Labels{"version": b.Version, "revision": b.Revision, "goversion": b.GoVersion},
	})
	build.Set(1)
	dropped := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "helios_access_log_dropped_total",
		Help: "Access log lines lost: dropped while the log writer was 512 KiB behind, or not written because a write failed.",
	}, func() float64 {
		if accessDropped == nil {
			return 0
		}
		return float64(accessDropped())
	})
	for _, c := range []prometheus.Collector{p.reloads, p.lastSuccess, build, dropped} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Reloaded counts one reload: its result and, when it worked, its time.
func (p *Process) Reloaded(ok bool, at time.Time) {
	if !ok {
		p.reloads.WithLabelValues("failure").Inc()
		return
	}
	p.reloads.WithLabelValues("success").Inc()
	p.lastSuccess.Set(float64(at.UnixNano()) / 1e9)
}
