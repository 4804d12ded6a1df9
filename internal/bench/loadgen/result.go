package loadgen

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Result is what one run measured. `helios bench loadgen` prints it as one
// line of JSON, which Parse reads back.
type Result struct {
	// Format names this layout; Parse refuses any other.
	Format      string  `json:"format"`
	URL         string  `json:"url"`
	Rate        float64 `json:"rate"`
	DurationS   float64 `json:"duration_s"`
	Connections int     `json:"connections"`
	// MaxConnections and ConnectionsUsed are set when the pool could
	// grow: its cap, and how many connections it opened.
	MaxConnections  int `json:"max_connections,omitempty"`
	ConnectionsUsed int `json:"connections_used,omitempty"`
	// Scheduled is Sent + Unsent: every request whose intended send time
	// fell within the duration.
	Scheduled uint64 `json:"scheduled"`
	// Sent counts requests written or attempted; Completed those answered
	// with a status below 400 (the ones in Latency).
	Sent      uint64 `json:"sent"`
	Completed uint64 `json:"completed"`
	// Unsent counts scheduled requests never sent because every
	// connection was still behind when the grace period ended: a sign the
	// target could not keep up with the rate.
	Unsent uint64 `json:"unsent"`
	// AchievedRPS is Completed divided by the run's wall time.
	AchievedRPS float64   `json:"achieved_rps"`
	Errors      Errors    `json:"errors"`
	Latency     LatencyMS `json:"latency_ms"`
}

// FormatV1 is the Format of Results this version writes.
const FormatV1 = "helios-loadgen/1"

// Errors counts failed requests by kind, with wrk's names.
type Errors struct {
	Connect uint64 `json:"connect"`
	Read    uint64 `json:"read"`
	Write   uint64 `json:"write"`
	Timeout uint64 `json:"timeout"`
	// Non2xx counts answers with a status of 400 or more (wrk's "Non-2xx
	// or 3xx responses").
	Non2xx uint64 `json:"non_2xx"`
}

// Total returns the sum of every kind.
func (e Errors) Total() uint64 { return e.Connect + e.Read + e.Write + e.Timeout + e.Non2xx }

// LatencyMS summarises the latencies of completed requests, in
// milliseconds, measured from each request's intended send time.
type LatencyMS struct {
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p99.9"`
	Max   float64 `json:"max"`
	Count uint64  `json:"count"`
}

// Write prints r as one line of JSON.
func (r *Result) Write(w io.Writer) error {
	r.Format = FormatV1
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// ErrNoResult is returned by Parse when the output holds no result line.
var ErrNoResult = errors.New("no loadgen result in the output")

// Parse reads the output of `helios bench loadgen` and returns the last
// result line in it. Lines that are not JSON objects are ignored.
func Parse(r io.Reader) (*Result, error) {
	last, err := lastJSONLine(r)
	if err != nil {
		return nil, err
	}
	var res Result
	dec := json.NewDecoder(bytes.NewReader(last))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&res); err != nil {
		return nil, fmt.Errorf("loadgen result: %w", err)
	}
	if res.Format != FormatV1 {
		return nil, fmt.Errorf("loadgen result: format %q, want %q", res.Format, FormatV1)
	}
	if res.Completed != res.Latency.Count {
		return nil, fmt.Errorf("loadgen result: %d completed but %d latencies", res.Completed, res.Latency.Count)
	}
	return &res, nil
}

// WriteJSON prints v (a WSResult, HandshakeResult or IdleResult) as one
// line of JSON.
func WriteJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// ParseJSON reads the last line of r that is a JSON object into v, which
// must carry a "format" field equal to format; unknown fields are errors.
func ParseJSON(r io.Reader, v any, format string) error {
	last, err := lastJSONLine(r)
	if err != nil {
		return err
	}
	var f struct {
		Format string `json:"format"`
	}
	if err := json.Unmarshal(last, &f); err != nil {
		return fmt.Errorf("result: %w", err)
	}
	if f.Format != format {
		return fmt.Errorf("result: format %q, want %q", f.Format, format)
	}
	dec := json.NewDecoder(bytes.NewReader(last))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("result: %w", err)
	}
	return nil
}

// lastJSONLine returns the last line of r that starts a JSON object, or
// ErrNoResult.
func lastJSONLine(r io.Reader) ([]byte, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var last []byte
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) > 0 && line[0] == '{' {
			last = append(last[:0], line...)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if last == nil {
		return nil, ErrNoResult
	}
	return last, nil
}
