package h2

import (
	"bytes"
	"cmp"
	"slices"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Output takes the bytes a Conn writes. Write must not block and must
// take all of p (returning len(p)) unless the connection is broken:
// what the socket does not accept now, the driver keeps and sends
// later, and tells the Conn with SetOutputBlocked when that backlog is
// high. p is only valid during the call. An error means the
// connection is broken; the Conn ends (Err wraps it).
type Output interface {
	Write(p []byte) (int, error)
}

// BufferPool lends a Conn the buffer it gathers output in, for the
// length of one call (Feed, Tick, a Stream write...): between calls a
// Conn holds no output buffer. An event loop passes its free list; it
// needs no lock, as all of a loop's connections run on the loop. Get
// returns a buffer (any length and capacity; it is used from length
// 0); Put takes it back, possibly grown.
type BufferPool interface {
	Get() []byte
	Put(b []byte)
}

// Field is a header field. Names the machine writes should be
// lowercase (others are lowercased, which allocates); fields it passes
// to handlers have been validated (RFC 9113 §8.2).
type Field = hpack.HeaderField

// flushAt is how much output a Conn gathers before writing it, within
// one call: bulk DATA goes out in writes of about this size.
const flushAt = 64 << 10

// keepOutBuf is the largest output buffer an idle connection keeps.
const keepOutBuf = 4 << 10

// recentResets is how many streams this side reset recently, and
// whose late frames are ignored rather than treated as errors
// (RFC 9113 §5.4.2: the peer may have sent them before it saw the
// RST_STREAM).
const recentResets = 32

// shutdownPing is the payload of the PING that follows the first
// GOAWAY of a graceful shutdown.
var shutdownPing = [8]byte{'h', 'e', 'l', 'i', 'o', 's', 'g', 'a'}

// Conn is one HTTP/2 connection, client or server side: a state
// machine the driver pushes bytes into (Feed) and time into (Tick),
// and which writes frames to its Output. It never blocks, starts no
// goroutine and takes no lock: all of its methods, and the methods of
// its Streams, must be called from one goroutine at a time (an event
// loop), and handlers are called on that goroutine from within those
// methods. Handlers may call any Stream method and Conn.Shutdown,
// Conn.OpenStream and Conn.Ping, but not Feed, Tick or Close.
//
// Output is written before each of those methods returns (in writes of
// up to about 64 KiB, more than one when there is more). When the
// connection is over — Done reports true, and Feed and Tick return the
// reason — the driver writes out what it holds and closes the socket.
type Conn struct {
	out    Output
	client bool
	srv    ServerHandler
	cli    ClientHandler
	sh     StreamHandler
	set    settings
	stats  *Stats

	err  error // why the connection is over; nil while it lives
	werr error // Output failed: nothing more is written

	wbuf  []byte
	depth int // nesting of entry points; output goes at the outermost exit

	now int64 // unix nanoseconds, from Tick (or creation)

	// Preface and settings.
	prefaceDone     bool
	sawSettings     bool
	unackedSettings int
	settingsAt      int64

	// The peer's settings.
	peerMaxFrame      uint32
	peerInitialWindow int32
	peerMaxStreams    uint32
	peerConnect       bool

	// Flow control: what we may send, and what the peer may send.
	sendWindow int64
	recvAvail  int32
	recvUnsent int32

	// Streams.
	streams       map[uint32]*Stream
	maxPeerStream uint32 // server: highest client stream id seen
	nextStream    uint32 // client: id of the next stream to open
	resets        [recentResets]uint32
	resetNext     int

	// Header block being received; blockBuf keeps the fragments of one
	// that spans frames (fragment).
	hb       headerBlock
	blockBuf []byte
	fields   []Field
	req      RequestHead
	resp     ResponseHead

	// HPACK.
	enc    *hpack.Encoder
	encBuf bytes.Buffer
	dec    *hpack.Decoder

	// Streams that wrote short and wait for window or output.
	waiting      []*Stream
	waitScratch  []*Stream
	staleWaiting int // closed streams still in waiting
	wakePending  bool

	outBlocked   bool
	blockedSince int64
	queuedCtl    int

	// GOAWAY, ours and the peer's.
	shutdownPhase uint8 // 0 none; 1 first GOAWAY and PING sent; 2 final GOAWAY sent
	shutdownAt    int64
	goAwayLast    uint32 // last stream id of our final GOAWAY
	goAwayRecv    bool

	// Liveness and idleness.
	lastRead       int64
	idleSince      int64
	pingOut        bool
	pingAt         int64
	pingData       [8]byte
	pingSeq        uint64
	connStallSince int64

	win floodWindow
}

// floodWindow counts events within one Limits.Window.
type floodWindow struct {
	start        int64
	opened       int
	rapidResets  int
	settings     int
	pings        int
	empty        int
	streamErrors int
}

// StreamHandler receives the events of streams, in both roles. Its
// methods are called on the driving goroutine, from within Feed or
// another Conn or Stream method; they must not block.
type StreamHandler interface {
	// OnData delivers body bytes; p is only valid during the call.
	// The stream's window shrinks by len(p) until the consumer calls
	// Consumed. endStream: the body is complete.
	OnData(s *Stream, p []byte, endStream bool)
	// OnTrailers delivers trailers; they end the body. fields are
	// only valid during the call (the strings may be kept).
	OnTrailers(s *Stream, fields []Field)
	// OnWritable says that a stream whose last WriteData wrote less
	// than asked may write again (window or output opened).
	OnWritable(s *Stream)
	// OnReset says that the stream is over without finishing: the
	// peer reset it (*StreamError, Remote), this side reset it for a
	// protocol error of the peer or a limit (*StreamError, ErrStalled),
	// a GOAWAY left it unprocessed (*GoAwayError, ErrRetryable) or the
	// connection ended (*ConnError, ErrClosed, ErrPingTimeout...). It
	// is not called for the handler's own Stream.Reset, nor for a
	// stream that finished normally. No call for the stream follows.
	OnReset(s *Stream, err error)
}

// ServerHandler receives requests.
type ServerHandler interface {
	StreamHandler
	// OnRequest delivers a request head whose pseudo-header fields
	// have been parsed and validated. h and h.Fields are reused after
	// the call (the strings may be kept). endStream: no body follows.
	OnRequest(s *Stream, h *RequestHead, endStream bool)
}

// ClientHandler receives responses to the streams a client Conn opens.
type ClientHandler interface {
	StreamHandler
	// OnResponse delivers a response head: informational ones
	// (h.Status 1xx, possibly several) and then the final one. h and
	// h.Fields are reused after the call (the strings may be kept).
	// endStream: no body follows.
	OnResponse(s *Stream, h *ResponseHead, endStream bool)
}

// NewServerConn returns the server side of a connection that has just
// been accepted (after the TLS handshake chose h2, or on an h2c
// listener). It writes the server's preface (SETTINGS, and a
// WINDOW_UPDATE raising the connection window) to out before it
// returns; the client's preface is the first thing Feed expects.
func NewServerConn(out Output, h ServerHandler, cfg Config) *Conn {
	c := newConn(out, false, cfg)
	c.srv, c.sh = h, h
	c.enter()
	c.writeSettings()
	c.exit()
	return c
}

// NewClientConn returns the client side of a connection that has just
// been dialled (TLS with ALPN h2, or h2c with prior knowledge). It
// writes the client preface, SETTINGS and a WINDOW_UPDATE to out before
// it returns; streams may be opened at once (OpenStream).
func NewClientConn(out Output, h ClientHandler, cfg Config) *Conn {
	c := newConn(out, true, cfg)
	c.cli, c.sh = h, h
	c.prefaceDone = true
	c.nextStream = 1
	c.enter()
	c.wbuf = append(c.wbuf, clientPreface...)
	c.writeSettings()
	c.exit()
	return c
}

func newConn(out Output, client bool, cfg Config) *Conn {
	c := &Conn{out: out, client: client, set: cfg.resolve(client)}
	c.stats = c.set.stats
	c.now = time.Now().UnixNano()
	c.lastRead, c.idleSince = c.now, c.now
	c.win.start = c.now
	c.peerMaxFrame = DefaultMaxFrameSize
	c.peerInitialWindow = minWindow
	c.peerMaxStreams = c.set.initialPeerStreams
	c.sendWindow = minWindow
	c.recvAvail = minWindow
	c.streams = make(map[uint32]*Stream)
	c.enc = hpack.NewEncoder(&c.encBuf)
	c.dec = hpack.NewDecoder(c.set.headerTable, c.onField)
	// A string may not be longer than a block can encode (Huffman
	// codes are at least 5 bits a byte): longer is a COMPRESSION_ERROR.
	// One that is merely longer than MaxHeaderListSize gets a 431.
	c.dec.SetMaxStringLength(2 * c.set.maxBlockBytes)
	return c
}

// enter and exit bracket every entry point; the outermost exit wakes
// streams waiting to write and hands the output to the driver.
func (c *Conn) enter() {
	if c.depth == 0 && c.wbuf == nil && c.set.buffers != nil {
		c.wbuf = c.set.buffers.Get()[:0]
	}
	c.depth++
}

func (c *Conn) exit() {
	if c.depth == 1 {
		if c.wakePending {
			c.wakeWriters()
		}
		c.flush()
		if c.set.buffers != nil && c.wbuf != nil {
			c.set.buffers.Put(c.wbuf)
			c.wbuf = nil
		}
	}
	c.depth--
}

// flush hands gathered output to the driver.
func (c *Conn) flush() {
	if len(c.wbuf) == 0 {
		return
	}
	if c.werr == nil {
		if _, err := c.out.Write(c.wbuf); err != nil {
			c.werr = err
		}
	}
	c.wbuf = c.wbuf[:0]
	if cap(c.wbuf) > keepOutBuf && len(c.streams) == 0 && c.set.buffers == nil {
		c.wbuf = nil // a burst is over: an idle connection keeps little
	}
	if c.werr != nil && c.err == nil {
		c.end(&closedError{cause: c.werr})
	}
}

func (c *Conn) maybeFlush() {
	if len(c.wbuf) >= flushAt {
		c.flush()
	}
}

// Feed gives the machine bytes read from the connection. It consumes
// whole frames only (and, on a server, the client preface): the driver
// keeps the bytes from consumed on and feeds them again, with more,
// once more have arrived. A frame needs at most FrameBufferSize bytes.
// Handlers are called from within Feed. A non-nil error means the
// connection is over (see Conn): ErrBadPreface, a *ConnError (GOAWAY
// has been written), or ErrClosed when it ended gracefully.
func (c *Conn) Feed(p []byte) (consumed int, err error) {
	if c.err != nil {
		return 0, c.err
	}
	c.enter()
	n, err := c.feed(p)
	if err != nil {
		c.fail(err)
	}
	c.exit()
	return n, c.err
}

func (c *Conn) feed(p []byte) (int, error) {
	off := 0
	if !c.prefaceDone {
		n := min(len(p), len(clientPreface))
		if string(p[:n]) != clientPreface[:n] {
			return 0, ErrBadPreface
		}
		if n < len(clientPreface) {
			return 0, nil
		}
		c.prefaceDone = true
		off = n
	}
	for c.err == nil {
		rest := p[off:]
		if len(rest) < frameHeaderLen {
			break
		}
		h := parseFrameHeader(rest)
		if h.length > int(c.set.maxFrame) {
			return off, connErr(http2.ErrCodeFrameSize, "frame larger than SETTINGS_MAX_FRAME_SIZE")
		}
		if len(rest) < frameHeaderLen+h.length {
			break
		}
		off += frameHeaderLen + h.length
		c.lastRead = c.now
		if err := c.frame(h, rest[frameHeaderLen:frameHeaderLen+h.length]); err != nil {
			return off, err
		}
	}
	return off, nil
}

// FrameBufferSize is the smallest read buffer that holds any frame
// this connection accepts: Feed can always make progress with a
// buffer this large.
func (c *Conn) FrameBufferSize() int { return frameHeaderLen + int(c.set.maxFrame) }

// frame handles one complete frame.
func (c *Conn) frame(h frameHeader, p []byte) error {
	if c.hb.active {
		if h.typ != http2.FrameContinuation || h.stream != c.hb.stream {
			return connErr(http2.ErrCodeProtocol, "frame inside a header block")
		}
		return c.continuation(h, p)
	}
	if !c.sawSettings && (h.typ != http2.FrameSettings || h.has(http2.FlagSettingsAck)) {
		return connErr(http2.ErrCodeProtocol, "first frame is not SETTINGS")
	}
	switch h.typ {
	case http2.FrameData:
		return c.data(h, p)
	case http2.FrameHeaders:
		return c.headers(h, p)
	case http2.FramePriority:
		return c.priority(h, p)
	case http2.FrameRSTStream:
		return c.rstStream(h, p)
	case http2.FrameSettings:
		return c.settings(h, p)
	case http2.FramePushPromise:
		return connErr(http2.ErrCodeProtocol, "PUSH_PROMISE: push is disabled")
	case http2.FramePing:
		return c.ping(h, p)
	case http2.FrameGoAway:
		return c.goAway(h, p)
	case http2.FrameWindowUpdate:
		return c.windowUpdate(h, p)
	case http2.FrameContinuation:
		return connErr(http2.ErrCodeProtocol, "CONTINUATION without HEADERS")
	}
	// Unknown frame types are ignored (RFC 9113 §4.1, §5.5).
	return nil
}

// newStream opens stream id.
func (c *Conn) newStream(id uint32) *Stream {
	s := &Stream{
		c:          c,
		id:         id,
		sendWindow: int64(c.peerInitialWindow),
		recvAvail:  c.set.streamWindow,
		declared:   -1,
	}
	c.streams[id] = s
	c.stats.StreamsOpened.Add(1)
	c.win.opened++
	return s
}

// closeStream forgets s: it is over, normally or not.
func (c *Conn) closeStream(s *Stream) {
	if s.closed {
		return
	}
	s.closed = true
	delete(c.streams, s.id)
	if s.waiting {
		s.waiting = false
		c.staleWaiting++
		if c.staleWaiting >= 16 && 2*c.staleWaiting >= len(c.waiting) {
			c.pruneWaiting()
		}
	}
	if s.unconsumed > 0 {
		// The consumer will not give this back any more.
		c.creditConn(s.unconsumed)
		s.unconsumed = 0
	}
	if len(c.streams) == 0 {
		c.idleSince = c.now
	}
	c.checkDone()
}

// maybeClose closes s once both sides have ended it.
func (c *Conn) maybeClose(s *Stream) {
	if s.recvEnded && s.sendEnded && !s.closed {
		c.closeStream(s)
	}
}

// checkDone ends a draining connection whose last stream is over.
func (c *Conn) checkDone() {
	if c.err == nil && len(c.streams) == 0 && (c.shutdownPhase == 2 || c.goAwayRecv) {
		c.end(ErrClosed)
	}
}

// fail ends the connection for err, writing GOAWAY for a connection
// error this side found.
func (c *Conn) fail(err error) {
	if c.err != nil {
		return
	}
	if ce, ok := err.(*ConnError); ok && !ce.Remote {
		if ce.Code != http2.ErrCodeEnhanceYourCalm {
			c.stats.ProtocolErrors.Add(1)
		}
		c.writeGoAway(c.lastStreamID(), ce.Code, ce.Reason)
	}
	c.end(err)
}

// lastStreamID is what a GOAWAY of ours names as the last stream
// processed.
func (c *Conn) lastStreamID() uint32 {
	if c.client {
		return 0 // we accept no pushed streams
	}
	if c.shutdownPhase == 2 {
		return c.goAwayLast
	}
	return c.maxPeerStream
}

// end makes err the end of the connection and tells every open stream.
func (c *Conn) end(err error) {
	if c.err != nil {
		return
	}
	c.err = err
	c.hb.active = false
	c.blockBuf = nil
	gone := make([]*Stream, 0, len(c.streams))
	for _, s := range c.streams {
		gone = append(gone, s)
	}
	sortByID(gone)
	for _, s := range gone {
		s.closed = true
		delete(c.streams, s.id)
	}
	for _, s := range gone {
		c.sh.OnReset(s, err)
	}
	clear(c.waiting)
	c.waiting = c.waiting[:0]
}

// sortByID puts streams in the order they were opened, so that what
// handlers are told does not depend on map order.
func sortByID(ss []*Stream) {
	slices.SortFunc(ss, func(a, b *Stream) int { return cmp.Compare(a.id, b.id) })
}

// Done reports whether the connection is over: the driver writes out
// what it holds and closes the socket. Err says why.
func (c *Conn) Done() bool { return c.err != nil }

// Err returns why the connection is over (nil while it lives).
func (c *Conn) Err() error { return c.err }

// Stats returns the counters the connection adds to.
func (c *Conn) Stats() *Stats { return c.stats }

// Close tells the machine that the connection is gone (the peer closed
// it, a read or write failed, or the driver gave up on it): every open
// stream gets OnReset with an error wrapping ErrClosed and cause.
// Nothing more is written.
func (c *Conn) Close(cause error) {
	if c.err != nil {
		return
	}
	c.enter()
	var err error = ErrClosed
	if cause != nil {
		err = &closedError{cause: cause}
	}
	c.werr = err
	c.end(err)
	c.exit()
}

// ActiveStreams returns the number of open streams.
func (c *Conn) ActiveStreams() int { return len(c.streams) }

// Hold gathers the output of the Stream and Conn calls that follow, up
// to the matching Release, which hands it to Output in one write (of up
// to about 64 KiB, more when there is more): a driver brackets work that
// makes several calls (a response head, its body and its end, say) so
// that they cost one write. Holds nest; handlers need none (the calls
// that run them hold already).
func (c *Conn) Hold() { c.enter() }

// Release ends what Hold began.
func (c *Conn) Release() { c.exit() }
