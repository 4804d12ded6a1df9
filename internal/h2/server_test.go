package h2

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"golang.org/x/net/http2"
)

// answer makes a recorder answer every request with 200 and body.
func answer(r *recorder, body string) {
	r.onRequest = func(s *Stream, h *RequestHead, end bool) {
		s.WriteHeaders(200, fieldList("Content-Type", "text/plain", "Connection", "keep-alive"), body == "")
		if body != "" {
			s.WriteData([]byte(body), true)
		}
	}
}

func TestServerRequestAndResponse(t *testing.T) {
	r := newRecorder()
	answer(r, "hello")
	p := newServerPeer(t, r, Config{})
	p.outN = 0
	p.headers(1, true, get("/a?b=c", "accept", "*/*", "cookie", "a=1", "cookie", "b=2")...)
	if err := p.feed(); err != nil {
		t.Fatal(err)
	}
	r.wantEvents(t, "request 1 GET /a?b=c end=true")
	// Fields are lowercased, connection-specific ones left out.
	p.wantFrames("HEADERS stream=1 :status=200 content-type=text/plain", "DATA stream=1 len=5 END_STREAM")
	if n := p.c.ActiveStreams(); n != 0 {
		t.Errorf("got %d active streams, want 0", n)
	}
	if p.outN != 1 {
		t.Errorf("got %d Output writes for the exchange, want 1", p.outN)
	}
}

func TestServerRequestHead(t *testing.T) {
	var got RequestHead
	r := newRecorder()
	r.onRequest = func(s *Stream, h *RequestHead, end bool) {
		got = RequestHead{Method: bytes.Clone(h.Method), Scheme: bytes.Clone(h.Scheme), Authority: bytes.Clone(h.Authority),
			Path: bytes.Clone(h.Path), Protocol: bytes.Clone(h.Protocol), Fields: cloneFields(h.Fields), ContentLength: h.ContentLength}
	}
	p := newServerPeer(t, r, Config{})
	p.headers(1, false, post("/upload", "content-length", "4", "x-a", "1", "cookie", "a=1", "cookie", "b=2")...)
	p.feed()
	want := "POST https example.com /upload  cl=4 [content-length=4 x-a=1 cookie=a=1 cookie=b=2]"
	var fs []string
	for _, f := range got.Fields {
		fs = append(fs, string(f.Name)+"="+string(f.Value))
	}
	if s := string(got.Method) + " " + string(got.Scheme) + " " + string(got.Authority) + " " + string(got.Path) + " " + string(got.Protocol) + " cl=" + itoa(got.ContentLength) + " [" + strings.Join(fs, " ") + "]"; s != want {
		t.Errorf("got head %q, want %q", s, want)
	}
}

func itoa(n int64) string {
	if n < 0 {
		return "-" + itoa(-n)
	}
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// TestServerMalformedRequests checks the stream errors of RFC 9113
// §8.1-8.3: each request is refused with RST_STREAM PROTOCOL_ERROR,
// the handler never sees it, and the connection goes on.
func TestServerMalformedRequests(t *testing.T) {
	tests := []struct {
		name   string
		fields []string
		end    bool
	}{
		{name: "uppercase name", fields: get("/", "X-Upper", "1")},
		{name: "connection field", fields: get("/", "connection", "keep-alive")},
		{name: "transfer-encoding", fields: get("/", "transfer-encoding", "chunked")},
		{name: "upgrade", fields: get("/", "upgrade", "h2c")},
		{name: "TE other than trailers", fields: get("/", "te", "gzip")},
		{name: "unknown pseudo-header", fields: get("/", ":foo", "bar")},
		{name: "response pseudo-header", fields: get("/", ":status", "200")},
		{name: "pseudo after regular", fields: []string{":method", "GET", "x", "1", ":scheme", "https", ":path", "/"}},
		{name: "no method", fields: []string{":scheme", "https", ":path", "/"}},
		{name: "no scheme", fields: []string{":method", "GET", ":path", "/"}},
		{name: "no path", fields: []string{":method", "GET", ":scheme", "https"}},
		{name: "empty path", fields: []string{":method", "GET", ":scheme", "https", ":path", ""}},
		{name: "relative path", fields: get("a/b")},
		{name: "path with a space", fields: get("/a b")},
		{name: "path with CR", fields: get("/a\rb")},
		{name: "asterisk not for OPTIONS", fields: get("*")},
		{name: "duplicate method", fields: append([]string{":method", "GET"}, get("/")...)},
		{name: "duplicate path", fields: get("/", ":path", "/")},
		{name: "method not a token", fields: []string{":method", "G ET", ":scheme", "https", ":path", "/"}},
		{name: "host differs from authority", fields: get("/", "host", "evil.example")},
		{name: "two hosts", fields: []string{":method", "GET", ":scheme", "https", ":path", "/", "host", "a", "host", "a"}},
		{name: "userinfo in authority", fields: []string{":method", "GET", ":scheme", "https", ":path", "/", ":authority", "u@example.com"}},
		{name: "value with LF", fields: get("/", "x", "a\nb")},
		{name: "value with NUL", fields: get("/", "x", "a\x00b")},
		{name: "value with leading space", fields: get("/", "x", " a")},
		{name: "empty name", fields: get("/", "", "a")},
		{name: "invalid content-length", fields: post("/", "content-length", "1x")},
		{name: "conflicting content-length", fields: post("/", "content-length", "1", "content-length", "2")},
		{name: "content-length and END_STREAM", fields: post("/", "content-length", "3"), end: true},
		{name: "CONNECT with a path", fields: []string{":method", "CONNECT", ":authority", "a:443", ":path", "/"}},
		{name: "CONNECT without authority", fields: []string{":method", "CONNECT"}},
		{name: ":protocol not enabled", fields: []string{":method", "CONNECT", ":protocol", "websocket", ":scheme", "https", ":path", "/", ":authority", "a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRecorder()
			answer(r, "ok")
			p := newServerPeer(t, r, Config{})
			p.headers(1, tt.end, tt.fields...)
			if err := p.feed(); err != nil {
				t.Fatalf("got connection error %v, want a stream error", err)
			}
			p.wantFrames("RST_STREAM stream=1 PROTOCOL_ERROR")
			r.wantEvents(t)
			// The connection goes on.
			p.headers(3, true, get("/next")...)
			p.feed()
			r.wantEvents(t, "request 3 GET /next end=true")
			p.wantFrames("HEADERS stream=3 :status=200 content-type=text/plain", "DATA stream=3 len=2 END_STREAM")
			if got := p.c.Stats().StreamErrors.Load(); got != 1 {
				t.Errorf("got StreamErrors %d, want 1", got)
			}
		})
	}
}

func TestServerValidRequests(t *testing.T) {
	tests := []struct {
		name   string
		cfg    Config
		fields []string
		want   string
	}{
		{name: "TE trailers", fields: get("/", "te", "trailers"), want: "GET /"},
		{name: "OPTIONS *", fields: []string{":method", "OPTIONS", ":scheme", "https", ":authority", "a", ":path", "*"}, want: "OPTIONS *"},
		{name: "host equal to authority", fields: get("/", "host", "example.com"), want: "GET /"},
		{name: "host without authority", fields: []string{":method", "GET", ":scheme", "http", ":path", "/", "host", "a"}, want: "GET /"},
		{name: "CONNECT", fields: []string{":method", "CONNECT", ":authority", "a:443"}, want: "CONNECT "},
		{name: "extended CONNECT", cfg: Config{EnableConnectProtocol: true}, fields: []string{":method", "CONNECT", ":protocol", "websocket", ":scheme", "https", ":path", "/chat", ":authority", "a"}, want: "CONNECT /chat"},
		{name: "obs-text value", fields: get("/", "x", "caf\xc3\xa9"), want: "GET /"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRecorder()
			p := newServerPeer(t, r, tt.cfg)
			p.headers(1, false, tt.fields...)
			if err := p.feed(); err != nil {
				t.Fatal(err)
			}
			r.wantEvents(t, "request 1 "+tt.want+" end=false")
			p.wantFrames()
		})
	}
}

// TestServerConnectionErrors checks connection errors of RFC 9113:
// GOAWAY with the code, then the connection is over.
func TestServerConnectionErrors(t *testing.T) {
	tests := []struct {
		name string
		send func(p *rawPeer)
		code http2.ErrCode
	}{
		{"DATA on stream 0", func(p *rawPeer) { p.data(0, true, []byte("x")) }, http2.ErrCodeProtocol},
		{"DATA on an idle stream", func(p *rawPeer) { p.data(1, true, []byte("x")) }, http2.ErrCodeProtocol},
		{"HEADERS on stream 0", func(p *rawPeer) { p.headers(0, true, get("/")...) }, http2.ErrCodeProtocol},
		{"even stream id", func(p *rawPeer) { p.headers(2, true, get("/")...) }, http2.ErrCodeProtocol},
		{"lower stream id", func(p *rawPeer) { p.headers(5, false, get("/")...); p.headers(3, true, get("/")...) }, http2.ErrCodeStreamClosed},
		{"frame inside a header block", func(p *rawPeer) {
			p.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: p.block(get("/")...)})
			p.fr.WritePing(false, [8]byte{})
		}, http2.ErrCodeProtocol},
		{"CONTINUATION of another stream", func(p *rawPeer) {
			p.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: p.block(get("/")...)})
			p.fr.WriteContinuation(3, true, nil)
		}, http2.ErrCodeProtocol},
		{"CONTINUATION alone", func(p *rawPeer) { p.fr.WriteContinuation(1, true, p.block(get("/")...)) }, http2.ErrCodeProtocol},
		{"bad HPACK", func(p *rawPeer) {
			p.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0x80}, EndHeaders: true})
		}, http2.ErrCodeCompression},
		{"padding longer than DATA", func(p *rawPeer) {
			p.headers(1, false, post("/")...)
			p.raw(http2.FrameData, http2.FlagDataPadded, 1, []byte{5, 'a', 'b'})
		}, http2.ErrCodeProtocol},
		{"frame above MAX_FRAME_SIZE", func(p *rawPeer) { p.headers(1, false, post("/")...); p.data(1, false, make([]byte, 16385)) }, http2.ErrCodeFrameSize},
		{"SETTINGS on a stream", func(p *rawPeer) { p.raw(http2.FrameSettings, 0, 1, nil) }, http2.ErrCodeProtocol},
		{"SETTINGS of odd length", func(p *rawPeer) { p.raw(http2.FrameSettings, 0, 0, []byte{0, 1, 0}) }, http2.ErrCodeFrameSize},
		{"SETTINGS ACK with payload", func(p *rawPeer) { p.raw(http2.FrameSettings, http2.FlagSettingsAck, 0, make([]byte, 6)) }, http2.ErrCodeFrameSize},
		{"ENABLE_PUSH 2", func(p *rawPeer) { p.fr.WriteSettings(http2.Setting{ID: http2.SettingEnablePush, Val: 2}) }, http2.ErrCodeProtocol},
		{"INITIAL_WINDOW_SIZE 2^31", func(p *rawPeer) { p.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 31}) }, http2.ErrCodeFlowControl},
		{"MAX_FRAME_SIZE too small", func(p *rawPeer) { p.fr.WriteSettings(http2.Setting{ID: http2.SettingMaxFrameSize, Val: 100}) }, http2.ErrCodeProtocol},
		{"PING of 7 bytes", func(p *rawPeer) { p.raw(http2.FramePing, 0, 0, make([]byte, 7)) }, http2.ErrCodeFrameSize},
		{"PING on a stream", func(p *rawPeer) { p.raw(http2.FramePing, 0, 1, make([]byte, 8)) }, http2.ErrCodeProtocol},
		{"GOAWAY on a stream", func(p *rawPeer) { p.raw(http2.FrameGoAway, 0, 1, make([]byte, 8)) }, http2.ErrCodeProtocol},
		{"RST_STREAM on stream 0", func(p *rawPeer) { p.fr.WriteRSTStream(0, http2.ErrCodeCancel) }, http2.ErrCodeProtocol},
		{"RST_STREAM on an idle stream", func(p *rawPeer) { p.fr.WriteRSTStream(1, http2.ErrCodeCancel) }, http2.ErrCodeProtocol},
		{"RST_STREAM of 3 bytes", func(p *rawPeer) {
			p.headers(1, false, post("/")...)
			p.raw(http2.FrameRSTStream, 0, 1, make([]byte, 3))
		}, http2.ErrCodeFrameSize},
		{"WINDOW_UPDATE of 0", func(p *rawPeer) { p.fr.WriteWindowUpdate(0, 0) }, http2.ErrCodeProtocol},
		{"WINDOW_UPDATE on an idle stream", func(p *rawPeer) { p.fr.WriteWindowUpdate(1, 1) }, http2.ErrCodeProtocol},
		{"connection window above 2^31-1", func(p *rawPeer) { p.fr.WriteWindowUpdate(0, 1<<31-1) }, http2.ErrCodeFlowControl},
		{"PRIORITY on stream 0", func(p *rawPeer) { p.fr.WritePriority(0, http2.PriorityParam{StreamDep: 1}) }, http2.ErrCodeProtocol},
		{"PUSH_PROMISE", func(p *rawPeer) {
			p.headers(1, false, get("/")...)
			p.fr.WritePushPromise(http2.PushPromiseParam{StreamID: 1, PromiseID: 2, BlockFragment: p.block(get("/")...), EndHeaders: true})
		}, http2.ErrCodeProtocol},
		{"DATA beyond the connection window", func(p *rawPeer) {
			p.headers(1, false, post("/")...)
			for i := 0; i < 5; i++ {
				p.data(1, false, make([]byte, 16384))
			}
		}, http2.ErrCodeFlowControl},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRecorder()
			p := newServerPeer(t, r, Config{ConnWindow: 65535, StreamWindow: 1 << 20})
			tt.send(p)
			err := p.feed()
			var ce *ConnError
			if !errors.As(err, &ce) || ce.Code != tt.code {
				t.Fatalf("got Feed error %v, want a connection error %v", err, tt.code)
			}
			p.wantConnError(tt.code)
			if !p.c.Done() {
				t.Error("got Done false after a connection error, want true")
			}
			if n, err2 := p.c.Feed([]byte("more")); n != 0 || err2 != err {
				t.Errorf("got Feed after the end = %d, %v; want 0, %v", n, err2, err)
			}
		})
	}
}

func TestServerFirstFrameMustBeSettings(t *testing.T) {
	p := newRawPeer(t)
	p.c = NewServerConn(countingOutput{p}, newRecorder(), Config{})
	p.frames()
	p.wr.WriteString(http2.ClientPreface)
	p.fr.WritePing(false, [8]byte{})
	p.feed()
	p.wantConnError(http2.ErrCodeProtocol)
}

func TestServerBadPreface(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  error
	}{
		{name: "HTTP/1.1 request", input: "GET / HTTP/1.1\r\nHost: a\r\n\r\n", want: ErrBadPreface},
		{name: "first bytes wrong", input: "PRX", want: ErrBadPreface},
		{name: "partial preface", input: "PRI * HTTP/2.0\r\n", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newRawPeer(t)
			p.c = NewServerConn(countingOutput{p}, newRecorder(), Config{})
			p.frames()
			n, err := p.c.Feed([]byte(tt.input))
			if n != 0 || err != tt.want {
				t.Fatalf("got %d, %v; want 0, %v", n, err, tt.want)
			}
			p.wantFrames() // nothing written: no GOAWAY to an HTTP/1.1 client
		})
	}
}

// TestServerFeedInPieces feeds a conversation a byte at a time and in
// odd pieces: Feed consumes whole frames only and the outcome is the
// same.
func TestServerFeedInPieces(t *testing.T) {
	for _, piece := range []int{1, 7, 100, 1 << 20} {
		r := newRecorder()
		answer(r, "hi")
		p := newRawPeer(t)
		p.c = NewServerConn(countingOutput{p}, r, Config{})
		p.wr.WriteString(http2.ClientPreface)
		p.fr.WriteSettings()
		p.headers(1, false, post("/", "content-length", "6")...)
		p.data(1, false, []byte("abc"))
		p.fr.WriteDataPadded(1, true, []byte("def"), make([]byte, 10))
		all := bytes.Clone(p.wr.Bytes())
		p.wr.Reset()
		var held []byte
		for len(all) > 0 {
			k := min(piece, len(all))
			held = append(held, all[:k]...)
			all = all[k:]
			n, err := p.c.Feed(held)
			if err != nil {
				t.Fatalf("piece %d: %v", piece, err)
			}
			held = held[n:]
		}
		if len(held) != 0 {
			t.Errorf("piece %d: got %d bytes left, want 0", piece, len(held))
		}
		r.wantEvents(t, "request 1 POST / end=false", `data 1 "abc" end=false`, `data 1 "def" end=true`)
	}
}

func TestServerRequestBodyAndTrailers(t *testing.T) {
	r := newRecorder()
	p := newServerPeer(t, r, Config{})
	p.headers(1, false, post("/", "content-length", "6")...)
	p.data(1, false, []byte("abc"))
	p.data(1, false, []byte("def"))
	p.headers(1, true, "grpc-status", "0", "x-t", "v")
	p.feed()
	r.wantEvents(t, "request 1 POST / end=false", `data 1 "abc" end=false`, `data 1 "def" end=false`, "trailers 1 grpc-status=0 x-t=v")
	s := r.streams[1]
	if err := s.WriteHeaders(200, nil, false); err != nil {
		t.Fatal(err)
	}
	s.WriteData([]byte("body"), false)
	if err := s.WriteTrailers(fieldList("grpc-status", "0", "grpc-message", "ok")); err != nil {
		t.Fatal(err)
	}
	p.wantFrames("HEADERS stream=1 :status=200", "DATA stream=1 len=4", "HEADERS stream=1 END_STREAM grpc-status=0 grpc-message=ok")
	if !s.Closed() {
		t.Error("got the stream open after both ends, want it closed")
	}
	if _, err := s.WriteData([]byte("x"), false); err != ErrStreamClosed {
		t.Errorf("got WriteData after the end = %v, want ErrStreamClosed", err)
	}
}

func TestServerTrailerErrors(t *testing.T) {
	tests := []struct {
		name   string
		send   func(p *rawPeer)
		reason string
	}{
		{"trailers without END_STREAM", func(p *rawPeer) { p.headers(1, false, "x", "1") }, "trailers without END_STREAM"},
		{"pseudo-header in trailers", func(p *rawPeer) { p.headers(1, true, ":path", "/") }, "pseudo-header field in trailers"},
		{"body shorter than content-length", func(p *rawPeer) { p.data(1, false, []byte("ab")); p.headers(1, true, "x", "1") }, "body length differs from content-length"},
		{"body longer than content-length", func(p *rawPeer) { p.data(1, false, []byte("abcdef")) }, "body length differs from content-length"},
		{"body shorter at END_STREAM", func(p *rawPeer) { p.data(1, true, []byte("ab")) }, "body length differs from content-length"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRecorder()
			p := newServerPeer(t, r, Config{})
			p.headers(1, false, post("/", "content-length", "3")...)
			p.feed()
			r.take()
			tt.send(p)
			if err := p.feed(); err != nil {
				t.Fatal(err)
			}
			p.wantFrames("RST_STREAM stream=1 PROTOCOL_ERROR")
			evs := r.events
			last := evs[len(evs)-1]
			var se *StreamError
			if !errors.As(last.err, &se) || se.Remote || se.Code != http2.ErrCodeProtocol || se.Reason != tt.reason {
				t.Errorf("got last event %v, want a local PROTOCOL_ERROR reset: %s", last, tt.reason)
			}
		})
	}
}

func TestServerStreamStates(t *testing.T) {
	tests := []struct {
		name string
		send func(p *rawPeer)
		want []string
	}{
		{"DATA after END_STREAM", func(p *rawPeer) { p.headers(1, true, get("/")...); p.data(1, true, []byte("x")) },
			[]string{"RST_STREAM stream=1 STREAM_CLOSED"}},
		{"HEADERS after END_STREAM", func(p *rawPeer) { p.headers(1, true, get("/")...); p.headers(1, true, "x", "1") },
			[]string{"RST_STREAM stream=1 STREAM_CLOSED"}},
		{"DATA after the peer's RST_STREAM", func(p *rawPeer) {
			p.headers(1, false, post("/")...)
			p.fr.WriteRSTStream(1, http2.ErrCodeCancel)
			p.data(1, true, []byte("x"))
		}, []string{"RST_STREAM stream=1 STREAM_CLOSED"}},
		{"WINDOW_UPDATE and RST_STREAM on a closed stream are ignored", func(p *rawPeer) {
			p.headers(1, false, post("/")...)
			p.fr.WriteRSTStream(1, http2.ErrCodeCancel)
			p.fr.WriteWindowUpdate(1, 10)
			p.fr.WriteRSTStream(1, http2.ErrCodeCancel)
			p.fr.WritePriority(1, http2.PriorityParam{StreamDep: 0})
		}, nil},
		{"PRIORITY on an idle stream does not open it", func(p *rawPeer) {
			p.fr.WritePriority(5, http2.PriorityParam{StreamDep: 0})
			p.headers(3, false, get("/")...)
		}, nil},
		{"PRIORITY depending on itself", func(p *rawPeer) { p.fr.WritePriority(1, http2.PriorityParam{StreamDep: 1}) },
			[]string{"RST_STREAM stream=1 PROTOCOL_ERROR"}},
		{"PRIORITY of 4 bytes", func(p *rawPeer) { p.raw(http2.FramePriority, 0, 1, make([]byte, 4)) },
			[]string{"RST_STREAM stream=1 FRAME_SIZE_ERROR"}},
		{"HEADERS depending on itself", func(p *rawPeer) {
			p.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: p.block(get("/")...), EndHeaders: true, Priority: http2.PriorityParam{StreamDep: 1, Weight: 3}})
		}, []string{"RST_STREAM stream=1 PROTOCOL_ERROR"}},
		{"WINDOW_UPDATE of 0 on a stream", func(p *rawPeer) { p.headers(1, false, get("/")...); p.fr.WriteWindowUpdate(1, 0) },
			[]string{"RST_STREAM stream=1 PROTOCOL_ERROR"}},
		{"stream window above 2^31-1", func(p *rawPeer) { p.headers(1, false, get("/")...); p.fr.WriteWindowUpdate(1, 1<<31-1) },
			[]string{"RST_STREAM stream=1 FLOW_CONTROL_ERROR"}},
		{"unknown frame type is ignored", func(p *rawPeer) { p.raw(0xfa, 0, 0, []byte("x")) }, nil},
		{"unknown settings are ignored", func(p *rawPeer) { p.fr.WriteSettings(http2.Setting{ID: 0x99, Val: 1}) },
			[]string{"SETTINGS ACK"}},
		{"PING is answered", func(p *rawPeer) { p.fr.WritePing(false, [8]byte{'a'}); p.fr.WritePing(true, [8]byte{'b'}) },
			[]string{`PING ACK "a\x00\x00\x00\x00\x00\x00\x00"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newServerPeer(t, newRecorder(), Config{})
			tt.send(p)
			if err := p.feed(); err != nil {
				t.Fatalf("got %v, want no connection error", err)
			}
			p.wantFrames(tt.want...)
		})
	}
}

func TestServerStreamErrorTellsHandler(t *testing.T) {
	r := newRecorder()
	p := newServerPeer(t, r, Config{})
	p.headers(1, false, post("/")...)
	p.fr.WriteWindowUpdate(1, 0)
	p.feed()
	r.wantEvents(t, "request 1 POST / end=false", "reset 1 h2: stream 1 reset PROTOCOL_ERROR: WINDOW_UPDATE of 0")
	p.headers(3, false, post("/")...)
	p.fr.WriteRSTStream(3, http2.ErrCodeCancel)
	p.feed()
	r.wantEvents(t, "request 3 POST / end=false", "reset 3 h2: stream 3 reset CANCEL by peer")
}

// TestServerEarlyResponse answers before the request body is in and
// stops it with RST_STREAM NO_ERROR: the body still in flight is
// ignored and its connection window given back.
func TestServerEarlyResponse(t *testing.T) {
	r := newRecorder()
	r.onRequest = func(s *Stream, h *RequestHead, end bool) {
		s.WriteHeaders(413, nil, true)
		s.Reset(http2.ErrCodeNo)
	}
	p := newServerPeer(t, r, Config{ConnWindow: 65535})
	p.headers(1, false, post("/")...)
	p.feed()
	p.wantFrames("HEADERS stream=1 END_STREAM :status=413", "RST_STREAM stream=1 NO_ERROR")
	for i := 0; i < 8; i++ {
		p.data(1, false, make([]byte, 16000))
	}
	if err := p.feed(); err != nil {
		t.Fatalf("got %v, want the late body ignored", err)
	}
	fs := p.frames()
	credit := 0
	for _, f := range fs {
		w, ok := f.(*http2.WindowUpdateFrame)
		if !ok || w.StreamID != 0 {
			t.Fatalf("got frame %s, want connection WINDOW_UPDATEs only", describe(f))
		}
		credit += int(w.Increment)
	}
	if credit < 100000 {
		t.Errorf("got %d bytes of connection window back, want most of the 128000 ignored", credit)
	}
	r.wantEvents(t, "request 1 POST / end=false")
}
