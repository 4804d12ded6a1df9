// Package loadgen is an open-loop HTTP/1.1 load generator for measuring
// latency at a fixed request rate without coordinated omission.
//
// A closed-loop tool such as wrk sends a connection's next request only when
// the previous answer is in, so a server that stalls also stalls the
// measurement: the requests that would have queued during the stall are
// never sent and their wait is never recorded. Here every request has an
// intended send time fixed in advance (request i at start + i/rate), and its
// latency runs from that intended time to the last byte of the answer.
// Requests are taken in order by whichever connection is free (a shared
// schedule, as a client's connection pool would): a request that finds every
// connection busy is sent late and its wait counts against the server, as in
// wrk2. With MaxConnections above Connections the pool grows while requests
// find it busy, as a browser's or Go's http.Client's would, so that a
// low-rate latency probe measures the server and not its own queue.
//
// The generator speaks just enough HTTP/1.1 to do this cheaply: one
// preformatted request, a status line, Content-Length or chunked bodies; over
// TLS for https:// URLs (the certificate is not verified: benchmarks run
// against throwaway certificates).
package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
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
	"sync/atomic"
	"time"
)

// Config describes one run.
type Config struct {
	// URL is the http:// or https:// URL requested. Required.
	URL string
	// Rate is the total request rate per second across all connections;
	// it must be positive.
	Rate float64
	// Duration is how long requests are scheduled for; it must be
	// positive.
	Duration time.Duration
	// Connections is the number of connections the rate is spread over
	// from the start. Zero means 100.
	Connections int
	// MaxConnections lets the pool grow up to this many connections while
	// requests find every connection busy (a request more than a
	// millisecond late opens one more). Zero or less than Connections
	// means a fixed pool of Connections.
	MaxConnections int
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
	nc     net.Conn
	br     *bufio.Reader
	target *target
}

// target is where and what the connections send.
type target struct {
	addr      string
	tls       *tls.Config // nil for http://
	req       []byte
	closeEach bool
	timeout   time.Duration
}

// schedule hands out request slots in order: slot i is due at
// start + i*interval, for every i with a due time before end.
type schedule struct {
	next        atomic.Int64
	start       time.Time
	end         time.Time
	stopSending time.Time
	interval    float64 // nanoseconds
	total       int64   // slots due before end
}

// due returns the intended send time of slot i.
func (s *schedule) due(i int64) time.Time {
	return s.start.Add(time.Duration(float64(i) * s.interval))
}

// slots returns how many slots one interval apart, from start, fall
// before start+d.
func slots(d time.Duration, interval float64) int64 {
	return int64(math.Ceil(float64(d) / interval))
}

// Run sends requests as Config says and returns what it measured. It fails
// only when the configuration is invalid; request failures are counted in
// the Result. Cancelling ctx ends the run early.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("url %q: want http://host:port/path or https://", cfg.URL)
	}
	if cfg.Rate <= 0 || cfg.Duration <= 0 {
		return nil, errors.New("rate and duration must be positive")
	}
	if cfg.Connections <= 0 {
		cfg.Connections = 100
	}
	cfg.MaxConnections = max(cfg.MaxConnections, cfg.Connections)
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.Grace <= 0 {
		cfg.Grace = cfg.Timeout
	}
	tg := &target{addr: u.Host, timeout: cfg.Timeout}
	port := "80"
	if u.Scheme == "https" {
		port = "443"
		tg.tls = &tls.Config{InsecureSkipVerify: true, ServerName: u.Hostname(), NextProtos: []string{"http/1.1"}}
	}
	if u.Port() == "" {
		tg.addr = net.JoinHostPort(u.Hostname(), port)
	}
	tg.req, tg.closeEach = formatRequest(u, cfg.Headers)

	s := &schedule{start: time.Now().Add(10 * time.Millisecond), interval: float64(time.Second) / cfg.Rate}
	s.end = s.start.Add(cfg.Duration)
	s.stopSending = s.end.Add(cfg.Grace)
	s.total = slots(cfg.Duration, s.interval)

	var (
		mu      sync.Mutex
		conns   []*conn
		wg      sync.WaitGroup
		started atomic.Int64
	)
	var spawn func() bool
	spawn = func() bool {
		if n := started.Add(1); n > int64(cfg.MaxConnections) {
			started.Add(-1)
			return false
		}
		c := &conn{target: tg}
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
		wg.Go(func() { c.run(ctx, s, spawn) })
		return true
	}
	for range cfg.Connections {
		spawn()
	}
	wg.Wait()
	elapsed := time.Since(s.start)

	res := &Result{
		URL:         cfg.URL,
		Rate:        cfg.Rate,
		DurationS:   cfg.Duration.Seconds(),
		Connections: cfg.Connections,
		Scheduled:   uint64(s.total),
	}
	if cfg.MaxConnections > cfg.Connections {
		res.MaxConnections = cfg.MaxConnections
		res.ConnectionsUsed = len(conns)
	}
	var all Histogram
	for _, c := range conns {
		all.Merge(&c.hist)
		res.Sent += c.sent
		res.Errors.Connect += c.errs[errConnect]
		res.Errors.Read += c.errs[errRead]
		res.Errors.Write += c.errs[errWrite]
		res.Errors.Timeout += c.errs[errTimeout]
		res.Errors.Non2xx += c.errs[errStatus]
	}
	res.Unsent = res.Scheduled - min(res.Sent, res.Scheduled)
	res.Completed = all.Count()
	res.AchievedRPS = float64(res.Completed) / max(elapsed, cfg.Duration).Seconds()
	res.Latency = summarize(&all)
	return res, nil
}

// ms converts d to float milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// growAfter is how late a request must be before it opens one more
// connection in a pool allowed to grow: later than timer jitter.
const growAfter = time.Millisecond

// run is one connection's loop: take the next slot, wait for its due time,
// send it, for as long as slots fall before the schedule's end. A slot
// taken late means every connection was busy; grow is then asked for one
// more connection.
func (c *conn) run(ctx context.Context, s *schedule, grow func() bool) {
	defer c.close()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		i := s.next.Add(1) - 1
		if i >= s.total {
			return
		}
		due := s.due(i)
		now := time.Now()
		if now.After(s.stopSending) || ctx.Err() != nil {
			// This slot and every later one go unsent (Run counts them).
			return
		}
		if wait := due.Sub(now); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
				return
			}
		} else if -wait > growAfter {
			grow()
		}
		c.sent++
		if kind, ok := c.do(); !ok {
			c.errs[kind]++
			c.close()
			continue
		}
		c.hist.Record(time.Since(due))
		if c.target.closeEach {
			c.close()
		}
	}
}

// do sends one request and reads its answer, reporting how it failed.
// A non-2xx/3xx answer is read in full and keeps the connection.
func (c *conn) do() (errorKind, bool) {
	t := c.target
	if c.nc == nil {
		nc, err := dial(t)
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
	c.nc.SetDeadline(time.Now().Add(t.timeout))
	if _, err := c.nc.Write(t.req); err != nil {
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

// dial connects to t, with a TLS handshake for https.
func dial(t *target) (net.Conn, error) {
	d := net.Dialer{Timeout: t.timeout}
	if t.tls == nil {
		return d.Dial("tcp", t.addr)
	}
	return tls.DialWithDialer(&d, "tcp", t.addr, t.tls)
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
