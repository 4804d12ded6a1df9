package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestProcessMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	dropped := uint64(7)
	start := time.Unix(1700000000, 0)
	p, err := NewProcess(reg, BuildInfo{Version: "v1.2.3", Revision: "abc123", GoVersion: "go1.26"}, func() uint64 { return dropped }, start)
	if err != nil {
		t.Fatal(err)
	}
	p.Reloaded(true, start.Add(10*time.Second))
	p.Reloaded(false, start.Add(20*time.Second))
	p.Reloaded(false, start.Add(30*time.Second))
	want := `
# HELP helios_access_log_dropped_total Access log lines lost: dropped while the log writer was 512 KiB behind, or not written because a write failed.
# TYPE helios_access_log_dropped_total counter
helios_access_log_dropped_total 7
# HELP helios_build_info Always 1; the labels say which build of Helios runs.
# TYPE helios_build_info gauge
helios_build_info{goversion="go1.26",revision="abc123",version="v1.2.3"} 1
# HELP helios_config_last_reload_success_timestamp_seconds Unix time of the last configuration load that succeeded (start counts).
# TYPE helios_config_last_reload_success_timestamp_seconds gauge
helios_config_last_reload_success_timestamp_seconds 1.70000001e+09
# HELP helios_config_reloads_total Configuration reloads (SIGHUP or the admin API) by result: success or failure.
# TYPE helios_config_reloads_total counter
helios_config_reloads_total{result="failure"} 2
helios_config_reloads_total{result="success"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
