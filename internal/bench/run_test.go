package bench

import "testing"

func TestMetricValue(t *testing.T) {
	text := "# HELP helios_access_log_dropped_total Lines dropped.\n# TYPE helios_access_log_dropped_total counter\nhelios_access_log_dropped_total 42\nhelios_access_log_dropped_totals 7\n"
	if v, err := metricValue(text, "helios_access_log_dropped_total"); err != nil || v != 42 {
		t.Errorf("got %v, %v, want 42", v, err)
	}
	if _, err := metricValue("other 1\n", "helios_access_log_dropped_total"); err == nil {
		t.Errorf("absent series: got no error")
	}
}
