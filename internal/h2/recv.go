package h2

// Receiving frames: each frame type's checks (RFC 9113 §6) and what it
// does to the connection and its streams. HEADERS and CONTINUATION are
// in headers.go.

import (
	"encoding/binary"
	"sync/atomic"

	"golang.org/x/net/http2"
)

// unpad strips the padding (and, when prio, the priority fields) of a
// DATA or HEADERS payload. It returns the stream dependency when there
// is one.
func unpad(h frameHeader, p []byte, prio bool) (body []byte, dep uint32, hasDep bool, err error) {
	pad := 0
	if h.has(http2.FlagDataPadded) {
		if len(p) < 1 {
			return nil, 0, false, connErr(http2.ErrCodeFrameSize, "padded frame without pad length")
		}
		pad = int(p[0])
		p = p[1:]
	}
	if prio {
		if len(p) < 5 {
			return nil, 0, false, connErr(http2.ErrCodeFrameSize, "HEADERS too short for its priority")
		}
		dep, hasDep = binary.BigEndian.Uint32(p)&(1<<31-1), true
		p = p[5:]
	}
	if pad > len(p) {
		return nil, 0, false, connErr(http2.ErrCodeProtocol, "padding longer than the payload")
	}
	return p[:len(p)-pad], dep, hasDep, nil
}

// isIdle reports whether id names a stream that was never opened (it
// is not in the map, and not below a stream that was).
func (c *Conn) isIdle(id uint32) bool {
	if c.client {
		return id%2 == 0 || id >= c.nextStream
	}
	return id%2 == 0 || id > c.maxPeerStream
}

func (c *Conn) data(h frameHeader, p []byte) error {
	if h.stream == 0 {
		return connErr(http2.ErrCodeProtocol, "DATA on stream 0")
	}
	data, _, _, err := unpad(h, p, false)
	if err != nil {
		return err
	}
	flow := int32(h.length)
	if flow > c.recvAvail {
		return connErr(http2.ErrCodeFlowControl, "DATA beyond the connection window")
	}
	c.recvAvail -= flow
	s := c.streams[h.stream]
	if s == nil || s.recvEnded {
		if s == nil && c.isIdle(h.stream) {
			return connErr(http2.ErrCodeProtocol, "DATA on an idle stream")
		}
		c.creditConn(flow) // no one will consume it
		if s == nil && c.recentlyReset(h.stream) {
			return nil
		}
		return c.streamError(h.stream, http2.ErrCodeStreamClosed, "DATA on a closed stream")
	}
	if flow > s.recvAvail {
		c.creditConn(flow)
		return c.streamError(s.id, http2.ErrCodeFlowControl, "DATA beyond the stream window")
	}
	s.recvAvail -= flow
	if padding := flow - int32(len(data)); padding > 0 {
		c.creditConn(padding)
		c.creditStream(s, padding)
	}
	end := h.has(http2.FlagDataEndStream)
	if len(data) == 0 && !end {
		if err := c.count(&c.win.empty, c.set.maxEmpty, &c.stats.EmptyFrameFloodCloses, "empty frames"); err != nil {
			return err
		}
	}
	if c.client && !s.gotFinal {
		c.creditConn(int32(len(data)))
		return c.streamError(s.id, http2.ErrCodeProtocol, "DATA before the response head")
	}
	s.recvBytes += int64(len(data))
	if s.declared >= 0 && (s.recvBytes > s.declared || end && s.recvBytes != s.declared) {
		c.creditConn(int32(len(data)))
		return c.streamError(s.id, http2.ErrCodeProtocol, "body length differs from content-length")
	}
	s.unconsumed += int32(len(data))
	if end {
		s.recvEnded = true
	}
	if len(data) > 0 || end {
		c.sh.OnData(s, data, end)
	}
	if end {
		c.maybeClose(s)
	}
	return nil
}

func (c *Conn) priority(h frameHeader, p []byte) error {
	if h.stream == 0 {
		return connErr(http2.ErrCodeProtocol, "PRIORITY on stream 0")
	}
	if h.length != 5 {
		return c.streamError(h.stream, http2.ErrCodeFrameSize, "PRIORITY of the wrong size")
	}
	if binary.BigEndian.Uint32(p)&(1<<31-1) == h.stream {
		return c.streamError(h.stream, http2.ErrCodeProtocol, "stream depends on itself")
	}
	// Priorities are parsed and ignored (RFC 9113 §5.3.2 deprecates
	// them); a stream of them is a flood like any other.
	return c.count(&c.win.empty, c.set.maxEmpty, &c.stats.EmptyFrameFloodCloses, "empty frames")
}

func (c *Conn) rstStream(h frameHeader, p []byte) error {
	if h.length != 4 {
		return connErr(http2.ErrCodeFrameSize, "RST_STREAM of the wrong size")
	}
	if h.stream == 0 {
		return connErr(http2.ErrCodeProtocol, "RST_STREAM on stream 0")
	}
	s := c.streams[h.stream]
	if s == nil {
		if c.isIdle(h.stream) {
			return connErr(http2.ErrCodeProtocol, "RST_STREAM on an idle stream")
		}
		return nil
	}
	code := ErrCode(binary.BigEndian.Uint32(p))
	c.stats.PeerResets.Add(1)
	rapid := !c.client && !s.answered
	c.closeStream(s)
	c.sh.OnReset(s, &StreamError{StreamID: s.id, Code: code, Remote: true})
	if rapid {
		// CVE-2023-44487: a stream reset before its answer cost us a
		// request (a backend may already be working on it) and the
		// peer nothing. A client that does this for most of its
		// streams, many times in a window, is an attacker.
		c.stats.RapidResets.Add(1)
		c.win.rapidResets++
		if m := c.set.maxRapidResets; m > 0 && c.win.rapidResets > m && 2*c.win.rapidResets > c.win.opened {
			c.stats.RapidResetCloses.Add(1)
			return connErr(http2.ErrCodeEnhanceYourCalm, "too many streams reset before their answer")
		}
	}
	return nil
}

func (c *Conn) settings(h frameHeader, p []byte) error {
	if h.stream != 0 {
		return connErr(http2.ErrCodeProtocol, "SETTINGS on a stream")
	}
	if h.has(http2.FlagSettingsAck) {
		if h.length != 0 {
			return connErr(http2.ErrCodeFrameSize, "SETTINGS ACK with a payload")
		}
		if c.unackedSettings > 0 {
			c.unackedSettings--
		}
		return nil
	}
	if h.length%6 != 0 {
		return connErr(http2.ErrCodeFrameSize, "SETTINGS length not a multiple of 6")
	}
	if err := c.count(&c.win.settings, c.set.maxSettings, &c.stats.SettingsFloodCloses, "SETTINGS frames"); err != nil {
		return err
	}
	first := !c.sawSettings
	c.sawSettings = true
	sawMaxStreams := false
	for ; len(p) >= 6; p = p[6:] {
		id := http2.SettingID(binary.BigEndian.Uint16(p))
		v := binary.BigEndian.Uint32(p[2:])
		switch id {
		case http2.SettingHeaderTableSize:
			c.enc.SetMaxDynamicTableSizeLimit(v)
		case http2.SettingEnablePush:
			if v > 1 || c.client && v == 1 {
				return connErr(http2.ErrCodeProtocol, "bad SETTINGS_ENABLE_PUSH")
			}
		case http2.SettingMaxConcurrentStreams:
			c.peerMaxStreams, sawMaxStreams = v, true
		case http2.SettingInitialWindowSize:
			if v > maxWindow {
				return connErr(http2.ErrCodeFlowControl, "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1")
			}
			delta := int64(v) - int64(c.peerInitialWindow)
			c.peerInitialWindow = int32(v)
			for _, s := range c.streams {
				s.sendWindow += delta
				if s.sendWindow > maxWindow {
					return connErr(http2.ErrCodeFlowControl, "stream window above 2^31-1")
				}
			}
			if delta > 0 {
				c.wakePending = true
			}
		case http2.SettingMaxFrameSize:
			if v < DefaultMaxFrameSize || v > 1<<24-1 {
				return connErr(http2.ErrCodeProtocol, "bad SETTINGS_MAX_FRAME_SIZE")
			}
			c.peerMaxFrame = v
		case http2.SettingEnableConnectProtocol:
			if v > 1 {
				return connErr(http2.ErrCodeProtocol, "bad SETTINGS_ENABLE_CONNECT_PROTOCOL")
			}
			c.peerConnect = v == 1
		}
	}
	if c.client && first && !sawMaxStreams {
		// No limit given: Go's transport assumes 1000 rather than
		// unlimited, and so do we.
		c.peerMaxStreams = 1000
	}
	c.wbuf = appendFrameHeader(c.wbuf, 0, http2.FrameSettings, http2.FlagSettingsAck, 0)
	return c.controlQueued()
}

func (c *Conn) ping(h frameHeader, p []byte) error {
	if h.stream != 0 {
		return connErr(http2.ErrCodeProtocol, "PING on a stream")
	}
	if h.length != 8 {
		return connErr(http2.ErrCodeFrameSize, "PING of the wrong size")
	}
	if h.has(http2.FlagPingAck) {
		switch {
		case c.shutdownPhase == 1 && [8]byte(p) == shutdownPing:
			c.finalGoAway()
		case c.pingOut && [8]byte(p) == c.pingData:
			c.pingOut = false
		}
		return nil
	}
	if err := c.count(&c.win.pings, c.set.maxPings, &c.stats.PingFloodCloses, "PING frames"); err != nil {
		return err
	}
	c.wbuf = appendFrameHeader(c.wbuf, 8, http2.FramePing, http2.FlagPingAck, 0)
	c.wbuf = append(c.wbuf, p...)
	return c.controlQueued()
}

func (c *Conn) goAway(h frameHeader, p []byte) error {
	if h.stream != 0 {
		return connErr(http2.ErrCodeProtocol, "GOAWAY on a stream")
	}
	if h.length < 8 {
		return connErr(http2.ErrCodeFrameSize, "GOAWAY too short")
	}
	last := binary.BigEndian.Uint32(p) & (1<<31 - 1)
	code := ErrCode(binary.BigEndian.Uint32(p[4:]))
	c.goAwayRecv = true
	if c.client {
		var debug string
		if d := p[8:]; len(d) > 0 {
			debug = string(d[:min(len(d), 256)])
		}
		// Streams above last were not processed: the caller may send
		// them again elsewhere (RFC 9113 §6.8).
		var gone []*Stream
		for id, s := range c.streams {
			if id > last {
				gone = append(gone, s)
			}
		}
		sortByID(gone)
		for _, s := range gone {
			c.closeStream(s)
		}
		for _, s := range gone {
			c.sh.OnReset(s, &GoAwayError{LastStreamID: last, Code: code, Debug: debug})
		}
	}
	c.checkDone()
	return nil
}

func (c *Conn) windowUpdate(h frameHeader, p []byte) error {
	if h.length != 4 {
		return connErr(http2.ErrCodeFrameSize, "WINDOW_UPDATE of the wrong size")
	}
	incr := int64(binary.BigEndian.Uint32(p) & (1<<31 - 1))
	if h.stream == 0 {
		if incr == 0 {
			return connErr(http2.ErrCodeProtocol, "WINDOW_UPDATE of 0")
		}
		c.sendWindow += incr
		if c.sendWindow > maxWindow {
			return connErr(http2.ErrCodeFlowControl, "connection window above 2^31-1")
		}
		c.wakePending = true
		return nil
	}
	s := c.streams[h.stream]
	if s == nil && c.isIdle(h.stream) {
		return connErr(http2.ErrCodeProtocol, "WINDOW_UPDATE on an idle stream")
	}
	if incr == 0 {
		if err := c.count(&c.win.empty, c.set.maxEmpty, &c.stats.EmptyFrameFloodCloses, "empty frames"); err != nil {
			return err
		}
		if s == nil {
			return nil
		}
		return c.streamError(s.id, http2.ErrCodeProtocol, "WINDOW_UPDATE of 0")
	}
	if s == nil {
		return nil // a closed stream (RFC 9113 §6.9)
	}
	s.sendWindow += incr
	if s.sendWindow > maxWindow {
		return c.streamError(s.id, http2.ErrCodeFlowControl, "stream window above 2^31-1")
	}
	if s.waiting {
		c.wakePending = true
	}
	return nil
}

// count counts one event of a flood kind and fails the connection
// when the window's count passes max (0: no limit).
func (c *Conn) count(n *int, max int, trips *atomic.Uint64, what string) error {
	*n++
	if max > 0 && *n > max {
		trips.Add(1)
		return connErr(http2.ErrCodeEnhanceYourCalm, "too many "+what)
	}
	return nil
}

// controlQueued accounts for a frame written in answer to the peer
// while output is blocked.
func (c *Conn) controlQueued() error {
	c.maybeFlush()
	if !c.outBlocked {
		return nil
	}
	c.queuedCtl++
	if m := c.set.maxQueuedControl; m > 0 && c.queuedCtl > m {
		c.stats.ControlQueueCloses.Add(1)
		return connErr(http2.ErrCodeEnhanceYourCalm, "peer does not read what it asks for")
	}
	return nil
}

// streamError resets stream id for the peer's error and tells its
// handler.
func (c *Conn) streamError(id uint32, code ErrCode, reason string) error {
	c.stats.StreamErrors.Add(1)
	c.writeRST(id, code)
	if s := c.streams[id]; s != nil {
		c.closeStream(s)
		c.sh.OnReset(s, &StreamError{StreamID: id, Code: code, Reason: reason})
	}
	if err := c.count(&c.win.streamErrors, c.set.maxStreamErrors, &c.stats.StreamErrorCloses, "stream errors"); err != nil {
		return err
	}
	return c.controlQueued()
}

func (c *Conn) recentlyReset(id uint32) bool {
	if !c.client && c.shutdownPhase == 2 && id > c.goAwayLast {
		// A stream our final GOAWAY left unprocessed: what the client
		// sends on it is ignored (RFC 9113 §6.8).
		return true
	}
	if c.client && id%2 == 1 && id < c.nextStream {
		// A client may reset many of its streams (every call a proxy's
		// client abandons): what the server sent before it saw each
		// RST_STREAM is ignored however many there were, as Go's
		// transport does (RFC 9113 §5.1 allows limiting this only).
		return true
	}
	for _, r := range c.resets {
		if r == id {
			return true
		}
	}
	return false
}
