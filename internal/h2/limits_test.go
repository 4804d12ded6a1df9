package h2

import (
	"bytes"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Each abuse limit: a peer that passes it loses its connection with
// GOAWAY ENHANCE_YOUR_CALM, the matching counter goes up, and a peer
// that stays under it keeps its connection.

func TestLimitFloods(t *testing.T) {
	tests := []struct {
		name    string
		limits  Limits
		cfg     Config
		prepare func(p *rawPeer) // before the flood, not counted
		flood   func(p *rawPeer, i int)
		n       int // floods under the limit; one more trips it
		counter func(s *Stats) *atomic.Uint64
	}{
		{
			name:   "rapid reset",
			limits: Limits{MaxRapidResets: 10},
			flood: func(p *rawPeer, i int) {
				id := uint32(2*i + 1)
				p.headers(id, false, post("/")...)
				p.fr.WriteRSTStream(id, http2.ErrCodeCancel)
			},
			n:       10,
			counter: func(s *Stats) *atomic.Uint64 { return &s.RapidResetCloses },
		},
		{
			name:    "SETTINGS",
			limits:  Limits{MaxSettings: 5},
			flood:   func(p *rawPeer, i int) { p.fr.WriteSettings(http2.Setting{ID: http2.SettingEnablePush, Val: 0}) },
			n:       4, // the handshake's SETTINGS counts too
			counter: func(s *Stats) *atomic.Uint64 { return &s.SettingsFloodCloses },
		},
		{
			name:    "PING",
			limits:  Limits{MaxPings: 5},
			flood:   func(p *rawPeer, i int) { p.fr.WritePing(false, [8]byte{byte(i)}) },
			n:       5,
			counter: func(s *Stats) *atomic.Uint64 { return &s.PingFloodCloses },
		},
		{
			name:    "empty DATA",
			limits:  Limits{MaxEmptyFrames: 5},
			prepare: func(p *rawPeer) { p.headers(1, false, post("/")...) },
			flood:   func(p *rawPeer, i int) { p.data(1, false, nil) },
			n:       5,
			counter: func(s *Stats) *atomic.Uint64 { return &s.EmptyFrameFloodCloses },
		},
		{
			name:    "WINDOW_UPDATE of zero on closed streams",
			limits:  Limits{MaxEmptyFrames: 5},
			prepare: func(p *rawPeer) { p.headers(1, false, post("/")...); p.fr.WriteRSTStream(1, http2.ErrCodeCancel) },
			flood:   func(p *rawPeer, i int) { p.fr.WriteWindowUpdate(1, 0) },
			n:       5,
			counter: func(s *Stats) *atomic.Uint64 { return &s.EmptyFrameFloodCloses },
		},
		{
			name:   "PRIORITY",
			limits: Limits{MaxEmptyFrames: 5},
			flood: func(p *rawPeer, i int) {
				p.fr.WritePriority(uint32(2*i+1), http2.PriorityParam{StreamDep: 0, Weight: 1})
			},
			n:       5,
			counter: func(s *Stats) *atomic.Uint64 { return &s.EmptyFrameFloodCloses },
		},
		{
			// The first stream over the limit, from a peer that knows
			// it: no stream of its own is reset first.
			name: "streams over the limit",
			cfg:  Config{MaxConcurrentStreams: 3},
			prepare: func(p *rawPeer) {
				p.headers(1, false, get("/")...)
				p.headers(3, false, get("/")...)
			},
			flood:   func(p *rawPeer, i int) { p.headers(uint32(2*i+5), true, get("/")...) },
			n:       1,
			counter: func(s *Stats) *atomic.Uint64 { return &s.RefusedStreamCloses },
		},
		{
			name:    "stream errors (reset flood)",
			limits:  Limits{MaxStreamErrors: 3},
			flood:   func(p *rawPeer, i int) { p.headers(uint32(2*i+1), true, get("/", "connection", "close")...) },
			n:       3,
			counter: func(s *Stats) *atomic.Uint64 { return &s.StreamErrorCloses },
		},
		{
			name:   "CONTINUATION frames",
			limits: Limits{MaxContinuationFrames: 4},
			prepare: func(p *rawPeer) {
				p.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: p.block(get("/")...)})
			},
			flood:   func(p *rawPeer, i int) { p.fr.WriteContinuation(1, false, p.block("x", "y")) },
			n:       4,
			counter: func(s *Stats) *atomic.Uint64 { return &s.HeaderFloodCloses },
		},
		{
			name:   "header block bytes",
			limits: Limits{MaxHeaderBlockBytes: 10000, MaxContinuationFrames: 100},
			prepare: func(p *rawPeer) {
				p.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: p.block(get("/")...)})
			},
			// Literal fields never indexed, of 1000 bytes that Huffman coding
			// would not shorten.
			flood: func(p *rawPeer, i int) {
				var b bytes.Buffer
				e := hpack.NewEncoder(&b)
				e.WriteField(hpack.HeaderField{Name: "x-pad", Value: strings.Repeat("\xfe", 1000), Sensitive: true})
				p.fr.WriteContinuation(1, false, b.Bytes())
			},
			n:       9,
			counter: func(s *Stats) *atomic.Uint64 { return &s.HeaderFloodCloses },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stats := new(Stats)
			cfg := tt.cfg
			cfg.Limits, cfg.Stats = tt.limits, stats
			cfg.MaxHeaderListSize = 1 << 20
			p := newServerPeer(t, newRecorder(), cfg)
			if tt.prepare != nil {
				tt.prepare(p)
			}
			for i := 0; i < tt.n; i++ {
				tt.flood(p, i)
			}
			if err := p.feed(); err != nil {
				t.Fatalf("got %v under the limit, want the connection open", err)
			}
			p.frames()
			tt.flood(p, tt.n)
			p.feed()
			p.wantConnError(http2.ErrCodeEnhanceYourCalm)
			if got := tt.counter(stats).Load(); got != 1 {
				t.Errorf("got the limit's counter at %d, want 1", got)
			}
			if got := stats.ProtocolErrors.Load(); got != 0 {
				t.Errorf("got ProtocolErrors %d, want 0 (ENHANCE_YOUR_CALM is not one)", got)
			}
		})
	}
}

// TestLimitWindowRolls: counts start again with each window.
func TestLimitWindowRolls(t *testing.T) {
	p := newServerPeer(t, newRecorder(), Config{Limits: Limits{MaxPings: 3, Window: time.Second}})
	for round := 0; round < 5; round++ {
		for i := 0; i < 3; i++ {
			p.fr.WritePing(false, [8]byte{byte(i)})
		}
		if err := p.feed(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		p.tick(1100 * time.Millisecond)
	}
}

// TestLimitRapidResetSparesBusyClients: a client that cancels some of
// many streams (a third here) is not an attacker.
func TestLimitRapidResetSparesBusyClients(t *testing.T) {
	r := newRecorder()
	p := newServerPeer(t, r, Config{Limits: Limits{MaxRapidResets: 10}})
	id := uint32(1)
	for i := 0; i < 60; i++ {
		p.headers(id, false, post("/")...)
		if i%3 == 0 {
			p.fr.WriteRSTStream(id, http2.ErrCodeCancel)
		}
		id += 2
	}
	if err := p.feed(); err != nil {
		t.Fatalf("got %v, want the connection open", err)
	}
	if got := p.c.Stats().RapidResets.Load(); got != 20 {
		t.Errorf("got RapidResets %d, want 20", got)
	}
	// Streams reset after their answer are no rapid resets.
	for i, s := range r.streams {
		if !s.Closed() {
			s.WriteHeaders(200, nil, false)
			p.fr.WriteRSTStream(i, http2.ErrCodeCancel)
		}
	}
	if err := p.feed(); err != nil {
		t.Fatalf("got %v, want the connection open", err)
	}
	if got := p.c.Stats().RapidResets.Load(); got != 20 {
		t.Errorf("got RapidResets %d after answered streams were reset, want 20", got)
	}
}

// TestLimitHPACKBomb: a small block that decodes to a huge header list
// (one large dynamic-table entry referenced again and again) is
// answered 431 without reaching the handler, and costs its encoded
// size; the connection goes on.
func TestLimitHPACKBomb(t *testing.T) {
	r := newRecorder()
	answer(r, "ok")
	p := newServerPeer(t, r, Config{MaxHeaderListSize: 16 << 10})
	block := p.block(get("/", "x-bomb", strings.Repeat("b", 3000))...)
	// The entry just added is index 62 (the first dynamic one):
	// 0xbe references it in one byte.
	block = append(block, bytes.Repeat([]byte{0xbe}, 3000)...)
	p.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block, EndStream: true, EndHeaders: true})
	if err := p.feed(); err != nil {
		t.Fatal(err)
	}
	p.wantFrames("HEADERS stream=1 END_STREAM :status=431")
	r.wantEvents(t)
	if got := p.c.Stats().HeaderListTooLarge.Load(); got != 1 {
		t.Errorf("got HeaderListTooLarge %d, want 1", got)
	}
	// The HPACK state is still in step: the next request decodes.
	p.headers(3, true, get("/next", "x-bomb", strings.Repeat("b", 3000))...)
	p.feed()
	r.wantEvents(t, "request 3 GET /next end=true")
}

func TestLimitHeaderListSizeWithBody(t *testing.T) {
	r := newRecorder()
	p := newServerPeer(t, r, Config{MaxHeaderListSize: 4096})
	// 3000 bytes of value, decoded twice (the second time from the
	// dynamic table, in one byte): a list over 4096, a block under it.
	block := append(p.block(post("/", "x-big", strings.Repeat("v", 3000))...), 0xbe)
	p.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block, EndHeaders: true})
	p.data(1, true, []byte("body"))
	if err := p.feed(); err != nil {
		t.Fatal(err)
	}
	p.wantFrames("HEADERS stream=1 END_STREAM :status=431", "RST_STREAM stream=1 NO_ERROR")
	r.wantEvents(t)
}

func TestLimitStalledStream(t *testing.T) {
	r := newRecorder()
	r.onRequest = func(s *Stream, h *RequestHead, end bool) {
		s.WriteHeaders(200, nil, false)
		if n, _ := s.WriteData([]byte("blocked"), true); n != 0 {
			t.Errorf("got %d bytes written into a zero window, want 0", n)
		}
	}
	p := newServerPeer(t, r, Config{Limits: Limits{StallTimeout: 10 * time.Second}})
	p.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	p.headers(1, true, get("/")...)
	p.feed()
	p.wantFrames("SETTINGS ACK", "HEADERS stream=1 :status=200")
	for i := 0; i < 10; i++ {
		p.tick(time.Second)
	}
	p.wantFrames()
	p.tick(2 * time.Second)
	p.wantFrames("RST_STREAM stream=1 CANCEL")
	r.wantEvents(t, "request 1 GET / end=true", "reset 1 "+ErrStalled.Error())
	if got := p.c.Stats().StalledStreamResets.Load(); got != 1 {
		t.Errorf("got StalledStreamResets %d, want 1", got)
	}
	if p.c.Done() {
		t.Error("got the connection closed, want only the stream reset")
	}
}

func TestLimitStalledConnection(t *testing.T) {
	r := newRecorder()
	r.onRequest = func(s *Stream, h *RequestHead, end bool) {
		s.WriteHeaders(200, nil, false)
		s.WriteData(make([]byte, 70000), true)
	}
	p := newServerPeer(t, r, Config{Limits: Limits{StallTimeout: 5 * time.Second}})
	p.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
	p.headers(1, true, get("/")...)
	p.feed()
	p.frames()
	p.wantCalmAfter(5*time.Second, 2*time.Second, &p.c.Stats().StalledConnCloses)
}

// wantCalmAfter ticks the clock a second at a time for before (the
// connection must stay open), then for after (it must end with
// ENHANCE_YOUR_CALM and counter must be 1).
func (p *rawPeer) wantCalmAfter(before, after time.Duration, counter *atomic.Uint64) {
	p.t.Helper()
	for d := time.Duration(0); d < before; d += time.Second {
		p.tick(time.Second)
	}
	if p.c.Done() {
		p.t.Fatalf("got the connection closed after %v, want it open", before)
	}
	p.tick(after)
	p.wantConnError(http2.ErrCodeEnhanceYourCalm)
	if got := counter.Load(); got != 1 {
		p.t.Errorf("got the counter at %d, want 1", got)
	}
}

func TestLimitSlowReader(t *testing.T) {
	r := newRecorder()
	var s1 *Stream
	r.onRequest = func(s *Stream, h *RequestHead, end bool) {
		s1 = s
		s.WriteHeaders(200, nil, false)
	}
	p := newServerPeer(t, r, Config{Limits: Limits{WriteTimeout: 30 * time.Second}})
	p.headers(1, true, get("/")...)
	p.feed()
	p.frames()
	// The driver's backlog is high: DATA waits.
	p.c.SetOutputBlocked(true)
	if n, err := s1.WriteData([]byte("held"), true); n != 0 || err != nil {
		t.Fatalf("got WriteData = %d, %v while blocked, want 0, nil", n, err)
	}
	p.wantFrames()
	p.c.SetOutputBlocked(false)
	r.wantEvents(t, "request 1 GET / end=true", "writable 1")
	s1.WriteData([]byte("held"), false)
	p.wantFrames("DATA stream=1 len=4")
	// Blocked too long: the reader is gone.
	p.c.SetOutputBlocked(true)
	p.wantCalmAfter(29*time.Second, 2*time.Second, &p.c.Stats().SlowReaderCloses)
}

func TestLimitQueuedControlFrames(t *testing.T) {
	p := newServerPeer(t, newRecorder(), Config{Limits: Limits{MaxQueuedControlFrames: 50, MaxPings: -1}})
	p.c.SetOutputBlocked(true)
	for i := 0; i < 50; i++ {
		p.fr.WritePing(false, [8]byte{})
	}
	if err := p.feed(); err != nil {
		t.Fatalf("got %v under the limit", err)
	}
	p.fr.WritePing(false, [8]byte{})
	p.feed()
	p.wantConnError(http2.ErrCodeEnhanceYourCalm)
	if got := p.c.Stats().ControlQueueCloses.Load(); got != 1 {
		t.Errorf("got ControlQueueCloses %d, want 1", got)
	}
}

// TestLimitOtherConnectionsUnaffected: one connection tripping a limit
// leaves another that shares its Stats serving.
func TestLimitOtherConnectionsUnaffected(t *testing.T) {
	stats := new(Stats)
	cfg := Config{Stats: stats, Limits: Limits{MaxPings: 2}}
	bad := newServerPeer(t, newRecorder(), cfg)
	r := newRecorder()
	answer(r, "fine")
	good := newServerPeer(t, r, cfg)
	for i := 0; i < 3; i++ {
		bad.fr.WritePing(false, [8]byte{})
	}
	bad.feed()
	bad.wantConnError(http2.ErrCodeEnhanceYourCalm)
	good.fr.WritePing(false, [8]byte{})
	good.headers(1, true, get("/")...)
	if err := good.feed(); err != nil {
		t.Fatal(err)
	}
	good.wantFrames(`PING ACK "\x00\x00\x00\x00\x00\x00\x00\x00"`, "HEADERS stream=1 :status=200 content-type=text/plain", "DATA stream=1 len=4 END_STREAM")
	if got := stats.PingFloodCloses.Load(); got != 1 {
		t.Errorf("got PingFloodCloses %d, want 1", got)
	}
}

func TestLimitsDefaults(t *testing.T) {
	s := (&Config{}).resolve(false)
	tests := []struct {
		name      string
		got, want int64
	}{
		{"MaxConcurrentStreams", int64(s.maxStreams), DefaultMaxConcurrentStreams},
		{"StreamWindow", int64(s.streamWindow), DefaultStreamWindow},
		{"ConnWindow", int64(s.connWindow), DefaultConnWindow},
		{"MaxHeaderBlockBytes", int64(s.maxBlockBytes), DefaultMaxHeaderListSize},
		{"client MaxHeaderBlockBytes", int64((&Config{}).resolve(true).maxBlockBytes), 2 * DefaultMaxHeaderListSize},
		{"HeaderTimeout", s.headerTimeout, int64(DefaultHeaderTimeout)},
		{"MaxRapidResets", int64(s.maxRapidResets), DefaultMaxRapidResets},
		{"Window", s.window, int64(DefaultWindow)},
		{"server PingInterval", s.pingInterval, 0},
		{"client PingInterval", (&Config{}).resolve(true).pingInterval, int64(DefaultClientPingInterval)},
		{"negative limit is none", int64((&Config{Limits: Limits{MaxPings: -1}}).resolve(false).maxPings), 0},
		{"negative timeout is none", (&Config{IdleTimeout: -1}).resolve(false).idleTimeout, 0},
		{"small window raised", int64((&Config{StreamWindow: 10}).resolve(false).streamWindow), minWindow},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %d, want %d", tt.name, tt.got, tt.want)
		}
	}
}

// TestLimitWaitingStreamsPruned: a peer that keeps the connection
// window shut while it opens and resets streams (each of which wrote
// short and waits) does not grow the machine's waiting list.
func TestLimitWaitingStreamsPruned(t *testing.T) {
	r := newRecorder()
	r.onRequest = func(s *Stream, h *RequestHead, end bool) {
		s.WriteHeaders(200, nil, false)
		s.WriteData(make([]byte, 70000), true)
	}
	p := newServerPeer(t, r, Config{Limits: Limits{MaxRapidResets: -1}})
	p.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
	for i := uint32(0); i < 2000; i++ {
		id := 2*i + 1
		p.headers(id, true, get("/")...)
		p.fr.WriteRSTStream(id, http2.ErrCodeCancel)
	}
	if err := p.feed(); err != nil {
		t.Fatal(err)
	}
	if got := len(p.c.waiting); got > 40 {
		t.Errorf("got %d streams in the waiting list, want closed ones pruned (at most 40)", got)
	}
}

// unfinishedBlock writes on stream 1 a header block of about n encoded
// bytes (literal fields never indexed, which Huffman coding would not
// shorten) in HEADERS and CONTINUATION frames of the default size,
// without END_HEADERS.
func unfinishedBlock(p *rawPeer, n int) {
	var b bytes.Buffer
	e := hpack.NewEncoder(&b)
	for b.Len() < n {
		e.WriteField(hpack.HeaderField{Name: "x-pad", Value: strings.Repeat("\xfe", 1000), Sensitive: true})
	}
	block := b.Bytes()
	p.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block[:16384]})
	for off := 16384; off < len(block); off += 16384 {
		p.fr.WriteContinuation(1, false, block[off:min(off+16384, len(block))])
	}
}

// TestLimitUnfinishedHeaderBlock: a header block that spans frames is
// held encoded until it ends, bounded by the header list size (64 KiB by
// default) and in time by HeaderTimeout (10 s by default), like an
// HTTP/1.1 request head: a block left unfinished costs at most about
// that much for at most that long, then the connection (GOAWAY
// ENHANCE_YOUR_CALM). Once a block ends, the connection keeps neither it
// nor its decoded fields.
func TestLimitUnfinishedHeaderBlock(t *testing.T) {
	t.Run("held encoded, bounded", func(t *testing.T) {
		p := newServerPeer(t, newRecorder(), Config{})
		unfinishedBlock(p, 60<<10)
		if err := p.feed(); err != nil {
			t.Fatalf("got %v for a block under the bound, want the connection open", err)
		}
		if got := p.c.HeaderBlockBytes(); got < 60<<10 || got > DefaultMaxHeaderListSize {
			t.Errorf("got %d bytes held for a 60 KiB unfinished block, want about its size, at most %d", got, DefaultMaxHeaderListSize)
		}
	})
	t.Run("past the header list size", func(t *testing.T) {
		stats := new(Stats)
		p := newServerPeer(t, newRecorder(), Config{Stats: stats})
		unfinishedBlock(p, 120<<10)
		p.feed()
		p.wantConnError(http2.ErrCodeEnhanceYourCalm)
		if got := stats.HeaderFloodCloses.Load(); got != 1 {
			t.Errorf("got HeaderFloodCloses %d, want 1", got)
		}
		if got := p.c.HeaderBlockBytes(); got != 0 {
			t.Errorf("got %d bytes held once the connection is over, want 0", got)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		stats := new(Stats)
		p := newServerPeer(t, newRecorder(), Config{Stats: stats})
		p.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: p.block(get("/")...)})
		if err := p.feed(); err != nil {
			t.Fatal(err)
		}
		if err := p.tick(DefaultHeaderTimeout - time.Second); err != nil {
			t.Fatalf("got %v before the header timeout, want the connection open", err)
		}
		p.tick(2 * time.Second)
		p.wantConnError(http2.ErrCodeEnhanceYourCalm)
		if got := stats.HeaderTimeoutCloses.Load(); got != 1 {
			t.Errorf("got HeaderTimeoutCloses %d, want 1", got)
		}
	})
	t.Run("finished in time", func(t *testing.T) {
		r := newRecorder()
		p := newServerPeer(t, r, Config{Limits: Limits{HeaderTimeout: 5 * time.Second}})
		var b bytes.Buffer
		e := hpack.NewEncoder(&b)
		fields := get("/")
		for i := 0; i+1 < len(fields); i += 2 {
			e.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
		}
		// Many small fields: decoded, they would cost more than their
		// encoding.
		for i := 0; i < 1500; i++ {
			e.WriteField(hpack.HeaderField{Name: "x-a", Value: "1"})
		}
		block := b.Bytes()
		p.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block[:len(block)/2], EndStream: true})
		p.feed()
		p.tick(4 * time.Second)
		p.fr.WriteContinuation(1, true, block[len(block)/2:])
		if err := p.feed(); err != nil {
			t.Fatal(err)
		}
		r.wantEvents(t, "request 1 GET / end=true")
		if err := p.tick(4 * time.Second); err != nil {
			t.Fatalf("got %v after the block ended, want the connection open", err)
		}
		if got := p.c.HeaderBlockBytes(); got != 0 {
			t.Errorf("got %d bytes held between blocks, want 0", got)
		}
		if cap(p.c.blockBuf) > keepBlockBuf || cap(p.c.fields) > keepFields {
			t.Errorf("got %d block bytes and %d field slots kept between blocks, want at most %d and %d",
				cap(p.c.blockBuf), cap(p.c.fields), keepBlockBuf, keepFields)
		}
	})
}
