package h2

import (
	"bytes"
	"encoding/binary"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// discard is an Output that keeps nothing.
type discard struct{ n int64 }

func (d *discard) Write(p []byte) (int, error) {
	d.n += int64(len(p))
	return len(p), nil
}

// benchAnswer answers every request with a small body.
type benchAnswer struct {
	fields []Field
	body   []byte
}

func (h *benchAnswer) OnRequest(s *Stream, r *RequestHead, end bool) {
	s.WriteHeaders(200, h.fields, false)
	s.WriteData(h.body, true)
}
func (h *benchAnswer) OnData(s *Stream, p []byte, end bool) { s.Consumed(len(p)) }
func (h *benchAnswer) OnTrailers(s *Stream, fields []Field) {}
func (h *benchAnswer) OnWritable(s *Stream)                 {}
func (h *benchAnswer) OnReset(s *Stream, err error)         {}

// requestFrame encodes a browser-like GET as one HEADERS frame with
// enc, whose state the server's decoder follows. Its token is
// never indexed (RFC 7541 §6.2.3), so every request's block carries it
// as a literal: the decoder reads it into its scratch each time.
func requestFrame(enc *hpack.Encoder, buf *bytes.Buffer) []byte {
	buf.Reset()
	for _, f := range []hpack.HeaderField{
		{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "https"},
		{Name: ":authority", Value: "www.example.com"}, {Name: ":path", Value: "/api/v1/items?page=2"},
		{Name: "user-agent", Value: "Mozilla/5.0 (X11; Linux x86_64) Gecko/20100101 Firefox/140.0"},
		{Name: "accept", Value: "application/json"}, {Name: "accept-encoding", Value: "gzip, deflate, br"},
		{Name: "accept-language", Value: "en-US,en;q=0.5"}, {Name: "cookie", Value: "session=0123456789abcdef0123456789abcdef"},
		{Name: "x-token", Value: "bearer abcdefghijklmnopqrstuvwxyz", Sensitive: true},
	} {
		enc.WriteField(f)
	}
	block := buf.Bytes()
	frame := appendFrameHeader(nil, len(block), http2.FrameHeaders, http2.FlagHeadersEndStream|http2.FlagHeadersEndHeaders, 1)
	return append(frame, block...)
}

// serverBench is a server Conn that answers every request with a small
// body, and a request to feed it: one HEADERS frame of a browser-like
// GET, its fields in the HPACK table as on a connection in use (but for
// its never-indexed token), the stream id patched per request.
type serverBench struct {
	c     *Conn
	out   *discard
	frame []byte
	id    uint32
}

func newServerBench(tb testing.TB) *serverBench {
	out := &discard{}
	h := &benchAnswer{
		fields: fieldList("content-type", "application/json", "cache-control", "no-store"),
		body:   []byte(`{"items":[]}` + "\n"),
	}
	c := NewServerConn(out, h, Config{})
	var wr bytes.Buffer
	fr := http2.NewFramer(&wr, nil)
	wr.WriteString(http2.ClientPreface)
	// Windows as large as they go, so that every answer fits (a client
	// would give credit back as it reads).
	fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1})
	fr.WriteWindowUpdate(0, 1<<31-1-65535)
	fr.WriteSettingsAck()
	if _, err := c.Feed(wr.Bytes()); err != nil {
		tb.Fatal(err)
	}
	var eb bytes.Buffer
	enc := hpack.NewEncoder(&eb)
	first := requestFrame(enc, &eb)
	if _, err := c.Feed(first); err != nil {
		tb.Fatal(err)
	}
	return &serverBench{c: c, out: out, frame: requestFrame(enc, &eb), id: 3}
}

// request feeds one request on the next stream; its answer is written
// before Feed returns.
func (b *serverBench) request(tb testing.TB) {
	binary.BigEndian.PutUint32(b.frame[5:], b.id)
	b.id += 2
	if n, err := b.c.Feed(b.frame); err != nil || n != len(b.frame) {
		tb.Fatalf("Feed: %d, %v", n, err)
	}
}

// BenchmarkServerRequest is one request (serverBench) and its response
// (HEADERS and a 13-byte DATA frame) through a server Conn in memory.
func BenchmarkServerRequest(b *testing.B) {
	sb := newServerBench(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sb.request(b)
	}
	b.StopTimer()
	if sb.c.ActiveStreams() != 0 {
		b.Fatalf("got %d streams open, want 0", sb.c.ActiveStreams())
	}
	b.ReportMetric(float64(sb.out.n)/float64(b.N+1), "out-bytes/op")
}

// TestServerRequestAllocs checks a request and its answer through a
// server Conn allocate one object, the Stream (not reused: a handler may
// keep it): HPACK decodes into the connection's buffers (the token, a
// literal every time, included) and encodes without allocating.
func TestServerRequestAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts under the race detector mean nothing")
	}
	sb := newServerBench(t)
	for i := 0; i < 10; i++ {
		sb.request(t)
	}
	if allocs := testing.AllocsPerRun(200, func() { sb.request(t) }); allocs != 1 {
		t.Errorf("got %v allocs per request, want 1", allocs)
	}
}

// BenchmarkServerDownload writes a response body in 16 KiB frames
// through a server Conn whose peer keeps the windows open.
func BenchmarkServerDownload(b *testing.B) {
	r := newRecorder()
	p := newServerPeer(b, r, Config{})
	p.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1})
	p.fr.WriteWindowUpdate(0, 1<<31-1-65535)
	p.headers(1, true, get("/")...)
	p.feed()
	s := r.streams[1]
	s.WriteHeaders(200, nil, false)
	p.out.Reset()
	chunk := make([]byte, 16384)
	out := &discard{}
	p.c.out = out
	b.SetBytes(int64(len(chunk)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if n, err := s.WriteData(chunk, false); n != len(chunk) || err != nil {
			// Give the windows back and go on.
			s.sendWindow, p.c.sendWindow = 1<<31-1, 1<<31-1
		}
	}
}

// BenchmarkServerUpload feeds request-body DATA frames of 16 KiB and
// consumes them, WINDOW_UPDATEs included.
func BenchmarkServerUpload(b *testing.B) {
	r := &benchAnswer{}
	p := newServerPeer(b, r, Config{})
	p.headers(1, false, post("/")...)
	p.feed()
	p.c.out = &discard{}
	p.fr.WriteData(1, false, make([]byte, 16384))
	frame := bytes.Clone(p.wr.Bytes())
	p.wr.Reset()
	b.SetBytes(16384)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := p.c.Feed(frame); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClientRequest is one request through a client Conn and its
// response (HEADERS and a small DATA frame from the server), as the
// proxy does towards an h2c backend.
func BenchmarkClientRequest(b *testing.B) {
	p := newClientPeer(b, &benchClient{}, Config{})
	p.c.out = &discard{}
	h := request("GET", "/pkg.Svc/Get", field("content-type", "application/grpc"), field("te", "trailers"))
	// The response to every stream, stream id patched in.
	p.headers(1, false, ":status", "200", "content-type", "application/grpc")
	p.data(1, false, []byte("\x00\x00\x00\x00\x02hi"))
	p.headers(1, true, "grpc-status", "0")
	p.c.OpenStream(h, true)
	p.feed()
	p.headers(1, false, ":status", "200", "content-type", "application/grpc")
	p.data(1, false, []byte("\x00\x00\x00\x00\x02hi"))
	p.headers(1, true, "grpc-status", "0")
	resp := bytes.Clone(p.wr.Bytes())
	p.wr.Reset()
	var ids []int
	for off := 0; off < len(resp); {
		ids = append(ids, off+5)
		off += frameHeaderLen + parseFrameHeader(resp[off:]).length
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s, err := p.c.OpenStream(h, true)
		if err != nil {
			b.Fatal(err)
		}
		for _, at := range ids {
			binary.BigEndian.PutUint32(resp[at:], s.ID())
		}
		if _, err := p.c.Feed(resp); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if p.c.ActiveStreams() != 0 {
		b.Fatalf("got %d streams open, want 0", p.c.ActiveStreams())
	}
}

type benchClient struct{}

func (benchClient) OnResponse(s *Stream, h *ResponseHead, end bool) {}
func (benchClient) OnData(s *Stream, p []byte, end bool)            { s.Consumed(len(p)) }
func (benchClient) OnTrailers(s *Stream, fields []Field)            {}
func (benchClient) OnWritable(s *Stream)                            {}
func (benchClient) OnReset(s *Stream, err error)                    {}
