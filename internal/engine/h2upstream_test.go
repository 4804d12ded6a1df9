package engine

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/helios-lb/helios/internal/netpoll"
	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/route"
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
		for _, l := range p.eng.loops {
			var errs []string
			l.do(func() { errs = l.h2upQuiescentErrors() })
			for _, e := range errs {
				t.Errorf("loop %d: %s", l.id, e)
			}
		}
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
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			b.accepts.Add(1)
			mu.Lock()
			conns = append(conns, nc)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				srv.ServeConn(nc, &http2.ServeConnOpts{Handler: h, BaseConfig: &http.Server{}})
				nc.Close()
				b.closed.Add(1)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
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
func (c *upClient) do(ctx context.Context, method, path string, body []byte, chunked bool, hdr http.Header) (h2Resp, error) {
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
		return h2Resp{}, err
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
	resp, err := c.rt.RoundTrip(req)
	if err != nil {
		return h2Resp{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return h2Resp{status: resp.StatusCode, proto: resp.Proto, header: resp.Header, trailer: resp.Trailer, body: string(b), length: resp.ContentLength}, err
}

// get sends a GET and fails the test if it fails.
func (c *upClient) get(t testing.TB, path string) h2Resp {
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
// the body whole; the client gets the backend's status, fields and body
// (of declared length or not) whole.
func TestH2UpProxy(t *testing.T) { run(t, testH2UpProxy) }

func testH2UpProxy(t *testing.T, k netpoll.Kind) {
	big := randomBody(3<<20+17, 21)
	seen := make(chan h2upSeen, 4)
	be := startH2CBackend(t, 0, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(400)
			return
		}
		seen <- h2upSeen{method: r.Method, proto: r.Proto, host: r.Host, uri: r.RequestURI, header: r.Header.Clone(), length: r.ContentLength, body: body}
		w.Header().Add("Set-Cookie", "a=1")
		w.Header().Add("Set-Cookie", "b=2")
		w.Header().Set("X-Answer", "yes")
		switch r.URL.Path {
		case "/big":
			w.Header().Set("Content-Length", strconv.Itoa(len(big)))
			w.Write(big)
		case "/echo":
			// No declared length: more than x/net buffers before the
			// head goes.
			w.WriteHeader(201)
			w.Write(body)
		}
	}))
	tests := []struct {
		name    string
		method  string
		path    string
		body    []byte
		chunked bool
		te      bool
		status  int
		want    []byte
	}{
		{name: "GET with TE trailers", method: "GET", path: "/big?q=1", te: true, status: 200, want: big},
		{name: "POST with length", method: "POST", path: "/echo", body: big, status: 201, want: big},
		{name: "POST without length", method: "POST", path: "/echo", body: big, chunked: true, status: 201, want: big},
		{name: "POST small", method: "POST", path: "/echo", body: []byte("hello"), status: 201, want: []byte("hello")},
	}
	p := startH2UpProxy(t, k, h2upTo(be.addr))
	for _, ck := range upClientKinds {
		c := newUpClient(t, p.addr, ck.h2)
		for _, tt := range tests {
			t.Run(ck.name+"/"+tt.name, func(t *testing.T) {
				hdr := http.Header{"Host": {"front.example:8080"}, "X-Custom": {"v1"}}
				if tt.te {
					hdr["Te"] = []string{"trailers"}
				}
				if !ck.h2 {
					// Hop-by-hop fields an HTTP/2 client cannot send.
					hdr["Connection"] = []string{"X-Hop"}
					hdr["X-Hop"] = []string{"1"}
					hdr["Keep-Alive"] = []string{"timeout=5"}
					hdr["Proxy-Authorization"] = []string{"Basic eA=="}
				}
				r, err := c.do(context.Background(), tt.method, tt.path, tt.body, tt.chunked, hdr)
				if err != nil {
					t.Fatalf("got %v, want an answer", err)
				}
				s := recv(t, seen, "the request at the backend")
				if s.proto != "HTTP/2.0" || s.method != tt.method || s.host != "front.example:8080" || s.uri != tt.path {
					t.Errorf("backend: got %s %s %s (authority %s), want %s %s HTTP/2.0 (authority front.example:8080)",
						s.method, s.uri, s.proto, s.host, tt.method, tt.path)
				}
				for name, want := range map[string][]string{
					"X-Custom":          {"v1"},
					"X-Forwarded-For":   {"127.0.0.1"},
					"X-Forwarded-Proto": {"http"},
				} {
					if got := s.header[name]; !slices.Equal(got, want) {
						t.Errorf("backend's %s: got %q, want %q", name, got, want)
					}
				}
				for _, name := range []string{"Connection", "X-Hop", "Keep-Alive", "Proxy-Authorization", "Transfer-Encoding", "Upgrade", "Host"} {
					if got, ok := s.header[name]; ok {
						t.Errorf("backend's %s: got %q, want none", name, got)
					}
				}
				if got, want := s.header["Te"], map[bool][]string{true: {"trailers"}}[tt.te]; !slices.Equal(got, want) {
					t.Errorf("backend's te: got %q, want %q", got, want)
				}
				if !bytes.Equal(s.body, tt.body) {
					t.Errorf("backend's body: got %d bytes (sha256 %x), want %d (sha256 %x)", len(s.body), sha256.Sum256(s.body), len(tt.body), sha256.Sum256(tt.body))
				}
				if wantLen := int64(len(tt.body)); !tt.chunked && s.length != wantLen {
					t.Errorf("backend's content-length: got %d, want %d", s.length, wantLen)
				}
				if r.status != tt.status || r.header.Get("X-Answer") != "yes" || !slices.Equal(r.header["Set-Cookie"], []string{"a=1", "b=2"}) {
					t.Errorf("got (%d, X-Answer %q, Set-Cookie %q), want (%d, yes, [a=1 b=2])", r.status, r.header.Get("X-Answer"), r.header["Set-Cookie"], tt.status)
				}
				if r.body != string(tt.want) {
					t.Errorf("body: got %d bytes (sha256 %x), want %d (sha256 %x)", len(r.body), sha256.Sum256([]byte(r.body)), len(tt.want), sha256.Sum256(tt.want))
				}
				if tt.path == "/big?q=1" && r.length != int64(len(big)) {
					t.Errorf("content-length: got %d, want %d", r.length, len(big))
				}
				checkRecord(t, p, tt.status, nil)
			})
		}
	}
	if n := be.accepts.Load(); n != 1 {
		t.Errorf("got %d backend connections, want 1 (every stream on one)", n)
	}
}

// TestH2UpResponseTrailers has an h2c backend end its answer, of declared
// length or not, with trailers: an HTTP/2 client gets them as trailers;
// an HTTP/1.1 client gets them in the last chunk of an answer without
// length, and an answer of declared length whole.
func TestH2UpResponseTrailers(t *testing.T) { run(t, testH2UpResponseTrailers) }

func testH2UpResponseTrailers(t *testing.T, k netpoll.Kind) {
	body := randomBody(100<<10+3, 22)
	be := startH2CBackend(t, 0, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Sum, Grpc-Status")
		if r.URL.Path == "/length" {
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		}
		w.Write(body[:1000])
		w.(http.Flusher).Flush()
		w.Write(body[1000:])
		w.Header().Set("X-Sum", "42")
		w.Header().Set("Grpc-Status", "0")
	}))
	p := startH2UpProxy(t, k, h2upTo(be.addr))
	for _, ck := range upClientKinds {
		c := newUpClient(t, p.addr, ck.h2)
		for _, path := range []string{"/length", "/chunked"} {
			t.Run(ck.name+path, func(t *testing.T) {
				r := c.get(t, path)
				if r.status != 200 || r.body != string(body) {
					t.Errorf("got (%d, %d bytes), want (200, %d bytes intact)", r.status, len(r.body), len(body))
				}
				if path == "/length" && r.length != int64(len(body)) {
					t.Errorf("content-length: got %d, want %d", r.length, len(body))
				}
				wantTrailers := ck.h2 || path == "/chunked"
				for name, want := range map[string]string{"X-Sum": "42", "Grpc-Status": "0"} {
					got := r.trailer.Get(name)
					if !wantTrailers {
						want = ""
					}
					if got != want {
						t.Errorf("trailer %s: got %q, want %q", name, got, want)
					}
				}
				checkRecord(t, p, 200, nil)
			})
		}
	}
}

// TestH2UpTrailersOnly has the backend answer with HEADERS alone, ending
// the stream (gRPC's trailers-only answer): an HTTP/2 client gets one
// HEADERS frame with END_STREAM, with the backend's grpc-status, no DATA
// and no content-length; an HTTP/1.1 client gets an empty answer of
// length 0 with the fields in its head.
func TestH2UpTrailersOnly(t *testing.T) { run(t, testH2UpTrailersOnly) }

func testH2UpTrailersOnly(t *testing.T, k netpoll.Kind) {
	got := make(chan *h2PeerReq, 4)
	be := startH2Peer(t, nil, func(pc *h2Peer) {
		for {
			ev, err := pc.next()
			if err != nil {
				return
			}
			if ev.req != nil {
				got <- ev.req
				pc.headers(ev.req.id, true, ":status", "200", "content-type", "application/grpc", "grpc-status", "7", "grpc-message", "denied")
			}
		}
	})
	p := startH2UpProxy(t, k, h2upTo(be.addr))
	t.Run("h2c", func(t *testing.T) {
		c := dialH2Raw(t, p.addr, nil, 0)
		c.request(1, "POST", "/pkg.Svc/Call", false, "content-type", "application/grpc", "te", "trailers")
		if err := c.fr.WriteData(1, true, []byte{0, 0, 0, 0, 0}); err != nil {
			t.Fatal(err)
		}
		req := recv(t, got, "the request at the backend")
		if te := req.field("te"); !slices.Equal(te, []string{"trailers"}) || !bytes.Equal(req.body, []byte{0, 0, 0, 0, 0}) {
			t.Errorf("backend: got te %q and body %x, want [trailers] and 0000000000", te, req.body)
		}
		r := c.response(1)
		if r.status != "200" || r.reset || r.dataFrames != 0 || r.trailers != nil {
			t.Errorf("got (status %q, reset %v, %d DATA frames, trailers %v), want one HEADERS frame ending the stream (200, no reset, 0, none)",
				r.status, r.reset, r.dataFrames, r.trailers)
		}
		if gs, gm, cl := r.field("grpc-status"), r.field("grpc-message"), r.field("content-length"); !slices.Equal(gs, []string{"7"}) || !slices.Equal(gm, []string{"denied"}) || cl != nil {
			t.Errorf("got grpc-status %q, grpc-message %q, content-length %q, want [7], [denied], none", gs, gm, cl)
		}
		checkWireFields(t, "trailers-only answer", r.fields)
		checkRecord(t, p, 200, nil)
	})
	t.Run("http1", func(t *testing.T) {
		c := dialRaw(t, p.addr)
		c.send("GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
		recv(t, got, "the request at the backend")
		r := c.read("GET")
		if r.status != 200 || r.body != "" || r.header.Get("Content-Length") != "0" || r.header.Get("Grpc-Status") != "7" || r.chunked {
			t.Errorf("got (%d, %q, content-length %q, grpc-status %q, chunked %v), want (200, empty, 0, 7, false)",
				r.status, r.body, r.header.Get("Content-Length"), r.header.Get("Grpc-Status"), r.chunked)
		}
		checkRecord(t, p, 200, nil)
		// The connection goes on.
		c.send("GET /fixed/next HTTP/1.1\r\nHost: x\r\n\r\n")
		if r := c.read("GET"); r.status != 200 || r.body != "fixed" {
			t.Errorf("next request: got (%d, %q), want (200, fixed)", r.status, r.body)
		}
		checkRecord(t, p, 200, nil)
	})
}

// TestH2UpMultiplexing sends 30 requests at once to a backend allowing 5
// streams per connection, which holds them until all 30 are in: every
// one is answered, on several connections but far fewer than 30; the
// next 30 go on the connections the first opened.
func TestH2UpMultiplexing(t *testing.T) { run(t, testH2UpMultiplexing) }

func testH2UpMultiplexing(t *testing.T, k netpoll.Kind) {
	const (
		n          = 30
		maxStreams = 5
		// At 5 streams a connection 30 need 6; a few more may be
		// dialled while the first waits for the backend's SETTINGS.
		most = 12
	)
	for _, ck := range upClientKinds {
		t.Run(ck.name, func(t *testing.T) {
			var arrived atomic.Int32
			var gate atomic.Pointer[chan struct{}]
			be := startH2CBackend(t, maxStreams, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				g := *gate.Load()
				arrived.Add(1)
				select {
				case <-g:
				case <-r.Context().Done():
					return
				}
				io.WriteString(w, "ok "+r.URL.Path)
			}))
			p := startH2UpProxy(t, k, h2upTo(be.addr))
			c := newUpClient(t, p.addr, ck.h2)
			round := func(t *testing.T) {
				t.Helper()
				g := make(chan struct{})
				gate.Store(&g)
				arrived.Store(0)
				errs := make(chan error, n)
				var wg sync.WaitGroup
				for i := range n {
					wg.Add(1)
					go func() {
						defer wg.Done()
						path := fmt.Sprintf("/m/%d", i)
						r, err := c.do(context.Background(), "GET", path, nil, false, nil)
						switch {
						case err != nil:
							errs <- fmt.Errorf("%s: got %v, want an answer", path, err)
						case r.status != 200 || r.body != "ok "+path:
							errs <- fmt.Errorf("%s: got (%d, %q), want (200, %q)", path, r.status, r.body, "ok "+path)
						}
					}()
				}
				waitFor(t, "every request to reach the backend", func() bool { return arrived.Load() == n })
				close(g)
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Error(err)
				}
				for range n {
					checkRecord(t, p, 200, nil)
				}
			}
			round(t)
			dialled := be.accepts.Load()
			if dialled < n/maxStreams || dialled > most {
				t.Errorf("got %d backend connections for %d requests at once, want %d to %d", dialled, n, n/maxStreams, most)
			}
			round(t)
			if got := be.accepts.Load(); got != dialled {
				t.Errorf("second round: got %d backend connections in all, want %d (the first round's, reused)", got, dialled)
			}
			if got := be.closed.Load(); got != 0 {
				t.Errorf("got %d backend connections closed, want 0", got)
			}
		})
	}
}

// TestH2UpRetryUnprocessed has the backend leave a stream unprocessed:
// refused (RST_STREAM REFUSED_STREAM) once, the request goes again on
// another stream of the connection and succeeds, body and all; refused
// every time, it goes 3 times more and then fails as a connect error
// (502); under a GOAWAY whose last stream is below it, it goes again on
// a new connection and succeeds. The client sees none of it.
func TestH2UpRetryUnprocessed(t *testing.T) { run(t, testH2UpRetryUnprocessed) }

func testH2UpRetryUnprocessed(t *testing.T, k netpoll.Kind) {
	tests := []struct {
		name string
		// act is what the backend does with the nth request it gets
		// (from 1, on any connection; pc.n numbers the connections):
		// true to answer it.
		act      func(pc *h2Peer, req *h2PeerReq, nth int) bool
		status   int
		wantErr  error
		requests int32 // the requests the backend gets
		accepts  int32
	}{
		{name: "refused once", act: func(pc *h2Peer, req *h2PeerReq, nth int) bool {
			if nth == 1 {
				pc.rst(req.id, http2.ErrCodeRefusedStream)
				return false
			}
			return true
		}, status: 200, requests: 2, accepts: 1},
		{name: "refused every time", act: func(pc *h2Peer, req *h2PeerReq, nth int) bool {
			pc.rst(req.id, http2.ErrCodeRefusedStream)
			return false
		}, status: 502, wantErr: wire.ErrConnect, requests: 1 + maxRefusedRetries, accepts: 1},
		{name: "GOAWAY below the stream", act: func(pc *h2Peer, req *h2PeerReq, nth int) bool {
			if pc.n == 1 {
				pc.goAway(0, http2.ErrCodeNo) // the stream is 1
				return false
			}
			return true
		}, status: 200, requests: 2, accepts: 2},
	}
	for _, ck := range upClientKinds {
		for _, method := range []string{"GET", "POST"} {
			for _, tt := range tests {
				t.Run(ck.name+"/"+method+"/"+tt.name, func(t *testing.T) {
					var reqs atomic.Int32
					bodies := make(chan string, 8)
					be := startH2Peer(t, nil, func(pc *h2Peer) {
						for {
							ev, err := pc.next()
							if err != nil {
								return
							}
							if ev.req == nil {
								continue
							}
							bodies <- string(ev.req.body)
							if tt.act(pc, ev.req, int(reqs.Add(1))) {
								pc.answer(ev.req.id, "ok:"+string(ev.req.body))
							}
						}
					})
					p := startH2UpProxy(t, k, h2upTo(be.addr))
					c := newUpClient(t, p.addr, ck.h2)
					var body []byte
					if method == "POST" {
						body = []byte("hello")
					}
					r, err := c.do(context.Background(), method, "/r", body, false, nil)
					if err != nil {
						t.Fatalf("got %v, want an answer", err)
					}
					if r.status != tt.status || tt.status == 200 && r.body != "ok:"+string(body) {
						t.Errorf("got (%d, %q), want (%d, %q)", r.status, r.body, tt.status, "ok:"+string(body))
					}
					rec := checkRecord(t, p, tt.status, tt.wantErr)
					if rec.Attempts != 1 {
						t.Errorf("record: got %d attempts, want 1 (the retries are the engine's own)", rec.Attempts)
					}
					if got := reqs.Load(); got != tt.requests {
						t.Errorf("got %d requests at the backend, want %d", got, tt.requests)
					}
					for range tt.requests {
						if b := recv(t, bodies, "a request body"); b != string(body) {
							t.Errorf("backend's body: got %q, want %q", b, body)
						}
					}
					if got := be.accepts.Load(); got != tt.accepts {
						t.Errorf("got %d backend connections, want %d", got, tt.accepts)
					}
				})
			}
		}
	}
}

// TestH2UpRefusedBufferedBodyRetried has the backend refuse the stream
// of a request whose body request buffering holds whole (in memory and
// in a file): nothing was processed and the body is all at hand, so it
// goes again, as a body the read buffer holds does.
func TestH2UpRefusedBufferedBodyRetried(t *testing.T) { run(t, testH2UpRefusedBufferedBodyRetried) }

func testH2UpRefusedBufferedBodyRetried(t *testing.T, k netpoll.Kind) {
	body := randomBody(300<<10, 23)
	var reqs atomic.Int32
	be := startH2Peer(t, nil, func(pc *h2Peer) {
		for {
			ev, err := pc.next()
			if err != nil {
				return
			}
			if ev.req == nil {
				continue
			}
			if reqs.Add(1) == 1 {
				pc.rst(ev.req.id, http2.ErrCodeRefusedStream)
				continue
			}
			pc.answer(ev.req.id, fmt.Sprintf("%x", sha256.Sum256(ev.req.body)))
		}
	})
	p := startH2UpProxy(t, k, h2upTo(be.addr))
	bufferRoute(t, p, wire.BufferLimits{Memory: 64 << 10, File: 1 << 20, Dir: t.TempDir()})
	c := newUpClient(t, p.addr, false)
	r, err := c.do(context.Background(), "POST", "/r", body, false, nil)
	if err != nil {
		t.Fatalf("got %v, want an answer", err)
	}
	if want := fmt.Sprintf("%x", sha256.Sum256(body)); r.status != 200 || r.body != want {
		t.Errorf("got (%d, %q), want (200, %q)", r.status, r.body, want)
	}
	checkRecord(t, p, 200, nil)
	if got := reqs.Load(); got != 2 {
		t.Errorf("got %d requests at the backend, want 2", got)
	}
}

// TestH2UpClientGone has the client go away while its request is at a
// slow h2c backend, before the answer's head or in its body: an HTTP/2
// client resets its stream, an HTTP/1.1 client closes its connection.
// The backend's stream is reset (its handler's context is cancelled),
// the record says the client went, and the backend connection serves
// the next request (no new dial, none closed).
func TestH2UpClientGone(t *testing.T) { run(t, testH2UpClientGone) }

func testH2UpClientGone(t *testing.T, k netpoll.Kind) {
	for _, ck := range upClientKinds {
		for _, midBody := range []bool{false, true} {
			name := ck.name + "/at the backend"
			if midBody {
				name = ck.name + "/mid-body"
			}
			t.Run(name, func(t *testing.T) {
				reached := make(chan struct{}, 1)
				cancelled := make(chan struct{}, 1)
				be := startH2CBackend(t, 0, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path == "/quick" {
						io.WriteString(w, "quick")
						return
					}
					if midBody {
						w.Header().Set("Content-Length", "10000000")
						w.Write(bytes.Repeat([]byte("m"), 64<<10))
						w.(http.Flusher).Flush()
					}
					reached <- struct{}{}
					select {
					case <-r.Context().Done():
						cancelled <- struct{}{}
					case <-time.After(testTimeout):
					}
				}))
				p := startH2UpProxy(t, k, h2upTo(be.addr))
				if ck.h2 {
					c := newUpClient(t, p.addr, true)
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					req, _ := http.NewRequestWithContext(ctx, "GET", c.base+"/slow", nil)
					done := make(chan error, 1)
					go func() {
						resp, err := c.rt.RoundTrip(req)
						if err == nil {
							_, err = io.ReadFull(resp.Body, make([]byte, 1000))
							cancel()
							_, err2 := io.ReadAll(resp.Body)
							resp.Body.Close()
							if err == nil {
								err = err2
							}
						}
						done <- err
					}()
					recv(t, reached, "the request at the backend")
					cancel()
					if err := recv(t, done, "the client to give up"); err == nil {
						t.Fatal("the client got its whole answer, want it to have given up")
					}
				} else {
					c := dialRaw(t, p.addr)
					c.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
					recv(t, reached, "the request at the backend")
					if midBody {
						c.readHead()
						if _, err := io.ReadFull(c.br, make([]byte, 1000)); err != nil {
							t.Fatalf("reading some of the body: %v", err)
						}
					}
					c.nc.Close()
				}
				recv(t, cancelled, "the backend's stream to be reset")
				checkRecord(t, p, proxy.StatusClientClosed, wire.ErrClientGone)
				if got := p.guard.outcomes(); len(got) != 1 || got[0] != proxy.Ignored {
					t.Errorf("got outcomes %v, want [Ignored]", got)
				}
				c := newUpClient(t, p.addr, ck.h2)
				if r := c.get(t, "/quick"); r.status != 200 || r.body != "quick" {
					t.Errorf("next request: got (%d, %q), want (200, quick)", r.status, r.body)
				}
				checkRecord(t, p, 200, nil)
				if a, cl := be.accepts.Load(), be.closed.Load(); a != 1 || cl != 0 {
					t.Errorf("got %d backend connections dialled and %d closed, want 1 and 0 (a reset costs its stream only)", a, cl)
				}
			})
		}
	}
}

// TestH2UpBackendConnectionBreaks has the backend close its connection
// under a stream: before the answer's head the request fails as the
// backend's (502); in the body the answer is cut (a reset stream for an
// HTTP/2 client, a short body for an HTTP/1.1 one) and recorded as the
// backend's failure. The next request dials a new connection and
// succeeds.
func TestH2UpBackendConnectionBreaks(t *testing.T) { run(t, testH2UpBackendConnectionBreaks) }

func testH2UpBackendConnectionBreaks(t *testing.T, k netpoll.Kind) {
	tests := []struct {
		name string
		cut  func(pc *h2Peer, id uint32)
		head bool // the answer's head went out
	}{
		{name: "before the head", cut: func(pc *h2Peer, id uint32) {}},
		{name: "mid-body of declared length", head: true, cut: func(pc *h2Peer, id uint32) {
			pc.headers(id, false, ":status", "200", "content-length", "100000")
			pc.data(id, false, bytes.Repeat([]byte("x"), 1000))
		}},
		{name: "mid-body without length", head: true, cut: func(pc *h2Peer, id uint32) {
			pc.headers(id, false, ":status", "200")
			pc.data(id, false, bytes.Repeat([]byte("x"), 1000))
		}},
	}
	for _, ck := range upClientKinds {
		for _, tt := range tests {
			t.Run(ck.name+"/"+tt.name, func(t *testing.T) {
				be := startH2Peer(t, nil, func(pc *h2Peer) {
					for {
						ev, err := pc.next()
						if err != nil {
							return
						}
						if ev.req == nil {
							continue
						}
						if pc.n == 1 {
							tt.cut(pc, ev.req.id)
							pc.cut()
							return
						}
						pc.answer(ev.req.id, "next")
					}
				})
				p := startH2UpProxy(t, k, h2upTo(be.addr))
				c := newUpClient(t, p.addr, ck.h2)
				r, err := c.do(context.Background(), "GET", "/x", nil, false, nil)
				switch {
				case tt.head && err == nil:
					t.Errorf("got (%d, %d bytes) whole, want the answer cut", r.status, len(r.body))
				case !tt.head && err != nil:
					t.Errorf("got %v, want an answer", err)
				case !tt.head && (r.status != 502 || r.body != string(bodyBadGateway)):
					t.Errorf("got (%d, %q), want (502, %q)", r.status, r.body, bodyBadGateway)
				}
				status := 502
				if tt.head {
					status = 0 // what was sent, or 499 when the client's side ended first
				}
				checkRecord(t, p, status, wire.ErrBackend)
				waitFor(t, "the broken backend connection to be closed", func() bool { return p.backendH2Conns() == 0 })
				c = newUpClient(t, p.addr, ck.h2)
				if r := c.get(t, "/next"); r.status != 200 || r.body != "next" {
					t.Errorf("next request: got (%d, %q), want (200, next)", r.status, r.body)
				}
				checkRecord(t, p, 200, nil)
				if got := be.accepts.Load(); got != 2 {
					t.Errorf("got %d backend connections, want 2 (the broken one replaced)", got)
				}
			})
		}
	}
}

// TestH2UpIdleTimeout has a backend connection without streams outlive
// the transport's IdleTimeout: it is closed, and the next request dials
// a new one.
func TestH2UpIdleTimeout(t *testing.T) { run(t, testH2UpIdleTimeout) }

func testH2UpIdleTimeout(t *testing.T, k netpoll.Kind) {
	be := startH2CBackend(t, 0, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	cfg := h2upTo(be.addr)
	cfg.to.IdleTimeout = 100 * time.Millisecond
	p := startH2UpProxy(t, k, cfg)
	c := newUpClient(t, p.addr, false)
	if r := c.get(t, "/a"); r.status != 200 || r.body != "ok" {
		t.Fatalf("got (%d, %q), want (200, ok)", r.status, r.body)
	}
	checkRecord(t, p, 200, nil)
	// The loops tick backend connections about once a second.
	waitFor(t, "the idle backend connection to be closed", func() bool { return be.closed.Load() == 1 })
	if n := p.backendH2Conns(); n != 0 {
		t.Errorf("got %d backend HTTP/2 connections, want 0", n)
	}
	if r := c.get(t, "/b"); r.status != 200 || r.body != "ok" {
		t.Errorf("got (%d, %q), want (200, ok)", r.status, r.body)
	}
	checkRecord(t, p, 200, nil)
	if got := be.accepts.Load(); got != 2 {
		t.Errorf("got %d backend connections, want 2", got)
	}
}

// TestH2UpPing has a backend connection stay silent, a stream open on
// it, past the client ping interval (h2.DefaultClientPingInterval: the
// engine does not set it, so the test gives the connection the time the
// loop's sweep would, 31 s on): it is pinged. Answered, the connection
// lives and its stream is answered; unanswered past the ping timeout,
// the connection is closed, its stream fails as the backend's (502),
// and the next request dials a new connection.
func TestH2UpPing(t *testing.T) { run(t, testH2UpPing) }

func testH2UpPing(t *testing.T, k netpoll.Kind) {
	for _, answered := range []bool{true, false} {
		name := "answered"
		if !answered {
			name = "unanswered"
		}
		t.Run(name, func(t *testing.T) {
			reached := make(chan struct{}, 1)
			pinged := make(chan struct{}, 1)
			release := make(chan struct{})
			be := startH2Peer(t, nil, func(pc *h2Peer) {
				pc.noPingAck = !answered && pc.n == 1
				var held uint32
				sawReq := false
				rel := release
				evs := make(chan h2PeerEv)
				go func() {
					defer close(evs)
					for {
						ev, err := pc.next()
						if err != nil {
							return
						}
						evs <- ev
					}
				}()
				for {
					select {
					case ev, ok := <-evs:
						switch {
						case !ok:
							return
						case ev.synced && held != 0 && !sawReq:
							// The proxy has read all we sent (its
							// SETTINGS acknowledged): the time may go.
							sawReq = true
							reached <- struct{}{}
						case ev.ping && pc.noPingAck, ev.synced:
							pinged <- struct{}{}
						case ev.req != nil && pc.n == 1 && held == 0:
							held = ev.req.id
							pc.sync()
						case ev.req != nil:
							pc.answer(ev.req.id, "next")
						}
					case <-rel:
						rel = nil
						pc.answer(held, "held")
					}
				}
			})
			p := startH2UpProxy(t, k, h2upTo(be.addr))
			c := newUpClient(t, p.addr, false)
			done := make(chan h2Resp, 1)
			go func() {
				r, err := c.do(context.Background(), "GET", "/held", nil, false, nil)
				if err != nil {
					r.body = err.Error()
				}
				done <- r
			}()
			recv(t, reached, "the request at the backend")
			tick := func(d time.Duration) {
				for _, l := range p.eng.loops {
					l.do(func() {
						for _, hu := range slices.Clone(l.h2ups) {
							hu.tick(l.now + int64(d))
						}
					})
				}
			}
			tick(31 * time.Second)
			recv(t, pinged, "a PING at the backend")
			if answered {
				// Acknowledged: still alive when the ping timeout has
				// passed.
				tick(31*time.Second + 16*time.Second)
				p.settle()
				if n := p.backendH2Conns(); n != 1 {
					t.Fatalf("got %d backend connections, want 1 (the pinged one, alive)", n)
				}
				close(release)
				if r := recv(t, done, "the answer"); r.status != 200 || r.body != "held" {
					t.Errorf("got (%d, %q), want (200, held)", r.status, r.body)
				}
				checkRecord(t, p, 200, nil)
			} else {
				tick(31*time.Second + 16*time.Second)
				if r := recv(t, done, "the answer"); r.status != 502 {
					t.Errorf("got (%d, %q), want 502", r.status, r.body)
				}
				checkRecord(t, p, 502, wire.ErrBackend)
			}
			if r := c.get(t, "/next"); r.status != 200 || r.body != "next" {
				t.Errorf("next request: got (%d, %q), want (200, next)", r.status, r.body)
			}
			checkRecord(t, p, 200, nil)
			want := int32(1)
			if !answered {
				want = 2
			}
			if got := be.accepts.Load(); got != want {
				t.Errorf("got %d backend connections, want %d", got, want)
			}
		})
	}
}

// TestH2UpBackendSpeaksFirst connects, again and again on fresh engines,
// to a backend that writes its SETTINGS as soon as it accepts, so that
// its connection may be readable before the loop has seen it writable
// (the portable poller reports the two apart, and each once): the
// request must go every time.
func TestH2UpBackendSpeaksFirst(t *testing.T) { run(t, testH2UpBackendSpeaksFirst) }

func testH2UpBackendSpeaksFirst(t *testing.T, k netpoll.Kind) {
	be := startH2CBackend(t, 0, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ready") }))
	cfg := h2upTo(be.addr)
	// A connect the loop never takes as done, or a connection it never
	// reads again (the readable report spent while connecting), fails the
	// request in this time (502, 504), rather than at the test's timeout.
	cfg.to.DialTimeout = 2 * time.Second
	cfg.to.ResponseHeaderTimeout = 2 * time.Second
	for i := range 10 {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			p := startH2UpProxy(t, k, cfg)
			c := dialRaw(t, p.addr)
			c.send("GET /ready HTTP/1.1\r\nHost: x\r\n\r\n")
			if r := c.read("GET"); r.status != 200 || r.body != "ready" {
				t.Errorf("got (%d, %q), want (200, ready)", r.status, r.body)
			}
			checkRecord(t, p, 200, nil)
		})
	}
	if got := be.accepts.Load(); got != 10 {
		t.Errorf("got %d backend connections, want 10 (one per engine)", got)
	}
}

// TestH2UpDialTimeoutAbandonsConnect has a backend's connect hang (its
// accept queue full, so its SYNs are dropped) past the transport's
// DialTimeout: the request fails (502), and the connect is given up, as
// an HTTP/1.1 backend's is (lupconn.close): no connection is left
// connecting, counted open, or promised streams. So once the backend is
// back, the next request dials it afresh and is served, rather than
// waiting for the old connect's next SYN (1 s, 3 s, ... on) and failing
// again.
func TestH2UpDialTimeoutAbandonsConnect(t *testing.T) { run(t, testH2UpDialTimeoutAbandonsConnect) }

func testH2UpDialTimeoutAbandonsConnect(t *testing.T, k netpoll.Kind) {
	fd, addr := listenLoopback(t)
	lf := os.NewFile(uintptr(fd), "backend")
	t.Cleanup(func() { lf.Close() })
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	// The one place in the accept queue.
	fill, err := net.DialTimeout("tcp", addr, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fill.Close() })
	cfg := h2upTo(addr)
	cfg.to.DialTimeout = 300 * time.Millisecond
	p := startH2UpProxy(t, k, cfg)
	c := dialRaw(t, p.addr)
	c.send("GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
	if r := c.read("GET"); r.status != 502 {
		t.Fatalf("got (%d, %q), want 502 (the connect timed out)", r.status, r.body)
	}
	checkRecord(t, p, 502, wire.ErrConnect)
	if n, s := p.backendH2Conns(), p.backendStreams(); n != 0 || s != 0 {
		t.Errorf("after the dial timeout: got %d backend connections and %d streams promised, want 0 and 0", n, s)
	}
	// The backend is back: it accepts (the queued connection first).
	ln, err := net.FileListener(lf)
	if err != nil {
		t.Fatal(err)
	}
	be := serveH2C(t, ln, 0, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "back") }))
	// Until the queued connection is taken the queue is still full, and
	// the proxy's SYN would be dropped (retried after 1 s, past the dial
	// timeout).
	waitFor(t, "the backend to take the queued connection", func() bool { return be.accepts.Load() >= 1 })
	c.send("GET /b HTTP/1.1\r\nHost: x\r\n\r\n")
	if r := c.read("GET"); r.status != 200 || r.body != "back" {
		t.Errorf("backend back: got (%d, %q), want (200, back)", r.status, r.body)
	}
	checkRecord(t, p, 0, nil)
	if n := be.accepts.Load(); n != 2 {
		t.Errorf("got %d connections accepted, want 2 (the queued one, and the proxy's new one)", n)
	}
}

// bufferRoute makes p's upstream route buffer request bodies under lim.
func bufferRoute(t *testing.T, p *loopProxy, lim wire.BufferLimits) {
	t.Helper()
	tab, err := route.New([]route.Entry[*proxy.Route]{
		{Name: "fixed", PathPrefix: "/fixed/", Value: &proxy.Route{Name: "fixed", Respond: &fixedRoute}},
		{Name: "up", Value: &proxy.Route{Name: "up", Upstream: p.up, Buffer: &lim}},
	})
	if err != nil {
		t.Fatal(err)
	}
	p.pipe.Swap(&proxy.Graph{Routes: tab, Upstreams: []*proxy.Upstream{p.up}, Recorder: p})
}

// fdsUnder counts the process's descriptors of files in dir.
func fdsUnder(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	n := 0
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && strings.HasPrefix(target, dir+string(filepath.Separator)) {
			n++
		}
	}
	return n
}

// TestH2UpBufferedBody has the route buffer request bodies, in memory up
// to 64 KiB and the rest in a file: a body of several MiB, with and
// without a declared length, from HTTP/1.1 and HTTP/2 clients, reaches
// the h2c backend whole (the file part read back as the stream's window
// allows), with the length it was found to have; the file is closed once
// the exchange ends.
func TestH2UpBufferedBody(t *testing.T) { run(t, testH2UpBufferedBody) }

func testH2UpBufferedBody(t *testing.T, k netpoll.Kind) {
	body := randomBody(3<<20+5, 24)
	be := startH2CBackend(t, 0, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(400)
			return
		}
		w.Header().Set("X-Req-CL", strconv.FormatInt(r.ContentLength, 10))
		fmt.Fprintf(w, "%d %x", len(b), sha256.Sum256(b))
	}))
	p := startH2UpProxy(t, k, h2upTo(be.addr))
	dir := t.TempDir()
	bufferRoute(t, p, wire.BufferLimits{Memory: 64 << 10, File: 16 << 20, Dir: dir})
	want := fmt.Sprintf("%d %x", len(body), sha256.Sum256(body))
	for _, ck := range upClientKinds {
		c := newUpClient(t, p.addr, ck.h2)
		for _, chunked := range []bool{false, true} {
			name := ck.name + "/with length"
			if chunked {
				name = ck.name + "/without length"
			}
			t.Run(name, func(t *testing.T) {
				r, err := c.do(context.Background(), "POST", "/up", body, chunked, nil)
				if err != nil {
					t.Fatalf("got %v, want an answer", err)
				}
				if r.status != 200 || r.body != want {
					t.Errorf("got (%d, %q), want (200, %q)", r.status, r.body, want)
				}
				if cl := r.header.Get("X-Req-CL"); cl != strconv.Itoa(len(body)) {
					t.Errorf("backend's content-length: got %s, want %d (the buffered body's)", cl, len(body))
				}
				checkRecord(t, p, 200, nil)
				waitFor(t, "the buffered body's file to be closed", func() bool { return fdsUnder(t, dir) == 0 })
			})
		}
	}
	if got := be.accepts.Load(); got != 1 {
		t.Errorf("got %d backend connections, want 1", got)
	}
}
