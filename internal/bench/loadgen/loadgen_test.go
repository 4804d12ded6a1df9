package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestHistogramQuantiles(t *testing.T) {
	var h Histogram
	rng := rand.New(rand.NewPCG(1, 2))
	var vals []time.Duration
	for range 100000 {
		// Log-uniform from 10µs to 10s, like latencies.
		v := time.Duration(math.Pow(10, 4+rng.Float64()*6))
		vals = append(vals, v)
		h.Record(v)
	}
	slices.Sort(vals)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		want := vals[int(math.Ceil(q*float64(len(vals))))-1]
		got := h.Quantile(q)
		if rel := math.Abs(float64(got-want)) / float64(want); rel > 0.02 {
			t.Errorf("q%v: got %v, want %v (±2%%), off by %.2f%%", q, got, want, rel*100)
		}
	}
	if h.Max() != vals[len(vals)-1] {
		t.Errorf("max: got %v, want %v exactly", h.Max(), vals[len(vals)-1])
	}
	if h.Count() != 100000 {
		t.Errorf("count: got %d, want 100000", h.Count())
	}
}

func TestHistogramSmallAndEdge(t *testing.T) {
	var h Histogram
	if h.Quantile(0.99) != 0 || h.Mean() != 0 || h.Max() != 0 {
		t.Errorf("empty histogram: got non-zero")
	}
	for _, v := range []time.Duration{1, 2, 3, 100, -5} {
		h.Record(v)
	}
	// Small values are exact; a negative one counts as 0.
	if got := h.Quantile(0.2); got != 0 {
		t.Errorf("q0.2: got %v, want 0", got)
	}
	if got := h.Quantile(0.6); got != 2 {
		t.Errorf("q0.6: got %v, want 2", got)
	}
	if got := h.Quantile(1); got != 100 {
		t.Errorf("q1: got %v, want 100", got)
	}
	var o Histogram
	o.Record(time.Hour)
	h.Merge(&o)
	if h.Count() != 6 || h.Max() != time.Hour {
		t.Errorf("merge: got count %d max %v", h.Count(), h.Max())
	}
	for i := range numBuckets {
		lo, hi := bucketRange(i)
		if bucketOf(lo) != i || bucketOf(hi) != i {
			t.Fatalf("bucket %d: range [%d, %d] maps to %d, %d", i, lo, hi, bucketOf(lo), bucketOf(hi))
		}
		if i > 0 {
			if _, prevHi := bucketRange(i - 1); prevHi+1 != lo {
				t.Fatalf("bucket %d starts at %d, previous ends at %d", i, lo, prevHi)
			}
		}
	}
}

func TestRunRateAndLatency(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.Header.Get("X-Test") != "yes" {
			w.WriteHeader(400)
			return
		}
		w.Write([]byte("hello"))
	}))
	defer srv.Close()
	res, err := Run(context.Background(), Config{
		URL: srv.URL + "/x", Rate: 1000, Duration: time.Second, Connections: 10,
		Headers: map[string]string{"X-Test": "yes"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Scheduled != 1000 || res.Sent != 1000 || res.Completed != 1000 || res.Unsent != 0 {
		t.Errorf("scheduled/sent/completed/unsent: got %d/%d/%d/%d, want 1000/1000/1000/0", res.Scheduled, res.Sent, res.Completed, res.Unsent)
	}
	if hits.Load() != 1000 {
		t.Errorf("server saw %d requests, want 1000", hits.Load())
	}
	if res.Errors.Total() != 0 {
		t.Errorf("errors: got %+v", res.Errors)
	}
	if res.AchievedRPS < 900 || res.AchievedRPS > 1001 {
		t.Errorf("achieved rate: got %v, want about 1000", res.AchievedRPS)
	}
	if res.Latency.P50 <= 0 || res.Latency.P50 > res.Latency.P99 || res.Latency.P99 > res.Latency.Max {
		t.Errorf("latency: got %+v", res.Latency)
	}
}

// stallOnceServer answers "ok" at once, except its first answer, which
// takes 300ms.
func stallOnceServer() *httptest.Server {
	var stalled atomic.Bool
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if stalled.CompareAndSwap(false, true) {
			time.Sleep(300 * time.Millisecond)
		}
		w.Write([]byte("ok"))
	}))
}

// A server that stalls for 300ms makes every request scheduled during the
// stall late: an open-loop generator records those waits, where a
// closed-loop one would record one slow request per connection.
func TestRunCountsStallsFromIntendedTime(t *testing.T) {
	srv := stallOnceServer()
	defer srv.Close()
	// One connection at 200/s: a request every 5ms; the stall delays the
	// ~60 requests due during it.
	res, err := Run(context.Background(), Config{URL: srv.URL, Rate: 200, Duration: time.Second, Connections: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Completed != 200 {
		t.Fatalf("completed: got %d, want 200", res.Completed)
	}
	// A tenth of the requests waited behind the stall, so p90 is well
	// above the server's normal sub-millisecond answers.
	if res.Latency.P90 < 20 || res.Latency.Max < 290 {
		t.Errorf("latency ms: got p90 %v max %v, want p90 >= 20 and max >= 290", res.Latency.P90, res.Latency.Max)
	}
}

func TestRunErrorKinds(t *testing.T) {
	// A closed port: connect errors.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	res, err := Run(context.Background(), Config{URL: "http://" + addr + "/", Rate: 100, Duration: 200 * time.Millisecond, Connections: 2, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors.Connect != 20 || res.Completed != 0 {
		t.Errorf("closed port: got %+v, completed %d, want 20 connect errors", res.Errors, res.Completed)
	}

	// 503s: non-2xx, and the connection is kept.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) }))
	defer srv.Close()
	res, err = Run(context.Background(), Config{URL: srv.URL, Rate: 100, Duration: 200 * time.Millisecond, Connections: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors.Non2xx != 20 || res.Completed != 0 {
		t.Errorf("503: got %+v, completed %d, want 20 non-2xx", res.Errors, res.Completed)
	}

	// A server slower than the timeout: timeouts.
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(300 * time.Millisecond)
	}))
	defer slow.Close()
	res, err = Run(context.Background(), Config{URL: slow.URL, Rate: 10, Duration: 100 * time.Millisecond, Connections: 1,
		Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors.Timeout != 1 {
		t.Errorf("slow: got %+v, want 1 timeout", res.Errors)
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{URL: "ftp://x/", Rate: 1, Duration: time.Second},
		{URL: "http://x/", Rate: 0, Duration: time.Second},
		{URL: "http://x/", Rate: 1},
		{URL: "::", Rate: 1, Duration: time.Second},
	} {
		if _, err := Run(context.Background(), cfg); err == nil {
			t.Errorf("Run(%+v): got no error", cfg)
		}
	}
}

func TestReadResponse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		status  int
		keep    bool
		rest    string
		wantErr bool
	}{
		{"content-length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloNEXT", 200, true, "NEXT", false},
		{"chunked with trailer", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n0\r\nT: 1\r\n\r\nNEXT", 200, true, "NEXT", false},
		{"connection close", "HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", 502, false, "", false},
		{"HTTP/1.0", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", 200, false, "", false},
		{"204 has no body", "HTTP/1.1 204 No Content\r\n\r\nNEXT", 204, true, "NEXT", false},
		{"body to close", "HTTP/1.1 200 OK\r\n\r\nall of it", 200, false, "", false},
		{"garbage", "SSH-2.0-OpenSSH\r\n", 0, false, "", true},
		{"bad length", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", 0, false, "", true},
		{"truncated", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", 0, false, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			br := bufio.NewReader(strings.NewReader(tt.in))
			status, keep, err := readResponse(br)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err: got %v, want error %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			rest, _ := br.ReadString(0)
			if status != tt.status || keep != tt.keep || rest != tt.rest {
				t.Errorf("got %d keep %v rest %q, want %d keep %v rest %q", status, keep, rest, tt.status, tt.keep, tt.rest)
			}
		})
	}
}

// The testdata file is a real `helios bench loadgen` run against nginx, as
// `helios bench` saves it (the command line first).
func TestParseResult(t *testing.T) {
	b, err := os.ReadFile("../testdata/loadgen_nginx_80pct.txt")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Parse(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if res.Rate != 47481 || res.Connections != 100 || res.DurationS != 3 {
		t.Errorf("settings: got rate %v conns %d duration %v", res.Rate, res.Connections, res.DurationS)
	}
	if res.Scheduled != 142443 || res.Completed != 142443 || res.Unsent != 0 || res.Errors.Total() != 0 {
		t.Errorf("counts: got %+v", res)
	}
	if res.Latency.P50 != 0.823295 || res.Latency.P99 != 123.207679 || res.Latency.P999 != 135.266303 || res.Latency.Max != 146.919669 {
		t.Errorf("latency: got %+v", res.Latency)
	}
}

func TestParseResultRejects(t *testing.T) {
	tests := []struct {
		name, in string
		want     error
	}{
		{"nothing", "$ helios bench loadgen\nerror: boom\n", ErrNoResult},
		{"other format", `{"format":"wrk/1"}`, nil},
		{"unknown field", `{"format":"helios-loadgen/1","extra":1}`, nil},
		{"inconsistent", `{"format":"helios-loadgen/1","completed":5,"latency_ms":{"count":4}}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tt.in))
			if err == nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("got %v, want an error (%v)", err, tt.want)
			}
		})
	}
}

func TestResultRoundTrip(t *testing.T) {
	in := &Result{URL: "http://x/", Rate: 10, DurationS: 1, Connections: 1, Scheduled: 10, Sent: 10, Completed: 9,
		Errors: Errors{Read: 1}, Latency: LatencyMS{P50: 1.5, Count: 9}}
	var b bytes.Buffer
	if err := in.Write(&b); err != nil {
		t.Fatal(err)
	}
	out, err := Parse(&b)
	if err != nil {
		t.Fatal(err)
	}
	in.Format = FormatV1
	if *out != *in {
		t.Errorf("got %+v, want %+v", out, in)
	}
}

// Requests scheduled but never sent (here: the run is cancelled) are
// counted, so Scheduled always covers the whole duration.
func TestRunCountsUnsent(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	res, err := Run(ctx, Config{URL: srv.URL, Rate: 100, Duration: time.Second, Connections: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Scheduled != 100 || res.Sent+res.Unsent != 100 || res.Unsent < 50 || res.Unsent > 80 {
		t.Errorf("scheduled %d, sent %d, unsent %d: want 100 scheduled, about 70 unsent", res.Scheduled, res.Sent, res.Unsent)
	}
}

// One connection stalls for 300ms: with a shared schedule the other
// connections take the requests due meanwhile, so only the stalled request
// is late (with one schedule per connection, a tenth of them would be).
func TestRunSharedScheduleRoutesAroundAStall(t *testing.T) {
	srv := stallOnceServer()
	defer srv.Close()
	res, err := Run(context.Background(), Config{URL: srv.URL, Rate: 200, Duration: time.Second, Connections: 4})
	if err != nil {
		t.Fatal(err)
	}
	if res.Completed != 200 {
		t.Fatalf("completed: got %d, want 200", res.Completed)
	}
	if res.Latency.P90 > 20 || res.Latency.Max < 290 {
		t.Errorf("latency ms: got p90 %v max %v, want p90 <= 20 and max >= 290", res.Latency.P90, res.Latency.Max)
	}
}

func TestRunGrowsThePool(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(40 * time.Millisecond)
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	// 100/s at 40ms each needs about four connections at once.
	tests := []struct {
		name            string
		max             int
		wantUsedAtLeast int
		wantP50Below    float64
	}{
		{"fixed pool of one falls behind", 0, 0, math.Inf(1)},
		{"pool grows to keep up", 16, 4, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Run(context.Background(), Config{URL: srv.URL, Rate: 100, Duration: time.Second,
				Connections: 1, MaxConnections: tt.max, Grace: 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if res.ConnectionsUsed < tt.wantUsedAtLeast || res.ConnectionsUsed > max(tt.max, 0) {
				t.Errorf("connections used: got %d, want %d..%d", res.ConnectionsUsed, tt.wantUsedAtLeast, tt.max)
			}
			if tt.max == 0 {
				// 25/s for a second: most of the 100 go unsent or late.
				if res.Unsent < 50 {
					t.Errorf("unsent: got %d, want at least 50", res.Unsent)
				}
				return
			}
			if res.Completed < 95 || res.Latency.P50 >= tt.wantP50Below {
				t.Errorf("completed %d, p50 %v ms: want >= 95 completed and p50 below %v", res.Completed, res.Latency.P50, tt.wantP50Below)
			}
		})
	}
}

func TestRunOverTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil {
			w.WriteHeader(400)
		}
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	res, err := Run(context.Background(), Config{URL: srv.URL + "/", Rate: 200, Duration: 500 * time.Millisecond, Connections: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Completed != 100 || res.Errors.Total() != 0 {
		t.Errorf("got %d completed, errors %+v, want 100 and none", res.Completed, res.Errors)
	}
}

// The histogram behind the probe's figures, fed the way Run feeds it: a
// request due every millisecond for 10s, answered in 1ms, except that the
// server stalls for the second starting at 5s. Measured from the intended
// send time, the thousand requests due during the stall waited up to a
// second each, so p99 and p99.9 show the stall; measured closed-loop (one
// request per answer, latency from when it was really sent) only one
// request in ten thousand would.
func TestHistogramCountsAStallFromIntendedTimes(t *testing.T) {
	var open, closed Histogram
	const stallFrom, stallTo = 5000, 6000 // ms
	for due := range 10000 {
		done := due + 1
		if due >= stallFrom && due < stallTo {
			done = stallTo + 1
		}
		open.Record(time.Duration(done-due) * time.Millisecond)
		if due < stallFrom || due >= stallTo {
			closed.Record(time.Millisecond)
		}
	}
	closed.Record(time.Second) // the one request that met the stall
	tests := []struct {
		name string
		h    *Histogram
		q    float64
		want time.Duration
	}{
		{"open loop p50", &open, 0.50, time.Millisecond},
		{"open loop p99", &open, 0.99, 900 * time.Millisecond},
		{"open loop p99.9", &open, 0.999, 990 * time.Millisecond},
		{"closed loop p99.9", &closed, 0.999, time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.h.Quantile(tt.q)
			if rel := math.Abs(float64(got-tt.want)) / float64(tt.want); rel > 0.02 {
				t.Errorf("got %v, want %v (±2%%)", got, tt.want)
			}
		})
	}
}
