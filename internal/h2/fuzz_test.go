package h2

import (
	"bytes"
	"strings"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// fuzzServer answers requests and echoes bodies as far as windows go,
// recording what it is told.
type fuzzServer struct {
	log strings.Builder
}

func (h *fuzzServer) OnRequest(s *Stream, r *RequestHead, end bool) {
	h.log.WriteString("request " + string(r.Method) + " " + string(r.Path) + "\n")
	s.WriteHeaders(200, []Field{{Name: []byte("x-method"), Value: r.Method}}, end)
}

func (h *fuzzServer) OnData(s *Stream, p []byte, end bool) {
	h.log.WriteString("data\n")
	n, _ := s.WriteData(p, end)
	s.Consumed(n)
}

func (h *fuzzServer) OnTrailers(s *Stream, fields []Field) {
	h.log.WriteString("trailers\n")
	s.WriteTrailers(fields)
}

func (h *fuzzServer) OnWritable(s *Stream) { h.log.WriteString("writable\n") }

func (h *fuzzServer) OnReset(s *Stream, err error) { h.log.WriteString("reset " + err.Error() + "\n") }

func (h *fuzzServer) OnResponse(s *Stream, r *ResponseHead, end bool) {
	h.log.WriteString("response\n")
}

// newFuzzServer is a server Conn for the fuzzers.
func newFuzzServer(o Output, h *fuzzServer) *Conn {
	return NewServerConn(o, h, Config{MaxConcurrentStreams: 4, StreamWindow: 65535, ConnWindow: 65535})
}

// newFuzzClient is a client Conn with two streams open, one of them
// still sending its body.
func newFuzzClient(o Output, h *fuzzServer) *Conn {
	c := NewClientConn(o, h, Config{StreamWindow: 65535, ConnWindow: 65535})
	c.OpenStream(request("GET", "/"), true)
	c.OpenStream(request("POST", "/"), false)
	return c
}

// runFuzz feeds in, cut at the given points, to a Conn made by newConn,
// as a driver would, and returns what it wrote and what its handler
// saw.
func runFuzz(newConn func(Output, *fuzzServer) *Conn, in []byte, cuts []int) (out, log string, consumed int) {
	var o bytes.Buffer
	h := &fuzzServer{}
	c := newConn(&o, h)
	var held []byte
	prev := 0
	for _, cut := range append(cuts, len(in)) {
		if cut < prev || cut > len(in) {
			continue
		}
		held = append(held, in[prev:cut]...)
		prev = cut
		n, err := c.Feed(held)
		consumed += n
		held = held[n:]
		if err != nil {
			break
		}
	}
	return o.String(), h.log.String(), consumed
}

// FuzzServerFeed: whatever a client sends, the machine does not panic,
// and the bytes cut anywhere give the same result as in one piece.
func FuzzServerFeed(f *testing.F) {
	var seed bytes.Buffer
	fr := http2.NewFramer(&seed, nil)
	var eb bytes.Buffer
	enc := hpack.NewEncoder(&eb)
	block := func(fields ...string) []byte {
		eb.Reset()
		for i := 0; i+1 < len(fields); i += 2 {
			enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
		}
		return bytes.Clone(eb.Bytes())
	}
	seed.WriteString(http2.ClientPreface)
	fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 100})
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block(post("/a", "content-length", "4")...), EndHeaders: true})
	fr.WriteData(1, false, []byte("ab"))
	fr.WriteDataPadded(1, false, []byte("cd"), []byte{0, 0})
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block("x-t", "1"), EndStream: true, EndHeaders: true})
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: block(get("/b")...)[:3]})
	fr.WriteContinuation(3, true, block(get("/b")...)[3:])
	fr.WriteWindowUpdate(0, 1000)
	fr.WritePing(false, [8]byte{1})
	fr.WriteRSTStream(3, http2.ErrCodeCancel)
	fr.WritePriority(5, http2.PriorityParam{StreamDep: 3})
	fr.WriteGoAway(0, http2.ErrCodeNo, nil)
	f.Add(seed.Bytes(), 30, 200)
	f.Add([]byte(http2.ClientPreface+"\x00\x00\x00\x04\x00\x00\x00\x00\x00"), 24, 25)
	f.Fuzz(func(t *testing.T, in []byte, cut1, cut2 int) { fuzzCuts(t, newFuzzServer, in, cut1, cut2) })
}

// FuzzClientFeed does for a client Conn with streams open what
// FuzzServerFeed does for a server.
func FuzzClientFeed(f *testing.F) {
	var seed bytes.Buffer
	fr := http2.NewFramer(&seed, nil)
	var eb bytes.Buffer
	enc := hpack.NewEncoder(&eb)
	for _, hf := range []hpack.HeaderField{{Name: ":status", Value: "200"}, {Name: "content-type", Value: "text/plain"}} {
		enc.WriteField(hf)
	}
	fr.WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 10}, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 10})
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: bytes.Clone(eb.Bytes()), EndHeaders: true})
	fr.WriteData(1, true, []byte("body"))
	fr.WriteWindowUpdate(3, 100)
	fr.WriteRSTStream(3, http2.ErrCodeRefusedStream)
	fr.WriteGoAway(1, http2.ErrCodeNo, []byte("bye"))
	f.Add(seed.Bytes(), 10, 40)
	f.Fuzz(func(t *testing.T, in []byte, cut1, cut2 int) { fuzzCuts(t, newFuzzClient, in, cut1, cut2) })
}

// fuzzCuts compares in fed whole and fed cut at cut1 and cut2.
func fuzzCuts(t *testing.T, newConn func(Output, *fuzzServer) *Conn, in []byte, cut1, cut2 int) {
	wantOut, wantLog, wantN := runFuzz(newConn, in, nil)
	gotOut, gotLog, gotN := runFuzz(newConn, in, []int{cut1, cut2})
	if gotOut != wantOut || gotLog != wantLog || gotN != wantN {
		t.Errorf("cut at %d and %d: got %d bytes out, %d consumed, log\n%s\nwant %d bytes out, %d consumed, log\n%s", cut1, cut2, len(gotOut), gotN, gotLog, len(wantOut), wantN, wantLog)
	}
}
