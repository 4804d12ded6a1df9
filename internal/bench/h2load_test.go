package bench

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The testdata files are real h2load 1.52.0 outputs against nginx over TLS.
func TestParseH2load(t *testing.T) {
	tests := []struct {
		name     string
		file     string
		rps      float64
		elapsed  time.Duration
		counts   []int64 // total, started, done, succeeded, failed, errored, timeout
		status   []int64 // 2xx, 3xx, 4xx, 5xx
		min, max time.Duration
		mean     time.Duration
		proto    string
		metrics  map[string]float64
	}{
		{
			name: "respond", file: "h2load_nginx_respond.txt", rps: 3333.33, elapsed: 3 * time.Second,
			counts: []int64{10053, 10090, 10053, 10000, 53, 53, 0}, status: []int64{10000, 0, 0, 0},
			min: 15 * time.Microsecond, max: 6160 * time.Microsecond, mean: 352 * time.Microsecond, proto: "h2",
			metrics: map[string]float64{MetricRPS: 3333.33, MetricRequests: 10000, MetricLatAvg: 0.352, MetricLatMax: 6.16,
				MetricErrRead: 53, MetricErrTimeout: 0, MetricErrNon2xx: 0, MetricErrTotal: 53},
		},
		{
			name: "404s", file: "h2load_404.txt", rps: 5000, elapsed: 2 * time.Second,
			counts: []int64{10056, 10090, 10056, 0, 10056, 56, 0}, status: []int64{0, 0, 10000, 0},
			min: 20 * time.Microsecond, max: 7270 * time.Microsecond, mean: 411 * time.Microsecond, proto: "h2",
			metrics: map[string]float64{MetricErrNon2xx: 10000, MetricErrRead: 56, MetricErrTotal: 10056},
		},
		{
			name: "connection refused", file: "h2load_refused.txt", rps: 0, elapsed: 461 * time.Microsecond,
			counts: []int64{1000, 0, 0, 0, 1000, 1000, 0}, status: []int64{0, 0, 0, 0},
			metrics: map[string]float64{MetricErrRead: 1000, MetricRequests: 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			h, err := ParseH2load(strings.NewReader(string(b)))
			if err != nil {
				t.Fatalf("ParseH2load: %v", err)
			}
			if h.RPS != tt.rps || h.Elapsed != tt.elapsed {
				t.Errorf("finished: got %v req/s in %v, want %v in %v", h.RPS, h.Elapsed, tt.rps, tt.elapsed)
			}
			counts := []int64{h.Total, h.Started, h.Done, h.Succeeded, h.Failed, h.Errored, h.Timeout}
			if !slices.Equal(counts, tt.counts) {
				t.Errorf("requests: got %v, want %v", counts, tt.counts)
			}
			status := []int64{h.Status2xx, h.Status3xx, h.Status4xx, h.Status5xx}
			if !slices.Equal(status, tt.status) {
				t.Errorf("status codes: got %v, want %v", status, tt.status)
			}
			if h.ReqMin != tt.min || h.ReqMax != tt.max || h.ReqMean != tt.mean {
				t.Errorf("time for request: got %v %v %v, want %v %v %v", h.ReqMin, h.ReqMax, h.ReqMean, tt.min, tt.max, tt.mean)
			}
			if h.Protocol != tt.proto {
				t.Errorf("protocol: got %q, want %q", h.Protocol, tt.proto)
			}
			m := h2loadMetrics(h)
			for k, want := range tt.metrics {
				if got := m[k]; !near(got, want) && got != want {
					t.Errorf("%s: got %v, want %v", k, got, want)
				}
			}
			if _, ok := m[MetricLatP99]; ok {
				t.Errorf("h2load has no percentiles, but p99 is set")
			}
		})
	}
}

func TestParseH2loadFailures(t *testing.T) {
	for _, out := range []string{
		"",
		"starting benchmark...\nspawning thread #0: 10 total client(s). 1000 total requests\n",
		"finished in 1.00s, x req/s, 1KB/s\n",
		"finished in 1.00s, 10 req/s, 1KB/s\nrequests: ten total\n",
	} {
		if _, err := ParseH2load(strings.NewReader(out)); err == nil {
			t.Errorf("ParseH2load(%q): got no error, want one", out)
		}
	}
	if _, err := ParseH2load(strings.NewReader("starting benchmark...\n")); !errors.Is(err, ErrH2loadFailed) {
		t.Errorf("no summary: got %v, want ErrH2loadFailed", err)
	}
}

func TestH2loadArgs(t *testing.T) {
	got := h2loadArgs(2, 100, 10, 5*time.Second, 0, "", nil, "https://127.0.0.1:28084/respond")
	want := []string{"-D", "5", "-c", "100", "-m", "10", "-t", "2", "https://127.0.0.1:28084/respond"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	got = h2loadArgs(2, 1, 1, 5*time.Second, 1, "", nil, "https://x/bytes/1073741824")
	want = []string{"-n", "1", "-c", "1", "-m", "1", "-t", "1", "https://x/bytes/1073741824"}
	if !slices.Equal(got, want) {
		t.Errorf("one request: got %q, want %q", got, want)
	}
	got = h2loadArgs(2, 100, 10, 5*time.Second, 0, "/tmp/grpc.bin", map[string]string{"content-type": "application/grpc", "te": "trailers"}, "https://x/helios.bench.Echo/Unary")
	want = []string{"-D", "5", "-c", "100", "-m", "10", "-t", "2", "-d", "/tmp/grpc.bin", "-H", "content-type: application/grpc", "-H", "te: trailers", "https://x/helios.bench.Echo/Unary"}
	if !slices.Equal(got, want) {
		t.Errorf("grpc: got %q, want %q", got, want)
	}
}
