package h2

import (
	"sync/atomic"
	"time"
)

// Defaults of Config and Limits, applied where a field is zero.
const (
	// DefaultMaxConcurrentStreams is Config.MaxConcurrentStreams' default.
	DefaultMaxConcurrentStreams = 128
	// DefaultStreamWindow is Config.StreamWindow's default.
	DefaultStreamWindow = 1 << 20
	// DefaultConnWindow is Config.ConnWindow's default.
	DefaultConnWindow = 4 << 20
	// DefaultMaxFrameSize is Config.MaxFrameSize's default, the
	// protocol's initial value.
	DefaultMaxFrameSize = 16 << 10
	// DefaultMaxHeaderListSize is Config.MaxHeaderListSize's default.
	DefaultMaxHeaderListSize = 64 << 10
	// DefaultHeaderTableSize is Config.HeaderTableSize's default, the
	// protocol's initial value.
	DefaultHeaderTableSize = 4096
	// DefaultSettingsTimeout is Config.SettingsTimeout's default.
	DefaultSettingsTimeout = 10 * time.Second
	// DefaultIdleTimeout is Config.IdleTimeout's default.
	DefaultIdleTimeout = 60 * time.Second
	// DefaultClientPingInterval is Config.PingInterval's default for
	// the client role.
	DefaultClientPingInterval = 30 * time.Second
	// DefaultPingTimeout is Config.PingTimeout's default.
	DefaultPingTimeout = 15 * time.Second
	// DefaultGoAwayGrace is Config.GoAwayGrace's default (Go's server
	// waits as long after its GOAWAY).
	DefaultGoAwayGrace = time.Second

	// DefaultWindow is Limits.Window's default.
	DefaultWindow = 10 * time.Second
	// DefaultMaxRapidResets is Limits.MaxRapidResets' default.
	DefaultMaxRapidResets = 200
	// DefaultMaxSettings is Limits.MaxSettings' default.
	DefaultMaxSettings = 100
	// DefaultMaxPings is Limits.MaxPings' default.
	DefaultMaxPings = 1000
	// DefaultMaxEmptyFrames is Limits.MaxEmptyFrames' default.
	DefaultMaxEmptyFrames = 1000
	// DefaultMaxStreamErrors is Limits.MaxStreamErrors' default.
	DefaultMaxStreamErrors = 1000
	// DefaultMaxContinuationFrames is Limits.MaxContinuationFrames'
	// default.
	DefaultMaxContinuationFrames = 32
	// DefaultMaxQueuedControlFrames is Limits.MaxQueuedControlFrames'
	// default (Go's).
	DefaultMaxQueuedControlFrames = 10000
	// DefaultWriteTimeout is Limits.WriteTimeout's default (the
	// listeners' write_timeout).
	DefaultWriteTimeout = 60 * time.Second
	// DefaultStallTimeout is Limits.StallTimeout's default.
	DefaultStallTimeout = 60 * time.Second
	// DefaultHeaderTimeout is Limits.HeaderTimeout's default (the
	// listeners' read_header_timeout).
	DefaultHeaderTimeout = 10 * time.Second
)

// minWindow is the smallest stream window a Config may ask for: the
// window RFC 9113 starts every stream with. A smaller one would be
// broken by a peer that sends before it has seen our SETTINGS.
const minWindow = 65535

// maxWindow is the largest flow-control window (RFC 9113 §6.9.1).
const maxWindow = 1<<31 - 1

// Config is the shape of one connection. The zero value is usable:
// every zero field takes the default named in its comment.
type Config struct {
	// MaxConcurrentStreams is advertised to the peer (server role)
	// and bounds the streams it may have open at once: a stream beyond
	// it is answered with GOAWAY ENHANCE_YOUR_CALM (see Limits). Zero means
	// DefaultMaxConcurrentStreams (128, nginx's). The client role
	// advertises 0 (no pushes) and follows the server's value instead.
	MaxConcurrentStreams uint32
	// StreamWindow is the receive window of each stream: how much of
	// a body the peer may send before the consumer gives credit back
	// with Stream.Consumed. Zero means DefaultStreamWindow (1 MiB);
	// values below 65535 are raised to it.
	StreamWindow uint32
	// ConnWindow is the connection's receive window, across streams:
	// it bounds what the consumers of one connection hold unconsumed.
	// Zero means DefaultConnWindow (4 MiB); values below 65535 are
	// raised to it.
	ConnWindow uint32
	// MaxFrameSize is the largest frame payload accepted (advertised
	// as SETTINGS_MAX_FRAME_SIZE). A driver's read buffer must hold
	// 9 bytes more (Conn.FrameBufferSize). Zero means
	// DefaultMaxFrameSize (16 KiB); other values are clamped to
	// 16 KiB..16 MiB-1.
	MaxFrameSize uint32
	// MaxHeaderListSize bounds the decoded size of a header list
	// (names and values plus 32 bytes per field, RFC 9113 §6.5.2),
	// advertised as SETTINGS_MAX_HEADER_LIST_SIZE. A larger request
	// is answered 431 and never reaches the handler. Zero means
	// DefaultMaxHeaderListSize (64 KiB, the listeners' max_header_bytes).
	MaxHeaderListSize uint32
	// HeaderTableSize is the HPACK dynamic table the peer may use for
	// what it sends us (SETTINGS_HEADER_TABLE_SIZE). Zero means
	// DefaultHeaderTableSize (4096, the protocol's default).
	HeaderTableSize uint32
	// EnableConnectProtocol advertises extended CONNECT (RFC 8441,
	// WebSocket over HTTP/2): requests may carry :protocol. False
	// refuses such requests as malformed.
	EnableConnectProtocol bool

	// SettingsTimeout is how long the peer has to acknowledge our
	// SETTINGS before the connection fails with SETTINGS_TIMEOUT.
	// Zero means DefaultSettingsTimeout (10s); negative, no limit.
	SettingsTimeout time.Duration
	// IdleTimeout closes a connection that has had no open stream for
	// this long (GOAWAY NO_ERROR). Zero means DefaultIdleTimeout
	// (60s); negative, never.
	IdleTimeout time.Duration
	// PingInterval sends a PING after this long without input, for
	// liveness; no answer within PingTimeout ends the connection. Zero
	// means DefaultClientPingInterval (30s) for the client role and
	// never for the server role; negative, never.
	PingInterval time.Duration
	// PingTimeout is how long a liveness PING (PingInterval, or
	// Conn.Ping) may wait for its acknowledgement. Zero means
	// DefaultPingTimeout (15s).
	PingTimeout time.Duration
	// GoAwayGrace is how long a graceful Shutdown waits for the
	// acknowledgement of the PING that follows its first GOAWAY
	// before sending the final one. Zero means DefaultGoAwayGrace (1s).
	GoAwayGrace time.Duration

	// Limits bounds what a peer may make the connection do.
	Limits Limits
	// Buffers, when set, lends the connection its output buffer call
	// by call (see BufferPool). Nil: the connection keeps a buffer of
	// its own, of up to 4 KiB while it is idle.
	Buffers BufferPool
	// Stats receives the connection's counters; connections of one
	// listener or transport usually share one. Nil gives the
	// connection a private Stats (see Conn.Stats).
	Stats *Stats
}

// Limits are the abuse limits of a connection. A peer that passes one
// loses its connection (GOAWAY ENHANCE_YOUR_CALM, unless another code
// is named), and the matching Stats counter goes up; other
// connections are not affected. The flood limits count events within
// a Window: zero means the default named in the comment, negative
// means no limit. Config.MaxConcurrentStreams is one too: the first
// stream over it gets GOAWAY ENHANCE_YOUR_CALM, not a reset of its own
// (RefusedStreamCloses; a peer that has not yet acknowledged our
// SETTINGS sees its streams under way finish first).
type Limits struct {
	// Window is the period over which the Max* counts below are
	// taken. Zero means DefaultWindow (10s). Windows are measured with
	// the times given to Conn.Tick.
	Window time.Duration
	// MaxRapidResets bounds streams the peer resets before they were
	// answered (CVE-2023-44487, "rapid reset"). The connection is
	// closed when the count in a window passes this and is also more
	// than half of the streams opened in it, so a busy client that
	// cancels some of its calls is not mistaken for an attacker.
	// Zero means DefaultMaxRapidResets (200).
	MaxRapidResets int
	// MaxSettings bounds SETTINGS frames. Zero means
	// DefaultMaxSettings (100).
	MaxSettings int
	// MaxPings bounds PING frames that want an answer. Zero means
	// DefaultMaxPings (1000).
	MaxPings int
	// MaxEmptyFrames bounds frames that carry nothing: DATA without
	// payload or END_STREAM, HEADERS and CONTINUATION fragments
	// without bytes or END_HEADERS, PRIORITY, and WINDOW_UPDATE of
	// zero (CVE-2019-9518). Zero means DefaultMaxEmptyFrames (1000).
	MaxEmptyFrames int
	// MaxStreamErrors bounds RST_STREAM frames sent for the peer's
	// stream errors (CVE-2019-9514, "reset flood"). Zero means
	// DefaultMaxStreamErrors (1000).
	MaxStreamErrors int
	// MaxHeaderBlockBytes bounds the encoded size of one header block,
	// HEADERS and CONTINUATION together (CONTINUATION floods,
	// CVE-2024-27316), and so what a block that spans frames holds
	// until it ends (Conn.HeaderBlockBytes). Zero means
	// Config.MaxHeaderListSize for the server role (an encoded block is
	// never much larger than the list it decodes to, so a larger one is
	// a list too large all the same) and twice it for the client role
	// (a backend's oversized head costs its stream, a 502, rather than
	// the connection's other streams).
	MaxHeaderBlockBytes int
	// MaxContinuationFrames bounds the CONTINUATION frames of one
	// header block. Zero means DefaultMaxContinuationFrames (32).
	MaxContinuationFrames int
	// MaxQueuedControlFrames bounds the frames the machine writes in
	// answer to the peer (SETTINGS and PING acknowledgements,
	// RST_STREAM, WINDOW_UPDATE) while output is blocked: a peer that
	// sends without reading cannot make the driver buffer without
	// bound. Zero means DefaultMaxQueuedControlFrames (10000, Go's).
	MaxQueuedControlFrames int
	// WriteTimeout bounds how long output may stay blocked
	// (Conn.SetOutputBlocked) before the connection is closed: a
	// reader that slow is gone. Zero means DefaultWriteTimeout (60s);
	// negative, no limit.
	WriteTimeout time.Duration
	// HeaderTimeout bounds how long a header block may stay
	// unfinished: from a HEADERS frame without END_HEADERS to the
	// CONTINUATION frame that ends it (nothing else may come on the
	// connection meanwhile). Past it the connection is closed, as a
	// request head that does not end in time. Zero means
	// DefaultHeaderTimeout (10s); negative, no limit.
	HeaderTimeout time.Duration
	// StallTimeout bounds how long a stream may wait for send window:
	// a stream whose own window stays shut is reset (CANCEL), and a
	// connection whose window stays shut is closed. Zero means
	// DefaultStallTimeout (60s); negative, no limit.
	StallTimeout time.Duration
}

// Stats counts what connections saw, for metrics. All fields are
// updated atomically and may be read at any time.
type Stats struct {
	// StreamsOpened counts streams opened, by either side.
	StreamsOpened atomic.Uint64
	// StreamsRefused counts streams refused for passing
	// MaxConcurrentStreams.
	StreamsRefused atomic.Uint64
	// PeerResets counts RST_STREAM frames received for open streams.
	PeerResets atomic.Uint64
	// RapidResets counts streams the peer reset before they were
	// answered (the rapid-reset signal).
	RapidResets atomic.Uint64
	// StreamErrors counts streams reset for the peer's protocol errors.
	StreamErrors atomic.Uint64
	// HeaderListTooLarge counts requests answered 431 because their
	// decoded header list passed MaxHeaderListSize (HPACK bombs).
	HeaderListTooLarge atomic.Uint64
	// ProtocolErrors counts connections closed for a protocol error
	// of the peer (GOAWAY with an error code other than
	// ENHANCE_YOUR_CALM).
	ProtocolErrors atomic.Uint64

	// RapidResetCloses counts connections closed by MaxRapidResets.
	RapidResetCloses atomic.Uint64
	// HeaderFloodCloses counts connections closed by
	// MaxHeaderBlockBytes or MaxContinuationFrames.
	HeaderFloodCloses atomic.Uint64
	// HeaderTimeoutCloses counts connections closed by HeaderTimeout.
	HeaderTimeoutCloses atomic.Uint64
	// SettingsFloodCloses counts connections closed by MaxSettings.
	SettingsFloodCloses atomic.Uint64
	// PingFloodCloses counts connections closed by MaxPings.
	PingFloodCloses atomic.Uint64
	// EmptyFrameFloodCloses counts connections closed by MaxEmptyFrames.
	EmptyFrameFloodCloses atomic.Uint64
	// RefusedStreamCloses counts connections closed (or drained) for
	// opening a stream over MaxConcurrentStreams.
	RefusedStreamCloses atomic.Uint64
	// StreamErrorCloses counts connections closed by MaxStreamErrors.
	StreamErrorCloses atomic.Uint64
	// ControlQueueCloses counts connections closed by
	// MaxQueuedControlFrames.
	ControlQueueCloses atomic.Uint64
	// SlowReaderCloses counts connections closed by WriteTimeout.
	SlowReaderCloses atomic.Uint64
	// StalledStreamResets counts streams reset by StallTimeout.
	StalledStreamResets atomic.Uint64
	// StalledConnCloses counts connections closed by StallTimeout.
	StalledConnCloses atomic.Uint64
	// SettingsTimeouts counts connections closed by SettingsTimeout.
	SettingsTimeouts atomic.Uint64
	// PingTimeouts counts connections closed by PingTimeout.
	PingTimeouts atomic.Uint64
	// IdleCloses counts connections closed by IdleTimeout.
	IdleCloses atomic.Uint64
}

// settings is a Config with its defaults applied, in the units the
// machine uses.
type settings struct {
	maxStreams         uint32
	streamWindow       int32
	connWindow         int32
	maxFrame           uint32
	maxHeaderList      uint32
	headerTable        uint32
	connectProtocol    bool
	settingsTimeout    int64
	idleTimeout        int64
	pingInterval       int64
	pingTimeout        int64
	goAwayGrace        int64
	window             int64
	maxRapidResets     int
	maxSettings        int
	maxPings           int
	maxEmpty           int
	maxStreamErrors    int
	maxBlockBytes      int
	maxContinuations   int
	maxQueuedControl   int
	writeTimeout       int64
	stallTimeout       int64
	headerTimeout      int64
	stats              *Stats
	buffers            BufferPool
	initialPeerStreams uint32
}

// resolve applies the defaults of cfg for a connection of the given
// role.
func (cfg *Config) resolve(client bool) settings {
	s := settings{
		maxStreams:      orU32(cfg.MaxConcurrentStreams, DefaultMaxConcurrentStreams),
		streamWindow:    window(cfg.StreamWindow, DefaultStreamWindow),
		connWindow:      window(cfg.ConnWindow, DefaultConnWindow),
		maxFrame:        orU32(cfg.MaxFrameSize, DefaultMaxFrameSize),
		maxHeaderList:   orU32(cfg.MaxHeaderListSize, DefaultMaxHeaderListSize),
		headerTable:     orU32(cfg.HeaderTableSize, DefaultHeaderTableSize),
		connectProtocol: cfg.EnableConnectProtocol,
		settingsTimeout: dur(cfg.SettingsTimeout, DefaultSettingsTimeout),
		idleTimeout:     dur(cfg.IdleTimeout, DefaultIdleTimeout),
		pingTimeout:     dur(cfg.PingTimeout, DefaultPingTimeout),
		goAwayGrace:     dur(cfg.GoAwayGrace, DefaultGoAwayGrace),
		stats:           cfg.Stats,
		buffers:         cfg.Buffers,
	}
	if client {
		s.pingInterval = dur(cfg.PingInterval, DefaultClientPingInterval)
	} else if cfg.PingInterval > 0 {
		s.pingInterval = int64(cfg.PingInterval)
	}
	s.maxFrame = min(max(s.maxFrame, DefaultMaxFrameSize), 1<<24-1)
	l := &cfg.Limits
	s.window = dur(l.Window, DefaultWindow)
	if s.window <= 0 {
		s.window = int64(DefaultWindow)
	}
	s.maxRapidResets = limit(l.MaxRapidResets, DefaultMaxRapidResets)
	s.maxSettings = limit(l.MaxSettings, DefaultMaxSettings)
	s.maxPings = limit(l.MaxPings, DefaultMaxPings)
	s.maxEmpty = limit(l.MaxEmptyFrames, DefaultMaxEmptyFrames)
	s.maxStreamErrors = limit(l.MaxStreamErrors, DefaultMaxStreamErrors)
	blockBytes := int(s.maxHeaderList)
	if client {
		blockBytes *= 2
	}
	s.maxBlockBytes = limit(l.MaxHeaderBlockBytes, blockBytes)
	s.maxContinuations = limit(l.MaxContinuationFrames, DefaultMaxContinuationFrames)
	s.maxQueuedControl = limit(l.MaxQueuedControlFrames, DefaultMaxQueuedControlFrames)
	s.writeTimeout = dur(l.WriteTimeout, DefaultWriteTimeout)
	s.stallTimeout = dur(l.StallTimeout, DefaultStallTimeout)
	s.headerTimeout = dur(l.HeaderTimeout, DefaultHeaderTimeout)
	if s.stats == nil {
		s.stats = new(Stats)
	}
	// Until the server's SETTINGS arrive a client assumes 100
	// concurrent streams, as Go's transport does (RFC 9113 §5.1.2
	// suggests no fewer).
	s.initialPeerStreams = 100
	return s
}

func orU32(v, def uint32) uint32 {
	if v == 0 {
		return def
	}
	return v
}

func window(v uint32, def int32) int32 {
	switch {
	case v == 0:
		return def
	case v < minWindow:
		return minWindow
	case v > maxWindow:
		return maxWindow
	}
	return int32(v)
}

// dur returns d in nanoseconds, def for zero and 0 (off) for negative.
func dur(d, def time.Duration) int64 {
	switch {
	case d == 0:
		return int64(def)
	case d < 0:
		return 0
	}
	return int64(d)
}

// limit returns v, def for zero and 0 (no limit) for negative.
func limit(v, def int) int {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}
