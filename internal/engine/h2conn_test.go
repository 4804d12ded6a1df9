package engine

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
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

	"github.com/helios-lb/helios/internal/h2"
	"github.com/helios-lb/helios/internal/netpoll"
	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/route"
	"github.com/helios-lb/helios/internal/static"
	"github.com/helios-lb/helios/internal/wire"
)

// HTTP/2 clients on the loops (h2conn.go, h2send.go), on every driver
// (run): h2c with prior knowledge and TLS with ALPN h2, each stream an
// exchange of the one machine. golang.org/x/net/http2's client shows what
// a real client gets; h2Raw, which writes and reads frames itself, shows
// what is on the wire (field names, flow-control windows, GOAWAY, resets).

// h2Modes are the ways a client reaches HTTP/2 on a listener.
var h2Modes = []struct {
	name string
	tls  bool
}{{"h2c", false}, {"tls", true}}

// h2TLS is a listener's TLS provider whose ALPN offers h2, then http/1.1.
func h2TLS(t testing.TB) *testTLS {
	tp := newTestTLS(t)
	tp.cfg.NextProtos = []string{"h2", "http/1.1"}
	return tp
}

// startH2Proxy starts a loopProxy whose listener serves HTTP/2 as well as
// HTTP/1.1: over TLS offering h2 when tlsOn (the provider is returned),
// as h2c otherwise. When the test ends, once its clients have closed
// their connections (their cleanups run first), no stream may be left on
// the loops and the loops' bookkeeping must be consistent (checkInvariants).
func startH2Proxy(t *testing.T, k netpoll.Kind, cfg loopConfig, tlsOn bool) (*loopProxy, *testTLS) {
	t.Helper()
	var tp *testTLS
	if tlsOn {
		tp = h2TLS(t)
		cfg.opts.TLS = tp
	} else {
		cfg.opts.H2C = true
	}
	p := startLoopProxy(t, k, cfg)
	t.Cleanup(func() {
		waitFor(t, "every stream to end once its connection closed", func() bool { return p.openStreams() == 0 })
		p.checkInvariants()
	})
	return p, tp
}

// openStreams counts the lconns serving HTTP/2 streams on the loops.
func (p *loopProxy) openStreams() int {
	n := 0
	for _, l := range p.eng.loops {
		l.do(func() {
			for c := l.streams.head; c != nil; c = c.next {
				n++
			}
		})
	}
	return n
}

// h2Client is golang.org/x/net/http2's client for one listener (h2c with
// prior knowledge, or TLS trusting a testTLS). It counts the connections
// it dials and closes them all when the test ends.
type h2Client struct {
	t     testing.TB
	base  string
	tr    *http2.Transport
	dials atomic.Int32
	mu    sync.Mutex
	conns []net.Conn
}

func newH2Client(t testing.TB, addr string, tp *testTLS) *h2Client {
	c := &h2Client{t: t}
	c.tr = &http2.Transport{DisableCompression: true}
	if tp == nil {
		c.base = "http://" + addr
		c.tr.AllowHTTP = true
		c.tr.DialTLSContext = func(ctx context.Context, network, a string, _ *tls.Config) (net.Conn, error) {
			d := net.Dialer{Timeout: testTimeout}
			return c.track(d.DialContext(ctx, network, a))
		}
	} else {
		c.base = "https://" + addr
		c.tr.TLSClientConfig = &tls.Config{RootCAs: tp.pool, ServerName: "localhost"}
		c.tr.DialTLSContext = func(ctx context.Context, network, a string, cfg *tls.Config) (net.Conn, error) {
			d := tls.Dialer{NetDialer: &net.Dialer{Timeout: testTimeout}, Config: cfg}
			return c.track(d.DialContext(ctx, network, a))
		}
	}
	t.Cleanup(c.close)
	return c
}

func (c *h2Client) track(nc net.Conn, err error) (net.Conn, error) {
	if err != nil {
		return nil, err
	}
	c.dials.Add(1)
	c.mu.Lock()
	c.conns = append(c.conns, nc)
	c.mu.Unlock()
	return nc, nil
}

func (c *h2Client) close() {
	c.tr.CloseIdleConnections()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, nc := range c.conns {
		nc.Close()
	}
}

// h2Resp is an answer an h2Client read, body and trailers included.
type h2Resp struct {
	status  int
	proto   string
	header  http.Header
	trailer http.Header
	body    string
	length  int64
}

// do sends a request and reads its answer whole; err is what failed.
func (c *h2Client) do(ctx context.Context, method, path string, body io.Reader, hdr http.Header, trailer http.Header) (h2Resp, error) {
	ctx, cancel := context.WithTimeout(ctx, testTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return h2Resp{}, err
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	req.Trailer = trailer
	resp, err := c.tr.RoundTrip(req)
	if err != nil {
		return h2Resp{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return h2Resp{status: resp.StatusCode, proto: resp.Proto, header: resp.Header, trailer: resp.Trailer, body: string(b), length: resp.ContentLength}, err
}

// get sends a GET and fails the test if it fails.
func (c *h2Client) get(path string) h2Resp {
	c.t.Helper()
	r, err := c.do(context.Background(), "GET", path, nil, nil, nil)
	if err != nil {
		c.t.Fatalf("GET %s over HTTP/2: %v", path, err)
	}
	return r
}

// h1Request is a request as an HTTP/1.1 backend received it: the head,
// and the body's bytes as they came (chunk framing and trailers included).
type h1Request struct{ head, body string }

// parsed reads the request back with net/http: the body decoded, the
// trailers of a chunked one.
func (r h1Request) parsed(t testing.TB) (*http.Request, string) {
	t.Helper()
	req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(r.head + r.body)))
	if err != nil {
		t.Fatalf("the backend's request does not parse: %v\n%s%s", err, r.head, r.body)
	}
	b, err := io.ReadAll(req.Body)
	if err != nil {
		t.Fatalf("the backend's request body does not parse: %v\n%s%s", err, r.head, r.body)
	}
	return req, string(b)
}

// recordingBackend reads each request whole, hands it to got and sends
// answer.
func recordingBackend(t testing.TB, answer string, got chan<- h1Request) *rawBackend {
	return startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
		for {
			head := readReqHead(br)
			if head == "" {
				return
			}
			body, err := readRawBody(br, head)
			if err != nil {
				return
			}
			got <- h1Request{head, body}
			io.WriteString(nc, answer)
		}
	})
}

// readRawBody reads the body of a request with the given head as it is
// framed on the wire.
func readRawBody(br *bufio.Reader, head string) (string, error) {
	f := headFields(head)
	if len(f["transfer-encoding"]) > 0 {
		var sb strings.Builder
		for {
			line, err := br.ReadString('\n')
			sb.WriteString(line)
			if err != nil {
				return sb.String(), err
			}
			size, _, _ := strings.Cut(strings.TrimRight(line, "\r\n"), ";")
			n, err := strconv.ParseInt(size, 16, 64)
			if err != nil {
				return sb.String(), err
			}
			if n == 0 {
				for line != "\r\n" {
					if line, err = br.ReadString('\n'); err != nil {
						return sb.String(), err
					}
					sb.WriteString(line)
				}
				return sb.String(), nil
			}
			chunk := make([]byte, n+2)
			if _, err := io.ReadFull(br, chunk); err != nil {
				return sb.String(), err
			}
			sb.Write(chunk)
		}
	}
	if cl := f["content-length"]; len(cl) == 1 {
		n, err := strconv.Atoi(cl[0])
		if err != nil {
			return "", err
		}
		b := make([]byte, n)
		_, err = io.ReadFull(br, b)
		return string(b), err
	}
	return "", nil
}

// nextRequest returns what the backend received next.
func nextRequest(t testing.TB, got <-chan h1Request) h1Request {
	t.Helper()
	select {
	case r := <-got:
		return r
	case <-time.After(testTimeout):
		t.Fatal("no request reached the backend")
		return h1Request{}
	}
}

// h2Raw is an HTTP/2 client that writes and reads frames itself. It
// keeps the receive windows it gave the server and fails the test for a
// DATA frame past them; with credit set it gives window back as DATA
// comes (once half of a window is used).
type h2Raw struct {
	t      testing.TB
	nc     net.Conn
	fr     *http2.Framer
	scheme string
	host   string
	enc    *hpack.Encoder
	hb     bytes.Buffer
	dec    *hpack.Decoder
	// autoPing: PINGs are acknowledged as they come; otherwise they are
	// returned by next.
	autoPing bool
	credit   bool
	// The receive windows: the connection's and each stream's, whose
	// initial size our SETTINGS set.
	connWin   int64
	streamWin map[uint32]int64
	initial   int64
}

// dialH2Raw connects to addr (over TLS with ALPN h2 when tp is set) and
// sends the preface and SETTINGS, with initialWindow as the streams'
// initial window unless it is 0.
func dialH2Raw(t testing.TB, addr string, tp *testTLS, initialWindow uint32) *h2Raw {
	t.Helper()
	c := &h2Raw{t: t, host: addr, scheme: "http", autoPing: true, credit: true,
		connWin: 65535, streamWin: map[uint32]int64{}, initial: 65535}
	if tp != nil {
		tc, err := tls.DialWithDialer(&net.Dialer{Timeout: testTimeout}, "tcp", addr,
			&tls.Config{RootCAs: tp.pool, ServerName: "localhost", NextProtos: []string{"h2"}})
		if err != nil {
			t.Fatalf("TLS dial: %v", err)
		}
		if got := tc.ConnectionState().NegotiatedProtocol; got != "h2" {
			t.Fatalf("ALPN: got %q, want h2", got)
		}
		c.nc, c.scheme = tc, "https"
	} else {
		nc, err := net.DialTimeout("tcp", addr, testTimeout)
		if err != nil {
			t.Fatal(err)
		}
		c.nc = nc
	}
	t.Cleanup(func() { c.nc.Close() })
	c.nc.SetDeadline(time.Now().Add(testTimeout))
	c.fr = http2.NewFramer(c.nc, c.nc)
	c.enc = hpack.NewEncoder(&c.hb)
	c.dec = hpack.NewDecoder(4096, nil)
	if _, err := io.WriteString(c.nc, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	var settings []http2.Setting
	if initialWindow > 0 {
		settings = append(settings, http2.Setting{ID: http2.SettingInitialWindowSize, Val: initialWindow})
		c.initial = int64(initialWindow)
	}
	if err := c.fr.WriteSettings(settings...); err != nil {
		t.Fatal(err)
	}
	return c
}

// request opens stream id with a request head; fields are name, value
// pairs after the pseudo-fields.
func (c *h2Raw) request(id uint32, method, path string, end bool, fields ...string) {
	c.t.Helper()
	c.hb.Reset()
	c.enc.WriteField(hpack.HeaderField{Name: ":method", Value: method})
	if method != "CONNECT" {
		c.enc.WriteField(hpack.HeaderField{Name: ":scheme", Value: c.scheme})
		c.enc.WriteField(hpack.HeaderField{Name: ":path", Value: path})
	}
	c.enc.WriteField(hpack.HeaderField{Name: ":authority", Value: c.host})
	for i := 0; i+1 < len(fields); i += 2 {
		c.enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	c.writeBlock(id, end)
}

// writeBlock sends the header block in c.hb on stream id: a HEADERS
// frame, and CONTINUATION frames for what passes the default frame size.
func (c *h2Raw) writeBlock(id uint32, end bool) {
	c.t.Helper()
	const max = 16384
	block := c.hb.Bytes()
	first := block[:min(len(block), max)]
	block = block[len(first):]
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndStream: end, EndHeaders: len(block) == 0}); err != nil {
		c.t.Fatalf("writing HEADERS: %v", err)
	}
	for len(block) > 0 {
		p := block[:min(len(block), max)]
		block = block[len(p):]
		if err := c.fr.WriteContinuation(id, len(block) == 0, p); err != nil {
			c.t.Fatalf("writing CONTINUATION: %v", err)
		}
	}
}

// h2Ev is a frame the server sent (SETTINGS, WINDOW_UPDATE and, with
// autoPing, PING are handled by next).
type h2Ev struct {
	typ    http2.FrameType
	stream uint32
	fields []hpack.HeaderField
	data   []byte
	end    bool
	code   http2.ErrCode
	last   uint32
	ping   [8]byte
}

// next returns the server's next frame of interest; io.EOF when the
// server closed the connection.
func (c *h2Raw) next() (h2Ev, error) {
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			return h2Ev{}, err
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				c.fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if f.IsAck() {
				continue
			}
			if c.autoPing {
				c.fr.WritePing(true, f.Data)
				continue
			}
			return h2Ev{typ: http2.FramePing, ping: f.Data}, nil
		case *http2.WindowUpdateFrame:
		case *http2.HeadersFrame:
			block := append([]byte(nil), f.HeaderBlockFragment()...)
			ended := f.HeadersEnded()
			for !ended {
				cf, err := c.fr.ReadFrame()
				if err != nil {
					return h2Ev{}, err
				}
				cont, ok := cf.(*http2.ContinuationFrame)
				if !ok {
					return h2Ev{}, fmt.Errorf("got %v inside a header block, want CONTINUATION", cf.Header().Type)
				}
				block = append(block, cont.HeaderBlockFragment()...)
				ended = cont.HeadersEnded()
			}
			fields, err := c.dec.DecodeFull(block)
			if err != nil {
				return h2Ev{}, fmt.Errorf("decoding a header block: %w", err)
			}
			return h2Ev{typ: http2.FrameHeaders, stream: f.StreamID, fields: fields, end: f.StreamEnded()}, nil
		case *http2.DataFrame:
			c.received(f.StreamID, int64(f.Header().Length), f.StreamEnded())
			return h2Ev{typ: http2.FrameData, stream: f.StreamID, data: append([]byte(nil), f.Data()...), end: f.StreamEnded()}, nil
		case *http2.RSTStreamFrame:
			return h2Ev{typ: http2.FrameRSTStream, stream: f.StreamID, code: f.ErrCode}, nil
		case *http2.GoAwayFrame:
			return h2Ev{typ: http2.FrameGoAway, last: f.LastStreamID, code: f.ErrCode}, nil
		}
	}
}

// mustNext is next that fails the test on an error.
func (c *h2Raw) mustNext() h2Ev {
	c.t.Helper()
	ev, err := c.next()
	if err != nil {
		c.t.Fatalf("reading a frame: %v", err)
	}
	return ev
}

// received accounts for a DATA frame of n bytes on stream id against the
// windows, and gives window back.
func (c *h2Raw) received(id uint32, n int64, end bool) {
	w, ok := c.streamWin[id]
	if !ok {
		w = c.initial
	}
	if n > w || n > c.connWin {
		c.t.Errorf("stream %d: got a DATA frame of %d bytes with windows of %d (stream) and %d (connection), want at most those",
			id, n, w, c.connWin)
	}
	w -= n
	c.connWin -= n
	if c.credit {
		if !end && w < c.initial/2 {
			c.fr.WriteWindowUpdate(id, uint32(c.initial-w))
			w = c.initial
		}
		if c.connWin < 65535/2 {
			c.fr.WriteWindowUpdate(0, uint32(65535-c.connWin))
			c.connWin = 65535
		}
	}
	c.streamWin[id] = w
}

// h2RawResp is what came on one stream.
type h2RawResp struct {
	status   string
	fields   []hpack.HeaderField // the final head's, :status included
	body     []byte
	trailers []hpack.HeaderField
	// dataFrames counts DATA frames (an empty one ending the stream
	// included); reset is the RST_STREAM that ended it, if one did.
	dataFrames int
	reset      bool
	code       http2.ErrCode
}

// field returns the values of a field of the final head, in order.
func (r h2RawResp) field(name string) []string {
	var vs []string
	for _, f := range r.fields {
		if f.Name == name {
			vs = append(vs, f.Value)
		}
	}
	return vs
}

// response reads stream id's answer until the stream ends; frames of
// other streams fail the test.
func (c *h2Raw) response(id uint32) h2RawResp {
	c.t.Helper()
	var r h2RawResp
	for {
		ev := c.mustNext()
		if ev.typ == http2.FrameGoAway {
			c.t.Fatalf("stream %d: got GOAWAY (%v, last stream %d), want the answer", id, ev.code, ev.last)
		}
		if ev.stream != id {
			c.t.Fatalf("got a %v frame on stream %d, want stream %d's answer", ev.typ, ev.stream, id)
		}
		switch ev.typ {
		case http2.FrameHeaders:
			var status string
			for _, f := range ev.fields {
				if f.Name == ":status" {
					status = f.Value
				}
			}
			switch {
			case r.status != "":
				r.trailers = ev.fields
			case status != "" && status[0] == '1':
				// an interim answer
			default:
				r.status, r.fields = status, ev.fields
			}
		case http2.FrameData:
			r.dataFrames++
			r.body = append(r.body, ev.data...)
		case http2.FrameRSTStream:
			r.reset, r.code = true, ev.code
			return r
		}
		if ev.end {
			return r
		}
	}
}

// expectEOF checks the server closes the connection with nothing more
// to say.
func (c *h2Raw) expectEOF() {
	c.t.Helper()
	ev, err := c.next()
	switch {
	case err == nil:
		c.t.Fatalf("got a %v frame (stream %d), want the connection closed", ev.typ, ev.stream)
	case !errors.Is(err, io.EOF):
		c.t.Fatalf("got %v, want the server to close the connection", err)
	}
}

// checkWireFields checks a head as HTTP/2 requires: field names in lower
// case (RFC 9113 §8.2.1) and no connection-specific field (§8.2.2).
func checkWireFields(t testing.TB, what string, fields []hpack.HeaderField) {
	t.Helper()
	for _, f := range fields {
		if f.Name != strings.ToLower(f.Name) {
			t.Errorf("%s: got field name %q, want it in lower case", what, f.Name)
		}
		switch strings.ToLower(f.Name) {
		case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te":
			t.Errorf("%s: got connection-specific field %q, want none", what, f.Name)
		}
	}
}

// randomBody returns n bytes that repeat no pattern a misplaced piece
// could hide in.
func randomBody(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestLoopH2Proxy forwards an HTTP/2 GET to an HTTP/1.1 backend, over
// h2c and over TLS: the backend gets an HTTP/1.1 request whose Host is
// the :authority, whose cookies, split by the client, are one field
// again, with X-Forwarded-Proto saying how the client came; the client
// gets the backend's status, fields and body over HTTP/2, without the
// backend's hop-by-hop fields.
func TestLoopH2Proxy(t *testing.T) { run(t, testLoopH2Proxy) }

func testLoopH2Proxy(t *testing.T, k netpoll.Kind) {
	const answer = "HTTP/1.1 201 Created\r\nX-Mixed-Case: Value\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n" +
		"Connection: X-Hop, keep-alive\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\nContent-Length: 5\r\n\r\nhello"
	for _, m := range h2Modes {
		t.Run(m.name, func(t *testing.T) {
			got := make(chan h1Request, 4)
			be := recordingBackend(t, answer, got)
			p, tp := startH2Proxy(t, k, loopTo(be.addr), m.tls)
			c := newH2Client(t, p.addr, tp)
			hdr := http.Header{"Cookie": {"a=1; b=2"}, "X-Custom": {"v1"}}
			for i := 0; i < 2; i++ {
				r, err := c.do(context.Background(), "GET", "/p/q?x=1", nil, hdr, nil)
				if err != nil {
					t.Fatalf("request %d: got %v, want an answer", i, err)
				}
				if r.status != 201 || r.body != "hello" || r.proto != "HTTP/2.0" {
					t.Errorf("request %d: got (%d, %q, %s), want (201, hello, HTTP/2.0)", i, r.status, r.body, r.proto)
				}
				if v := r.header.Get("X-Mixed-Case"); v != "Value" {
					t.Errorf("x-mixed-case: got %q, want Value", v)
				}
				if v := r.header.Values("Set-Cookie"); !equalStrings(v, []string{"a=1", "b=2"}) {
					t.Errorf("set-cookie: got %q, want [a=1 b=2]", v)
				}
				for _, name := range []string{"Connection", "Keep-Alive", "X-Hop"} {
					if v, ok := r.header[name]; ok {
						t.Errorf("%s: got %q, want it absent", name, v)
					}
				}
				req := nextRequest(t, got)
				line, _, _ := strings.Cut(req.head, "\r\n")
				if line != "GET /p/q?x=1 HTTP/1.1" {
					t.Errorf("request line: got %q, want %q", line, "GET /p/q?x=1 HTTP/1.1")
				}
				proto := "http"
				if m.tls {
					proto = "https"
				}
				f := headFields(req.head)
				for name, want := range map[string][]string{
					"host": {p.addr}, "cookie": {"a=1; b=2"}, "x-custom": {"v1"},
					"x-forwarded-proto": {proto}, "x-forwarded-for": {"127.0.0.1"},
				} {
					if !equalStrings(f[name], want) {
						t.Errorf("backend's %s: got %q, want %q", name, f[name], want)
					}
				}
				for _, name := range []string{"transfer-encoding", "content-length", "te", "connection"} {
					if v, ok := f[name]; ok {
						t.Errorf("backend's %s: got %q, want it absent", name, v)
					}
				}
				if rec := p.nextRec(t); rec.Status != 201 || rec.Err != nil || rec.Attempts != 1 || rec.Bytes != 5 {
					t.Errorf("record: got (%v, %v, %d attempts, %d bytes), want (201, nil, 1, 5)", rec.Status, rec.Err, rec.Attempts, rec.Bytes)
				}
			}
			if n := c.dials.Load(); n != 1 {
				t.Errorf("got %d client connections, want 1 (both requests on one)", n)
			}
			if n := be.accepts.Load(); n != 1 {
				t.Errorf("got %d backend connections, want 1 (kept alive between streams)", n)
			}
		})
	}
}

// TestLoopH2WireFields reads answers frame by frame: field names in lower
// case, no connection-specific field, the length of a chunked answer
// left out, a HEAD answer and a 204 as HEADERS that end the stream, and
// a CONNECT refused with 405 on its stream alone.
func TestLoopH2WireFields(t *testing.T) { run(t, testLoopH2WireFields) }

func testLoopH2WireFields(t *testing.T, k netpoll.Kind) {
	be := startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
		for {
			head := readReqHead(br)
			if head == "" {
				return
			}
			switch {
			case strings.HasPrefix(head, "GET /chunked "):
				io.WriteString(nc, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\nProxy-Connection: x\r\n"+
					"Upgrade: h2c\r\nTE: trailers\r\nX-UPPER: 1\r\nContent-Type: text/plain\r\nTrailer: X-Sum\r\n\r\n"+
					"5\r\nhello\r\n0\r\nX-Sum: 42\r\n\r\n")
			case strings.HasPrefix(head, "GET /204 "):
				io.WriteString(nc, "HTTP/1.1 204 No Content\r\nX-Empty: yes\r\n\r\n")
			case strings.HasPrefix(head, "HEAD "):
				io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")
			default:
				io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			}
		}
	})
	for _, m := range h2Modes {
		t.Run(m.name, func(t *testing.T) {
			p, tp := startH2Proxy(t, k, loopTo(be.addr), m.tls)
			c := dialH2Raw(t, p.addr, tp, 0)
			tests := []struct {
				name, method, path string
				status             string
				body               string
				fields             map[string][]string
				absent             []string
				trailers           map[string]string
				// bodyless: the HEADERS end the stream; no DATA.
				bodyless bool
				// date: the proxy's own answer carries a Date (a
				// backend's is relayed as it came, as over HTTP/1.1).
				date bool
			}{
				{name: "chunked answer", method: "GET", path: "/chunked", status: "200", body: "hello",
					fields: map[string][]string{"x-upper": {"1"}, "content-type": {"text/plain"}, "trailer": {"X-Sum"}},
					absent: []string{"content-length"}, trailers: map[string]string{"x-sum": "42"}},
				{name: "HEAD proxied", method: "HEAD", path: "/head", status: "200", bodyless: true,
					fields: map[string][]string{"content-length": {"100"}}},
				{name: "204 proxied", method: "GET", path: "/204", status: "204", bodyless: true,
					fields: map[string][]string{"x-empty": {"yes"}}, absent: []string{"content-length"}},
				{name: "fixed answer", method: "GET", path: "/fixed/x", status: "200", body: "fixed", date: true,
					fields: map[string][]string{"x-test": {"1"}, "content-length": {"5"}}},
				{name: "HEAD of a fixed answer", method: "HEAD", path: "/fixed/x", status: "200", bodyless: true, date: true,
					fields: map[string][]string{"x-test": {"1"}, "content-length": {"5"}}},
				{name: "CONNECT refused", method: "CONNECT", path: "", status: "405", body: "CONNECT is not supported\n", date: true},
				{name: "after them all", method: "GET", path: "/", status: "200", body: "ok"},
			}
			for i, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					c.t = t
					id := uint32(2*i + 1)
					c.request(id, tt.method, tt.path, true)
					r := c.response(id)
					if r.reset || r.status != tt.status || string(r.body) != tt.body {
						t.Fatalf("got (%q, %q, reset %v %v), want (%q, %q, no reset)", r.status, r.body, r.reset, r.code, tt.status, tt.body)
					}
					checkWireFields(t, "head", r.fields)
					checkWireFields(t, "trailers", r.trailers)
					if got := len(r.field("date")) == 1; got != tt.date {
						t.Errorf("date: got %q, want one: %v", r.field("date"), tt.date)
					}
					for name, want := range tt.fields {
						if got := r.field(name); !equalStrings(got, want) {
							t.Errorf("%s: got %q, want %q", name, got, want)
						}
					}
					for _, name := range tt.absent {
						if got := r.field(name); got != nil {
							t.Errorf("%s: got %q, want it absent", name, got)
						}
					}
					gotTr := map[string]string{}
					for _, f := range r.trailers {
						gotTr[f.Name] = f.Value
					}
					if len(gotTr) != len(tt.trailers) {
						t.Errorf("trailers: got %v, want %v", gotTr, tt.trailers)
					}
					for name, v := range tt.trailers {
						if gotTr[name] != v {
							t.Errorf("trailer %s: got %q, want %q", name, gotTr[name], v)
						}
					}
					if tt.bodyless && r.dataFrames != 0 {
						t.Errorf("got %d DATA frames, want the HEADERS to end the stream", r.dataFrames)
					}
				})
			}
		})
	}
}

// TestLoopH2Respond serves fixed answers on HTTP/2 streams: GET and HEAD
// (the length said, no body), and a 1 MiB answer, more than the client's
// initial windows, whole.
func TestLoopH2Respond(t *testing.T) { run(t, testLoopH2Respond) }

func testLoopH2Respond(t *testing.T, k netpoll.Kind) {
	for _, m := range h2Modes {
		t.Run(m.name, func(t *testing.T) {
			p, tp := startH2Proxy(t, k, loopConfig{}, m.tls)
			c := newH2Client(t, p.addr, tp)
			tests := []struct {
				method, path string
				status       int
				body         string
				length       int64
				header       map[string]string
			}{
				{"GET", "/fixed/a", 200, "fixed", 5, map[string]string{"X-Test": "1", "Content-Length": "5"}},
				{"HEAD", "/fixed/a", 200, "", 5, map[string]string{"X-Test": "1", "Content-Length": "5"}},
				{"GET", "/big-fixed", 200, string(bigFixed.Body), int64(len(bigFixed.Body)), nil},
				{"HEAD", "/big-fixed", 200, "", int64(len(bigFixed.Body)), nil},
			}
			for _, tt := range tests {
				t.Run(tt.method+" "+tt.path, func(t *testing.T) {
					r, err := c.do(context.Background(), tt.method, tt.path, nil, nil, nil)
					if err != nil {
						t.Fatal(err)
					}
					if r.status != tt.status || r.body != tt.body || r.length != tt.length {
						t.Errorf("got (%d, %d bytes, length %d), want (%d, %d bytes, length %d)", r.status, len(r.body), r.length, tt.status, len(tt.body), tt.length)
					}
					for name, v := range tt.header {
						if got := r.header.Get(name); got != v {
							t.Errorf("%s: got %q, want %q", name, got, v)
						}
					}
					if r.header.Get("Date") == "" {
						t.Error("date: got none, want one")
					}
					if rec := p.nextRec(t); rec.Status != tt.status || rec.Err != nil {
						t.Errorf("record: got (%v, %v), want (%v, nil)", rec.Status, rec.Err, tt.status)
					}
				})
			}
			if n := c.dials.Load(); n != 1 {
				t.Errorf("got %d client connections, want 1", n)
			}
		})
	}
}

// TestLoopH2RequestBodies sends request bodies on HTTP/2 streams: with a
// declared length they reach the backend with it; without one they are
// chunked, and the request's trailers arrive as the chunked body's
// trailers; large ones (more than the stream's window) arrive whole.
func TestLoopH2RequestBodies(t *testing.T) { run(t, testLoopH2RequestBodies) }

func testLoopH2RequestBodies(t *testing.T, k netpoll.Kind) {
	large := randomBody(3<<20+7, 1)
	tests := []struct {
		name    string
		body    []byte
		length  bool // the client declares the length
		trailer http.Header
		wantTE  string
		wantCL  string
		wantTr  http.Header // the trailers the backend reads
	}{
		{name: "declared length", body: []byte("hello"), length: true, wantCL: "5"},
		{name: "no length: chunked", body: []byte("hello world"), wantTE: "chunked"},
		{name: "no length, trailers", body: []byte("hello"), trailer: http.Header{"X-Sum": {"99"}, "X-Other": {"a"}},
			wantTE: "chunked", wantTr: http.Header{"X-Sum": {"99"}, "X-Other": {"a"}}},
		{name: "large, declared length", body: large, length: true, wantCL: strconv.Itoa(len(large))},
		{name: "large, chunked", body: large, wantTE: "chunked"},
		{name: "empty, chunked", body: []byte{}, wantTE: "chunked"},
	}
	for _, m := range h2Modes {
		t.Run(m.name, func(t *testing.T) {
			got := make(chan h1Request, 1)
			be := recordingBackend(t, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", got)
			p, tp := startH2Proxy(t, k, loopTo(be.addr), m.tls)
			c := newH2Client(t, p.addr, tp)
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					var body io.Reader = bytes.NewReader(tt.body)
					if !tt.length {
						body = struct{ io.Reader }{body} // length unknown
					}
					var trailer http.Header
					if tt.trailer != nil {
						// Declared up front, sent after the body.
						trailer = http.Header{}
						for name := range tt.trailer {
							trailer[name] = nil
						}
						body = &trailerFiller{r: body, dst: trailer, src: tt.trailer}
					}
					r, err := c.do(context.Background(), "POST", "/upload", body, nil, trailer)
					if err != nil || r.status != 200 || r.body != "ok" {
						t.Fatalf("got (%v, %d, %q), want (nil, 200, ok)", err, r.status, r.body)
					}
					req, data := nextRequest(t, got).parsed(t)
					if data != string(tt.body) {
						t.Errorf("body: got %d bytes (sum %x), want %d (sum %x)", len(data), sha256.Sum256([]byte(data)), len(tt.body), sha256.Sum256(tt.body))
					}
					if te := strings.Join(req.TransferEncoding, ","); te != tt.wantTE {
						t.Errorf("transfer-encoding: got %q, want %q", te, tt.wantTE)
					}
					if cl := req.Header.Get("Content-Length"); cl != tt.wantCL {
						t.Errorf("content-length: got %q, want %q", cl, tt.wantCL)
					}
					for name, vs := range tt.wantTr {
						if got := req.Trailer[name]; !equalStrings(got, vs) {
							t.Errorf("trailer %s: got %q, want %q", name, got, vs)
						}
					}
					if rec := p.nextRec(t); rec.Status != 200 || rec.Err != nil {
						t.Errorf("record: got (%v, %v), want (200, nil)", rec.Status, rec.Err)
					}
				})
			}
		})
	}
}

// trailerFiller reads r, and sets the trailers from src into dst at its
// end, as a client that computes them while sending does.
type trailerFiller struct {
	r        io.Reader
	dst, src http.Header
}

func (f *trailerFiller) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		for k, v := range f.src {
			f.dst[k] = v
		}
	}
	return n, err
}

// TestLoopH2ResponseTrailers relays an HTTP/1.1 backend's chunked answer
// with trailers: the trailers arrive as HTTP/2 trailers, after the body.
func TestLoopH2ResponseTrailers(t *testing.T) { run(t, testLoopH2ResponseTrailers) }

func testLoopH2ResponseTrailers(t *testing.T, k netpoll.Kind) {
	hb, _ := newHTTPBackend(t, httpMux())
	for _, m := range h2Modes {
		t.Run(m.name, func(t *testing.T) {
			p, tp := startH2Proxy(t, k, loopTo(hb.Listener.Addr().String()), m.tls)
			c := newH2Client(t, p.addr, tp)
			r := c.get("/chunked")
			if r.status != 200 || r.body != "part1,part2" || r.trailer.Get("X-Sum") != "42" {
				t.Errorf("got (%d, %q, trailers %v), want (200, part1,part2, X-Sum 42)", r.status, r.body, r.trailer)
			}
			if rec := p.nextRec(t); rec.Status != 200 || rec.Err != nil || rec.Bytes != int64(len("part1,part2")) {
				t.Errorf("record: got (%v, %v, %d bytes), want (200, nil, 11)", rec.Status, rec.Err, rec.Bytes)
			}
		})
	}
}

// TestLoopH2LargeResponse relays answers of several MiB, more than the
// client's windows, over HTTP/2: whole and intact, with a declared length
// and chunked.
func TestLoopH2LargeResponse(t *testing.T) { run(t, testLoopH2LargeResponse) }

func testLoopH2LargeResponse(t *testing.T, k netpoll.Kind) {
	big := randomBody(6<<20+3, 2)
	mux := http.NewServeMux()
	mux.HandleFunc("/length", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(big)))
		w.Write(big)
	})
	mux.HandleFunc("/chunked", func(w http.ResponseWriter, r *http.Request) {
		for b := big; len(b) > 0; {
			n := min(len(b), 100_000)
			w.Write(b[:n])
			w.(http.Flusher).Flush()
			b = b[n:]
		}
	})
	hb, _ := newHTTPBackend(t, mux)
	for _, m := range h2Modes {
		t.Run(m.name, func(t *testing.T) {
			p, tp := startH2Proxy(t, k, loopTo(hb.Listener.Addr().String()), m.tls)
			c := newH2Client(t, p.addr, tp)
			for _, path := range []string{"/length", "/chunked"} {
				r := c.get(path)
				if r.status != 200 || r.body != string(big) {
					t.Errorf("%s: got (%d, %d bytes, sum %x), want (200, %d bytes, sum %x)", path, r.status, len(r.body),
						sha256.Sum256([]byte(r.body)), len(big), sha256.Sum256(big))
				}
				if rec := p.nextRec(t); rec.Status != 200 || rec.Err != nil || rec.Bytes != int64(len(big)) {
					t.Errorf("%s: record: got (%v, %v, %d bytes), want (200, nil, %d)", path, rec.Status, rec.Err, rec.Bytes, len(big))
				}
			}
		})
	}
}

// TestLoopH2FlowControl reads answers with small receive windows, given
// back only as the data is read: no DATA frame passes the windows, and
// every answer (forwarded, fixed, from a file) arrives whole.
func TestLoopH2FlowControl(t *testing.T) { run(t, testLoopH2FlowControl) }

func testLoopH2FlowControl(t *testing.T, k netpoll.Kind) {
	hb, _ := newHTTPBackend(t, httpMux())
	file := randomBody(1<<20+11, 3)
	for _, m := range h2Modes {
		t.Run(m.name, func(t *testing.T) {
			p, tp := startH2Proxy(t, k, loopTo(hb.Listener.Addr().String()), m.tls)
			addFileRoute(t, p, map[string][]byte{"f.bin": file})
			c := dialH2Raw(t, p.addr, tp, 16384)
			tests := []struct {
				path string
				want []byte
			}{
				{"/size/2000000", bytes.Repeat([]byte("s"), 2000000)},
				{"/big-fixed", bigFixed.Body},
				{"/files/f.bin", file},
				{"/chunked", []byte("part1,part2")},
			}
			for i, tt := range tests {
				id := uint32(2*i + 1)
				c.request(id, "GET", tt.path, true)
				r := c.response(id)
				if r.reset || r.status != "200" || !bytes.Equal(r.body, tt.want) {
					t.Errorf("%s: got (%q, %d bytes, reset %v %v), want (200, %d bytes)", tt.path, r.status, len(r.body), r.reset, r.code, len(tt.want))
				}
			}
		})
	}
}

// addFileRoute adds a route serving files (internal/static's planner,
// the loop's own file answers) under /files/ in front of p's routes.
func addFileRoute(t *testing.T, p *loopProxy, files map[string][]byte) *static.Handler {
	t.Helper()
	h := fileHandler(t, files)
	tab, err := route.New([]route.Entry[*proxy.Route]{
		{Name: "files", PathPrefix: "/files/", Value: &proxy.Route{Name: "files", Files: h}},
		{Name: "fixed", PathPrefix: "/fixed/", Value: &proxy.Route{Name: "fixed", Respond: &fixedRoute}},
		{Name: "big", Path: "/big-fixed", Value: &proxy.Route{Name: "big", Respond: &bigFixed}},
		{Name: "up", Value: &proxy.Route{Name: "up", Upstream: p.up}},
	})
	if err != nil {
		t.Fatal(err)
	}
	p.pipe.Swap(&proxy.Graph{Routes: tab, Upstreams: []*proxy.Upstream{p.up}, Recorder: p})
	return h
}

// TestLoopH2Files serves static files on HTTP/2 streams: whole, a range,
// HEAD, a conditional request, a missing file, and a 4 MiB file whole.
func TestLoopH2Files(t *testing.T) { run(t, testLoopH2Files) }

func testLoopH2Files(t *testing.T, k netpoll.Kind) {
	big := randomBody(4<<20, 4)
	for _, m := range h2Modes {
		t.Run(m.name, func(t *testing.T) {
			p, tp := startH2Proxy(t, k, loopConfig{}, m.tls)
			mid := randomBody(30<<10, 7) // held in memory by the planner
			addFileRoute(t, p, map[string][]byte{"a.txt": []byte("hello, files\n"), "mid.bin": mid, "big.bin": big})
			c := newH2Client(t, p.addr, tp)
			r := c.get("/files/a.txt")
			etag := r.header.Get("Etag")
			if r.status != 200 || r.body != "hello, files\n" || etag == "" {
				t.Fatalf("whole: got (%d, %q, etag %q), want (200, the file, an etag)", r.status, r.body, etag)
			}
			tests := []struct {
				name, method string
				hdr          http.Header
				status       int
				body         string
				length       string
			}{
				{"range", "GET", http.Header{"Range": {"bytes=7-"}}, 206, "files\n", "6"},
				{"head", "HEAD", nil, 200, "", "13"},
				{"conditional", "GET", http.Header{"If-None-Match": {etag}}, 304, "", ""},
				{"missing", "GET", nil, 404, "", ""},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					path := "/files/a.txt"
					if tt.status == 404 {
						path = "/files/missing"
					}
					r, err := c.do(context.Background(), tt.method, path, nil, tt.hdr, nil)
					if err != nil {
						t.Fatal(err)
					}
					if r.status != tt.status || (tt.status != 404 && r.body != tt.body) {
						t.Errorf("got (%d, %q), want (%d, %q)", r.status, r.body, tt.status, tt.body)
					}
					if tt.length != "" && r.header.Get("Content-Length") != tt.length {
						t.Errorf("content-length: got %q, want %q", r.header.Get("Content-Length"), tt.length)
					}
				})
			}
			if r := c.get("/files/mid.bin"); r.status != 200 || r.body != string(mid) {
				t.Errorf("held in memory: got (%d, %d bytes), want (200, the %d bytes)", r.status, len(r.body), len(mid))
			}
			if r := c.get("/files/big.bin"); r.status != 200 || r.body != string(big) {
				t.Errorf("big: got (%d, %d bytes), want (200, the %d bytes)", r.status, len(r.body), len(big))
			}
		})
	}
}

// TestLoopH2ManyStreams runs 50 streams at once on one connection, fixed
// answers, downloads and uploads mixed: each gets its own answer.
func TestLoopH2ManyStreams(t *testing.T) { run(t, testLoopH2ManyStreams) }

func testLoopH2ManyStreams(t *testing.T, k netpoll.Kind) {
	hb, _ := newHTTPBackend(t, httpMux())
	for _, m := range h2Modes {
		t.Run(m.name, func(t *testing.T) {
			p, tp := startH2Proxy(t, k, loopTo(hb.Listener.Addr().String()), m.tls)
			c := newH2Client(t, p.addr, tp)
			c.get("/fixed/warm") // the connection, before the streams race for it
			const n = 50
			errs := make(chan error, n)
			for i := 0; i < n; i++ {
				go func() {
					var (
						r    h2Resp
						err  error
						want string
					)
					switch i % 3 {
					case 0:
						r, err = c.do(context.Background(), "GET", fmt.Sprintf("/fixed/%d", i), nil, nil, nil)
						want = "fixed"
					case 1:
						r, err = c.do(context.Background(), "GET", fmt.Sprintf("/size/%d", 1000*i+1), nil, nil, nil)
						want = strings.Repeat("s", 1000*i+1)
					case 2:
						body := randomBody(3000*i+5, uint64(i))
						r, err = c.do(context.Background(), "POST", "/echo", bytes.NewReader(body), nil, nil)
						want = string(body)
					}
					switch {
					case err != nil:
						errs <- fmt.Errorf("stream %d: %w", i, err)
					case r.status != 200 || r.body != want:
						errs <- fmt.Errorf("stream %d: got (%d, %d bytes), want (200, %d bytes)", i, r.status, len(r.body), len(want))
					default:
						errs <- nil
					}
				}()
			}
			for i := 0; i < n; i++ {
				if err := <-errs; err != nil {
					t.Error(err)
				}
			}
			if got := c.dials.Load(); got != 1 {
				t.Errorf("got %d client connections, want 1", got)
			}
		})
	}
}

// TestLoopH2StreamLimitAbuse has a client open more streams than
// SETTINGS_MAX_CONCURRENT_STREAMS before it resets them (rapid reset in
// bursts): the first answer to the abuse is GOAWAY ENHANCE_YOUR_CALM, not
// a reset of each stream over the limit, whether the client had
// acknowledged the server's SETTINGS or not.
func TestLoopH2StreamLimitAbuse(t *testing.T) { run(t, testLoopH2StreamLimitAbuse) }

func testLoopH2StreamLimitAbuse(t *testing.T, k netpoll.Kind) {
	be := silentBackend(t)
	for _, m := range h2Modes {
		for _, acked := range []bool{false, true} {
			name := m.name + "/before the SETTINGS ack"
			if acked {
				name = m.name + "/after the SETTINGS ack"
			}
			t.Run(name, func(t *testing.T) {
				stats := new(h2.Stats)
				cfg := loopTo(be.addr)
				cfg.opts.HTTP2.Stats = stats
				p, tp := startH2Proxy(t, k, cfg, m.tls)
				c := dialH2Raw(t, p.addr, tp, 0)
				first := uint32(1)
				if acked {
					// next acknowledges the server's SETTINGS on its
					// way to the answer.
					c.request(1, "GET", "/fixed/x", true)
					if r := c.response(1); r.status != "200" {
						t.Fatalf("got %q, want 200", r.status)
					}
					p.nextRec(t)
					first = 3
				}
				const burst = 300 // over the default limit of 128
				for id := first; id < first+2*burst; id += 2 {
					c.request(id, "GET", "/up", true)
				}
				for id := first; id < first+2*burst; id += 2 {
					c.fr.WriteRSTStream(id, http2.ErrCodeCancel)
				}
				for {
					ev, err := c.next()
					if err != nil {
						t.Fatalf("got %v, want GOAWAY", err)
					}
					if ev.typ == http2.FrameGoAway {
						if ev.code != http2.ErrCodeEnhanceYourCalm {
							t.Errorf("got GOAWAY %v, want ENHANCE_YOUR_CALM", ev.code)
						}
						break
					}
					if ev.typ == http2.FrameRSTStream {
						t.Fatalf("got RST_STREAM %v on stream %d before the GOAWAY, want GOAWAY first", ev.code, ev.stream)
					}
				}
				if got := stats.RefusedStreamCloses.Load(); got != 1 {
					t.Errorf("got RefusedStreamCloses %d, want 1", got)
				}
				// The streams taken (as many as the limit) end as the
				// client's doing; no other reached the pipeline.
				for i := 0; i < int(h2.DefaultMaxConcurrentStreams); i++ {
					if rec := p.nextRec(t); rec.Status != 499 {
						t.Fatalf("record %d: got %d (%v), want 499", i, rec.Status, rec.Err)
					}
				}
			})
		}
	}
}

// TestLoopH2UnfinishedHeaderBlock has a client send a header block
// without END_HEADERS and stop: the connection holds the block encoded,
// no more than the header list size (64 KiB), and ends it (GOAWAY
// ENHANCE_YOUR_CALM) once read_header_timeout has passed, as an
// unfinished HTTP/1.1 head gets 408 then; a block past the header list
// size ends the connection at once.
func TestLoopH2UnfinishedHeaderBlock(t *testing.T) { run(t, testLoopH2UnfinishedHeaderBlock) }

func testLoopH2UnfinishedHeaderBlock(t *testing.T, k netpoll.Kind) {
	tests := []struct {
		name  string
		size  int
		flood bool // past the bound: GOAWAY at once
	}{
		{"stalled under the bound", 60 << 10, false},
		{"past the bound", 120 << 10, true},
	}
	for _, m := range h2Modes {
		for _, tt := range tests {
			t.Run(m.name+"/"+tt.name, func(t *testing.T) {
				stats := new(h2.Stats)
				cfg := loopTo("127.0.0.1:1")
				cfg.opts.ReadHeaderTimeout = 300 * time.Millisecond
				cfg.opts.IdleTimeout = time.Minute
				cfg.opts.HTTP2.Stats = stats
				p, tp := startH2Proxy(t, k, cfg, m.tls)
				c := dialH2Raw(t, p.addr, tp, 0)
				// A first request has the SETTINGS exchanged, so that the
				// client writes nothing inside the block.
				c.request(1, "GET", "/fixed/x", true)
				c.response(1)
				start := time.Now()
				c.hb.Reset()
				for _, f := range [][2]string{{":method", "GET"}, {":scheme", c.scheme}, {":path", "/"}, {":authority", c.host}} {
					c.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
				}
				for c.hb.Len() < tt.size {
					// Never indexed, and not shortened by Huffman coding.
					c.enc.WriteField(hpack.HeaderField{Name: "x-pad", Value: strings.Repeat("\xfe", 1000), Sensitive: true})
				}
				block := c.hb.Bytes()
				c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: block[:16384]})
				for off := 16384; off < len(block); off += 16384 {
					c.fr.WriteContinuation(3, false, block[off:min(off+16384, len(block))])
				}
				if !tt.flood {
					var held int
					waitFor(t, "the block to be held", func() bool {
						held = p.headerBlockBytes()
						return held >= tt.size
					})
					if held > h2.DefaultMaxHeaderListSize {
						t.Errorf("got %d bytes held for a block of %d, want at most the header list size, %d", held, len(block), h2.DefaultMaxHeaderListSize)
					}
				}
				for {
					ev := c.mustNext()
					if ev.typ != http2.FrameGoAway {
						continue
					}
					if ev.code != http2.ErrCodeEnhanceYourCalm {
						t.Errorf("got GOAWAY %v, want ENHANCE_YOUR_CALM", ev.code)
					}
					break
				}
				// The sweep ticks HTTP/2 connections once a second.
				if el := time.Since(start); !tt.flood && el > 300*time.Millisecond+3*time.Second {
					t.Errorf("got GOAWAY after %v, want it within the 300ms read_header_timeout (and a tick)", el)
				}
				closes := &stats.HeaderTimeoutCloses
				if tt.flood {
					closes = &stats.HeaderFloodCloses
				}
				if got := closes.Load(); got != 1 {
					t.Errorf("got %d closes by the limit, want 1", got)
				}
			})
		}
	}
}

// headerBlockBytes adds up what the loops' HTTP/2 connections hold for
// header blocks not finished yet.
func (p *loopProxy) headerBlockBytes() int {
	n := 0
	for _, l := range p.eng.loops {
		l.do(func() {
			for c := l.conns.head; c != nil; c = c.next {
				if c.h2 != nil {
					n += c.h2.conn.HeaderBlockBytes()
				}
			}
		})
	}
	return n
}

// TestLoopH2ClientResets has the client reset its stream (RST_STREAM
// CANCEL) while the backend has not answered, and while the answer
// streams: the request ends as 499 (not the backend's fault), the backend
// connection is closed rather than pooled, and the client's connection
// goes on serving its other streams.
func TestLoopH2ClientResets(t *testing.T) { run(t, testLoopH2ClientResets) }

func testLoopH2ClientResets(t *testing.T, k netpoll.Kind) {
	tests := []struct {
		name string
		// midBody: the backend sends its head and part of its body
		// before it stalls, and the client reads some of it first.
		midBody bool
	}{
		{"at the backend", false},
		{"mid-body", true},
	}
	for _, m := range h2Modes {
		for _, tt := range tests {
			t.Run(m.name+"/"+tt.name, func(t *testing.T) {
				reached := make(chan struct{}, 1)
				closed := make(chan struct{}, 1)
				be := startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
					head := readReqHead(br)
					if head == "" {
						return
					}
					if strings.HasPrefix(head, "GET /quick ") {
						io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nquick")
						return
					}
					if tt.midBody {
						io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 10000000\r\n\r\n")
						nc.Write(bytes.Repeat([]byte("m"), 64<<10))
					}
					reached <- struct{}{}
					// Nothing more comes from the proxy on this
					// connection: a read returns when it is closed.
					io.Copy(io.Discard, br)
					closed <- struct{}{}
				})
				stats := &h2.Stats{}
				cfg := loopTo(be.addr)
				cfg.opts.HTTP2.Stats = stats
				p, tp := startH2Proxy(t, k, cfg, m.tls)
				c := newH2Client(t, p.addr, tp)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, "GET", c.base+"/slow", nil)
				resDone := make(chan error, 1)
				go func() {
					resp, err := c.tr.RoundTrip(req)
					if err == nil {
						// Some of the body, then the client gives up.
						_, err = io.ReadFull(resp.Body, make([]byte, 1000))
						cancel()
						_, err2 := io.ReadAll(resp.Body)
						resp.Body.Close()
						if err == nil {
							err = err2
						}
					}
					resDone <- err
				}()
				select {
				case <-reached:
				case <-time.After(testTimeout):
					t.Fatal("the request did not reach the backend")
				}
				if !tt.midBody {
					cancel()
				}
				if err := <-resDone; err == nil {
					t.Fatal("the client got its whole answer, want it to have given up")
				}
				rec := p.nextRec(t)
				if rec.Status != proxy.StatusClientClosed || !errors.Is(rec.Err, wire.ErrClientGone) {
					t.Errorf("got (%v, %v), want (%v, %v)", rec.Status, rec.Err, proxy.StatusClientClosed, wire.ErrClientGone)
				}
				select {
				case <-closed:
				case <-time.After(testTimeout):
					t.Fatal("the backend connection was not closed")
				}
				if got := p.guard.outcomes(); len(got) != 1 || got[0] != proxy.Ignored {
					t.Errorf("got outcomes %v, want [Ignored]", got)
				}
				if n := p.idleBackendConns(); n != 0 {
					t.Errorf("got %d idle backend connections, want 0", n)
				}
				if n := stats.PeerResets.Load(); n != 1 {
					t.Errorf("got %d resets from the client counted, want 1", n)
				}
				if r := c.get("/quick"); r.status != 200 || r.body != "quick" {
					t.Errorf("next stream: got (%d, %q), want (200, quick)", r.status, r.body)
				}
				if n := c.dials.Load(); n != 1 {
					t.Errorf("got %d client connections, want 1 (the reset costs its stream only)", n)
				}
			})
		}
	}
}

// TestLoopH2BackendFailures has the backend fail a stream's request in
// each way it can: the stream gets the pipeline's answer (502, 504) or,
// once its answer has begun, a reset; the record says the backend failed;
// retries work as for HTTP/1.1; and the connection serves its next stream.
func TestLoopH2BackendFailures(t *testing.T) { run(t, testLoopH2BackendFailures) }

func testLoopH2BackendFailures(t *testing.T, k netpoll.Kind) {
	answering := func(t *testing.T, resp string) string {
		return startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
			if readReqHead(br) != "" {
				io.WriteString(nc, resp)
			}
		}).addr
	}
	tests := []struct {
		name    string
		cfg     func(t *testing.T) loopConfig
		status  int // the answer's, or 0 for a reset stream
		body    string
		wantErr error
		attempt int
	}{
		{name: "dial refused", cfg: func(t *testing.T) loopConfig { return loopTo(deadAddr(t)) },
			status: 502, body: string(bodyBadGateway), wantErr: wire.ErrConnect, attempt: 1},
		{name: "malformed head", cfg: func(t *testing.T) loopConfig {
			return loopTo(answering(t, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nx"))
		}, status: 502, body: string(bodyBadGateway), wantErr: wire.ErrBackend, attempt: 1},
		{name: "101 nobody asked for", cfg: func(t *testing.T) loopConfig {
			return loopTo(answering(t, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"))
		}, status: 502, body: string(bodyBadGateway), wantErr: wire.ErrBackend, attempt: 1},
		{name: "no head in time", cfg: func(t *testing.T) loopConfig {
			be := startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
				readReqHead(br)
				io.Copy(io.Discard, br)
			})
			cfg := loopTo(be.addr)
			cfg.to.ResponseHeaderTimeout = 100 * time.Millisecond
			return cfg
		}, status: 504, wantErr: wire.ErrTimeout, attempt: 1},
		{name: "closes mid body", cfg: func(t *testing.T) loopConfig {
			return loopTo(answering(t, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b"))
		}, status: 0, wantErr: wire.ErrBackend, attempt: 1},
		{name: "connect error retried on the next backend", cfg: func(t *testing.T) loopConfig {
			cfg := loopConfig{backends: []string{deadAddr(t), okBackend(t, nil).addr}, to: defaultTransport}
			cfg.retry = proxy.RetryPolicy{Attempts: 1, OnConnectError: true}
			return cfg
		}, status: 200, body: "ok", attempt: 2},
	}
	for _, m := range h2Modes {
		for _, tt := range tests {
			t.Run(m.name+"/"+tt.name, func(t *testing.T) {
				p, tp := startH2Proxy(t, k, tt.cfg(t), m.tls)
				c := newH2Client(t, p.addr, tp)
				r, err := c.do(context.Background(), "GET", "/x", nil, nil, nil)
				switch {
				case tt.status == 0:
					// Which code resets it: TestLoopH2BackendFailureMidBodyIsInternalError.
					var se http2.StreamError
					if !errors.As(err, &se) {
						t.Errorf("got (%v, %d, %q), want the stream reset", err, r.status, r.body)
					}
				case err != nil:
					t.Errorf("got %v, want an answer", err)
				case r.status != tt.status || tt.body != "" && r.body != tt.body:
					t.Errorf("got (%d, %q), want (%d, %q)", r.status, r.body, tt.status, tt.body)
				}
				rec := p.nextRec(t)
				if tt.wantErr != nil && !errors.Is(rec.Err, tt.wantErr) || tt.wantErr == nil && rec.Err != nil {
					t.Errorf("record: got %v, want %v", rec.Err, tt.wantErr)
				}
				if rec.Attempts != tt.attempt {
					t.Errorf("record: got %d attempts, want %d", rec.Attempts, tt.attempt)
				}
				if r := c.get("/fixed/next"); r.status != 200 || r.body != "fixed" {
					t.Errorf("next stream: got (%d, %q), want (200, fixed)", r.status, r.body)
				}
				if n := c.dials.Load(); n != 1 {
					t.Errorf("got %d client connections, want 1 (a failed stream costs its stream only)", n)
				}
			})
		}
	}
}

// TestLoopH2AnswerBeforeBody answers a request whose body the client has
// not sent (a fixed answer reads none): the answer goes out whole, then
// RST_STREAM NO_ERROR tells the client to stop sending (RFC 9113 §8.1),
// and the connection goes on.
func TestLoopH2AnswerBeforeBody(t *testing.T) { run(t, testLoopH2AnswerBeforeBody) }

func testLoopH2AnswerBeforeBody(t *testing.T, k netpoll.Kind) {
	for _, m := range h2Modes {
		t.Run(m.name, func(t *testing.T) {
			p, tp := startH2Proxy(t, k, loopConfig{}, m.tls)
			c := dialH2Raw(t, p.addr, tp, 0)
			c.request(1, "POST", "/fixed/post", false, "content-length", "100000")
			c.fr.WriteData(1, false, []byte("only the start"))
			var r h2RawResp
			for done := false; !done; {
				ev := c.mustNext()
				if ev.stream != 1 {
					t.Fatalf("got a %v frame on stream %d, want stream 1's", ev.typ, ev.stream)
				}
				switch ev.typ {
				case http2.FrameHeaders:
					r.fields = ev.fields
				case http2.FrameData:
					r.body = append(r.body, ev.data...)
					if ev.end {
						r.status = "ended"
					}
				case http2.FrameRSTStream:
					r.reset, r.code = true, ev.code
					done = true
				}
			}
			if string(r.body) != "fixed" || r.status != "ended" || r.code != http2.ErrCodeNo {
				t.Errorf("got (%q, end of stream %v, reset %v), want (fixed, the answer ended, then RST_STREAM NO_ERROR)", r.body, r.status == "ended", r.code)
			}
			c.request(3, "GET", "/fixed/next", true)
			if r := c.response(3); r.status != "200" || string(r.body) != "fixed" {
				t.Errorf("next stream: got (%q, %q), want (200, fixed)", r.status, r.body)
			}
		})
	}
}

// TestLoopH2RequestFrames sends requests frame by frame, as x/net's
// client does not: a declared length with trailers (which HTTP/1.1 has no
// place for with a length: dropped), DATA in pieces ended by an empty
// frame, trailers with no DATA at all, cookies in several fields (one
// field again, RFC 9113 §8.2.3), and Expect, which means nothing across
// the hop.
func TestLoopH2RequestFrames(t *testing.T) { run(t, testLoopH2RequestFrames) }

func testLoopH2RequestFrames(t *testing.T, k netpoll.Kind) {
	tests := []struct {
		name     string
		method   string
		fields   []string // name, value pairs after the pseudo-fields
		data     []string // DATA frames; the last ends the stream unless trailers follow
		trailers []string
		wantTE   string
		wantCL   string
		wantBody string
		wantTr   map[string]string
		want     map[string][]string // fields of the head the backend reads
		absent   []string
	}{
		{name: "length, then trailers", method: "POST", fields: []string{"content-length", "5"},
			data: []string{"he", "llo"}, trailers: []string{"x-sum", "99"},
			wantCL: "5", wantBody: "hello", absent: []string{"x-sum", "trailer"}},
		{name: "no length, pieces, empty DATA ends it", method: "POST", data: []string{"abc", "de", ""},
			wantTE: "chunked", wantBody: "abcde"},
		{name: "no length, trailers and no DATA", method: "PUT", trailers: []string{"x-sum", "99", "x-more", "a b"},
			wantTE: "chunked", wantTr: map[string]string{"X-Sum": "99", "X-More": "a b"}},
		{name: "cookies in several fields", method: "GET", fields: []string{"cookie", "a=1", "x-other", "o", "cookie", "b=2"},
			want: map[string][]string{"cookie": {"a=1; b=2"}, "x-other": {"o"}}},
		{name: "expect dropped", method: "POST", fields: []string{"content-length", "3", "expect", "100-continue"},
			data: []string{"abc"}, wantCL: "3", wantBody: "abc", absent: []string{"expect"}},
		{name: "large head", method: "GET", fields: []string{"x-big", strings.Repeat("v", 40<<10), "x-after", "a"},
			want: map[string][]string{"x-big": {strings.Repeat("v", 40<<10)}, "x-after": {"a"}}},
	}
	for _, m := range h2Modes {
		t.Run(m.name, func(t *testing.T) {
			got := make(chan h1Request, 1)
			be := recordingBackend(t, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", got)
			p, tp := startH2Proxy(t, k, loopTo(be.addr), m.tls)
			c := dialH2Raw(t, p.addr, tp, 0)
			for i, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					c.t = t
					id := uint32(2*i + 1)
					c.request(id, tt.method, "/r", len(tt.data) == 0 && len(tt.trailers) == 0, tt.fields...)
					for j, d := range tt.data {
						c.fr.WriteData(id, j == len(tt.data)-1 && len(tt.trailers) == 0, []byte(d))
					}
					if len(tt.trailers) > 0 {
						c.hb.Reset()
						for j := 0; j+1 < len(tt.trailers); j += 2 {
							c.enc.WriteField(hpack.HeaderField{Name: tt.trailers[j], Value: tt.trailers[j+1]})
						}
						c.writeBlock(id, true)
					}
					if r := c.response(id); r.reset || r.status != "200" || string(r.body) != "ok" {
						t.Fatalf("got (%q, %q, reset %v %v), want (200, ok)", r.status, r.body, r.reset, r.code)
					}
					br := nextRequest(t, got)
					req, body := br.parsed(t)
					if body != tt.wantBody {
						t.Errorf("body: got %q, want %q", body, tt.wantBody)
					}
					if te := strings.Join(req.TransferEncoding, ","); te != tt.wantTE {
						t.Errorf("transfer-encoding: got %q, want %q", te, tt.wantTE)
					}
					if cl := req.Header.Get("Content-Length"); cl != tt.wantCL {
						t.Errorf("content-length: got %q, want %q", cl, tt.wantCL)
					}
					gotTr := map[string]string{}
					for name, vs := range req.Trailer {
						gotTr[name] = strings.Join(vs, ",")
					}
					if fmt.Sprint(gotTr) != fmt.Sprint(tt.wantTr) && len(gotTr)+len(tt.wantTr) > 0 {
						t.Errorf("trailers: got %v, want %v", gotTr, tt.wantTr)
					}
					f := headFields(br.head)
					for name, want := range tt.want {
						if !equalStrings(f[name], want) {
							t.Errorf("%s: got %q, want %q", name, f[name], want)
						}
					}
					for _, name := range tt.absent {
						if v, ok := f[name]; ok {
							t.Errorf("%s: got %q, want it absent", name, v)
						}
					}
				})
			}
		})
	}
}

// TestLoopH2BackendFailureMidBodyIsInternalError has the backend close
// its connection in the middle of an answer's body: the stream, whose
// answer cannot be completed, is reset with INTERNAL_ERROR, as
// streamDone means to (a CANCEL would tell the client the server merely
// lost interest, RFC 9113 §7).
func TestLoopH2BackendFailureMidBodyIsInternalError(t *testing.T) {
	run(t, func(t *testing.T, k netpoll.Kind) {
		be := startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
			if readReqHead(br) != "" {
				io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b")
			}
		})
		for _, m := range h2Modes {
			t.Run(m.name, func(t *testing.T) {
				p, tp := startH2Proxy(t, k, loopTo(be.addr), m.tls)
				c := dialH2Raw(t, p.addr, tp, 0)
				c.request(1, "GET", "/", true)
				r := c.response(1)
				if r.status != "200" || !r.reset || r.code != http2.ErrCodeInternal {
					t.Errorf("got (%q, %q, reset %v with %v), want (200, the stream reset with INTERNAL_ERROR)", r.status, r.body, r.reset, r.code)
				}
				if rec := p.nextRec(t); !errors.Is(rec.Err, wire.ErrBackend) {
					t.Errorf("record: got %v, want %v", rec.Err, wire.ErrBackend)
				}
			})
		}
	})
}

// TestLoopH2StreamTimeouts has a stream's client stop sending its body:
// the stream's own deadline (swept with the loop's streams) answers it
// 408, whether the body was to be read whole first or streamed to a
// backend, and the connection goes on serving its other streams.
func TestLoopH2StreamTimeouts(t *testing.T) { run(t, testLoopH2StreamTimeouts) }

func testLoopH2StreamTimeouts(t *testing.T, k netpoll.Kind) {
	closed := make(chan struct{}, 4)
	be := startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
		if readReqHead(br) == "" {
			return
		}
		io.Copy(io.Discard, br)
		closed <- struct{}{}
	})
	tests := []struct {
		name, path string
		length     string
		toBackend  bool
	}{
		{"small body read first", "/fixed/post", "10", false},
		{"body streamed to the backend", "/up", "1000000", true},
	}
	for _, m := range h2Modes {
		for _, tt := range tests {
			t.Run(m.name+"/"+tt.name, func(t *testing.T) {
				cfg := loopTo(be.addr)
				cfg.opts.ReadTimeout = 200 * time.Millisecond
				cfg.opts.IdleTimeout = 10 * time.Second
				p, tp := startH2Proxy(t, k, cfg, m.tls)
				c := dialH2Raw(t, p.addr, tp, 0)
				start := time.Now()
				c.request(1, "POST", tt.path, false, "content-length", tt.length)
				c.fr.WriteData(1, false, []byte("abc"))
				r := c.response(1)
				if r.status != "408" || time.Since(start) > 5*time.Second {
					t.Errorf("got (%q, %q, reset %v %v) after %v, want 408 after the 200ms read timeout", r.status, r.body, r.reset, r.code, time.Since(start))
				}
				if el := time.Since(start); el < 150*time.Millisecond {
					t.Errorf("answered after %v, want at least the read timeout", el)
				}
				rec := p.nextRec(t)
				if rec.Status != 408 {
					t.Errorf("record: got %v (%v), want 408", rec.Status, rec.Err)
				}
				if tt.toBackend {
					if !errors.Is(rec.Err, wire.ErrClientTimeout) {
						t.Errorf("record: got %v, want %v", rec.Err, wire.ErrClientTimeout)
					}
					select {
					case <-closed:
					case <-time.After(testTimeout):
						t.Fatal("the backend connection, its request body cut short, was not closed")
					}
				}
				c.request(3, "GET", "/fixed/next", true)
				for {
					// The first stream may still be reset (NO_ERROR: its
					// body is not wanted) before the next one's answer.
					ev := c.mustNext()
					if ev.stream == 1 && ev.typ == http2.FrameRSTStream {
						continue
					}
					if ev.stream != 3 || ev.typ != http2.FrameHeaders {
						t.Fatalf("got a %v frame on stream %d, want stream 3's answer", ev.typ, ev.stream)
					}
					break
				}
			})
		}
	}
}

// TestLoopH2StalledBodyResetCodes has a stream's client stop sending its
// body: a stream answered whole (the proxy's 408) is then reset with
// NO_ERROR, its body no longer wanted (RFC 9113 §8.1); one whose answer
// was under way (the backend answered before the body was in) is cut and
// reset with CANCEL: the client's stall ended it, not an error of the
// proxy's (INTERNAL_ERROR), and the record says 408.
func TestLoopH2StalledBodyResetCodes(t *testing.T) { run(t, testLoopH2StalledBodyResetCodes) }

func testLoopH2StalledBodyResetCodes(t *testing.T, k netpoll.Kind) {
	be := startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
		head := readReqHead(br)
		if strings.HasPrefix(head, "POST /early") {
			io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nfirst")
		}
		io.Copy(io.Discard, br)
	})
	tests := []struct {
		name, path string
		status     string
		body       string
		code       http2.ErrCode
	}{
		{"answered whole", "/late", "408", "", http2.ErrCodeNo},
		{"answer under way", "/early", "200", "first", http2.ErrCodeCancel},
	}
	for _, m := range h2Modes {
		for _, tt := range tests {
			t.Run(m.name+"/"+tt.name, func(t *testing.T) {
				cfg := loopTo(be.addr)
				cfg.opts.ReadTimeout = 200 * time.Millisecond
				p, tp := startH2Proxy(t, k, cfg, m.tls)
				c := dialH2Raw(t, p.addr, tp, 0)
				c.request(1, "POST", tt.path, false, "content-length", "100000")
				c.fr.WriteData(1, false, []byte("abc"))
				r := c.response(1)
				if r.status != tt.status || tt.body != "" && string(r.body) != tt.body {
					t.Fatalf("got (%q, %q), want (%s, %q)", r.status, r.body, tt.status, tt.body)
				}
				if !r.reset {
					// Answered whole: the reset follows.
					ev := c.mustNext()
					r.reset, r.code = ev.typ == http2.FrameRSTStream && ev.stream == 1, ev.code
				}
				if !r.reset || r.code != tt.code {
					t.Errorf("got the stream reset %v with %v, want reset with %v", r.reset, r.code, tt.code)
				}
				if rec := p.nextRec(t); rec.Status != 408 || !errors.Is(rec.Err, wire.ErrClientTimeout) {
					t.Errorf("record: got (%d, %v), want (408, %v)", rec.Status, rec.Err, wire.ErrClientTimeout)
				}
			})
		}
	}
}

// TestLoopH2ClientCloses has the client close its connection, or reset
// it, with streams at a slow backend: every stream's request ends as 499,
// no backend connection is kept, and no stream is left on the loop.
func TestLoopH2ClientCloses(t *testing.T) { run(t, testLoopH2ClientCloses) }

func testLoopH2ClientCloses(t *testing.T, k netpoll.Kind) {
	tests := []struct {
		name  string
		leave func(nc net.Conn)
	}{
		{"close", func(nc net.Conn) { nc.Close() }},
		{"reset", func(nc net.Conn) {
			if tc, ok := nc.(*net.TCPConn); ok {
				tc.SetLinger(0)
			} else if tc, ok := nc.(*tls.Conn); ok {
				tc.NetConn().(*net.TCPConn).SetLinger(0)
			}
			nc.Close()
		}},
	}
	for _, m := range h2Modes {
		for _, tt := range tests {
			t.Run(m.name+"/"+tt.name, func(t *testing.T) {
				be := startSlowBackend(t)
				p, tp := startH2Proxy(t, k, loopTo(be.addr), m.tls)
				c := dialH2Raw(t, p.addr, tp, 0)
				const n = 3
				for i := 0; i < n; i++ {
					c.request(uint32(2*i+1), "GET", fmt.Sprintf("/slow/%d", i), true)
				}
				for i := 0; i < n; i++ {
					be.waitReached(t)
				}
				if got := p.openStreams(); got != n {
					t.Errorf("got %d streams on the loop, want %d", got, n)
				}
				p.checkInvariants()
				tt.leave(c.nc)
				for i := 0; i < n; i++ {
					if rec := p.nextRec(t); rec.Status != proxy.StatusClientClosed || !errors.Is(rec.Err, wire.ErrClientGone) {
						t.Errorf("got (%v, %v), want (%v, %v)", rec.Status, rec.Err, proxy.StatusClientClosed, wire.ErrClientGone)
					}
				}
				for i := 0; i < n; i++ {
					select {
					case <-be.closed:
					case <-time.After(testTimeout):
						t.Fatalf("%d of %d backend connections closed, want all", i, n)
					}
				}
				waitFor(t, "the connection and its streams to end", func() bool { return p.eng.OpenConns() == 0 && p.openStreams() == 0 })
				if n := p.idleBackendConns(); n != 0 {
					t.Errorf("got %d idle backend connections, want 0", n)
				}
			})
		}
	}
}

// TestLoopH2EarlyAnswer has the backend answer an upload, larger than the
// stream's window, before it has read it: the answer reaches the client,
// the upload is stopped, the backend connection is not reused, and the
// client's connection goes on.
func TestLoopH2EarlyAnswer(t *testing.T) { run(t, testLoopH2EarlyAnswer) }

func testLoopH2EarlyAnswer(t *testing.T, k netpoll.Kind) {
	be := startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
		for h := readReqHead(br); h != ""; h = readReqHead(br) {
			if strings.HasPrefix(h, "POST") {
				io.WriteString(nc, "HTTP/1.1 413 Too Large\r\nContent-Length: 3\r\n\r\nbig")
				io.Copy(io.Discard, br)
				return
			}
			io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	for _, m := range h2Modes {
		t.Run(m.name, func(t *testing.T) {
			p, tp := startH2Proxy(t, k, loopTo(be.addr), m.tls)
			c := newH2Client(t, p.addr, tp)
			accepts := be.accepts.Load()
			r, err := c.do(context.Background(), "POST", "/up", bytes.NewReader(make([]byte, 8<<20)), nil, nil)
			if err != nil || r.status != 413 || r.body != "big" {
				t.Errorf("got (%v, %d, %q), want (nil, 413, big)", err, r.status, r.body)
			}
			if rec := p.nextRec(t); rec.Status != 413 {
				t.Errorf("record: got (%v, %v), want 413", rec.Status, rec.Err)
			}
			if r := c.get("/after"); r.status != 200 || r.body != "ok" {
				t.Errorf("next stream: got (%d, %q), want (200, ok)", r.status, r.body)
			}
			if got := be.accepts.Load() - accepts; got != 2 {
				t.Errorf("got %d backend connections, want 2 (the one whose upload was cut short not reused)", got)
			}
			if n := c.dials.Load(); n != 1 {
				t.Errorf("got %d client connections, want 1", n)
			}
		})
	}
}

// TestLoopH2ResetWhileWindowShut has the client give no window back, so
// that an answer waits for it, then reset the stream: the exchange ends
// as 499, a file answer gives its file back (closed once the planner's
// cache lets go too), a forwarded one its backend connection, and the
// connection goes on.
func TestLoopH2ResetWhileWindowShut(t *testing.T) { run(t, testLoopH2ResetWhileWindowShut) }

func testLoopH2ResetWhileWindowShut(t *testing.T, k netpoll.Kind) {
	hb, _ := newHTTPBackend(t, httpMux())
	for _, m := range h2Modes {
		for _, path := range []string{"/files/big.bin", "/size/3000000"} {
			t.Run(m.name+path, func(t *testing.T) {
				p, tp := startH2Proxy(t, k, loopTo(hb.Listener.Addr().String()), m.tls)
				h := addFileRoute(t, p, map[string][]byte{"big.bin": randomBody(3<<20, 5)})
				c := dialH2Raw(t, p.addr, tp, 16384)
				c.credit = false
				c.request(1, "GET", path, true)
				got := 0
				for got < 16384 {
					ev := c.mustNext()
					if ev.stream != 1 || ev.typ == http2.FrameRSTStream {
						t.Fatalf("got a %v frame on stream %d, want stream 1's answer", ev.typ, ev.stream)
					}
					got += len(ev.data)
				}
				c.fr.WriteRSTStream(1, http2.ErrCodeCancel)
				// A file answer's record keeps its status, as over
				// HTTP/1.1 (TestLoopFiles): the pipeline logs 499 for
				// forwarded and fixed answers only.
				wantStatus := proxy.StatusClientClosed
				if strings.HasPrefix(path, "/files/") {
					wantStatus = 200
				}
				rec := p.nextRec(t)
				if rec.Status != wantStatus || !errors.Is(rec.Err, wire.ErrClientGone) {
					t.Errorf("got (%v, %v), want (%v, %v)", rec.Status, rec.Err, wantStatus, wire.ErrClientGone)
				}
				waitFor(t, "the stream to end", func() bool { return p.openStreams() == 0 })
				c.credit = true
				c.fr.WriteWindowUpdate(0, uint32(65535-c.connWin))
				c.connWin = 65535
				c.request(3, "GET", "/fixed/next", true)
				for {
					ev := c.mustNext()
					if ev.stream == 1 {
						continue // what was on its way before the reset
					}
					if ev.stream != 3 || ev.typ != http2.FrameHeaders {
						t.Fatalf("got a %v frame on stream %d, want stream 3's answer", ev.typ, ev.stream)
					}
					break
				}
				if n := p.idleBackendConns(); path != "/files/big.bin" && n != 0 {
					t.Errorf("got %d idle backend connections, want 0 (the one with an answer cut short closed)", n)
				}
				if strings.HasPrefix(path, "/files/") {
					h.Close()
					waitFor(t, "the file to be closed", func() bool { return !fileOpen(t, "big.bin") })
				}
			})
		}
	}
}

// fileOpen reports whether the process holds a descriptor of a file
// with this base name in a test's temporary directory.
func fileOpen(t *testing.T, name string) bool {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && filepath.Base(target) == name && strings.Contains(target, t.Name()[:min(len(t.Name()), 20)]) {
			return true
		}
	}
	return false
}

// TestLoopH2Shutdown drains the listener, and the engine, with a stream at
// a slow backend: the client gets GOAWAY for every stream and a PING, a
// stream it opened before it answered the PING is still served, the
// final GOAWAY names the last stream served, the streams in flight finish,
// and the connection then closes and Shutdown returns.
func TestLoopH2Shutdown(t *testing.T) { run(t, testLoopH2Shutdown) }

func testLoopH2Shutdown(t *testing.T, k netpoll.Kind) {
	tests := []struct {
		name     string
		shutdown func(p *loopProxy, ctx context.Context) error
	}{
		{"listener", func(p *loopProxy, ctx context.Context) error { return p.ll.Shutdown(ctx) }},
		{"engine", func(p *loopProxy, ctx context.Context) error { return p.eng.Shutdown(ctx) }},
	}
	for _, m := range h2Modes {
		for _, tt := range tests {
			t.Run(m.name+"/"+tt.name, func(t *testing.T) {
				be := startSlowBackend(t)
				p, tp := startH2Proxy(t, k, loopTo(be.addr), m.tls)
				c := dialH2Raw(t, p.addr, tp, 0)
				c.request(1, "GET", "/slow", true)
				be.waitReached(t)
				p.checkInvariants()
				ping, shut := startH2Drain(t, p, c, tt.shutdown)
				// A request already on its way is served.
				c.request(3, "GET", "/fixed/late", true)
				if r := c.response(3); r.status != "200" || string(r.body) != "fixed" {
					t.Errorf("stream opened before the PING's answer: got (%q, %q), want (200, fixed)", r.status, r.body)
				}
				c.fr.WritePing(true, ping)
				ev := c.mustNext()
				if ev.typ != http2.FrameGoAway || ev.code != http2.ErrCodeNo || ev.last != 3 {
					t.Fatalf("got (%v, %v, last %d), want the final GOAWAY NO_ERROR naming stream 3", ev.typ, ev.code, ev.last)
				}
				select {
				case err := <-shut:
					t.Fatalf("Shutdown returned %v with a stream at the backend", err)
				default:
				}
				close(be.release)
				if r := c.response(1); r.status != "200" || string(r.body) != "slow" {
					t.Errorf("stream in flight: got (%q, %q, reset %v), want (200, slow)", r.status, r.body, r.reset)
				}
				c.expectEOF()
				c.nc.Close()
				drainReturned(t, shut)
				if n := p.eng.OpenConns(); n != 0 {
					t.Errorf("got %d open connections, want 0", n)
				}
			})
		}
	}
}

// TestLoopH2IdleTimeout closes an HTTP/2 connection that has had no
// stream for the listener's idle timeout (HTTP2.IdleTimeout left zero
// takes it): GOAWAY NO_ERROR naming the last stream, then the close.
func TestLoopH2IdleTimeout(t *testing.T) { run(t, testLoopH2IdleTimeout) }

func testLoopH2IdleTimeout(t *testing.T, k netpoll.Kind) {
	for _, m := range h2Modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel() // each waits for a tick of the connection's clock
			cfg := loopConfig{}
			cfg.opts.IdleTimeout = 200 * time.Millisecond
			p, tp := startH2Proxy(t, k, cfg, m.tls)
			c := dialH2Raw(t, p.addr, tp, 0)
			c.request(1, "GET", "/fixed/x", true)
			if r := c.response(1); r.status != "200" {
				t.Fatalf("got %q, want 200", r.status)
			}
			start := time.Now()
			ev := c.mustNext()
			if ev.typ != http2.FrameGoAway || ev.code != http2.ErrCodeNo || ev.last != 1 {
				t.Fatalf("got (%v, %v, last %d), want GOAWAY NO_ERROR naming stream 1", ev.typ, ev.code, ev.last)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("idle connection told to go after %v, want about the 200ms timeout (ticks are 1s)", d)
			}
			c.expectEOF()
			c.nc.Close()
			waitFor(t, "the connection to close", func() bool { return p.eng.OpenConns() == 0 })
		})
	}
}

// TestLoopH2PanicCostsOneStream has the recorder panic for one stream's
// request (a fixed answer) while another stream of the connection waits
// for a slow backend: the panic is counted, and the other stream, the
// connection and its next streams go on.
func TestLoopH2PanicCostsOneStream(t *testing.T) {
	run(t, func(t *testing.T, k netpoll.Kind) {
		for _, m := range h2Modes {
			t.Run(m.name, func(t *testing.T) { testH2Panic(t, k, m.tls, "/fixed/panic") })
		}
	})
}

// TestLoopH2PanicInForwardedAnswer is TestLoopH2PanicCostsOneStream with
// the panic in the record of a forwarded answer, which runs on the
// backend connection's event after that connection went back to the
// pool.
func TestLoopH2PanicInForwardedAnswer(t *testing.T) {
	run(t, func(t *testing.T, k netpoll.Kind) {
		for _, m := range h2Modes {
			t.Run(m.name, func(t *testing.T) { testH2Panic(t, k, m.tls, "/panic") })
		}
	})
}

// testH2Panic is the body of the panic tests: the recorder panics for
// requests to path.
func testH2Panic(t *testing.T, k netpoll.Kind, tlsOn bool, path string) {
	var slowSeen atomic.Bool
	release := make(chan struct{})
	be := startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
		for {
			head := readReqHead(br)
			if head == "" {
				return
			}
			if strings.HasPrefix(head, "GET /slow ") {
				slowSeen.Store(true)
				<-release
			}
			io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nbody")
		}
	})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	cfg := loopTo(be.addr)
	cfg.panicPath = path
	p, tp := startH2Proxy(t, k, cfg, tlsOn)
	c := newH2Client(t, p.addr, tp)
	c.get("/fixed/warm")
	<-p.recs
	slow := make(chan h2Resp, 1)
	go func() {
		r, err := c.do(context.Background(), "GET", "/slow", nil, nil, nil)
		if err != nil {
			r.status, r.body = -1, err.Error()
		}
		slow <- r
	}()
	waitFor(t, "the slow request to reach the backend", slowSeen.Load)
	p.checkInvariants()
	// The panicking stream's own outcome is not the point: its answer
	// may have gone before the recorder ran.
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	c.do(ctx, "GET", path, nil, nil, nil)
	cancel()
	waitFor(t, "the panic", func() bool { return p.eng.Panics() == 1 })
	close(release)
	select {
	case r := <-slow:
		if r.status != 200 || r.body != "body" {
			t.Errorf("the other stream: got (%d, %q), want (200, body)", r.status, r.body)
		}
	case <-time.After(testTimeout):
		t.Fatal("the other stream got no answer")
	}
	if r := c.get("/fixed/after"); r.status != 200 || r.body != "fixed" {
		t.Errorf("next stream: got (%d, %q), want (200, fixed)", r.status, r.body)
	}
	if n := c.dials.Load(); n != 1 {
		t.Errorf("got %d client connections, want 1 (the panic costs its stream only)", n)
	}
	if got := p.eng.Panics(); got != 1 {
		t.Errorf("got %d panics counted, want 1", got)
	}
	// With the client's connection still open, every stream has ended:
	// none was left behind by the panic.
	deadline := time.Now().Add(2 * time.Second)
	for p.openStreams() != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := p.openStreams(); n != 0 {
		// Forget them, and the closed connections left in the pools, so
		// that the proxy's shutdown reports instead of panicking the loop
		// (it would end their exchanges a second time, and close fd -1).
		for _, l := range p.eng.loops {
			l.do(func() {
				for l.streams.head != nil {
					l.streams.remove(l.streams.head)
				}
				for _, pl := range l.pools {
					pl.idle = slices.DeleteFunc(pl.idle, func(u *lupconn) bool { return u.fd < 0 })
				}
			})
		}
		t.Fatalf("got %d streams left after the panic, want 0", n)
	}
}

// TestLoopH2CleartextAfterTLSHasNoTLSVersion serves a TLS connection and
// then, on another listener of the same loop, a cleartext one, over
// HTTP/1.1 and over h2c: the cleartext requests have no TLS version for
// the recorders (the access log's tls field), whatever connection the
// loop served before with the same lconn.
func TestLoopH2CleartextAfterTLSHasNoTLSVersion(t *testing.T) {
	run(t, testLoopH2CleartextAfterTLSHasNoTLSVersion)
}

func testLoopH2CleartextAfterTLSHasNoTLSVersion(t *testing.T, k netpoll.Kind) {
	for _, proto := range []string{"HTTP/1.1", "h2c"} {
		t.Run(proto, func(t *testing.T) {
			p, _ := startH2Proxy(t, k, loopConfig{}, false)
			tp := h2TLS(t)
			fd, addr := listenLoopback(t)
			tll, err := p.eng.Attach("tls", []int{fd}, Options{TLS: tp}, p.admit, p.release)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				tll.Stop()
				syscall.Close(fd)
			})
			vers := make(chan string, 16)
			g := p.pipe.Graph()
			p.pipe.Swap(&proxy.Graph{Routes: g.Routes, Upstreams: g.Upstreams, Recorder: versionRecorder{p, vers}})
			nextVersion := func() string {
				t.Helper()
				select {
				case v := <-vers:
					return v
				case <-time.After(testTimeout):
					t.Fatal("no request recorded")
					return ""
				}
			}

			c := dialTLS(t, addr, tp)
			c.send("GET /fixed/tls HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
			if r := c.read("GET"); r.status != 200 {
				t.Fatalf("over TLS: got %d, want 200", r.status)
			}
			if v := nextVersion(); v != "1.3" {
				t.Fatalf("TLS version of the TLS request: got %q, want 1.3", v)
			}
			c.expectClosed(time.Second)
			waitFor(t, "the TLS connection to be closed", func() bool { return p.eng.OpenConns() == 0 })

			switch proto {
			case "HTTP/1.1":
				c := dialRaw(t, p.addr)
				c.send("GET /fixed/clear HTTP/1.1\r\nHost: x\r\n\r\n")
				c.read("GET")
			case "h2c":
				newH2Client(t, p.addr, nil).get("/fixed/clear")
			}
			if v := nextVersion(); v != "" {
				t.Errorf("TLS version of a cleartext %s request: got %q, want none", proto, v)
			}
		})
	}
}

// versionRecorder hands each request's TLS version to vers, then records
// it as p does.
type versionRecorder struct {
	p    *loopProxy
	vers chan<- string
}

func (r versionRecorder) Record(ex wire.Exchange, rec proxy.Record) {
	r.vers <- string(ex.TLSVersion())
	r.p.Record(ex, rec)
}

// TestLoopH2CListenerServesHTTP1 checks an h2c listener still serves
// HTTP/1.1: requests whose first bytes could begin the preface (POST,
// PUT, a lone "P") are HTTP/1.1 once they part from it, keep-alive
// works, and the preface counts only at a connection's start.
func TestLoopH2CListenerServesHTTP1(t *testing.T) { run(t, testLoopH2CListenerServesHTTP1) }

func testLoopH2CListenerServesHTTP1(t *testing.T, k netpoll.Kind) {
	hb, _ := newHTTPBackend(t, httpMux())
	p, _ := startH2Proxy(t, k, loopTo(hb.Listener.Addr().String()), false)
	tests := []struct {
		name   string
		pieces []string
		method string
		status int
		body   string
	}{
		{"GET", []string{"GET /fixed/a HTTP/1.1\r\nHost: x\r\n\r\n"}, "GET", 200, "fixed"},
		{"POST", []string{"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"}, "POST", 200, "hello"},
		{"PUT in pieces", []string{"P", "UT /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"}, "PUT", 200, "abc"},
		{"PRI of HTTP/1.1", []string{"PRI", " /fixed/a HTTP/1.1\r\nHost: x\r\n\r\n"}, "PRI", 200, "fixed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dialRaw(t, p.addr)
			for i, piece := range tt.pieces {
				if i > 0 {
					c.expectOpen(50 * time.Millisecond)
				}
				c.send(piece)
			}
			if r := c.read(tt.method); r.status != tt.status || r.body != tt.body {
				t.Fatalf("got (%d, %q), want (%d, %q)", r.status, r.body, tt.status, tt.body)
			}
			// Keep-alive: the next request, even the preface, is HTTP/1.1.
			c.send("GET /fixed/b HTTP/1.1\r\nHost: x\r\n\r\n")
			if r := c.read("GET"); r.status != 200 || r.body != "fixed" {
				t.Errorf("next request: got (%d, %q), want (200, fixed)", r.status, r.body)
			}
			c.send(http2.ClientPreface)
			if r := c.read("PRI"); r.status != 505 {
				t.Errorf("preface after a request: got %d, want 505", r.status)
			}
			c.expectClosed(time.Second)
		})
	}
	t.Run("preface in pieces", func(t *testing.T) {
		nc, err := net.DialTimeout("tcp", p.addr, testTimeout)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(testTimeout))
		io.WriteString(nc, http2.ClientPreface[:1])
		rc := &rawClient{t: t, nc: nc, br: bufio.NewReader(nc)}
		rc.expectOpen(50 * time.Millisecond)
		io.WriteString(nc, http2.ClientPreface[1:16])
		rc.expectOpen(50 * time.Millisecond)
		// The rest of the preface, SETTINGS and a request in one write.
		var buf bytes.Buffer
		buf.WriteString(http2.ClientPreface[16:])
		fr := http2.NewFramer(&buf, rc.br)
		fr.WriteSettings()
		var hb bytes.Buffer
		enc := hpack.NewEncoder(&hb)
		for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":path", "/fixed/p"}, {":authority", "x"}} {
			enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true})
		nc.Write(buf.Bytes())
		c := &h2Raw{t: t, nc: nc, fr: http2.NewFramer(nc, rc.br), autoPing: true, connWin: 65535, streamWin: map[uint32]int64{}, initial: 65535,
			dec: hpack.NewDecoder(4096, nil)}
		if r := c.response(1); r.status != "200" || string(r.body) != "fixed" {
			t.Errorf("got (%q, %q), want (200, fixed)", r.status, r.body)
		}
	})
	t.Run("broken preface", func(t *testing.T) {
		c := dialRaw(t, p.addr)
		c.send("PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n")
		c.expectClosed(time.Second)
	})
}

// TestLoopH2PrefaceWithoutH2C checks HTTP/2 is only served where it is
// offered: a cleartext listener without H2C answers the preface as the
// HTTP/1.1 request it reads as (505) and closes; a TLS listener whose
// ALPN does not offer h2 goes on with HTTP/1.1 when a client asks for h2.
func TestLoopH2PrefaceWithoutH2C(t *testing.T) { run(t, testLoopH2PrefaceWithoutH2C) }

func testLoopH2PrefaceWithoutH2C(t *testing.T, k netpoll.Kind) {
	t.Run("cleartext", func(t *testing.T) {
		p := startLoopProxy(t, k, loopConfig{})
		c := dialRaw(t, p.addr)
		c.send(http2.ClientPreface)
		r, err := c.tryRead("PRI")
		if err != nil || r.status != 505 {
			t.Fatalf("got (%v, %d), want an HTTP/1.1 505", err, r.status)
		}
		c.expectClosed(time.Second)
		if n := p.openStreams(); n != 0 {
			t.Errorf("got %d streams, want 0", n)
		}
	})
	t.Run("tls without h2", func(t *testing.T) {
		tp := newTestTLS(t) // ALPN: http/1.1 alone
		cfg := loopConfig{}
		cfg.opts.TLS = tp
		p := startLoopProxy(t, k, cfg)
		nc, err := tls.DialWithDialer(&net.Dialer{Timeout: testTimeout}, "tcp", p.addr,
			&tls.Config{RootCAs: tp.pool, ServerName: "localhost", NextProtos: []string{"h2", "http/1.1"}})
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(testTimeout))
		if got := nc.ConnectionState().NegotiatedProtocol; got != "http/1.1" {
			t.Errorf("ALPN: got %q, want http/1.1", got)
		}
		c := &rawClient{t: t, nc: nc, br: bufio.NewReader(nc)}
		c.send("GET /fixed/ HTTP/1.1\r\nHost: x\r\n\r\n")
		if r := c.read("GET"); r.status != 200 || r.body != "fixed" {
			t.Errorf("got (%d, %q), want (200, fixed)", r.status, r.body)
		}
	})
}

// TestLoopH2TLSServesHTTP1 checks a TLS listener that offers h2 still
// serves a client that asks for http/1.1, or for nothing, with HTTP/1.1.
func TestLoopH2TLSServesHTTP1(t *testing.T) { run(t, testLoopH2TLSServesHTTP1) }

func testLoopH2TLSServesHTTP1(t *testing.T, k netpoll.Kind) {
	p, tp := startH2Proxy(t, k, loopConfig{}, true)
	for _, protos := range [][]string{{"http/1.1"}, nil} {
		t.Run(fmt.Sprint(protos), func(t *testing.T) {
			nc, err := tls.DialWithDialer(&net.Dialer{Timeout: testTimeout}, "tcp", p.addr,
				&tls.Config{RootCAs: tp.pool, ServerName: "localhost", NextProtos: protos})
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			nc.SetDeadline(time.Now().Add(testTimeout))
			if got, want := nc.ConnectionState().NegotiatedProtocol, strings.Join(protos, ""); got != want {
				t.Errorf("ALPN: got %q, want %q", got, want)
			}
			c := &rawClient{t: t, nc: nc, br: bufio.NewReader(nc)}
			for i := 0; i < 2; i++ {
				c.send("GET /fixed/ HTTP/1.1\r\nHost: x\r\n\r\n")
				if r := c.read("GET"); r.status != 200 || r.body != "fixed" {
					t.Errorf("request %d: got (%d, %q), want (200, fixed)", i, r.status, r.body)
				}
			}
		})
	}
}

// TestLoopH2TickDeadlineNotInherited: an lconn that served an HTTP/2
// connection (its tick deadline set) and went back to the free list must
// not carry that deadline into the next connection it serves. A TLS
// connection sets no deadline until its handshake is done, so the stale
// tick fired on a connection still handshaking and panicked (no HTTP/2
// session to tick); seen under h2load's connection churn.
func TestLoopH2TickDeadlineNotInherited(t *testing.T) {
	run(t, func(t *testing.T, k netpoll.Kind) {
		p, tp := startH2Proxy(t, k, loopConfig{}, true)
		c := newH2Client(t, p.addr, tp)
		if r := c.get("/fixed/a"); r.status != 200 {
			t.Fatalf("first request: got %d, want 200", r.status)
		}
		c.close() // its lconn goes back to the loop's free list, tick deadline set
		// The next connection takes that lconn; it only connects, so it
		// stays in its handshake past the old tick deadline.
		nc, err := net.DialTimeout("tcp", p.addr, testTimeout)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		time.Sleep(1500 * time.Millisecond) // past the tick the last use had due, and a sweep
		tc := tls.Client(nc, &tls.Config{RootCAs: tp.pool, ServerName: "localhost", NextProtos: []string{"http/1.1"}})
		tc.SetDeadline(time.Now().Add(testTimeout))
		if _, err := io.WriteString(tc, "GET /fixed/a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
			t.Fatalf("the connection that reused the lconn: got %v, want it served", err)
		}
		out, _ := io.ReadAll(tc)
		if !strings.HasPrefix(string(out), "HTTP/1.1 200") {
			t.Errorf("answer: got %q, want a 200", out)
		}
		if got := p.eng.Panics(); got != 0 {
			t.Errorf("panics: got %d, want 0", got)
		}
	})
}
