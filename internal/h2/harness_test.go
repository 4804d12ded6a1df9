package h2

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// rawPeer is the other end of a Conn under test, in memory: it writes
// frames with http2.Framer, feeds them to the Conn in one piece (or in
// pieces), and reads back what the Conn wrote.
type rawPeer struct {
	t    testing.TB
	c    *Conn
	out  bytes.Buffer // what the Conn wrote
	wr   bytes.Buffer // frames written, not yet fed
	in   []byte       // fed, not consumed
	fr   *http2.Framer
	enc  *hpack.Encoder
	eb   bytes.Buffer
	now  time.Time
	err  error // the last Feed or Tick error
	outN int   // Output.Write calls
}

// countingOutput counts the Conn's writes into the peer's buffer.
type countingOutput struct{ p *rawPeer }

func (o countingOutput) Write(b []byte) (int, error) {
	o.p.outN++
	return o.p.out.Write(b)
}

func newRawPeer(t testing.TB) *rawPeer {
	p := &rawPeer{t: t, now: time.Now()}
	p.fr = http2.NewFramer(&p.wr, &p.out)
	p.fr.AllowIllegalWrites = true
	p.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	p.fr.MaxHeaderListSize = 1 << 20
	p.enc = hpack.NewEncoder(&p.eb)
	return p
}

// newServerPeer returns a server Conn with handler h, past the
// prefaces and SETTINGS exchange.
func newServerPeer(t testing.TB, h ServerHandler, cfg Config) *rawPeer {
	p := newRawPeer(t)
	p.c = NewServerConn(countingOutput{p}, h, cfg)
	p.wr.WriteString(http2.ClientPreface)
	p.fr.WriteSettings()
	p.fr.WriteSettingsAck()
	p.feed()
	p.wantHandshake()
	return p
}

// wantHandshake checks the Conn's side of the SETTINGS exchange: its
// SETTINGS, a WINDOW_UPDATE when its connection window is larger than
// the default, and the ACK of ours.
func (p *rawPeer) wantHandshake() {
	p.t.Helper()
	got := describeAll(p.frames())
	want := []string{"SETTINGS", "WINDOW_UPDATE stream=0", "SETTINGS ACK"}
	if p.c.set.connWindow == minWindow {
		want = []string{"SETTINGS", "SETTINGS ACK"}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		p.t.Fatalf("got handshake frames %v, want %v", got, want)
	}
}

// newClientPeer returns a client Conn with handler h, past the
// prefaces and SETTINGS exchange; the server side is the raw peer,
// announcing settings.
func newClientPeer(t testing.TB, h ClientHandler, cfg Config, settings ...http2.Setting) *rawPeer {
	p := newRawPeer(t)
	p.c = NewClientConn(countingOutput{p}, h, cfg)
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(&p.out, preface); err != nil || string(preface) != http2.ClientPreface {
		t.Fatalf("got preface %q (%v), want the client preface", preface, err)
	}
	p.fr.WriteSettings(settings...)
	p.fr.WriteSettingsAck()
	p.feed()
	p.wantHandshake()
	return p
}

// feed feeds what was written to the Conn and returns Feed's error.
func (p *rawPeer) feed() error {
	p.in = append(p.in, p.wr.Bytes()...)
	p.wr.Reset()
	n, err := p.c.Feed(p.in)
	p.in = p.in[n:]
	p.err = err
	return err
}

// tick advances the peer's clock by d and ticks the Conn.
func (p *rawPeer) tick(d time.Duration) error {
	p.now = p.now.Add(d)
	p.err = p.c.Tick(p.now)
	return p.err
}

// block encodes fields as a header block.
func (p *rawPeer) block(fields ...string) []byte {
	p.eb.Reset()
	for i := 0; i+1 < len(fields); i += 2 {
		p.enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return bytes.Clone(p.eb.Bytes())
}

// get is a valid GET request's fields, with extra fields appended.
func get(path string, extra ...string) []string {
	return append([]string{":method", "GET", ":scheme", "https", ":authority", "example.com", ":path", path}, extra...)
}

// post is a valid POST request's fields.
func post(path string, extra ...string) []string {
	f := get(path, extra...)
	f[1] = "POST"
	return f
}

func (p *rawPeer) headers(id uint32, end bool, fields ...string) {
	p.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: p.block(fields...), EndStream: end, EndHeaders: true})
}

func (p *rawPeer) data(id uint32, end bool, b []byte) { p.fr.WriteData(id, end, b) }

func (p *rawPeer) raw(typ http2.FrameType, flags http2.Flags, id uint32, payload []byte) {
	p.fr.WriteRawFrame(typ, flags, id, payload)
}

// frames returns every frame the Conn has written since the last call.
func (p *rawPeer) frames() []http2.Frame {
	var fs []http2.Frame
	for p.out.Len() > 0 {
		f, err := p.fr.ReadFrame()
		if err != nil {
			p.t.Fatalf("reading the Conn's output: %v", err)
		}
		fs = append(fs, copyFrame(f))
	}
	return fs
}

// copyFrame detaches a frame from the Framer's buffers.
func copyFrame(f http2.Frame) http2.Frame {
	switch f := f.(type) {
	case *http2.DataFrame:
		return &dataFrame{FrameHeader: f.FrameHeader, data: bytes.Clone(f.Data())}
	case *http2.GoAwayFrame:
		g := *f
		return &goAwayFrame{GoAwayFrame: g, debug: string(f.DebugData())}
	}
	return f
}

// dataFrame and goAwayFrame are copies of Framer frames whose payload
// the Framer would reuse.
type dataFrame struct {
	http2.FrameHeader
	data []byte
}

type goAwayFrame struct {
	http2.GoAwayFrame
	debug string
}

// describe renders a frame compactly for comparisons.
func describe(f http2.Frame) string {
	switch f := f.(type) {
	case *http2.SettingsFrame:
		if f.IsAck() {
			return "SETTINGS ACK"
		}
		return "SETTINGS"
	case *http2.WindowUpdateFrame:
		return fmt.Sprintf("WINDOW_UPDATE stream=%d", f.StreamID)
	case *http2.MetaHeadersFrame:
		var b strings.Builder
		fmt.Fprintf(&b, "HEADERS stream=%d", f.StreamID)
		if f.StreamEnded() {
			b.WriteString(" END_STREAM")
		}
		for _, hf := range f.Fields {
			fmt.Fprintf(&b, " %s=%s", hf.Name, hf.Value)
		}
		return b.String()
	case *dataFrame:
		end := ""
		if f.Flags.Has(http2.FlagDataEndStream) {
			end = " END_STREAM"
		}
		return fmt.Sprintf("DATA stream=%d len=%d%s", f.StreamID, len(f.data), end)
	case *http2.RSTStreamFrame:
		return fmt.Sprintf("RST_STREAM stream=%d %v", f.StreamID, f.ErrCode)
	case *goAwayFrame:
		return fmt.Sprintf("GOAWAY last=%d %v", f.LastStreamID, f.ErrCode)
	case *http2.PingFrame:
		if f.IsAck() {
			return fmt.Sprintf("PING ACK %q", f.Data[:])
		}
		return fmt.Sprintf("PING %q", f.Data[:])
	}
	return fmt.Sprintf("%T", f)
}

func describeAll(fs []http2.Frame) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = describe(f)
	}
	return out
}

// wantFrames checks the frames written since the last look against
// want (exactly, in order).
func (p *rawPeer) wantFrames(want ...string) []http2.Frame {
	p.t.Helper()
	fs := p.frames()
	got := describeAll(fs)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		p.t.Fatalf("got frames\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
	return fs
}

// wantConnError checks that the connection ended with GOAWAY code.
func (p *rawPeer) wantConnError(code http2.ErrCode) {
	p.t.Helper()
	var ce *ConnError
	if !errors.As(p.c.Err(), &ce) || ce.Code != code {
		p.t.Fatalf("got connection error %v, want %v", p.c.Err(), code)
	}
	fs := p.frames()
	if len(fs) == 0 {
		p.t.Fatalf("got no frames, want GOAWAY %v", code)
	}
	g, ok := fs[len(fs)-1].(*goAwayFrame)
	if !ok || g.ErrCode != code {
		p.t.Fatalf("got last frame %s, want GOAWAY %v", describe(fs[len(fs)-1]), code)
	}
}

// event is what a recording handler saw.
type event struct {
	kind   string // request, response, data, trailers, writable, reset
	stream uint32
	head   string // method and path, or status
	fields []Field
	data   []byte
	end    bool
	err    error
}

func (e event) String() string {
	switch e.kind {
	case "request", "response":
		return fmt.Sprintf("%s %d %s end=%v", e.kind, e.stream, e.head, e.end)
	case "data":
		return fmt.Sprintf("data %d %q end=%v", e.stream, e.data, e.end)
	case "trailers":
		var b strings.Builder
		fmt.Fprintf(&b, "trailers %d", e.stream)
		for _, f := range e.fields {
			fmt.Fprintf(&b, " %s=%s", f.Name, f.Value)
		}
		return b.String()
	case "reset":
		return fmt.Sprintf("reset %d %v", e.stream, e.err)
	}
	return fmt.Sprintf("%s %d", e.kind, e.stream)
}

// recorder is a handler for both roles that records what it is told
// and, when set, calls the hooks.
type recorder struct {
	events    []event
	streams   map[uint32]*Stream
	onRequest func(s *Stream, h *RequestHead, end bool)
	onData    func(s *Stream, p []byte, end bool)
	onWrite   func(s *Stream)
	onReset   func(s *Stream, err error)
}

func newRecorder() *recorder { return &recorder{streams: map[uint32]*Stream{}} }

func (r *recorder) OnRequest(s *Stream, h *RequestHead, end bool) {
	r.streams[s.ID()] = s
	r.events = append(r.events, event{kind: "request", stream: s.ID(), head: string(h.Method) + " " + string(h.Path), fields: cloneFields(h.Fields), end: end})
	if r.onRequest != nil {
		r.onRequest(s, h, end)
	}
}

func (r *recorder) OnResponse(s *Stream, h *ResponseHead, end bool) {
	r.events = append(r.events, event{kind: "response", stream: s.ID(), head: fmt.Sprint(h.Status), fields: cloneFields(h.Fields), end: end})
}

func (r *recorder) OnData(s *Stream, p []byte, end bool) {
	r.events = append(r.events, event{kind: "data", stream: s.ID(), data: bytes.Clone(p), end: end})
	if r.onData != nil {
		r.onData(s, p, end)
	}
}

func (r *recorder) OnTrailers(s *Stream, fields []Field) {
	r.events = append(r.events, event{kind: "trailers", stream: s.ID(), fields: cloneFields(fields)})
}

func (r *recorder) OnWritable(s *Stream) {
	r.events = append(r.events, event{kind: "writable", stream: s.ID()})
	if r.onWrite != nil {
		r.onWrite(s)
	}
}

func (r *recorder) OnReset(s *Stream, err error) {
	r.events = append(r.events, event{kind: "reset", stream: s.ID(), err: err})
	if r.onReset != nil {
		r.onReset(s, err)
	}
}

// take returns the events recorded since the last call, as strings.
func (r *recorder) take() []string {
	out := make([]string, len(r.events))
	for i, e := range r.events {
		out[i] = e.String()
	}
	r.events = r.events[:0]
	return out
}

// wantEvents checks the recorded events against want.
func (r *recorder) wantEvents(t testing.TB, want ...string) {
	t.Helper()
	got := r.take()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got events\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}
