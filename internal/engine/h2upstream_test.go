package engine

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/helios-lb/helios/internal/netpoll"
	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/wire"
)

// HTTP/2 to backends (transport protocol h2c, h2upstream.go), on every driver
// (run), from HTTP/1.1 and HTTP/2 clients. golang.org/x/net/http2's
// server shows what a real backend gets and does; h2Peer, a backend that
// reads and writes frames itself, does what a real one cannot be made to
// do (refuse a stream, GOAWAY below a stream, answer with HEADERS alone,
// break its connection mid-answer, leave a PING unanswered).

// h2upTo is one h2c backend at addr with the default transport options.
func h2upTo(addr string) loopConfig {
	cfg := loopTo(addr)
	cfg.to.Protocol = wire.ProtoH2C
	return cfg
}

// startH2UpProxy starts a loopProxy whose listener serves HTTP/1.1 and
// h2c (startH2Proxy), with the checks of the loops' backend HTTP/2
// bookkeeping: once the test's clients have closed their connections no
// stream is left open on a backend connection and the bookkeeping is
// consistent (checkInvariants, h2upQuiescentErrors); once the engine has closed, no
// backend HTTP/2 connection is left and every pool counts none open.
func startH2UpProxy(t *testing.T, k netpoll.Kind, cfg loopConfig) *loopProxy {
	t.Helper()
	var p *loopProxy
	// Registered before the proxy's own cleanup, so it runs after it:
	// after Engine.Close, which waits for the loops to end (so their
	// state may be read here).
	t.Cleanup(func() {
		if p == nil {
			return
		}
		for _, l := range p.eng.loops {
			if n := len(l.h2ups); n != 0 {
				t.Errorf("loop %d: got %d backend HTTP/2 connections listed after the engine closed, want 0", l.id, n)
			}
			for key, pl := range l.pools {
				if len(pl.h2) != 0 || pl.open != 0 {
					t.Errorf("loop %d, pool %s: got %d HTTP/2 connections pooled and %d counted open after the engine closed, want 0 and 0",
						l.id, key.addr, len(pl.h2), pl.open)
				}
			}
		}
	})
	p, _ = startH2Proxy(t, k, cfg, false)
	// Registered after the proxy's cleanups and before the clients':
	// runs once the clients have closed, before the proxy stops.
	t.Cleanup(func() {
		waitFor(t, "every backend stream to end once the clients closed", func() bool { return p.backendStreams() == 0 })
		p.checkInvariants()
		p.checkLoops(t, (*loop).h2upQuiescentErrors)
	})
	return p
}

// backendStreams counts the streams open on the loops' HTTP/2
// connections to backends, and the exchanges waiting for a connection
// being set up to open theirs.
func (p *loopProxy) backendStreams() int {
	n := 0
	for _, l := range p.eng.loops {
		l.do(func() {
			for _, hu := range l.h2ups {
				n += len(hu.waiting)
				if hu.conn != nil {
					n += hu.conn.ActiveStreams()
				}
			}
		})
	}
	return n
}

// backendH2Conns counts the loops' HTTP/2 connections to backends.
func (p *loopProxy) backendH2Conns() int {
	n := 0
	for _, l := range p.eng.loops {
		l.do(func() { n += len(l.h2ups) })
	}
	return n
}

// h2upInvariantErrors checks the loop's HTTP/2 connections to backends
// and the lupconns in the stream role, for invariantErrors (own records
// who holds each buffer): each listed connection is open, registered
// under its fd and in its pool; each pool counts the connections it
// holds; every free stream-role lupconn is let go of (no stream, no
// connection, no client, no buffer) and free once; an exchange's
// stream-role lupconn is not free and is on a live connection.
func (l *loop) h2upInvariantErrors(own func(b []byte, who string)) []string {
	var errs []string
	listed := map[*h2up]bool{}
	for _, hu := range l.h2ups {
		who := fmt.Sprintf("backend HTTP/2 connection fd %d", hu.fd)
		if listed[hu] {
			errs = append(errs, who+": listed twice")
		}
		listed[hu] = true
		switch {
		case hu.closed:
			errs = append(errs, who+": closed but listed")
		case hu.fd < 0 || hu.fd >= len(l.targets) || l.targets[hu.fd] != target(hu):
			errs = append(errs, who+": not registered")
		case !slices.Contains(hu.pool.h2, hu):
			errs = append(errs, who+": not in its pool")
		}
		own(hu.rbuf, who+" read buffer")
	}
	for key, pl := range l.pools {
		if key.settings.Protocol == wire.ProtoHTTP1 {
			continue
		}
		for _, hu := range pl.h2 {
			if !listed[hu] {
				errs = append(errs, fmt.Sprintf("pool %s: holds an HTTP/2 connection the loop does not list", key.addr))
			}
		}
		if pl.open != len(pl.h2) {
			errs = append(errs, fmt.Sprintf("pool %s: got %d connections counted open, want %d (the ones it holds)", key.addr, pl.open, len(pl.h2)))
		}
	}
	free := map[*lupconn]bool{}
	for _, u := range l.freeUpStreams {
		if free[u] {
			errs = append(errs, "a stream-role backend connection is free twice")
		}
		free[u] = true
		if u.h2 == nil {
			errs = append(errs, "a free stream-role backend connection has no stream state")
			continue
		}
		if u.state != upClosed || u.client != nil || u.h2.s != nil || u.h2.hu != nil || u.rd.buf != nil || u.h2.file != nil {
			errs = append(errs, fmt.Sprintf("a free stream-role backend connection is live: state %d, client %v, stream %v, connection %v, buffer %v, file %v",
				u.state, u.client != nil, u.h2.s != nil, u.h2.hu != nil, u.rd.buf != nil, u.h2.file != nil))
		}
	}
	inUse := func(c *lconn, who string) {
		if u := c.up; u != nil && u.h2 != nil {
			if free[u] {
				errs = append(errs, who+": its stream-role backend connection is also free")
			}
			if hu := u.h2.hu; hu == nil || !listed[hu] {
				errs = append(errs, who+": its stream-role backend connection is on no live connection")
			}
		}
	}
	for c := l.conns.head; c != nil; c = c.next {
		inUse(c, fmt.Sprintf("conn fd %d", c.fd))
	}
	for c := l.streams.head; c != nil; c = c.next {
		inUse(c, "a client stream")
	}
	return errs
}

// h2upQuiescentErrors checks what holds of the loop's HTTP/2 backend
// connections once no exchange is in flight: none is still connecting,
// none has streams waiting for it or promised, no pool has requests
// queued.
func (l *loop) h2upQuiescentErrors() []string {
	var errs []string
	for _, hu := range l.h2ups {
		who := fmt.Sprintf("backend HTTP/2 connection fd %d", hu.fd)
		switch {
		case hu.connecting:
			errs = append(errs, who+": still connecting with no exchange in flight")
		case hu.conn == nil || hu.conn.Done():
			errs = append(errs, who+": its session is over but the connection is kept")
		case len(hu.waiting) != 0 || hu.opening != 0:
			errs = append(errs, fmt.Sprintf("%s: got %d streams waiting and %d promised, want 0 and 0", who, len(hu.waiting), hu.opening))
		}
	}
	for key, pl := range l.pools {
		if key.settings.Protocol != wire.ProtoHTTP1 && len(pl.queue) != 0 {
			errs = append(errs, fmt.Sprintf("pool %s: got %d requests queued, want 0", key.addr, len(pl.queue)))
		}
	}
	return errs
}

// ---- HTTP/2 backends ----

// h2cBackend is golang.org/x/net/http2's server on accepted connections
// (h2c with prior knowledge): it writes its SETTINGS as soon as it
// accepts. It counts the connections it accepted and the ones whose
// session ended.
type h2cBackend struct {
	addr    string
	accepts atomic.Int32
	closed  atomic.Int32
}

// startH2CBackend serves h on 127.0.0.1, allowing maxStreams concurrent
// streams per connection (0: x/net's default), until the test ends.
func startH2CBackend(t testing.TB, maxStreams uint32, h http.Handler) *h2cBackend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveH2C(t, ln, maxStreams, h)
}

// serveH2C is startH2CBackend on a listener of the test's.
func serveH2C(t testing.TB, ln net.Listener, maxStreams uint32, h http.Handler) *h2cBackend {
	b := &h2cBackend{addr: ln.Addr().String()}
	srv := &http2.Server{MaxConcurrentStreams: maxStreams}
	serveConns(t, ln, &b.accepts, func(nc net.Conn) {
		srv.ServeConn(nc, &http2.ServeConnOpts{Handler: h, BaseConfig: &http.Server{}})
		nc.Close()
		b.closed.Add(1)
	})
	return b
}

// h2Peer is one connection of a backend that speaks HTTP/2 frame by
// frame (startH2Peer): its SETTINGS are sent, what the proxy sends is
// read by next (SETTINGS acknowledged, request bodies credited back,
// PINGs acknowledged unless noPingAck), answers are written with
// headers, data, rst and goAway.
type h2Peer struct {
	nc net.Conn
	fr *http2.Framer
	// mu serialises writes (a test may read on one goroutine and answer
	// on another).
	mu  sync.Mutex
	enc *hpack.Encoder
	hb  bytes.Buffer
	// n numbers the backend's connections from 1 in accept order.
	n         int
	noPingAck bool
	reqs      map[uint32]*h2PeerReq
}

// h2PeerReq is a request as the peer received it.
type h2PeerReq struct {
	id     uint32
	fields []hpack.HeaderField
	body   []byte
}

// field returns the values of a request field, in order.
func (r *h2PeerReq) field(name string) []string {
	var vs []string
	for _, f := range r.fields {
		if f.Name == name {
			vs = append(vs, f.Value)
		}
	}
	return vs
}

// h2PeerEv is what next returns: a request received whole (req), a
// stream the proxy reset (reset, with its code), a PING (ping), or the
// acknowledgement of the PING the peer sends after acknowledging one
// (synced: the proxy has read everything the peer sent before it).
type h2PeerEv struct {
	req    *h2PeerReq
	reset  uint32
	code   http2.ErrCode
	ping   bool
	synced bool
}

// syncPing is the data of the peer's own PING.
var syncPing = [8]byte{'s', 'y', 'n', 'c'}

// write runs f, a write on the framer, alone.
func (pc *h2Peer) write(f func() error) error {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return f()
}

// startH2Peer starts a backend that runs serve on each connection once
// the client preface has come and the peer's SETTINGS (settings) are
// sent.
func startH2Peer(t testing.TB, settings []http2.Setting, serve func(pc *h2Peer)) *rawBackend {
	var n atomic.Int32
	return startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
		pc := &h2Peer{nc: nc, n: int(n.Add(1)), reqs: map[uint32]*h2PeerReq{}}
		preface := make([]byte, len(http2.ClientPreface))
		if _, err := io.ReadFull(br, preface); err != nil || string(preface) != http2.ClientPreface {
			return
		}
		pc.fr = http2.NewFramer(nc, br)
		pc.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
		pc.enc = hpack.NewEncoder(&pc.hb)
		if pc.write(func() error { return pc.fr.WriteSettings(settings...) }) != nil {
			return
		}
		serve(pc)
	})
}

// next returns the next event of interest; an error when the
// connection ends (io.EOF when the proxy closed it).
func (pc *h2Peer) next() (h2PeerEv, error) {
	for {
		f, err := pc.fr.ReadFrame()
		if err != nil {
			return h2PeerEv{}, err
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				pc.write(pc.fr.WriteSettingsAck)
			}
		case *http2.PingFrame:
			if f.IsAck() {
				if f.Data == syncPing {
					return h2PeerEv{synced: true}, nil
				}
				continue
			}
			if !pc.noPingAck {
				pc.write(func() error {
					pc.fr.WritePing(true, f.Data)
					return pc.fr.WritePing(false, syncPing)
				})
			}
			return h2PeerEv{ping: true}, nil
		case *http2.MetaHeadersFrame:
			r := &h2PeerReq{id: f.StreamID, fields: f.Fields}
			if f.StreamEnded() {
				return h2PeerEv{req: r}, nil
			}
			pc.reqs[f.StreamID] = r
		case *http2.DataFrame:
			r := pc.reqs[f.StreamID]
			if n := uint32(len(f.Data())); n > 0 {
				pc.write(func() error {
					pc.fr.WriteWindowUpdate(0, n)
					if !f.StreamEnded() {
						return pc.fr.WriteWindowUpdate(f.StreamID, n)
					}
					return nil
				})
			}
			if r == nil {
				continue
			}
			r.body = append(r.body, f.Data()...)
			if f.StreamEnded() {
				delete(pc.reqs, f.StreamID)
				return h2PeerEv{req: r}, nil
			}
		case *http2.RSTStreamFrame:
			delete(pc.reqs, f.StreamID)
			return h2PeerEv{reset: f.StreamID, code: f.ErrCode}, nil
		case *http2.GoAwayFrame:
			return h2PeerEv{}, fmt.Errorf("got GOAWAY %v", f.ErrCode)
		}
	}
}

// eachPeerRequest runs f for each request the peer receives whole, until
// its connection ends.
func eachPeerRequest(pc *h2Peer, f func(req *h2PeerReq)) {
	for {
		ev, err := pc.next()
		if err != nil {
			return
		}
		if ev.req != nil {
			f(ev.req)
		}
	}
}

// headers writes a header block on stream id; fields are name, value
// pairs.
func (pc *h2Peer) headers(id uint32, end bool, fields ...string) error {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.hb.Reset()
	for i := 0; i+1 < len(fields); i += 2 {
		pc.enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return pc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: pc.hb.Bytes(), EndStream: end, EndHeaders: true})
}

// data writes p on stream id in frames of the default size at most.
func (pc *h2Peer) data(id uint32, end bool, p []byte) error {
	for {
		n := min(len(p), 16384)
		last := n == len(p)
		if err := pc.write(func() error { return pc.fr.WriteData(id, end && last, p[:n]) }); err != nil {
			return err
		}
		p = p[n:]
		if last {
			return nil
		}
	}
}

// sync sends the peer's PING, whose acknowledgement (next: synced) says
// the proxy has read everything the peer sent before it.
func (pc *h2Peer) sync() error {
	return pc.write(func() error { return pc.fr.WritePing(false, syncPing) })
}

// rst resets stream id with code.
func (pc *h2Peer) rst(id uint32, code http2.ErrCode) error {
	return pc.write(func() error { return pc.fr.WriteRSTStream(id, code) })
}

// goAway sends GOAWAY naming last as the last stream processed.
func (pc *h2Peer) goAway(last uint32, code http2.ErrCode) error {
	return pc.write(func() error { return pc.fr.WriteGoAway(last, code, nil) })
}

// cut ends the connection from the peer's side: FIN first, then, once
// the proxy has closed its side (or the deadline passed), the socket.
func (pc *h2Peer) cut() {
	pc.nc.(*net.TCPConn).CloseWrite()
	pc.nc.SetReadDeadline(time.Now().Add(testTimeout))
	io.Copy(io.Discard, pc.nc)
	pc.nc.Close()
}

// answer answers stream id with 200 and body, of declared length.
func (pc *h2Peer) answer(id uint32, body string) error {
	if err := pc.headers(id, false, ":status", "200", "content-length", strconv.Itoa(len(body))); err != nil {
		return err
	}
	return pc.data(id, true, []byte(body))
}

// ---- clients ----

// upClient is a client of the proxy: HTTP/1.1 (net/http's transport) or
// HTTP/2 (x/net/http2's, h2c with prior knowledge).
type upClient struct {
	h2   bool
	base string
	rt   http.RoundTripper
	// dials counts the HTTP/2 client's connections.
	dials *atomic.Int32
}

// upClientKinds are the clients every test here sends from.
var upClientKinds = []struct {
	name string
	h2   bool
}{{"http1", false}, {"h2c", true}}

func newUpClient(t testing.TB, addr string, h2 bool) *upClient {
	if h2 {
		c := newH2Client(t, addr, nil)
		return &upClient{h2: true, base: c.base, rt: c.tr, dials: &c.dials}
	}
	tr := &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	return &upClient{base: "http://" + addr, rt: tr}
}

// do sends a request and reads its answer whole. A body sent chunked
// has no declared length (HTTP/1.1 chunked, HTTP/2 without
// content-length); a "Host" entry of hdr is the request's host.
func (c *upClient) do(ctx context.Context, method, path string, body []byte, chunked bool, hdr http.Header) (clientResp, error) {
	ctx, cancel := context.WithTimeout(ctx, testTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
		if chunked {
			rd = struct{ io.Reader }{rd} // no length to find
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return clientResp{}, err
	}
	if chunked {
		req.ContentLength = -1
	}
	for k, vs := range hdr {
		if k == "Host" {
			req.Host = vs[0]
			continue
		}
		req.Header[k] = vs
	}
	return roundTrip(c.rt, req)
}

// get sends a GET and fails the test if it fails.
func (c *upClient) get(t testing.TB, path string) clientResp {
	t.Helper()
	r, err := c.do(context.Background(), "GET", path, nil, false, nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return r
}

// recv waits for a value on ch, failing the test after testTimeout.
func recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testTimeout):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}

// checkRecord checks the next record's status and error (nil: none).
func checkRecord(t testing.TB, p *loopProxy, status int, want error) proxy.Record {
	t.Helper()
	rec := p.nextRec(t)
	if status != 0 && rec.Status != status {
		t.Errorf("record: got status %d, want %d", rec.Status, status)
	}
	if want == nil && rec.Err != nil || want != nil && !errors.Is(rec.Err, want) {
		t.Errorf("record: got error %v, want %v", rec.Err, want)
	}
	return rec
}

// ---- tests ----

// h2upSeen is what the h2c backend saw of a request.
type h2upSeen struct {
	method, proto, host, uri string
	header                   http.Header
	length                   int64
	body                     []byte
}

// TestH2UpProxy forwards GETs and POSTs (bodies of several MiB, with and
// without a declared length) from HTTP/1.1 and HTTP/2 clients to an h2c
// backend: the backend gets an HTTP/2 request whose :authority is the
// client's Host, with X-Forwarded-For and -Proto, without hop-by-hop
// fields, with te: trailers only when the client sent TE: trailers, and
