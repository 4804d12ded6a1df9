package h2

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// Client-role tests: a client Conn against a raw server peer.

func request(method, path string, fields ...Field) *RequestHead {
	return &RequestHead{Method: []byte(method), Scheme: []byte("http"), Authority: []byte("backend:50051"), Path: []byte(path), Fields: fields}
}

func TestClientRequestAndResponse(t *testing.T) {
	r := newRecorder()
	p := newClientPeer(t, r, Config{})
	s, err := p.c.OpenStream(request("POST", "/pkg.Svc/Call",
		field("Content-Type", "application/grpc"),
		field("te", "trailers"),
		field("connection", "close"),
		field("host", "ignored")), false)
	if err != nil {
		t.Fatal(err)
	}
	if s.ID() != 1 {
		t.Errorf("got stream %d, want 1", s.ID())
	}
	s.WriteData([]byte("req"), false)
	s.WriteTrailers(fieldList("x-req-trailer", "1"))
	p.wantFrames("HEADERS stream=1 :method=POST :scheme=http :path=/pkg.Svc/Call :authority=backend:50051 content-type=application/grpc te=trailers",
		"DATA stream=1 len=3", "HEADERS stream=1 END_STREAM x-req-trailer=1")
	p.headers(1, false, ":status", "200", "content-type", "application/grpc")
	p.data(1, false, []byte("resp"))
	p.headers(1, true, "grpc-status", "0", "grpc-message", "")
	if err := p.feed(); err != nil {
		t.Fatal(err)
	}
	r.wantEvents(t, "response 1 200 end=false", `data 1 "resp" end=false`, "trailers 1 grpc-status=0 grpc-message=")
	if !s.Closed() || p.c.ActiveStreams() != 0 {
		t.Errorf("got the stream open (closed %v, active %d), want it over", s.Closed(), p.c.ActiveStreams())
	}
	s2, _ := p.c.OpenStream(request("GET", "/", field("Host", "h.example")), true)
	s2.Reset(http2.ErrCodeCancel)
	if s2.ID() != 3 {
		t.Errorf("got stream %d, want 3", s2.ID())
	}
}

func TestClientAuthorityFromHost(t *testing.T) {
	p := newClientPeer(t, newRecorder(), Config{})
	h := request("GET", "/", field("Host", "h.example"), field("authorization", "secret"))
	h.Authority = nil
	p.c.OpenStream(h, true)
	fs := p.frames()
	hf := fs[0].(*http2.MetaHeadersFrame)
	if got := hf.PseudoValue("authority"); got != "h.example" {
		t.Errorf("got :authority %q, want h.example", got)
	}
	if len(hf.RegularFields()) != 1 || !hf.RegularFields()[0].Sensitive {
		t.Errorf("got fields %v, want authorization alone, never indexed", hf.RegularFields())
	}
}

func TestClientInformationalAndHeadResponses(t *testing.T) {
	r := newRecorder()
	p := newClientPeer(t, r, Config{})
	p.c.OpenStream(request("GET", "/"), true)
	p.c.OpenStream(request("HEAD", "/"), true)
	p.frames()
	p.headers(1, false, ":status", "103", "link", "</a>")
	p.headers(1, true, ":status", "304", "content-length", "10")
	p.headers(3, true, ":status", "200", "content-length", "10")
	if err := p.feed(); err != nil {
		t.Fatal(err)
	}
	r.wantEvents(t, "response 1 103 end=false", "response 1 304 end=true", "response 3 200 end=true")
}

func TestClientMalformedResponses(t *testing.T) {
	tests := []struct {
		name string
		send func(p *rawPeer)
	}{
		{"no status", func(p *rawPeer) { p.headers(1, true, "x", "1") }},
		{"status of two digits", func(p *rawPeer) { p.headers(1, true, ":status", "20") }},
		{"status 101", func(p *rawPeer) { p.headers(1, true, ":status", "101") }},
		{"request pseudo-header", func(p *rawPeer) { p.headers(1, true, ":status", "200", ":path", "/") }},
		{"informational ends the stream", func(p *rawPeer) { p.headers(1, true, ":status", "100") }},
		{"DATA before the head", func(p *rawPeer) { p.data(1, true, []byte("x")) }},
		{"body longer than content-length", func(p *rawPeer) {
			p.headers(1, false, ":status", "200", "content-length", "1")
			p.data(1, true, []byte("xx"))
		}},
		{"content-length without a body", func(p *rawPeer) { p.headers(1, true, ":status", "200", "content-length", "1") }},
		{"connection-specific field", func(p *rawPeer) { p.headers(1, true, ":status", "200", "connection", "close") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRecorder()
			p := newClientPeer(t, r, Config{})
			p.c.OpenStream(request("GET", "/"), true)
			p.frames()
			tt.send(p)
			if err := p.feed(); err != nil {
				t.Fatalf("got %v, want a stream error", err)
			}
			p.wantFrames("RST_STREAM stream=1 PROTOCOL_ERROR")
			last := r.events[len(r.events)-1]
			var se *StreamError
			if !errors.As(last.err, &se) || se.Remote || errors.Is(last.err, ErrRetryable) {
				t.Errorf("got %v, want a local, not retryable, stream error", last)
			}
		})
	}
}

func TestClientConnectionErrors(t *testing.T) {
	tests := []struct {
		name string
		send func(p *rawPeer)
	}{
		{"HEADERS on a server stream", func(p *rawPeer) { p.headers(2, true, ":status", "200") }},
		{"HEADERS on an idle stream", func(p *rawPeer) { p.headers(3, true, ":status", "200") }},
		{"PUSH_PROMISE", func(p *rawPeer) {
			p.fr.WritePushPromise(http2.PushPromiseParam{StreamID: 1, PromiseID: 2, BlockFragment: p.block(get("/")...), EndHeaders: true})
		}},
		{"ENABLE_PUSH 1", func(p *rawPeer) { p.fr.WriteSettings(http2.Setting{ID: http2.SettingEnablePush, Val: 1}) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newClientPeer(t, newRecorder(), Config{})
			p.c.OpenStream(request("GET", "/"), true)
			p.frames()
			tt.send(p)
			p.feed()
			p.wantConnError(http2.ErrCodeProtocol)
			if p.c.CanOpen() {
				t.Error("got CanOpen true on a dead connection")
			}
		})
	}
}

func TestClientMaxConcurrentStreams(t *testing.T) {
	tests := []struct {
		name     string
		settings []http2.Setting
		want     int
	}{
		{"from SETTINGS", []http2.Setting{{ID: http2.SettingMaxConcurrentStreams, Val: 2}}, 2},
		{"absent: 1000, as Go assumes", nil, 1000},
		{"zero", []http2.Setting{{ID: http2.SettingMaxConcurrentStreams, Val: 0}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newClientPeer(t, newRecorder(), Config{}, tt.settings...)
			if got := p.c.AvailableStreams(); got != tt.want {
				t.Fatalf("got %d available streams, want %d", got, tt.want)
			}
		})
	}
	// Before the server's SETTINGS arrive, 100.
	c := NewClientConn(countingOutput{newRawPeer(t)}, newRecorder(), Config{})
	if got := c.AvailableStreams(); got != 100 {
		t.Errorf("got %d available streams before SETTINGS, want 100", got)
	}
	r := newRecorder()
	p := newClientPeer(t, r, Config{}, http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 2})
	a, _ := p.c.OpenStream(request("GET", "/"), true)
	p.c.OpenStream(request("GET", "/"), true)
	if _, err := p.c.OpenStream(request("GET", "/"), true); err != ErrCannotOpen || p.c.CanOpen() {
		t.Fatalf("got OpenStream beyond the limit = %v (CanOpen %v), want ErrCannotOpen", err, p.c.CanOpen())
	}
	p.frames()
	p.headers(a.ID(), true, ":status", "204")
	p.feed()
	if !p.c.CanOpen() {
		t.Error("got CanOpen false once a stream ended, want true")
	}
}

func TestClientGoAway(t *testing.T) {
	r := newRecorder()
	p := newClientPeer(t, r, Config{})
	var streams []*Stream
	for i := 0; i < 3; i++ {
		s, _ := p.c.OpenStream(request("GET", "/"), true)
		streams = append(streams, s)
	}
	p.frames()
	p.fr.WriteGoAway(1, http2.ErrCodeNo, []byte("draining"))
	p.feed()
	if p.c.CanOpen() {
		t.Error("got CanOpen true after GOAWAY")
	}
	if _, err := p.c.OpenStream(request("GET", "/"), true); err != ErrCannotOpen {
		t.Errorf("got OpenStream after GOAWAY = %v, want ErrCannotOpen", err)
	}
	if len(r.events) != 2 {
		t.Fatalf("got events %v, want resets of streams 3 and 5", r.take())
	}
	for _, e := range r.events {
		var ge *GoAwayError
		if e.kind != "reset" || e.stream == 1 || !errors.As(e.err, &ge) || !errors.Is(e.err, ErrRetryable) || ge.Debug != "draining" {
			t.Errorf("got %v, want a retryable GoAwayError for a stream above 1", e)
		}
	}
	r.take()
	// Stream 1 finishes; then the connection is done.
	p.headers(1, true, ":status", "200")
	p.feed()
	r.wantEvents(t, "response 1 200 end=true")
	if !p.c.Done() || !errors.Is(p.c.Err(), ErrClosed) {
		t.Errorf("got Done %v (%v), want ErrClosed after the last stream", p.c.Done(), p.c.Err())
	}
}

func TestClientRefusedStreamIsRetryable(t *testing.T) {
	r := newRecorder()
	p := newClientPeer(t, r, Config{})
	p.c.OpenStream(request("GET", "/"), true)
	p.c.OpenStream(request("GET", "/"), true)
	p.fr.WriteRSTStream(1, http2.ErrCodeRefusedStream)
	p.fr.WriteRSTStream(3, http2.ErrCodeInternal)
	p.feed()
	if len(r.events) != 2 {
		t.Fatalf("got %v, want two resets", r.take())
	}
	if err := r.events[0].err; !errors.Is(err, ErrRetryable) {
		t.Errorf("got %v for REFUSED_STREAM, want ErrRetryable", err)
	}
	if err := r.events[1].err; errors.Is(err, ErrRetryable) {
		t.Errorf("got %v for INTERNAL_ERROR retryable, want not", err)
	}
}

func TestClientRequestBodyFlowControl(t *testing.T) {
	r := newRecorder()
	body := make([]byte, 50)
	sent := 0
	r.onWrite = func(s *Stream) {
		n, _ := s.WriteData(body[sent:], true)
		sent += n
	}
	p := newClientPeer(t, r, Config{}, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 20})
	s, _ := p.c.OpenStream(request("PUT", "/"), false)
	n, _ := s.WriteData(body, true)
	sent += n
	p.wantFrames("HEADERS stream=1 :method=PUT :scheme=http :path=/ :authority=backend:50051", "DATA stream=1 len=20")
	p.fr.WriteWindowUpdate(1, 100)
	p.feed()
	p.wantFrames("DATA stream=1 len=30 END_STREAM")
	r.wantEvents(t, "writable 1")
}

func TestClientPing(t *testing.T) {
	p := newClientPeer(t, newRecorder(), Config{PingInterval: 10 * time.Second, PingTimeout: 5 * time.Second})
	p.c.Ping()
	fs := p.frames()
	ping := fs[0].(*http2.PingFrame)
	p.fr.WritePing(true, ping.Data)
	p.feed()
	// Quiet for longer than PingInterval: a PING goes out by itself;
	// unanswered, the connection is dead.
	p.tick(11 * time.Second)
	fs = p.frames()
	if len(fs) != 1 || describe(fs[0])[:4] != "PING" {
		t.Fatalf("got %v, want a liveness PING", describeAll(fs))
	}
	p.tick(3 * time.Second)
	if p.c.Done() {
		t.Fatal("got the connection closed before the ping timeout")
	}
	p.tick(3 * time.Second)
	if !errors.Is(p.err, ErrPingTimeout) {
		t.Errorf("got %v, want ErrPingTimeout", p.err)
	}
	if got := p.c.Stats().PingTimeouts.Load(); got != 1 {
		t.Errorf("got PingTimeouts %d, want 1", got)
	}
}

func TestClientShutdown(t *testing.T) {
	r := newRecorder()
	p := newClientPeer(t, r, Config{})
	p.c.OpenStream(request("GET", "/"), true)
	p.frames()
	p.c.Shutdown()
	p.wantFrames("GOAWAY last=0 NO_ERROR")
	if p.c.CanOpen() || p.c.Done() {
		t.Fatalf("got CanOpen %v, Done %v; want false, false while stream 1 is open", p.c.CanOpen(), p.c.Done())
	}
	p.headers(1, true, ":status", "200")
	p.feed()
	if !p.c.Done() {
		t.Error("got the connection open after its last stream, want Done")
	}
}

func TestClientWrongRole(t *testing.T) {
	p := newClientPeer(t, newRecorder(), Config{})
	s, _ := p.c.OpenStream(request("GET", "/"), false)
	if err := s.WriteHeaders(200, nil, true); err != ErrWrongRole {
		t.Errorf("got WriteHeaders on a client stream = %v, want ErrWrongRole", err)
	}
	srv := newServerPeer(t, newRecorder(), Config{})
	if _, err := srv.c.OpenStream(request("GET", "/"), true); err != ErrWrongRole {
		t.Errorf("got OpenStream on a server = %v, want ErrWrongRole", err)
	}
	if srv.c.CanOpen() {
		t.Error("got CanOpen true on a server")
	}
}
