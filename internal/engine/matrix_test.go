package engine

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/h2"
	"github.com/helios-lb/helios/internal/netpoll"
	"github.com/helios-lb/helios/internal/wire"
)

// The protocol matrix: one test body, every pairing of the protocol a
// client speaks to Helios with the protocol Helios speaks to the backend,
// on every poller — the way net/http's clientserver_test.go runs each
// test in every mode. A behaviour that only some protocols have says so
// with a filter (onlyClients, onlyBackends), never with a copy of the
// test.

// clientProto is what a client speaks to Helios.
type clientProto string

// The client protocols.
const (
	clientH1    clientProto = "h1"    // HTTP/1.1 in the clear
	clientH1TLS clientProto = "h1tls" // HTTP/1.1 over TLS
	clientH2    clientProto = "h2"    // HTTP/2 over TLS (ALPN)
	clientH2C   clientProto = "h2c"   // HTTP/2 in the clear, prior knowledge
)

// backendProto is what Helios speaks to the backend.
type backendProto string

// The backend protocols.
const (
	backendH1    backendProto = "h1"    // HTTP/1.1 in the clear
	backendH1TLS backendProto = "h1tls" // HTTP/1.1 over TLS
	backendH2C   backendProto = "h2c"   // HTTP/2 in the clear (transport protocol h2c)
	backendH2    backendProto = "h2"    // HTTP/2 over TLS (transport protocol h2)
)

var (
	allClients  = []clientProto{clientH1, clientH1TLS, clientH2, clientH2C}
	allBackends = []backendProto{backendH1, backendH1TLS, backendH2C, backendH2}
)

// http2 reports whether the client speaks HTTP/2.
func (c clientProto) http2() bool { return c == clientH2 || c == clientH2C }

// tls reports whether the client speaks TLS.
func (c clientProto) tls() bool { return c == clientH1TLS || c == clientH2 }

// http2 reports whether Helios speaks HTTP/2 to the backend.
func (b backendProto) http2() bool { return b == backendH2 || b == backendH2C }

// tls reports whether Helios speaks TLS to the backend.
func (b backendProto) tls() bool { return b == backendH1TLS || b == backendH2 }

// mode is one cell of the matrix.
type mode struct {
	poller  netpoll.Kind
	client  clientProto
	backend backendProto
}

func (m mode) String() string { return fmt.Sprintf("%s/%s-%s", m.poller, m.client, m.backend) }

// matrixOpts narrow the matrix and shape the proxy.
type matrixOpts struct {
	clients  []clientProto
	backends []backendProto
	// cfg is the proxy's configuration; the matrix sets its backend,
	// transport protocol and TLS, and its listener's protocols.
	cfg loopConfig
	// parallel runs the cells at once (for tests that mostly wait).
	parallel bool
}

// matrixOpt changes matrixOpts.
type matrixOpt func(*matrixOpts)

// onlyClients runs the cells with these client protocols.
func onlyClients(cs ...clientProto) matrixOpt { return func(o *matrixOpts) { o.clients = cs } }

// onlyBackends runs the cells with these backend protocols.
func onlyBackends(bs ...backendProto) matrixOpt { return func(o *matrixOpts) { o.backends = bs } }

// inParallel runs the cells at once: for a test that mostly waits (on
// timeouts), whose cells share nothing.
func inParallel() matrixOpt { return func(o *matrixOpts) { o.parallel = true } }

// withConfig starts the proxies from cfg.
func withConfig(cfg loopConfig) matrixOpt { return func(o *matrixOpts) { o.cfg = cfg } }

// cell is a running cell: a backend speaking the cell's backend
// protocol behind a proxy whose listener takes the cell's client
// protocol, and a client that speaks it.
type cell struct {
	mode
	t     testing.TB
	p     *loopProxy
	be    *matrixBackend // nil in a cell started by startFront
	tr    *http.Transport
	base  string
	front *testTLS
	// dials counts the client's connections to the proxy.
	dials atomic.Int32
	// h2stats counts what the proxy's HTTP/2 listener saw (the streams
	// its clients reset, say), unless the test's configuration brought
	// its own.
	h2stats *h2.Stats
}

// matrix runs f in every cell the options leave, as subtests named
// poller/client-backend.
func matrix(t *testing.T, f func(t *testing.T, c *cell), opts ...matrixOpt) {
	modes(t, func(t *testing.T, m mode, o matrixOpts) { f(t, startCell(t, m, o.cfg)) }, opts...)
}

// modes runs f in every mode the options leave, as subtests named
// poller/client-backend, starting nothing: for a test whose backend is
// its own (scripted to fail in ways a real server is not), which starts
// the rest of its cell with startFront.
func modes(t *testing.T, f func(t *testing.T, m mode, o matrixOpts), opts ...matrixOpt) {
	o := matrixOpts{clients: allClients, backends: allBackends}
	for _, opt := range opts {
		opt(&o)
	}
	for _, k := range pollers {
		for _, cp := range o.clients {
			for _, bp := range o.backends {
				m := mode{poller: k, client: cp, backend: bp}
				t.Run(m.String(), func(t *testing.T) {
					if o.parallel {
						t.Parallel()
					}
					f(t, m, o)
				})
			}
		}
	}
}

// startCell starts a cell's backend, proxy and client; all stop when the
// test ends.
func startCell(t testing.TB, m mode, cfg loopConfig) *cell {
	t.Helper()
	be := startMatrixBackend(t, m.backend)
	cfg.backends = []string{be.addr}
	if m.backend.tls() {
		cfg.clientTLS = &matrixClientTLS{roots: be.roots, h2: m.backend.http2()}
	}
	c := startFront(t, m, cfg)
	c.be = be
	return c
}

// startFront starts a cell's proxy, forwarding as cfg says (its backends
// set by the caller, and for a TLS backend protocol its clientTLS), and
// its client; both stop when the test ends. The cell's backend protocol
// sets the transport's protocol and TLS.
func startFront(t testing.TB, m mode, cfg loopConfig) *cell {
	t.Helper()
	c := &cell{mode: m, t: t}
	if cfg.to == (wire.TransportSettings{}) {
		cfg.to = defaultTransport
	}
	switch m.backend {
	case backendH2C:
		cfg.to.Protocol = wire.ProtoH2C
	case backendH2:
		cfg.to.Protocol = wire.ProtoH2
	}
	if m.backend.tls() {
		if cfg.clientTLS == nil {
			t.Fatalf("%s: a TLS backend protocol without the client TLS to reach it", m)
		}
		cfg.to.TLS = true
	}
	if cfg.opts.HTTP2.Stats == nil {
		cfg.opts.HTTP2.Stats = &h2.Stats{}
	}
	c.h2stats = cfg.opts.HTTP2.Stats
	if m.client.tls() {
		c.front = h2TLS(t)
		cfg.opts.TLS = c.front
	} else {
		cfg.opts.H2C = true
	}
	if m.client.http2() || m.backend.http2() {
		c.p, _ = startH2UpProxyWith(t, m.poller, cfg)
	} else {
		c.p = startLoopProxy(t, m.poller, cfg)
	}
	c.tr = &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 16}
	c.tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c.dials.Add(1)
		d := net.Dialer{Timeout: testTimeout}
		return d.DialContext(ctx, network, addr)
	}
	c.tr.Protocols = new(http.Protocols)
	switch m.client {
	case clientH1:
		c.tr.Protocols.SetHTTP1(true)
	case clientH1TLS:
		c.tr.Protocols.SetHTTP1(true)
	case clientH2:
		c.tr.Protocols.SetHTTP2(true)
	case clientH2C:
		c.tr.Protocols.SetUnencryptedHTTP2(true)
	}
	if m.client.tls() {
		c.tr.TLSClientConfig = &tls.Config{RootCAs: c.front.pool, ServerName: "localhost"}
		c.base = "https://" + c.p.addr
	} else {
		c.base = "http://" + c.p.addr
	}
	t.Cleanup(c.tr.CloseIdleConnections)
	return c
}

// startFrontTLS starts a cell's proxy as startFront does, for a test
// that brings its own client (dialH2Raw's frames, newH2Client): it
// returns the proxy and its listener's TLS (nil for a client protocol in
// the clear), which that client trusts.
func startFrontTLS(t testing.TB, m mode, cfg loopConfig) (*loopProxy, *testTLS) {
	t.Helper()
	c := startFront(t, m, cfg)
	return c.p, c.front
}

// startH2UpProxyWith starts a proxy with the HTTP/2 bookkeeping checks
// (startH2UpProxy) whose listener is configured by cfg as given.
func startH2UpProxyWith(t testing.TB, k netpoll.Kind, cfg loopConfig) (*loopProxy, *testTLS) {
	t.Helper()
	p := startLoopProxy(t, k, cfg)
	t.Cleanup(func() {
		waitFor(t, "every stream to end once its connection closed", func() bool { return p.openStreams() == 0 })
		waitFor(t, "every backend stream to end once the clients closed", func() bool { return p.backendStreams() == 0 })
		p.checkInvariants()
	})
	return p, nil
}

// clientResp is an answer a client of the proxy read whole, body and
// trailers included: a matrix cell's, an h2Client's or an upClient's.
type clientResp struct {
	status  int
	proto   string
	header  http.Header
	trailer http.Header
	body    string
	length  int64
}

// do sends req (its URL a path) and reads the answer whole, checking that
// it came over the cell's client protocol.
func (c *cell) do(req *http.Request) (clientResp, error) {
	c.t.Helper()
	return c.doIn(c.t, req)
}

// doIn is do reporting to t (a fuzz target's, say, rather than the
// cell's).
func (c *cell) doIn(t testing.TB, req *http.Request) (clientResp, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(req.Context(), testTimeout)
	defer cancel()
	u := c.base + req.URL.String()
	r2, err := http.NewRequestWithContext(ctx, req.Method, u, req.Body)
	if err != nil {
		return clientResp{}, err
	}
	r2.Header, r2.Trailer, r2.ContentLength, r2.Host = req.Header, req.Trailer, req.ContentLength, req.Host
	out, err := roundTrip(c.tr, r2)
	if want := c.client.protoName(); out.proto != "" && out.proto != want {
		t.Errorf("answer came over %s, want %s", out.proto, want)
	}
	return out, err
}

// raw dials the cell's proxy with a client that reads and writes bytes
// (over TLS for a TLS client protocol).
func (c *cell) raw(t testing.TB) *rawClient {
	t.Helper()
	if c.front != nil {
		return dialTLS(t, c.p.addr, c.front)
	}
	return dialRaw(t, c.p.addr)
}

// roundTrip sends req on rt and reads the answer whole; err is what
// failed (the answer as far as it came with it).
func roundTrip(rt http.RoundTripper, req *http.Request) (clientResp, error) {
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return clientResp{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return clientResp{status: resp.StatusCode, proto: resp.Proto, header: resp.Header, trailer: resp.Trailer, body: string(b), length: resp.ContentLength}, err
}

// get sends a GET for path.
func (c *cell) get(path string, hdr http.Header) (clientResp, error) {
	req, _ := http.NewRequest("GET", path, nil)
	if hdr != nil {
		req.Header = hdr
	}
	return c.do(req)
}

// protoName is the protocol as an answer's Proto names it.
func (c clientProto) protoName() string {
	if c.http2() {
		return "HTTP/2.0"
	}
	return "HTTP/1.1"
}

// matrixBackend is a backend that speaks one backend protocol, answers
// with the handler the test sets, and records the requests it got.
type matrixBackend struct {
	addr  string
	roots *x509.CertPool
	srv   *httptest.Server
	proto backendProto
	// accepts and closed count the connections the backend accepted and
	// the ones it has seen closed.
	accepts, closed atomic.Int32

	mu      sync.Mutex
	handler http.HandlerFunc
	seen    []seenRequest
}

// seenRequest is what a matrix backend recorded of a request.
type seenRequest struct {
	method, uri, host, proto string
	tls                      bool
	header                   http.Header
	body                     string
	trailer                  http.Header
	length                   int64
	te                       []string // the transfer codings (HTTP/1.1)
}

func startMatrixBackend(t testing.TB, proto backendProto) *matrixBackend {
	t.Helper()
	b := &matrixBackend{proto: proto}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s := seenRequest{method: r.Method, uri: r.RequestURI, host: r.Host, proto: r.Proto, tls: r.TLS != nil,
			header: r.Header.Clone(), body: string(body), trailer: r.Trailer.Clone(), length: r.ContentLength, te: r.TransferEncoding}
		b.mu.Lock()
		b.seen = append(b.seen, s)
		hf := b.handler
		b.mu.Unlock()
		if hf == nil {
			w.Header().Set("X-Backend", "matrix")
			io.WriteString(w, "hello from the backend\n")
			return
		}
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		hf(w, r)
	})
	b.srv = httptest.NewUnstartedServer(h)
	b.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			b.accepts.Add(1)
		case http.StateClosed, http.StateHijacked:
			b.closed.Add(1)
		}
	}
	b.srv.Config.Protocols = new(http.Protocols)
	switch proto {
	case backendH1, backendH1TLS:
		b.srv.Config.Protocols.SetHTTP1(true)
	case backendH2C:
		b.srv.Config.Protocols.SetUnencryptedHTTP2(true)
	case backendH2:
		b.srv.Config.Protocols.SetHTTP2(true)
	}
	if proto.tls() {
		tp := newTestTLS(t)
		b.srv.TLS = &tls.Config{Certificates: tp.cfg.Certificates}
		if proto == backendH2 {
			b.srv.TLS.NextProtos = []string{"h2"}
		} else {
			b.srv.TLS.NextProtos = []string{"http/1.1"}
		}
		b.roots = tp.pool
		b.srv.StartTLS()
	} else {
		b.srv.Start()
	}
	t.Cleanup(b.srv.Close)
	b.addr = b.srv.Listener.Addr().String()
	return b
}

// handle sets what the backend answers.
func (b *matrixBackend) handle(h http.HandlerFunc) {
	b.mu.Lock()
	b.handler = h
	b.mu.Unlock()
}

// last returns the last request the backend got, and checks that it came
// over the cell's backend protocol.
func (c *cell) last() seenRequest {
	c.t.Helper()
	return c.lastIn(c.t)
}

// lastIn is last reporting to t.
func (c *cell) lastIn(t testing.TB) seenRequest {
	t.Helper()
	b := c.be
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.seen) == 0 {
		t.Fatalf("the backend got no request")
	}
	s := b.seen[len(b.seen)-1]
	wantProto := "HTTP/1.1"
	if b.proto.http2() {
		wantProto = "HTTP/2.0"
	}
	if s.proto != wantProto || s.tls != b.proto.tls() {
		t.Errorf("the backend got %s (TLS %v), want %s (TLS %v)", s.proto, s.tls, wantProto, b.proto.tls())
	}
	return s
}

// requests returns how many requests the backend got.
func (c *cell) requests() int {
	c.be.mu.Lock()
	defer c.be.mu.Unlock()
	return len(c.be.seen)
}

// matrixClientTLS is how the engine dials a matrix backend over TLS
// (wire.ClientTLS): trusting its test CA, offering h2 or http/1.1.
type matrixClientTLS struct {
	roots *x509.CertPool
	h2    bool
}

func (m *matrixClientTLS) Config(addr string) *tls.Config {
	host, _, _ := net.SplitHostPort(addr)
	cfg := &tls.Config{RootCAs: m.roots, ServerName: host, NextProtos: []string{"http/1.1"}}
	if m.h2 {
		cfg.NextProtos = []string{"h2"}
	}
	return cfg
}

func (m *matrixClientTLS) CheckALPN(cs tls.ConnectionState) error {
	if m.h2 && cs.NegotiatedProtocol != "h2" {
		return errors.New("the backend did not agree to h2")
	}
	return nil
}

// matrixTimeout bounds the waits of matrix tests that expect something
// not to happen.
const matrixTimeout = 2 * time.Second
