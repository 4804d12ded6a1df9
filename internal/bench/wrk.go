package bench

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// WrkResult is what wrk printed for one run (wrk 4.x with --latency).
// Latencies come from wrk's own closed-loop measurement: a connection sends
// its next request only after the previous answer, so they understate the
// latency of a stalled server (coordinated omission).
type WrkResult struct {
	Threads, Connections int
	// Requests, Elapsed and BytesRead come from the "N requests in T,
	// B read" line (B in wrk's units of 1024: 299.29MB).
	Requests  int64
	Elapsed   time.Duration
	BytesRead float64
	// RPS is the "Requests/sec:" line: Requests divided by Elapsed. The
	// per-thread Req/Sec line is ThreadRPS (mean, stdev, max).
	RPS       float64
	ThreadRPS Spread
	// LatencyAvg, LatencyStdev and LatencyMax are the thread stats'
	// Latency line.
	LatencyAvg, LatencyStdev, LatencyMax time.Duration
	// Percentiles is the latency distribution: "50%" -> value.
	Percentiles map[string]time.Duration
	// Connect, Read, Write and Timeout are the "Socket errors" line (zero
	// when wrk printed none); Non2xx counts answers with a status of 400
	// or more.
	Connect, Read, Write, Timeout, Non2xx int64

	latencySeen, requestsSeen bool
}

// Spread is a mean, standard deviation and maximum.
type Spread struct{ Mean, Stdev, Max float64 }

// ErrWrkFailed reports wrk output without a result, such as "unable to
// connect to HOST Connection refused".
var ErrWrkFailed = errors.New("wrk did not report a result")

// ParseWrk parses the text wrk prints with --latency. It understands the
// thread stats (latency units us/ms/s/m/h, counts with k/M/G suffixes), the
// latency distribution, "Socket errors: connect X, read Y, write Z, timeout
// W", "Non-2xx or 3xx responses: N" and "Requests/sec:". Lines it does not
// know, such as a Lua script's output, are ignored.
func ParseWrk(r io.Reader) (*WrkResult, error) {
	res := &WrkResult{Percentiles: map[string]time.Duration{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var failure string
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		f := strings.Fields(line)
		var err error
		switch {
		case len(f) == 0:
		case strings.HasPrefix(line, "unable to connect"):
			failure = line
		case len(f) == 5 && f[1] == "threads" && f[2] == "and" && f[4] == "connections":
			res.Threads, err = strconv.Atoi(f[0])
			if err == nil {
				res.Connections, err = strconv.Atoi(f[3])
			}
		case f[0] == "Latency" && len(f) >= 4:
			res.LatencyAvg, err = parseWrkDuration(f[1])
			if err == nil {
				res.LatencyStdev, err = parseWrkDuration(f[2])
			}
			if err == nil {
				res.LatencyMax, err = parseWrkDuration(f[3])
			}
			res.latencySeen = true
		case f[0] == "Req/Sec" && len(f) >= 4:
			res.ThreadRPS.Mean, err = parseMetric(f[1])
			if err == nil {
				res.ThreadRPS.Stdev, err = parseMetric(f[2])
			}
			if err == nil {
				res.ThreadRPS.Max, err = parseMetric(f[3])
			}
		case len(f) == 2 && strings.HasSuffix(f[0], "%"):
			var d time.Duration
			d, err = parseWrkDuration(f[1])
			res.Percentiles[f[0]] = d
		case len(f) >= 4 && f[1] == "requests" && f[2] == "in":
			res.Requests, err = strconv.ParseInt(f[0], 10, 64)
			if err == nil {
				res.Elapsed, err = parseWrkDuration(strings.TrimSuffix(f[3], ","))
			}
			if err == nil && len(f) >= 6 && f[5] == "read" {
				res.BytesRead, err = parseWrkBytes(f[4])
			}
			res.requestsSeen = true
		case strings.HasPrefix(line, "Socket errors:"):
			err = parseSocketErrors(strings.TrimPrefix(line, "Socket errors:"), res)
		case strings.HasPrefix(line, "Non-2xx or 3xx responses:"):
			res.Non2xx, err = strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(line, "Non-2xx or 3xx responses:")), 10, 64)
		case f[0] == "Requests/sec:" && len(f) == 2:
			res.RPS, err = strconv.ParseFloat(f[1], 64)
		}
		if err != nil {
			return nil, fmt.Errorf("wrk output %q: %w", line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if failure != "" {
		return nil, fmt.Errorf("%w: %s", ErrWrkFailed, failure)
	}
	if !res.requestsSeen || !res.latencySeen {
		return nil, ErrWrkFailed
	}
	return res, nil
}

// parseSocketErrors parses " connect 0, read 12, write 0, timeout 34".
func parseSocketErrors(s string, res *WrkResult) error {
	for part := range strings.SplitSeq(s, ",") {
		f := strings.Fields(part)
		if len(f) != 2 {
			return fmt.Errorf("socket errors: %q", part)
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return err
		}
		switch f[0] {
		case "connect":
			res.Connect = n
		case "read":
			res.Read = n
		case "write":
			res.Write = n
		case "timeout":
			res.Timeout = n
		default:
			return fmt.Errorf("socket errors: unknown kind %q", f[0])
		}
	}
	return nil
}

// wrkTimeUnits are the units wrk prints durations in, longest suffix first.
var wrkTimeUnits = []struct {
	suffix string
	unit   time.Duration
}{
	{"us", time.Microsecond},
	{"ms", time.Millisecond},
	{"ns", time.Nanosecond},
	{"s", time.Second},
	{"m", time.Minute},
	{"h", time.Hour},
}

// parseWrkDuration parses wrk's "123.45us", "1.23ms", "2.00s", "1.50m".
func parseWrkDuration(s string) (time.Duration, error) {
	for _, u := range wrkTimeUnits {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseFloat(num, 64)
			if err != nil {
				return 0, fmt.Errorf("duration %q: %w", s, err)
			}
			return time.Duration(v * float64(u.unit)), nil
		}
	}
	return 0, fmt.Errorf("duration %q: no unit", s)
}

// wrkByteUnits are the units wrk prints byte counts in (powers of 1024),
// longest suffix first.
var wrkByteUnits = []struct {
	suffix string
	unit   float64
}{
	{"KB", 1 << 10},
	{"MB", 1 << 20},
	{"GB", 1 << 30},
	{"TB", 1 << 40},
	{"B", 1},
}

// parseWrkBytes parses wrk's "512.00B", "1.50KB", "299.29MB".
func parseWrkBytes(s string) (float64, error) {
	for _, u := range wrkByteUnits {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseFloat(num, 64)
			if err != nil {
				return 0, fmt.Errorf("bytes %q: %w", s, err)
			}
			return v * u.unit, nil
		}
	}
	return 0, fmt.Errorf("bytes %q: no unit", s)
}

// parseMetric parses a count with wrk's optional SI suffix: "812.34",
// "30.39k", "1.31M", "2.00G".
func parseMetric(s string) (float64, error) {
	mult := 1.0
	switch {
	case strings.HasSuffix(s, "k"):
		mult, s = 1e3, s[:len(s)-1]
	case strings.HasSuffix(s, "M"):
		mult, s = 1e6, s[:len(s)-1]
	case strings.HasSuffix(s, "G"):
		mult, s = 1e9, s[:len(s)-1]
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("count %q: %w", s, err)
	}
	return v * mult, nil
}

// wrkArgs returns wrk's arguments for one run; script, when not "", is a
// Lua script run with scriptArgs.
func wrkArgs(threads, conns int, d time.Duration, timeout time.Duration, headers map[string]string, script string, scriptArgs []string, url string) []string {
	args := []string{
		"-t", strconv.Itoa(max(1, min(threads, conns))),
		"-c", strconv.Itoa(conns),
		"-d", wholeSeconds(d),
		"--timeout", wholeSeconds(timeout),
		"--latency",
	}
	for _, k := range sortedKeys(headers) {
		args = append(args, "-H", k+": "+headers[k])
	}
	if script != "" {
		args = append(args, "-s", script)
	}
	args = append(args, url)
	if len(scriptArgs) > 0 {
		args = append(append(args, "--"), scriptArgs...)
	}
	return args
}

// wholeSeconds formats d as wrk wants it: whole seconds, at least 1.
func wholeSeconds(d time.Duration) string {
	return strconv.Itoa(max(1, int((d+time.Second-1)/time.Second))) + "s"
}
