package h2

import (
	"encoding/binary"

	"golang.org/x/net/http2"
)

// Frames are parsed and written here rather than with http2.Framer:
// the Framer reads from an io.Reader and allocates a frame value per
// frame it reads (SetReuseFrames reuses only DATA frames), and it
// writes each frame with its own Write call. The machine parses frame
// headers in place from the bytes the driver fed, and appends frames it
// writes to one buffer that goes to the driver in a single Write. The
// frame type, flag, setting and error-code constants are http2's.

const frameHeaderLen = 9

// clientPreface opens every HTTP/2 connection (RFC 9113 §3.4).
const clientPreface = http2.ClientPreface

// frameHeader is a parsed frame header.
type frameHeader struct {
	length int
	typ    http2.FrameType
	flags  http2.Flags
	stream uint32
}

func (h frameHeader) has(f http2.Flags) bool { return h.flags&f != 0 }

func parseFrameHeader(b []byte) frameHeader {
	return frameHeader{
		length: int(b[0])<<16 | int(b[1])<<8 | int(b[2]),
		typ:    http2.FrameType(b[3]),
		flags:  http2.Flags(b[4]),
		stream: binary.BigEndian.Uint32(b[5:]) & (1<<31 - 1),
	}
}

func appendFrameHeader(b []byte, length int, typ http2.FrameType, flags http2.Flags, stream uint32) []byte {
	return append(b, byte(length>>16), byte(length>>8), byte(length), byte(typ), byte(flags),
		byte(stream>>24)&0x7f, byte(stream>>16), byte(stream>>8), byte(stream))
}

func appendUint32(b []byte, v uint32) []byte {
	return append(b, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

func appendSetting(b []byte, id http2.SettingID, v uint32) []byte {
	return appendUint32(append(b, byte(id>>8), byte(id)), v)
}

// writeSettings writes our SETTINGS and raises the connection window.
func (c *Conn) writeSettings() {
	start := len(c.wbuf)
	c.wbuf = appendFrameHeader(c.wbuf, 0, http2.FrameSettings, 0, 0)
	if c.client {
		c.wbuf = appendSetting(c.wbuf, http2.SettingEnablePush, 0)
	} else {
		c.wbuf = appendSetting(c.wbuf, http2.SettingMaxConcurrentStreams, c.set.maxStreams)
	}
	c.wbuf = appendSetting(c.wbuf, http2.SettingInitialWindowSize, uint32(c.set.streamWindow))
	if c.set.maxFrame != DefaultMaxFrameSize {
		c.wbuf = appendSetting(c.wbuf, http2.SettingMaxFrameSize, c.set.maxFrame)
	}
	c.wbuf = appendSetting(c.wbuf, http2.SettingMaxHeaderListSize, c.set.maxHeaderList)
	if c.set.headerTable != DefaultHeaderTableSize {
		c.wbuf = appendSetting(c.wbuf, http2.SettingHeaderTableSize, c.set.headerTable)
	}
	if c.set.connectProtocol && !c.client {
		c.wbuf = appendSetting(c.wbuf, http2.SettingEnableConnectProtocol, 1)
	}
	n := len(c.wbuf) - start - frameHeaderLen
	c.wbuf[start], c.wbuf[start+1], c.wbuf[start+2] = byte(n>>16), byte(n>>8), byte(n)
	c.unackedSettings++
	c.settingsAt = c.now
	if d := c.set.connWindow - c.recvAvail; d > 0 {
		c.writeWindowUpdate(0, uint32(d))
		c.recvAvail += d
	}
}

func (c *Conn) writeRST(id uint32, code ErrCode) {
	c.wbuf = appendFrameHeader(c.wbuf, 4, http2.FrameRSTStream, 0, id)
	c.wbuf = appendUint32(c.wbuf, uint32(code))
	c.resets[c.resetNext] = id
	c.resetNext = (c.resetNext + 1) % recentResets
}

func (c *Conn) writeWindowUpdate(id, incr uint32) {
	c.wbuf = appendFrameHeader(c.wbuf, 4, http2.FrameWindowUpdate, 0, id)
	c.wbuf = appendUint32(c.wbuf, incr)
}

func (c *Conn) writeGoAway(last uint32, code ErrCode, debug string) {
	c.wbuf = appendFrameHeader(c.wbuf, 8+len(debug), http2.FrameGoAway, 0, 0)
	c.wbuf = appendUint32(c.wbuf, last)
	c.wbuf = appendUint32(c.wbuf, uint32(code))
	c.wbuf = append(c.wbuf, debug...)
}

func (c *Conn) writePing(data [8]byte) {
	c.wbuf = appendFrameHeader(c.wbuf, 8, http2.FramePing, 0, 0)
	c.wbuf = append(c.wbuf, data[:]...)
}
