// Package loadgen is an open-loop HTTP/1.1 load generator for measuring
// latency at a fixed request rate without coordinated omission.
//
// A closed-loop tool such as wrk sends a connection's next request only when
// the previous answer is in, so a server that stalls also stalls the
// measurement: the requests that would have queued during the stall are
// never sent and their wait is never recorded. Here every request has an
// intended send time fixed in advance (request i of connection k at
// start + (i*C+k)/rate, so the C connections share the rate evenly), and
// its latency runs from that intended time to the last byte of the answer.
// A connection that falls behind sends at once, and its late start counts
// against the server, as in wrk2.
//
// The generator speaks just enough HTTP/1.1 to do this cheaply: one
// preformatted request, a status line, Content-Length or chunked bodies.
package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"
)

// Config describes one run.
type Config struct {
	// URL is the http:// URL requested. Required.
	URL string
	// Rate is the total request rate per second across all connections;
	// it must be positive.
	Rate float64
	// Duration is how long requests are scheduled for; it must be
	// positive.
	Duration time.Duration
	// Connections is the number of connections the rate is spread over.
	// Zero means 100.
	Connections int
	// Timeout bounds connecting and each request, counted from when it is
	// sent. Zero means 5s.
	Timeout time.Duration
	// Grace is how long connections that fell behind may go on sending
	// requests scheduled before the end of Duration; what is still unsent
	// then is counted as Unsent. Zero means Timeout.
	Grace time.Duration
	// Headers are added to every request; nil adds none. A Connection:
	// close header makes each request use a new connection.
	Headers map[string]string
}

// errorKind classifies a failed request, with the names wrk uses.
type errorKind int

const (
	errConnect errorKind = iota
	errRead
	errWrite
	errTimeout
	errStatus
	numErrorKinds
)

// conn is one connection's state; only its goroutine touches it.
type conn struct {
	hist   Histogram
	errs   [numErrorKinds]uint64
	sent   uint64
	unsent uint64
	nc     net.Conn
	br     *bufio.Reader
}

// Run sends requests as Config says and returns what it measured. It fails
// only when the configuration is invalid; request failures are counted in
// the Result. Cancelling ctx ends the run early.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("url %q: want http://host:port/path", cfg.URL)
	}
	if cfg.Rate <= 0 || cfg.Duration <= 0 {
		return nil, errors.New("rate and duration must be positive")
	}
	if cfg.Connections <= 0 {
		cfg.Connections = 100
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.Grace <= 0 {
		cfg.Grace = cfg.Timeout
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	req, closeEach := formatRequest(u, cfg.Headers)

	conns := make([]*conn, cfg.Connections)
	start := time.Now().Add(10 * time.Millisecond)
	end := start.Add(cfg.Duration)
	stopSending := end.Add(cfg.Grace)
	interval := float64(time.Second) / cfg.Rate
	var wg sync.WaitGroup
	for k := range conns {
		c := &conn{}
		conns[k] = c
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.run(ctx, k, cfg.Connections, start, end, stopSending, interval, addr, req, closeEach, cfg.Timeout)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)

	res := &Result{
		URL:         cfg.URL,
		Rate:        cfg.Rate,
		DurationS:   cfg.Duration.Seconds(),
		Connections: cfg.Connections,
	}
	var all Histogram
	for _, c := range conns {
		all.Merge(&c.hist)
		res.Sent += c.sent
		res.Unsent += c.unsent
		res.Errors.Connect += c.errs[errConnect]
		res.Errors.Read += c.errs[errRead]
		res.Errors.Write += c.errs[errWrite]
		res.Errors.Timeout += c.errs[errTimeout]
		res.Errors.Non2xx += c.errs[errStatus]
	}
	res.Completed = all.Count()
	res.Scheduled = res.Sent + res.Unsent
	res.AchievedRPS = float64(res.Completed) / max(elapsed, cfg.Duration).Seconds()
	res.Latency = LatencyMS{
		Mean:  ms(all.Mean()),
		P50:   ms(all.Quantile(0.50)),
		P90:   ms(all.Quantile(0.90)),
		P99:   ms(all.Quantile(0.99)),
		P999:  ms(all.Quantile(0.999)),
		Max:   ms(all.Max()),
		Count: all.Count(),
	}
	return res, nil
}

// ms converts d to float milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// run is one connection's loop: request i is due at
// start + (i*n+k)*interval, for as long as that is before end.
func (c *conn) run(ctx context.Context, k, n int, start, end, stopSending time.Time, interval float64,
	addr string, req []byte, closeEach bool, timeout time.Duration) {
	defer c.close()
	step := time.Duration(float64(n) * interval)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for i := 0; ; i++ {
		due := start.Add(time.Duration(float64(i*n+k) * interval))
		if !due.Before(end) {
			return
		}
		now := time.Now()
		if now.After(stopSending) || ctx.Err() != nil {
			// Everything due from here to end was never sent.
			c.unsent += remaining(due, end, step)
			return
		}
		if wait := due.Sub(now); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
				c.unsent += remaining(due, end, step)
				return
			}
		}
		c.sent++
		if kind, ok := c.do(addr, req, timeout); !ok {
			c.errs[kind]++
			c.close()
			continue
		}
		c.hist.Record(time.Since(due))
		if closeEach {
			c.close()
		}
	}
}

// remaining returns how many requests one step apart are due from due
// (included) until end (excluded).
func remaining(due, end time.Time, step time.Duration) uint64 {
	if !due.Before(end) || step <= 0 {
		return 0
	}
	return uint64(math.Ceil(float64(end.Sub(due)) / float64(step)))
}

// do sends one request and reads its answer, reporting how it failed.
// A non-2xx/3xx answer is read in full and keeps the connection.
func (c *conn) do(addr string, req []byte, timeout time.Duration) (errorKind, bool) {
	if c.nc == nil {
		nc, err := net.DialTimeout("tcp", addr, timeout)
		if err != nil {
			return classify(err, errConnect), false
		}
		c.nc = nc
		if c.br == nil {
			c.br = bufio.NewReaderSize(nc, 16<<10)
		} else {
			c.br.Reset(nc)
		}
	}
	c.nc.SetDeadline(time.Now().Add(timeout))
	if _, err := c.nc.Write(req); err != nil {
		return classify(err, errWrite), false
	}
	status, keep, err := readResponse(c.br)
	if err != nil {
		return classify(err, errRead), false
	}
	if !keep {
		c.close()
	}
	if status >= 400 {
		return errStatus, false
	}
	return 0, true
}

func (c *conn) close() {
	if c.nc != nil {
		c.nc.Close()
		c.nc = nil
	}
}

// classify turns a network error into a timeout or the given kind.
func classify(err error, kind errorKind) errorKind {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return errTimeout
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return errTimeout
	}
	return kind
}

// formatRequest returns the bytes of a GET for u with headers, and whether
// the connection must be closed after each request.
func formatRequest(u *url.URL, headers map[string]string) ([]byte, bool) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "GET %s HTTP/1.1\r\nHost: %s\r\n", u.RequestURI(), u.Host)
	closeEach := false
	keys := make([]string, 0, len(headers))
	for k := range headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %s\r\n", k, headers[k])
		if equalFold(k, "Connection") && equalFold(headers[k], "close") {
			closeEach = true
		}
	}
	b.WriteString("\r\n")
	return b.Bytes(), closeEach
}

func equalFold(a, b string) bool { return bytes.EqualFold([]byte(a), []byte(b)) }

// errMalformed reports an answer the generator cannot frame.
var errMalformed = errors.New("malformed response")

// readResponse reads one response and discards its body. It returns the
// status and whether the connection may carry another request.
func readResponse(br *bufio.Reader) (status int, keep bool, err error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return 0, false, err
	}
	// HTTP/1.1 200 OK
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, false, errMalformed
	}
	status, err = strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, false, errMalformed
	}
	keep = line[7] == '1'
	length, chunked := int64(-1), false
	for {
		line, err = br.ReadSlice('\n')
		if err != nil {
			return 0, false, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return 0, false, errMalformed
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			length, err = strconv.ParseInt(string(value), 10, 64)
			if err != nil || length < 0 {
				return 0, false, errMalformed
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(value, []byte("chunked"))
		case bytes.EqualFold(name, []byte("Connection")):
			if bytes.EqualFold(value, []byte("close")) {
				keep = false
			}
		}
	}
	switch {
	case status < 200 || status == 204 || status == 304:
	case chunked:
		err = skipChunked(br)
	case length >= 0:
		_, err = br.Discard(int(length))
	default:
		// The body runs to the end of the connection.
		_, err = io.Copy(io.Discard, br)
		keep = false
	}
	return status, keep, err
}

// skipChunked discards a chunked body and its trailers.
func skipChunked(br *bufio.Reader) error {
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		line = bytes.TrimRight(line, "\r\n")
		if i := bytes.IndexByte(line, ';'); i >= 0 {
			line = line[:i]
		}
		size, err := strconv.ParseInt(string(bytes.TrimSpace(line)), 16, 64)
		if err != nil || size < 0 {
			return errMalformed
		}
		if size == 0 {
			for {
				line, err := br.ReadSlice('\n')
				if err != nil {
					return err
				}
				if len(bytes.TrimRight(line, "\r\n")) == 0 {
					return nil
				}
			}
		}
		if _, err := br.Discard(int(size) + 2); err != nil {
			return err
		}
	}
}
