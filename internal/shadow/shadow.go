// Package shadow sends the copies of requests that routes mirror
// (routes[].mirror) to their shadow backends, away from the event loops,
// and drops the answers.
//
// Why not on the loops: the engine's backend side (internal/engine's
// lupconn) is driven at every step, connecting, TLS, HTTP/2 streams,
// deadlines, the connection cap's queue, by the client connection it
// serves; a request with no client would be a third role threaded
// through all of it. Copies are a sampled side channel whose cost only
// copied requests pay, so they go through Go's net/http client instead,
// on a pool of goroutines: the loop makes the copy (its bytes copied
// once into a reused buffer, proxy.Mirror) and hands it over without
// waiting; a worker sends it and reads the answer to its end. The cost
// is honest and bounded: a worker goroutine and a connection per copy in
// flight, at most the routes' max_inflight in all, net/http's
// allocations per copy on the workers, and connection pools to the
// shadows apart from the engine's.
package shadow

import (
	"bytes"
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

	"github.com/helios-lb/helios/internal/wire"
)

// Pool sends copies on worker goroutines: a copy goes to a worker that
// waits for one, or to a new worker when none waits, so Mirror never
// blocks and never refuses (the pipeline bounds the copies in flight).
// A worker with nothing to do for IdleTimeout ends, so there are at most
// twice as many workers as there were copies in flight at the busiest
// moment of the last IdleTimeout (a copy that comes while the worker of
// the last one is on its way back to wait gets a new one). Pool
// implements wire.Mirrorer.
type Pool struct {
	ctx    context.Context
	cancel context.CancelFunc
	// tasks hands copies to waiting workers; unbuffered, so a send
	// succeeds only when one waits.
	tasks chan *wire.MirrorRequest
	idle  time.Duration

	mu      sync.Mutex
	closed  bool
	workers int
	wg      sync.WaitGroup
	// transports are the HTTP clients of the shadows, by what they
	// connect with.
	transports map[transportKey]*http.Transport
}

// IdleTimeout is how long a worker waits for another copy before it
// ends.
const IdleTimeout = 30 * time.Second

// New returns a pool with no workers yet.
func New() *Pool {
	ctx, cancel := context.WithCancel(context.Background())
	return &Pool{ctx: ctx, cancel: cancel, tasks: make(chan *wire.MirrorRequest), idle: IdleTimeout, transports: make(map[transportKey]*http.Transport)}
}

// Mirror hands r to a worker (wire.Mirrorer). It never blocks: when no
// worker waits, it starts one. After Close, r is done at once with
// wire.ErrMirrorClosed.
func (p *Pool) Mirror(r *wire.MirrorRequest) {
	select {
	case p.tasks <- r:
		return
	default:
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		r.Done(r, 0, wire.ErrMirrorClosed)
		return
	}
	p.workers++
	p.wg.Add(1)
	p.mu.Unlock()
	go p.work(r)
}

// Workers returns the number of worker goroutines now.
func (p *Pool) Workers() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.workers
}

// work sends r, then the copies handed to it, until it has waited
// IdleTimeout for one or the pool closes.
func (p *Pool) work(r *wire.MirrorRequest) {
	defer p.wg.Done()
	idle := time.NewTimer(p.idle)
	defer idle.Stop()
	for {
		p.send(r)
		idle.Reset(p.idle)
		select {
		case r = <-p.tasks:
			continue
		case <-idle.C:
		case <-p.ctx.Done():
		}
		p.mu.Lock()
		p.workers--
		p.mu.Unlock()
		return
	}
}

// send sends one copy and reads its answer to the end, under its
// timeout, then reports it done.
func (p *Pool) send(r *wire.MirrorRequest) {
	status, err := p.roundTrip(r)
	r.Done(r, status, err)
}

func (p *Pool) roundTrip(r *wire.MirrorRequest) (int, error) {
	if p.ctx.Err() != nil {
		return 0, wire.ErrMirrorClosed
	}
	ctx, cancel := context.WithTimeout(p.ctx, r.Timeout)
	defer cancel()
	req, err := newRequest(ctx, r)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", wire.ErrBadRequest, err)
	}
	resp, err := p.transport(r.Transport).RoundTrip(req)
	if err != nil {
		return 0, classify(ctx, err)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return resp.StatusCode, classify(ctx, err)
	}
	return resp.StatusCode, nil
}

// classify wraps err in the wire error that says whose it was.
func classify(ctx context.Context, err error) error {
	var op *net.OpError
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("%w: %w", wire.ErrTimeout, err)
	case errors.As(err, &op) && op.Op == "dial":
		return fmt.Errorf("%w: %w", wire.ErrConnect, err)
	}
	return fmt.Errorf("%w: %w", wire.ErrBackend, err)
}

// newRequest makes the net/http request of a copy.
func newRequest(ctx context.Context, r *wire.MirrorRequest) (*http.Request, error) {
	u, err := url.ParseRequestURI(string(r.Target))
	if err != nil {
		return nil, err
	}
	u.Scheme, u.Host = "http", r.Backend.Addr
	if r.Transport.Settings.TLS {
		u.Scheme = "https"
	}
	var body io.Reader = http.NoBody
	if len(r.Body) > 0 {
		body = bytes.NewReader(r.Body)
	}
	req, err := http.NewRequestWithContext(ctx, string(r.Method), u.String(), body)
	if err != nil {
		return nil, err
	}
	req.Host = string(r.Authority)
	req.ContentLength = int64(len(r.Body))
	for _, f := range r.Header.Fields {
		if !f.Drop {
			req.Header.Add(string(f.Name), string(f.Value))
		}
	}
	return req, nil
}

// transportKey is what a shadow's connections are pooled by: a reload
// that changes none of it keeps them.
type transportKey struct {
	name     string
	settings wire.TransportSettings
	tls      wire.ClientTLS
}

// transport returns the client for t, made on first use; one for the
// same upstream made with other settings is let go (its idle
// connections closed).
func (p *Pool) transport(t *wire.Transport) *http.Transport {
	k := transportKey{name: t.Name, settings: t.Settings, tls: t.TLS}
	p.mu.Lock()
	defer p.mu.Unlock()
	if tr := p.transports[k]; tr != nil {
		return tr
	}
	for old, tr := range p.transports {
		if old.name == k.name {
			tr.CloseIdleConnections()
			delete(p.transports, old)
		}
	}
	tr := newTransport(t)
	p.transports[k] = tr
	return tr
}

// newTransport returns a net/http transport that connects as t says:
// its timeouts and pool size, TLS with its configuration, HTTP/2 over
// TLS (h2) or cleartext (h2c). It never uses a proxy from the
// environment, follows no redirect (RoundTrip) and asks for no
// compression the client did not.
func newTransport(t *wire.Transport) *http.Transport {
	s := t.Settings
	d := &net.Dialer{Timeout: s.DialTimeout}
	tr := &http.Transport{
		DialContext:           d.DialContext,
		MaxIdleConnsPerHost:   s.MaxIdlePerBackend,
		IdleConnTimeout:       s.IdleTimeout,
		ResponseHeaderTimeout: s.ResponseHeaderTimeout,
		DisableCompression:    true,
		DisableKeepAlives:     s.MaxIdlePerBackend == 0,
	}
	if s.MaxConnsPerBackend > 0 {
		tr.MaxConnsPerHost = s.MaxConnsPerBackend
	}
	protos := new(http.Protocols)
	switch s.Protocol {
	case wire.ProtoH2C:
		protos.SetUnencryptedHTTP2(true)
	case wire.ProtoH2:
		protos.SetHTTP2(true)
	default:
		protos.SetHTTP1(true)
	}
	tr.Protocols = protos
	if s.TLS && t.TLS != nil {
		ct := t.TLS
		tr.ForceAttemptHTTP2 = s.Protocol == wire.ProtoH2
		tr.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			raw, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			tc := tls.Client(raw, ct.Config(addr))
			if err := tc.HandshakeContext(ctx); err != nil {
				raw.Close()
				return nil, err
			}
			if err := ct.CheckALPN(tc.ConnectionState()); err != nil {
				tc.Close()
				return nil, err
			}
			return tc, nil
		}
	}
	return tr
}

// Close stops the workers (the copies they send are cut short), lets
// the shadows' idle connections go, and makes later copies done at once.
// It waits for the workers to end.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	p.mu.Lock()
	for k, tr := range p.transports {
		tr.CloseIdleConnections()
		delete(p.transports, k)
	}
	p.mu.Unlock()
}
