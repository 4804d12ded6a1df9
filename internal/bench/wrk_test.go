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

func parseWrkFile(t *testing.T, name string) (*WrkResult, error) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return ParseWrk(strings.NewReader(string(b)))
}

// The files in testdata are real wrk 4.1.0 outputs from this project's
// machines.
func TestParseWrkSamples(t *testing.T) {
	tests := []struct {
		name                                  string
		file                                  string
		threads, conns                        int
		requests                              int64
		elapsed                               time.Duration
		bytesRead, rps                        float64
		threadRPS                             Spread
		avg, max, p50, p99                    time.Duration
		connect, read, write, timeout, non2xx int64
	}{
		{name: "keep-alive", file: "wrk_helios_ka_c100.txt", threads: 2, conns: 100,
			requests: 181614, elapsed: 3 * time.Second, bytesRead: 25.29 * (1 << 20), rps: 60438.42,
			threadRPS: Spread{Mean: 30390, Stdev: 2170, Max: 33120},
			avg:       1660 * time.Microsecond, max: 19010 * time.Microsecond,
			p50: 1520 * time.Microsecond, p99: 4970 * time.Microsecond},
		{name: "microseconds", file: "wrk_nginx_respond_us.txt", threads: 2, conns: 100,
			requests: 590371, elapsed: 3010 * time.Millisecond, bytesRead: 92.90 * (1 << 20), rps: 196215.81,
			threadRPS: Spread{Mean: 98750, Stdev: 2890, Max: 108380},
			avg:       829940 * time.Nanosecond, max: 9840 * time.Microsecond,
			p50: 240 * time.Microsecond, p99: 5020 * time.Microsecond},
		{name: "M suffix in thread stats vs Requests/sec", file: "wrk_pipeline_mega.txt", threads: 2, conns: 100,
			requests: 7843100, elapsed: 3010 * time.Millisecond, bytesRead: 0.87 * (1 << 30), rps: 2604666.89,
			threadRPS: Spread{Mean: 1.31e6, Stdev: 94850, Max: 1.5e6},
			avg:       1820 * time.Microsecond, max: 13800 * time.Microsecond,
			p50: 1330 * time.Microsecond, p99: 7920 * time.Microsecond},
		{name: "non-2xx", file: "wrk_non2xx.txt", threads: 2, conns: 50,
			requests: 102688, elapsed: 2 * time.Second, rps: 51292.68,
			threadRPS: Spread{Mean: 25790, Stdev: 1840, Max: 28920},
			avg:       990 * time.Microsecond, max: 10180 * time.Microsecond,
			p50: 880 * time.Microsecond, p99: 3030 * time.Microsecond, non2xx: 102688},
		{name: "socket errors", file: "wrk_socket_errors.txt", threads: 2, conns: 200,
			requests: 14020, elapsed: 3060 * time.Millisecond, rps: 4582.69,
			threadRPS: Spread{Mean: 4690, Stdev: 349.2, Max: 5050},
			avg:       21070 * time.Microsecond, max: 23390 * time.Microsecond,
			p50: 21050 * time.Microsecond, p99: 22470 * time.Microsecond, read: 221, write: 171601},
		{name: "every request timed out, -nan%", file: "wrk_all_timeouts.txt", threads: 2, conns: 200,
			requests: 271, elapsed: 3010 * time.Millisecond, bytesRead: 40.76 * (1 << 10), rps: 90.05,
			threadRPS: Spread{Mean: 237.17, Stdev: 331.82, Max: 690}, timeout: 271},
		{name: "seconds", file: "wrk_c10k.txt", threads: 2, conns: 10000,
			requests: 67399, elapsed: 4090 * time.Millisecond, rps: 16465.88,
			threadRPS: Spread{Mean: 9670, Stdev: 6240, Max: 26740},
			avg:       475030 * time.Microsecond, max: 877180 * time.Microsecond,
			p50: 455750 * time.Microsecond, p99: 837840 * time.Microsecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := parseWrkFile(t, tt.file)
			if err != nil {
				t.Fatalf("ParseWrk: %v", err)
			}
			if w.Threads != tt.threads || w.Connections != tt.conns {
				t.Errorf("threads, connections: got %d, %d, want %d, %d", w.Threads, w.Connections, tt.threads, tt.conns)
			}
			if w.Requests != tt.requests || w.Elapsed != tt.elapsed {
				t.Errorf("requests in: got %d in %v, want %d in %v", w.Requests, w.Elapsed, tt.requests, tt.elapsed)
			}
			if tt.bytesRead != 0 && !near(w.BytesRead, tt.bytesRead) {
				t.Errorf("bytes read: got %v, want %v", w.BytesRead, tt.bytesRead)
			}
			if w.RPS != tt.rps {
				t.Errorf("Requests/sec: got %v, want %v", w.RPS, tt.rps)
			}
			if !near(w.ThreadRPS.Mean, tt.threadRPS.Mean) || !near(w.ThreadRPS.Stdev, tt.threadRPS.Stdev) || !near(w.ThreadRPS.Max, tt.threadRPS.Max) {
				t.Errorf("Req/Sec: got %+v, want %+v", w.ThreadRPS, tt.threadRPS)
			}
			if !nearD(w.LatencyAvg, tt.avg) || !nearD(w.LatencyMax, tt.max) {
				t.Errorf("latency avg, max: got %v, %v, want %v, %v", w.LatencyAvg, w.LatencyMax, tt.avg, tt.max)
			}
			if !nearD(w.Percentiles["50%"], tt.p50) || !nearD(w.Percentiles["99%"], tt.p99) {
				t.Errorf("p50, p99: got %v, %v, want %v, %v", w.Percentiles["50%"], w.Percentiles["99%"], tt.p50, tt.p99)
			}
			got := []int64{w.Connect, w.Read, w.Write, w.Timeout, w.Non2xx}
			want := []int64{tt.connect, tt.read, tt.write, tt.timeout, tt.non2xx}
			if !slices.Equal(got, want) {
				t.Errorf("errors connect/read/write/timeout/non-2xx: got %v, want %v", got, want)
			}
		})
	}
}

func near(a, b float64) bool { return a == b || (a-b)/b < 1e-9 && (b-a)/b < 1e-9 }

func nearD(a, b time.Duration) bool { return a-b < time.Nanosecond*2 && b-a < time.Nanosecond*2 }

func TestParseWrkSocketErrorsLine(t *testing.T) {
	out := `Running 10s test @ http://127.0.0.1:8080/
  4 threads and 1000 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   174.78ms   60.00ms    1.99s    80.00%
    Req/Sec     1.30k   200.00     2.00k    70.00%
  Latency Distribution
     50%  172.16ms
     75%  200.00ms
     90%  250.00ms
     99%  313.64ms
  51820 requests in 10.00s, 9.00MB read
  Socket errors: connect 17, read 3, write 2, timeout 420
  Non-2xx or 3xx responses: 9
Requests/sec:   5182.00
Transfer/sec:      0.90MB
`
	w, err := ParseWrk(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	got := []int64{w.Connect, w.Read, w.Write, w.Timeout, w.Non2xx}
	if want := []int64{17, 3, 2, 420, 9}; !slices.Equal(got, want) {
		t.Errorf("errors: got %v, want %v", got, want)
	}
	if w.LatencyMax != 1990*time.Millisecond {
		t.Errorf("max latency in seconds: got %v, want 1.99s", w.LatencyMax)
	}
	m := wrkMetrics(w)
	if m[MetricErrTotal] != 17+3+2+420+9 {
		t.Errorf("errors_total: got %v, want %v", m[MetricErrTotal], 17+3+2+420+9)
	}
	if m[MetricRPS] != 5182 || m[MetricLatP99] != 313.64 {
		t.Errorf("rps, p99: got %v, %v, want 5182, 313.64", m[MetricRPS], m[MetricLatP99])
	}
	if want := 9.0 * (1 << 20) / 51820; !near(m[MetricBytesPerAnswer], want) {
		t.Errorf("bytes per answer: got %v, want %v", m[MetricBytesPerAnswer], want)
	}
}

func TestParseWrkFailures(t *testing.T) {
	tests := []struct {
		name, out string
	}{
		{"unable to connect", "unable to connect to 127.0.0.1:28099 Connection refused"},
		{"empty", ""},
		{"usage", "Usage: wrk <options> <url>\n  Options:\n    -c, --connections <N>  Connections to keep open\n"},
		{"bad socket errors", "  2 threads and 10 connections\n    Latency 1.00ms 1.00ms 1.00ms 50%\n  10 requests in 1.00s, 1KB read\n  Socket errors: connect x, read 0, write 0, timeout 0\n"},
		{"bad unit", "    Latency 1.00xs 1.00ms 1.00ms 50%\n  10 requests in 1.00s, 1KB read\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if w, err := ParseWrk(strings.NewReader(tt.out)); err == nil {
				t.Errorf("ParseWrk: got %+v, want an error", w)
			}
		})
	}
	_, err := parseWrkFile(t, "wrk_unable_to_connect.txt")
	if !errors.Is(err, ErrWrkFailed) || !strings.Contains(err.Error(), "Connection refused") {
		t.Errorf("unable to connect: got %v, want ErrWrkFailed with wrk's reason", err)
	}
}

func TestParseWrkUnits(t *testing.T) {
	durations := []struct {
		in   string
		want time.Duration
	}{
		{"829.94us", 829940 * time.Nanosecond},
		{"1.66ms", 1660 * time.Microsecond},
		{"2.00s", 2 * time.Second},
		{"1.50m", 90 * time.Second},
		{"0.00us", 0},
	}
	for _, tt := range durations {
		if got, err := parseWrkDuration(tt.in); err != nil || !nearD(got, tt.want) {
			t.Errorf("parseWrkDuration(%q): got %v, %v, want %v", tt.in, got, err, tt.want)
		}
	}
	counts := []struct {
		in   string
		want float64
	}{
		{"814.81", 814.81},
		{"30.39k", 30390},
		{"1.31M", 1310000},
		{"2.00G", 2e9},
	}
	for _, tt := range counts {
		if got, err := parseMetric(tt.in); err != nil || !near(got, tt.want) {
			t.Errorf("parseMetric(%q): got %v, %v, want %v", tt.in, got, err, tt.want)
		}
	}
}

// wrk prints zeros for the distribution of deep pipelining runs; they must
// not be reported as 0 ms percentiles.
func TestWrkMetricsDropsZeroDistribution(t *testing.T) {
	w, err := parseWrkFile(t, "wrk_pipeline_zero_percentiles.txt")
	if err != nil {
		t.Fatal(err)
	}
	m := wrkMetrics(w)
	for _, k := range []string{MetricLatP50, MetricLatP90, MetricLatP99} {
		if v, ok := m[k]; ok {
			t.Errorf("%s: got %v, want it left out", k, v)
		}
	}
	if m[MetricLatAvg] != 25.29 {
		t.Errorf("avg: got %v, want 25.29", m[MetricLatAvg])
	}
}

func TestWrkArgs(t *testing.T) {
	got := wrkArgs(2, 100, 8*time.Second, 5*time.Second, map[string]string{"Connection": "close"}, "", nil, "http://x/")
	want := []string{"-t", "2", "-c", "100", "-d", "8s", "--timeout", "5s", "--latency", "-H", "Connection: close", "http://x/"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	got = wrkArgs(8, 4, 1500*time.Millisecond, 5*time.Second, nil, "/tmp/p.lua", []string{"10"}, "http://x/")
	want = []string{"-t", "4", "-c", "4", "-d", "2s", "--timeout", "5s", "--latency", "-s", "/tmp/p.lua", "http://x/", "--", "10"}
	if !slices.Equal(got, want) {
		t.Errorf("pipelined: got %q, want %q", got, want)
	}
}
