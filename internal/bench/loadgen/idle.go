package loadgen

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// IdleConfig describes an idle-connection run: open Connections TLS
// connections, make one request on each (so that the server holds each
// as an idle keep-alive connection or HTTP/2 session, as after real use),
// hold them all for Hold, then close them.
type IdleConfig struct {
	// URL is the https:// URL requested once per connection. Required.
	URL string
	// Connections is how many to open. Zero means 1000.
	Connections int
	// H2 speaks HTTP/2 (ALPN h2); otherwise HTTP/1.1.
	H2 bool
	// Hold is how long the connections stay open once all are; it must be
	// positive.
	Hold time.Duration
	// Timeout bounds opening each connection and its request. Zero means
	// 10s.
	Timeout time.Duration
}

// IdleResult is what an idle-connection run did.
type IdleResult struct {
	Format      string `json:"format"`
	URL         string `json:"url"`
	Protocol    string `json:"protocol"`
	Connections int    `json:"connections"`
	// Opened counts connections that completed their request and were
	// held; Failed the others.
	Opened uint64  `json:"opened"`
	Failed uint64  `json:"failed"`
	HeldS  float64 `json:"held_s"`
	// OpenS is how long opening them all took.
	OpenS float64 `json:"open_s"`
}

// FormatIdle is the Format of IdleResult.
const FormatIdle = "helios-idle/1"

// idleDialers bounds how many connections are being opened at once, so
// that the server's accept queue never overflows.
const idleDialers = 64

// RunIdle runs an idle-connection hold as cfg says. It fails only on an
// invalid configuration.
func RunIdle(ctx context.Context, cfg IdleConfig) (*IdleResult, error) {
	u, err := parseURL(cfg.URL, "https")
	if err != nil {
		return nil, err
	}
	if cfg.Hold <= 0 {
		return nil, errors.New("hold must be positive")
	}
	cfg.Connections = cmpOr(cfg.Connections, 1000)
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	proto := "http/1.1"
	if cfg.H2 {
		proto = "h2"
	}
	tc := clientTLS(u.Hostname(), proto)
	var (
		mu      sync.Mutex
		closers []func()
		failed  uint64
		wg      sync.WaitGroup
		sem     = make(chan struct{}, idleDialers)
	)
	start := time.Now()
	for range cfg.Connections {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			closeFn, err := openIdle(ctx, u, tc, cfg.H2, cfg.Timeout)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed++
				return
			}
			closers = append(closers, closeFn)
		})
	}
	wg.Wait()
	opened := time.Since(start)
	sleepUntil(ctx, time.Now().Add(cfg.Hold))
	for _, c := range closers {
		c()
	}
	return &IdleResult{Format: FormatIdle, URL: cfg.URL, Protocol: proto, Connections: cfg.Connections,
		Opened: uint64(len(closers)), Failed: failed, HeldS: cfg.Hold.Seconds(), OpenS: opened.Seconds()}, nil
}

// openIdle opens one connection, makes one request on it and returns what
// closes it. Each connection has an http.Transport of its own, which keeps
// it idle in its pool after the request (HTTP/2 from the standard library's
// own implementation when ALPN says h2).
func openIdle(ctx context.Context, u *url.URL, tc *tls.Config, h2 bool, timeout time.Duration) (func(), error) {
	tr := &http.Transport{
		TLSClientConfig:     tc.Clone(),
		ForceAttemptHTTP2:   h2,
		MaxIdleConnsPerHost: 1,
		IdleConnTimeout:     0,
		DisableCompression:  true,
		DialContext:         (&net.Dialer{Timeout: timeout}).DialContext,
		TLSHandshakeTimeout: timeout,
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(rctx, "GET", u.String(), nil)
	resp, err := tr.RoundTrip(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		want := "HTTP/1.1"
		if h2 {
			want = "HTTP/2.0"
		}
		switch {
		case resp.StatusCode >= 400:
			err = fmt.Errorf("status %d", resp.StatusCode)
		case resp.Proto != want:
			err = fmt.Errorf("protocol %s, want %s", resp.Proto, want)
		}
	}
	if err != nil {
		tr.CloseIdleConnections()
		return nil, err
	}
	return tr.CloseIdleConnections, nil
}
