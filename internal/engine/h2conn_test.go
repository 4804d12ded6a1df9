package engine

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/helios-lb/helios/internal/netpoll"
)

// HTTP/2 clients on the loops (h2conn.go, h2send.go), in the matrix's
// cells with an HTTP/2 client (modes with onlyClients(clientH2,
// clientH2C), matrix_test.go): h2c with prior knowledge and TLS with ALPN
// h2, each stream an exchange of the one machine. golang.org/x/net/http2's client shows what
// a real client gets; h2Raw, which writes and reads frames itself, shows
// what is on the wire (field names, flow-control windows, GOAWAY, resets).

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

// do sends a request and reads its answer whole; err is what failed.
func (c *h2Client) do(ctx context.Context, method, path string, body io.Reader, hdr http.Header, trailer http.Header) (clientResp, error) {
	ctx, cancel := context.WithTimeout(ctx, testTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return clientResp{}, err
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	req.Trailer = trailer
	return roundTrip(c.tr, req)
}

// get sends a GET and fails the test if it fails.
func (c *h2Client) get(path string) clientResp {
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
	return requestBackend(t, func(nc net.Conn, r h1Request) {
		got <- r
		io.WriteString(nc, answer)
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
	return recv(t, got, "a request at the backend")
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
