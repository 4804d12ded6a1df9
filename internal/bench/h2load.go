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

// H2loadResult is what h2load (nghttp2) printed for one run. h2load reports
// no percentiles: only the min, max, mean and standard deviation of the
// request times.
type H2loadResult struct {
	// Elapsed and RPS come from "finished in T, R req/s, B/s".
	Elapsed time.Duration
	RPS     float64
	// The "requests:" line.
	Total, Started, Done, Succeeded, Failed, Errored, Timeout int64
	// The "status codes:" line.
	Status2xx, Status3xx, Status4xx, Status5xx int64
	// "time for request:" min, max, mean, sd.
	ReqMin, ReqMax, ReqMean, ReqSD time.Duration
	// Protocol is the "Application protocol:" line (h2, http/1.1); empty
	// when h2load never connected.
	Protocol string
	// TrafficBytes is the total of the "traffic:" line, in bytes.
	TrafficBytes int64

	finished bool
}

// ErrH2loadFailed reports h2load output without a result.
var ErrH2loadFailed = errors.New("h2load did not report a result")

// ParseH2load parses the summary h2load prints at the end of a run.
func ParseH2load(r io.Reader) (*H2loadResult, error) {
	res := &H2loadResult{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		var err error
		switch {
		case strings.HasPrefix(line, "finished in "):
			// finished in 3.00s, 3333.33 req/s, 254.12KB/s
			parts := strings.Split(strings.TrimPrefix(line, "finished in "), ",")
			if len(parts) < 2 {
				err = errors.New("short line")
				break
			}
			res.Elapsed, err = parseWrkDuration(strings.TrimSpace(parts[0]))
			if err == nil {
				res.RPS, err = strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(parts[1]), " req/s"), 64)
			}
			res.finished = true
		case strings.HasPrefix(line, "requests:"):
			err = parseCounts(strings.TrimPrefix(line, "requests:"), map[string]*int64{
				"total": &res.Total, "started": &res.Started, "done": &res.Done,
				"succeeded": &res.Succeeded, "failed": &res.Failed,
				"errored": &res.Errored, "timeout": &res.Timeout,
			})
		case strings.HasPrefix(line, "status codes:"):
			err = parseCounts(strings.TrimPrefix(line, "status codes:"), map[string]*int64{
				"2xx": &res.Status2xx, "3xx": &res.Status3xx, "4xx": &res.Status4xx, "5xx": &res.Status5xx,
			})
		case strings.HasPrefix(line, "time for request:"):
			f := strings.Fields(strings.TrimPrefix(line, "time for request:"))
			if len(f) < 4 {
				err = errors.New("short line")
				break
			}
			dst := []*time.Duration{&res.ReqMin, &res.ReqMax, &res.ReqMean, &res.ReqSD}
			for i, p := range dst {
				if *p, err = parseWrkDuration(f[i]); err != nil {
					break
				}
			}
		case strings.HasPrefix(line, "traffic:"):
			// traffic: 762.36KB (780660) total, 478.52KB (490000) headers ...
			f := strings.Fields(strings.TrimPrefix(line, "traffic:"))
			if len(f) < 2 || !strings.HasPrefix(f[1], "(") {
				err = errors.New("no byte count")
				break
			}
			res.TrafficBytes, err = strconv.ParseInt(strings.Trim(f[1], "()"), 10, 64)
		case strings.HasPrefix(line, "Application protocol:"):
			res.Protocol = strings.TrimSpace(strings.TrimPrefix(line, "Application protocol:"))
		}
		if err != nil {
			return nil, fmt.Errorf("h2load output %q: %w", line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if !res.finished {
		return nil, ErrH2loadFailed
	}
	return res, nil
}

// parseCounts parses "10053 total, 10090 started, 0 timeout" into dst by
// name; names not in dst are ignored.
func parseCounts(s string, dst map[string]*int64) error {
	for part := range strings.SplitSeq(s, ",") {
		f := strings.Fields(part)
		if len(f) != 2 {
			return fmt.Errorf("count %q", part)
		}
		p, ok := dst[f[1]]
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return err
		}
		*p = n
	}
	return nil
}

// h2loadArgs returns h2load's arguments for a run of d (or of requests
// requests when that is positive) with conns connections and streams
// concurrent streams each; data, when not "", is the file POSTed as every
// request's body.
func h2loadArgs(threads, conns, streams int, d time.Duration, requests int, data string, headers map[string]string, url string) []string {
	args := []string{"-D", strconv.Itoa(max(1, int((d+time.Second-1)/time.Second)))}
	if requests > 0 {
		args = []string{"-n", strconv.Itoa(requests)}
	}
	args = append(args,
		"-c", strconv.Itoa(conns),
		"-m", strconv.Itoa(max(1, streams)),
		"-t", strconv.Itoa(max(1, min(threads, conns))),
	)
	if data != "" {
		args = append(args, "-d", data)
	}
	for _, k := range sortedKeys(headers) {
		args = append(args, "-H", k+": "+headers[k])
	}
	return append(args, url)
}
