package h2

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// The server's flow control both ways, limits, timeouts, shutdown and
// buffers.

func TestServerFlowControlReceive(t *testing.T) {
	r := newRecorder()
	p := newServerPeer(t, r, Config{StreamWindow: 65535, ConnWindow: 65535})
	p.headers(1, false, post("/")...)
	p.data(1, false, make([]byte, 16000))
	p.data(1, false, make([]byte, 4000))
	p.feed()
	// Nothing consumed: no credit.
	p.wantFrames()
	s := r.streams[1]
	s.Consumed(10000)
	p.wantFrames()
	s.Consumed(7000)
	// A quarter of the window is owed: both windows are topped up.
	fs := p.wantFrames("WINDOW_UPDATE stream=0", "WINDOW_UPDATE stream=1")
	if got := fs[0].(*http2.WindowUpdateFrame).Increment; got != 17000 {
		t.Errorf("got an increment of %d, want 17000", got)
	}
	// The peer may use what is left of its window, 62535 bytes, and
	// not one more.
	for i := 0; i < 3; i++ {
		p.data(1, false, make([]byte, 16384))
	}
	p.data(1, false, make([]byte, 13383))
	if err := p.feed(); err != nil {
		t.Fatal(err)
	}
	p.wantFrames()
	p.data(1, false, []byte("x"))
	p.feed()
	p.wantConnError(http2.ErrCodeFlowControl)
}

func TestServerFlowControlStreamWindow(t *testing.T) {
	r := newRecorder()
	p := newServerPeer(t, r, Config{StreamWindow: 65535, ConnWindow: 1 << 20})
	p.headers(1, false, post("/")...)
	for i := 0; i < 4; i++ {
		p.data(1, false, make([]byte, 16383))
	}
	p.data(1, false, make([]byte, 4))
	if err := p.feed(); err != nil {
		t.Fatal(err)
	}
	p.wantFrames("RST_STREAM stream=1 FLOW_CONTROL_ERROR")
}

func TestServerFlowControlSend(t *testing.T) {
	r := newRecorder()
	body := bytes.Repeat([]byte("x"), 100)
	var sent int
	write := func(s *Stream) {
		n, err := s.WriteData(body[sent:], true)
		if err != nil {
			t.Fatal(err)
		}
		sent += n
	}
	r.onRequest = func(s *Stream, h *RequestHead, end bool) {
		s.WriteHeaders(200, nil, false)
		write(s)
	}
	r.onWrite = write
	p := newServerPeer(t, r, Config{})
	p.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 30})
	p.headers(1, true, get("/")...)
	p.feed()
	p.wantFrames("SETTINGS ACK", "HEADERS stream=1 :status=200", "DATA stream=1 len=30")
	// A smaller initial window makes the stream's window negative
	// (RFC 9113 §6.9.2): an update of 20 leaves it at 0.
	p.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 10})
	p.fr.WriteWindowUpdate(1, 20)
	p.feed()
	p.wantFrames("SETTINGS ACK")
	p.fr.WriteWindowUpdate(1, 50)
	p.feed()
	p.wantFrames("DATA stream=1 len=50")
	// The connection window (65535 - 80 left) is not the limit; a
	// larger initial window opens the stream again.
	p.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1000})
	p.feed()
	p.wantFrames("SETTINGS ACK", "DATA stream=1 len=20 END_STREAM")
	r.wantEvents(t, "request 1 GET / end=true", "writable 1", "writable 1")
}

func TestServerSendConnectionWindow(t *testing.T) {
	r := newRecorder()
	big := make([]byte, 70000)
	left := map[uint32][]byte{}
	write := func(s *Stream) {
		n, _ := s.WriteData(left[s.ID()], true)
		left[s.ID()] = left[s.ID()][n:]
	}
	r.onRequest = func(s *Stream, h *RequestHead, end bool) {
		left[s.ID()] = big
		s.WriteHeaders(200, nil, false)
		write(s)
	}
	r.onWrite = write
	p := newServerPeer(t, r, Config{})
	p.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
	p.headers(1, true, get("/")...)
	p.headers(3, true, get("/")...)
	p.feed()
	// The connection window (65535) goes to stream 1; stream 3 waits.
	total := 0
	for _, f := range p.frames() {
		if d, ok := f.(*dataFrame); ok {
			total += len(d.data)
		}
	}
	if total != 65535 {
		t.Fatalf("got %d bytes sent, want the connection window, 65535", total)
	}
	p.fr.WriteWindowUpdate(0, 200000)
	p.feed()
	total = 0
	ends := 0
	for _, f := range p.frames() {
		if d, ok := f.(*dataFrame); ok {
			total += len(d.data)
			if d.Flags.Has(http2.FlagDataEndStream) {
				ends++
			}
		}
	}
	if total != 140000-65535 || ends != 2 {
		t.Errorf("got %d bytes and %d ends, want %d and 2", total, ends, 140000-65535)
	}
	if n := p.c.ActiveStreams(); n != 0 {
		t.Errorf("got %d active streams, want 0", n)
	}
}

func TestServerLargeHeadersUseContinuation(t *testing.T) {
	r := newRecorder()
	long := strings.Repeat("v", 20000)
	r.onRequest = func(s *Stream, h *RequestHead, end bool) {
		s.WriteHeaders(200, fieldList("x-long", long, "x-long2", long), true)
	}
	p := newServerPeer(t, r, Config{MaxHeaderListSize: 1 << 20})
	p.headers(1, true, get("/")...)
	p.feed()
	fs := p.frames()
	if len(fs) != 1 {
		t.Fatalf("got %d frames, want one header block", len(fs))
	}
	h := fs[0].(*http2.MetaHeadersFrame)
	if got := h.PseudoValue("status"); got != "200" || len(h.RegularFields()) != 2 || h.RegularFields()[1].Value != long {
		t.Errorf("got a head of status %s and %d fields, want 200 and 2 long ones", got, len(h.RegularFields()))
	}
}

func TestServerInformationalResponses(t *testing.T) {
	r := newRecorder()
	r.onRequest = func(s *Stream, h *RequestHead, end bool) {
		if err := s.WriteHeaders(100, nil, true); err == nil {
			t.Error("got 100 with END_STREAM accepted, want an error")
		}
		if _, err := s.WriteData([]byte("x"), false); err != ErrWrongRole {
			t.Errorf("got WriteData before the head = %v, want ErrWrongRole", err)
		}
		s.WriteHeaders(100, nil, false)
		s.WriteHeaders(103, fieldList("link", "</a.css>; rel=preload"), false)
		s.WriteHeaders(204, nil, true)
		if err := s.WriteHeaders(200, nil, true); err != ErrWrongRole {
			t.Errorf("got a second final head = %v, want ErrWrongRole", err)
		}
	}
	p := newServerPeer(t, r, Config{})
	p.headers(1, true, get("/")...)
	p.feed()
	p.wantFrames("HEADERS stream=1 :status=100", "HEADERS stream=1 :status=103 link=</a.css>; rel=preload", "HEADERS stream=1 END_STREAM :status=204")
}

// TestServerConcurrentStreamLimit: a stream over
// SETTINGS_MAX_CONCURRENT_STREAMS is answered with GOAWAY
// ENHANCE_YOUR_CALM, never a reset of the stream alone. A peer that has
// acknowledged our SETTINGS loses the connection at once; one that has
// not (it may have sent the stream before our SETTINGS arrived) has the
// streams it opened finish, and what it sends after the GOAWAY's last
// stream is not processed.
func TestServerConcurrentStreamLimit(t *testing.T) {
	t.Run("settings acknowledged", func(t *testing.T) {
		r := newRecorder()
		p := newServerPeer(t, r, Config{MaxConcurrentStreams: 2})
		p.headers(1, false, get("/")...)
		p.headers(3, false, get("/")...)
		p.headers(5, false, get("/")...)
		p.data(5, true, []byte("late body of a refused stream"))
		p.feed()
		p.wantConnError(http2.ErrCodeEnhanceYourCalm)
		if got := p.c.Stats().StreamsRefused.Load(); got != 1 {
			t.Errorf("got StreamsRefused %d, want 1", got)
		}
		if got := p.c.Stats().RefusedStreamCloses.Load(); got != 1 {
			t.Errorf("got RefusedStreamCloses %d, want 1", got)
		}
	})
	t.Run("settings not yet acknowledged", func(t *testing.T) {
		r := newRecorder()
		p := newRawPeer(t)
		p.c = NewServerConn(countingOutput{p}, r, Config{MaxConcurrentStreams: 2})
		p.wr.WriteString(http2.ClientPreface)
		p.fr.WriteSettings()
		p.headers(1, false, get("/")...)
		p.headers(3, false, get("/")...)
		p.headers(5, false, get("/")...)
		p.headers(7, false, get("/")...)
		p.data(5, true, []byte("body of a stream left unprocessed"))
		p.data(7, true, []byte("and another"))
		if err := p.feed(); err != nil {
			t.Fatalf("got %v, want the connection draining", err)
		}
		// The bodies of the streams left unprocessed are ignored, not
		// answered with resets.
		p.wantFrames("SETTINGS", "WINDOW_UPDATE stream=0", "SETTINGS ACK", "GOAWAY last=3 ENHANCE_YOUR_CALM")
		r.wantEvents(t, "request 1 GET / end=false", "request 3 GET / end=false")
		for _, id := range []uint32{1, 3} {
			p.data(id, true, nil)
			p.feed()
			r.streams[id].WriteHeaders(204, nil, true)
		}
		if !p.c.Done() || !errors.Is(p.c.Err(), ErrClosed) {
			t.Errorf("after its streams: got (done %v, %v), want the connection closed", p.c.Done(), p.c.Err())
		}
	})
}

func TestServerHandlerResetsDuringData(t *testing.T) {
	r := newRecorder()
	r.onData = func(s *Stream, p []byte, end bool) { s.Reset(http2.ErrCodeCancel) }
	p := newServerPeer(t, r, Config{})
	p.headers(1, false, post("/")...)
	p.data(1, false, []byte("a"))
	p.data(1, false, []byte("b"))
	p.headers(1, true, "x", "1")
	if err := p.feed(); err != nil {
		t.Fatal(err)
	}
	r.wantEvents(t, "request 1 POST / end=false", `data 1 "a" end=false`)
	p.wantFrames("RST_STREAM stream=1 CANCEL")
}

func TestServerIdleTimeout(t *testing.T) {
	r := newRecorder()
	answer(r, "x")
	p := newServerPeer(t, r, Config{IdleTimeout: 10 * time.Second})
	p.tick(9 * time.Second)
	p.headers(1, true, get("/")...)
	p.feed()
	p.frames()
	if p.tick(9*time.Second) != nil {
		t.Fatal("got the connection closed 9s after its last stream, want it open")
	}
	p.tick(2 * time.Second)
	if !errors.Is(p.err, ErrClosed) {
		t.Fatalf("got %v, want ErrClosed after the idle timeout", p.err)
	}
	p.wantFrames("GOAWAY last=1 NO_ERROR")
	if got := p.c.Stats().IdleCloses.Load(); got != 1 {
		t.Errorf("got IdleCloses %d, want 1", got)
	}
}

func TestServerSettingsTimeout(t *testing.T) {
	p := newRawPeer(t)
	p.c = NewServerConn(countingOutput{p}, newRecorder(), Config{SettingsTimeout: 5 * time.Second})
	p.frames()
	p.wr.WriteString(http2.ClientPreface)
	p.fr.WriteSettings()
	p.feed()
	p.frames()
	p.tick(4 * time.Second)
	if p.c.Done() {
		t.Fatal("got the connection closed before the timeout")
	}
	p.tick(2 * time.Second)
	p.wantConnError(http2.ErrCodeSettingsTimeout)
}

func TestServerGracefulShutdown(t *testing.T) {
	r := newRecorder()
	p := newServerPeer(t, r, Config{})
	p.headers(1, true, get("/")...)
	p.feed()
	p.c.Shutdown()
	p.wantFrames("GOAWAY last=2147483647 NO_ERROR", `PING "heliosga"`)
	// A request sent before the client saw the GOAWAY is served.
	p.headers(3, true, get("/")...)
	p.fr.WritePing(true, shutdownPing)
	p.feed()
	p.wantFrames("GOAWAY last=3 NO_ERROR")
	// One sent after the final GOAWAY is ignored.
	p.headers(5, true, get("/")...)
	p.feed()
	p.wantFrames()
	r.wantEvents(t, "request 1 GET / end=true", "request 3 GET / end=true")
	r.streams[1].WriteHeaders(200, nil, true)
	if p.c.Done() {
		t.Fatal("got Done with stream 3 open, want the connection draining")
	}
	r.streams[3].WriteHeaders(200, nil, true)
	if !p.c.Done() || !errors.Is(p.c.Err(), ErrClosed) {
		t.Fatalf("got Done %v (%v) after the last stream, want ErrClosed", p.c.Done(), p.c.Err())
	}
}

func TestServerGracefulShutdownWithoutPingAck(t *testing.T) {
	p := newServerPeer(t, newRecorder(), Config{GoAwayGrace: 2 * time.Second})
	p.c.Shutdown()
	p.frames()
	p.tick(time.Second)
	p.wantFrames()
	p.tick(1500 * time.Millisecond)
	p.wantFrames("GOAWAY last=0 NO_ERROR")
	if !errors.Is(p.err, ErrClosed) {
		t.Errorf("got %v, want ErrClosed with no stream open", p.err)
	}
}

func TestServerPeerGoAway(t *testing.T) {
	r := newRecorder()
	p := newServerPeer(t, r, Config{})
	p.headers(1, true, get("/")...)
	p.fr.WriteGoAway(1, http2.ErrCodeNo, nil)
	p.feed()
	if p.c.Done() {
		t.Fatal("got Done with a stream open")
	}
	r.streams[1].WriteHeaders(200, nil, true)
	if !p.c.Done() {
		t.Error("got the connection open after the client's GOAWAY and its last stream, want Done")
	}
}

func TestServerCloseResetsStreams(t *testing.T) {
	r := newRecorder()
	p := newServerPeer(t, r, Config{})
	p.headers(1, false, get("/")...)
	p.headers(3, false, get("/")...)
	p.feed()
	r.take()
	cause := errors.New("peer closed the socket")
	p.c.Close(cause)
	evs := r.events
	if len(evs) != 2 {
		t.Fatalf("got %d events, want 2 resets", len(evs))
	}
	for _, e := range evs {
		if e.kind != "reset" || !errors.Is(e.err, ErrClosed) || !errors.Is(e.err, cause) {
			t.Errorf("got %v, want a reset wrapping ErrClosed and the cause", e)
		}
	}
	p.wantFrames()
}

// countingPool is a BufferPool that counts what is out.
type countingPool struct {
	gets, puts int
	free       [][]byte
}

func (p *countingPool) Get() []byte {
	p.gets++
	if n := len(p.free); n > 0 {
		b := p.free[n-1]
		p.free = p.free[:n-1]
		return b
	}
	return make([]byte, 0, 2048)
}

func (p *countingPool) Put(b []byte) {
	p.puts++
	p.free = append(p.free, b)
}

// TestServerBufferPool: with a BufferPool, a connection borrows its
// output buffer for each call and holds none in between.
func TestServerBufferPool(t *testing.T) {
	pool := &countingPool{}
	r := newRecorder()
	answer(r, strings.Repeat("x", 30000))
	p := newServerPeer(t, r, Config{Buffers: pool})
	p.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
	p.fr.WriteWindowUpdate(0, 1<<20)
	p.feed()
	for id := uint32(1); id < 10; id += 2 {
		p.headers(id, true, get("/")...)
		p.feed()
		p.frames()
		p.tick(time.Second)
		if p.c.wbuf != nil || pool.gets != pool.puts {
			t.Fatalf("got a buffer held (%v) and %d gets, %d puts between calls; want none held and as many puts as gets", p.c.wbuf != nil, pool.gets, pool.puts)
		}
	}
	if len(pool.free) != 1 {
		t.Errorf("got %d buffers in the pool, want the one buffer reused", len(pool.free))
	}
	r.take()
	if n := p.c.ActiveStreams(); n != 0 {
		t.Errorf("got %d streams open, want 0", n)
	}
}

// TestServerSettingsAdvertised: the server's preface carries its
// limits, and raises the connection window.
func TestServerSettingsAdvertised(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want map[http2.SettingID]uint32
		incr uint32
	}{
		{name: "defaults", want: map[http2.SettingID]uint32{
			http2.SettingMaxConcurrentStreams: DefaultMaxConcurrentStreams,
			http2.SettingInitialWindowSize:    DefaultStreamWindow,
			http2.SettingMaxHeaderListSize:    DefaultMaxHeaderListSize,
		}, incr: DefaultConnWindow - 65535},
		{name: "configured", cfg: Config{MaxConcurrentStreams: 10, StreamWindow: 100000, ConnWindow: 200000, MaxHeaderListSize: 8192, MaxFrameSize: 1 << 20, HeaderTableSize: 8192, EnableConnectProtocol: true},
			want: map[http2.SettingID]uint32{
				http2.SettingMaxConcurrentStreams:  10,
				http2.SettingInitialWindowSize:     100000,
				http2.SettingMaxHeaderListSize:     8192,
				http2.SettingMaxFrameSize:          1 << 20,
				http2.SettingHeaderTableSize:       8192,
				http2.SettingEnableConnectProtocol: 1,
			}, incr: 200000 - 65535},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newRawPeer(t)
			p.c = NewServerConn(countingOutput{p}, newRecorder(), tt.cfg)
			f, err := p.fr.ReadFrame()
			sf, ok := f.(*http2.SettingsFrame)
			if err != nil || !ok {
				t.Fatalf("got %v (%v), want SETTINGS", f, err)
			}
			got := map[http2.SettingID]uint32{}
			sf.ForeachSetting(func(s http2.Setting) error { got[s.ID] = s.Val; return nil })
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("got settings %v, want %v", got, tt.want)
			}
			fs := p.frames()
			if len(fs) != 1 {
				t.Fatalf("got %v after SETTINGS, want one WINDOW_UPDATE", describeAll(fs))
			}
			if w := fs[0].(*http2.WindowUpdateFrame); w.Increment != tt.incr {
				t.Errorf("got a connection window increment of %d, want %d", w.Increment, tt.incr)
			}
			if got, want := p.c.FrameBufferSize(), 9+int(max(tt.cfg.MaxFrameSize, DefaultMaxFrameSize)); got != want {
				t.Errorf("got FrameBufferSize %d, want %d", got, want)
			}
		})
	}
}
