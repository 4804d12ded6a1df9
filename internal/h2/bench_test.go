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
// enc, whose state the server's decoder follows.
func requestFrame(enc *hpack.Encoder, buf *bytes.Buffer) []byte {
	buf.Reset()
	for _, f := range []hpack.HeaderField{
		{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "https"},
		{Name: ":authority", Value: "www.example.com"}, {Name: ":path", Value: "/api/v1/items?page=2"},
		{Name: "user-agent", Value: "Mozilla/5.0 (X11; Linux x86_64) Gecko/20100101 Firefox/140.0"},
		{Name: "accept", Value: "application/json"}, {Name: "accept-encoding", Value: "gzip, deflate, br"},
		{Name: "accept-language", Value: "en-US,en;q=0.5"}, {Name: "cookie", Value: "session=0123456789abcdef0123456789abcdef"},
	} {
		enc.WriteField(f)
	}
	block := buf.Bytes()
	frame := appendFrameHeader(nil, len(block), http2.FrameHeaders, http2.FlagHeadersEndStream|http2.FlagHeadersEndHeaders, 1)
	return append(frame, block...)
}

// BenchmarkServerRequest is one request (a HEADERS frame of a
// browser-like GET, its fields in the HPACK table as on a connection
// in use) and its response (HEADERS and a 13-byte DATA frame) through
// a server Conn in memory.
func BenchmarkServerRequest(b *testing.B) {
	out := &discard{}
	h := &benchAnswer{
		fields: fieldList("content-type", "application/json", "cache-control", "no-store"),
		body:   []byte(`{"items":[]}` + "\n"),
	}
	c := NewServerConn(out, h, Config{})
	var wr bytes.Buffer
	fr := http2.NewFramer(&wr, nil)
	wr.WriteString(http2.ClientPreface)
	// Windows as large as they go, so that b.N answers fit (a client
	// would give credit back as it reads).
	fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1})
	fr.WriteWindowUpdate(0, 1<<31-1-65535)
	fr.WriteSettingsAck()
	if _, err := c.Feed(wr.Bytes()); err != nil {
		b.Fatal(err)
	}
	var eb bytes.Buffer
	enc := hpack.NewEncoder(&eb)
	first := requestFrame(enc, &eb)
	frame := requestFrame(enc, &eb) // every field indexed now
	if _, err := c.Feed(first); err != nil {
		b.Fatal(err)
	}
	id := uint32(3)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		binary.BigEndian.PutUint32(frame[5:], id)
		id += 2
		if n, err := c.Feed(frame); err != nil || n != len(frame) {
			b.Fatalf("Feed: %d, %v", n, err)
		}
	}
	b.StopTimer()
	if c.ActiveStreams() != 0 {
		b.Fatalf("got %d streams open, want 0", c.ActiveStreams())
	}
	b.ReportMetric(float64(out.n)/float64(b.N+1), "out-bytes/op")
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
