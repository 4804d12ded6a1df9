package loadgen

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"
)

// HandshakeConfig describes a TLS handshake run: each connection of the
// pool repeatedly connects, completes a TLS 1.3 handshake, sends one GET
// with Connection: close, reads the answer and closes (closed loop).
type HandshakeConfig struct {
	// URL is the https:// URL requested. Required.
	URL string
	// Connections is the number of concurrent clients. Zero means 100.
	Connections int
	// Duration is how long the clients run; it must be positive.
	Duration time.Duration
	// Resume shares a session cache between the clients, so that every
	// handshake after the first resumes a session (TLS 1.3 PSK from a
	// session ticket) when the server allows it.
	Resume bool
	// Timeout bounds each connection. Zero means 5s.
	Timeout time.Duration
}

// HandshakeResult is what a handshake run measured.
type HandshakeResult struct {
	Format      string  `json:"format"`
	URL         string  `json:"url"`
	Connections int     `json:"connections"`
	DurationS   float64 `json:"duration_s"`
	Resume      bool    `json:"resume"`
	// Handshakes counts connections that completed the handshake and got
	// an answer; Resumed those of them that resumed a session.
	Handshakes uint64    `json:"handshakes"`
	Resumed    uint64    `json:"resumed"`
	PerSecond  float64   `json:"handshakes_per_s"`
	Errors     Errors    `json:"errors"`
	Latency    LatencyMS `json:"latency_ms"`
}

// FormatHandshake is the Format of HandshakeResult.
const FormatHandshake = "helios-tlsload/1"

// clientTLS is the client side every TLS tool here uses: TLS 1.3 with
// X25519 only (the curve nginx and HAProxy are set to; Go would otherwise
// offer a post-quantum hybrid that OpenSSL 3.0 servers do not have, and
// compare unlike work), no certificate verification (the benchmarks' is
// self-signed), and the protocol given by ALPN.
func clientTLS(host string, alpn ...string) *tls.Config {
	return &tls.Config{
		InsecureSkipVerify: true,
		ServerName:         host,
		MinVersion:         tls.VersionTLS13,
		CurvePreferences:   []tls.CurveID{tls.X25519},
		NextProtos:         alpn,
	}
}

// RunHandshakes runs TLS handshakes as cfg says. It fails only on an
// invalid configuration.
func RunHandshakes(ctx context.Context, cfg HandshakeConfig) (*HandshakeResult, error) {
	u, err := parseURL(cfg.URL, "https")
	if err != nil {
		return nil, err
	}
	if cfg.Duration <= 0 {
		return nil, errors.New("duration must be positive")
	}
	cfg.Connections = cmpOr(cfg.Connections, 100)
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	tc := clientTLS(u.Hostname(), "http/1.1")
	if cfg.Resume {
		tc.ClientSessionCache = tls.NewLRUClientSessionCache(4 * cfg.Connections)
	}
	req := []byte("GET " + u.RequestURI() + " HTTP/1.1\r\nHost: " + u.Host + "\r\nConnection: close\r\n\r\n")
	var resumed atomic.Uint64
	all, errs, elapsed := closedLoop(cfg.Connections, cfg.Duration, func(w *worker, end time.Time) {
		br := bufio.NewReaderSize(nil, 16<<10)
		for time.Now().Before(end) && ctx.Err() == nil {
			began := time.Now()
			did, kind, err := handshakeOnce(u.Host, tc, req, br, cfg.Timeout)
			if err != nil {
				w.errs[kind]++
				continue
			}
			w.hist.Record(time.Since(began))
			if did {
				resumed.Add(1)
			}
		}
	})
	res := &HandshakeResult{Format: FormatHandshake, URL: cfg.URL, Connections: cfg.Connections, DurationS: cfg.Duration.Seconds(),
		Resume: cfg.Resume, Errors: errs}
	res.Handshakes = all.Count()
	res.Resumed = resumed.Load()
	res.PerSecond = float64(res.Handshakes) / elapsed.Seconds()
	res.Latency = summarize(&all)
	return res, nil
}

// handshakeOnce connects, handshakes, sends req and reads the answer. It
// reports whether the session was resumed.
func handshakeOnce(addr string, tc *tls.Config, req []byte, br *bufio.Reader, timeout time.Duration) (bool, errorKind, error) {
	d := net.Dialer{Timeout: timeout}
	raw, err := d.Dial("tcp", addr)
	if err != nil {
		return false, classify(err, errConnect), err
	}
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(timeout))
	c := tls.Client(raw, tc)
	if err := c.Handshake(); err != nil {
		return false, classify(err, errConnect), err
	}
	if _, err := c.Write(req); err != nil {
		return false, classify(err, errWrite), err
	}
	br.Reset(c)
	status, _, err := readResponse(br)
	if err != nil && !errors.Is(err, io.EOF) {
		return false, classify(err, errRead), err
	}
	if status == 0 || status >= 400 {
		return false, errStatus, fmt.Errorf("status %d", status)
	}
	return c.ConnectionState().DidResume, 0, nil
}
