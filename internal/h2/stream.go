package h2

import (
	"fmt"

	"golang.org/x/net/http2"
)

// Stream is one stream of a Conn: a request and its response. Its
// methods are called on the connection's goroutine. A Stream is not
// reused: once it is over (both sides ended, or reset) its methods
// return ErrStreamClosed or do nothing, so a handler may keep the
// pointer as long as it likes.
type Stream struct {
	c    *Conn
	id   uint32
	user any

	sendWindow int64 // may go negative (RFC 9113 §6.9.2)
	recvAvail  int32 // window the peer has left
	recvUnsent int32 // credit owed to the peer, not yet sent
	unconsumed int32 // delivered to the handler, not yet Consumed
	declared   int64 // content-length received, -1 when absent
	recvBytes  int64
	stallSince int64

	answered  bool // our head is out: a server's final response, a client's request
	gotFinal  bool // client: the final response head has arrived
	isHead    bool // client: the request is HEAD (no body in the response)
	recvEnded bool
	sendEnded bool
	closed    bool
	waiting   bool // wrote short; OnWritable due
}

// ID returns the stream id.
func (s *Stream) ID() uint32 { return s.id }

// Conn returns the stream's connection.
func (s *Stream) Conn() *Conn { return s.c }

// SetUser attaches v to the stream for its handler (its exchange, say).
func (s *Stream) SetUser(v any) { s.user = v }

// User returns what SetUser attached, or nil.
func (s *Stream) User() any { return s.user }

// Closed reports whether the stream is over.
func (s *Stream) Closed() bool { return s.closed }

// sendable returns an error unless the stream may still send.
func (s *Stream) sendable() error {
	if s.closed || s.sendEnded || s.c.err != nil {
		return ErrStreamClosed
	}
	return nil
}

// WriteHeaders writes a server's response head: informational heads
// (1xx, endStream false) any number of times, then the final one.
// fields must not hold pseudo-header fields; connection-specific
// fields are left out. endStream: there is no body and no trailers.
func (s *Stream) WriteHeaders(status int, fields []Field, endStream bool) error {
	c := s.c
	if c.client || s.answered {
		return ErrWrongRole
	}
	if err := s.sendable(); err != nil {
		return err
	}
	if status < 100 || status > 999 || status == 101 || status < 200 && endStream {
		return fmt.Errorf("h2: cannot send status %d (endStream %v)", status, endStream)
	}
	c.enter()
	c.encBuf = c.encBuf[:0]
	c.encodePseudo(nameStatus, c.statusValue(status))
	for _, f := range fields {
		c.encodeField(f)
	}
	c.writeHeaderBlock(s.id, endStream)
	if status >= 200 {
		s.answered = true
	}
	if endStream {
		s.endSend()
	}
	c.exit()
	return nil
}

// WriteData writes body bytes, as much of p as the send windows (the
// stream's and the connection's) allow, in frames of the peer's
// maximum size; p is copied and may be reused at once. n < len(p)
// means the windows are shut or output is blocked: OnWritable will say
// when to write the rest. endStream ends the body, but only when all of
// p has been written; an empty p with endStream always goes.
func (s *Stream) WriteData(p []byte, endStream bool) (n int, err error) {
	c := s.c
	if err := s.sendable(); err != nil {
		return 0, err
	}
	if !s.answered {
		return 0, ErrWrongRole
	}
	c.enter()
	for n < len(p) && !c.outBlocked {
		chunk := min(int64(len(p)-n), s.sendWindow, c.sendWindow, int64(c.peerMaxFrame))
		if chunk <= 0 {
			break
		}
		k := int(chunk)
		var flags http2.Flags
		if endStream && n+k == len(p) {
			flags = http2.FlagDataEndStream
		}
		c.wbuf = appendFrameHeader(c.wbuf, k, http2.FrameData, flags, s.id)
		c.wbuf = append(c.wbuf, p[n:n+k]...)
		s.sendWindow -= chunk
		c.sendWindow -= chunk
		n += k
		c.maybeFlush()
	}
	if n > 0 {
		s.stallSince = 0
	}
	switch {
	case n < len(p):
		if !s.waiting {
			s.waiting = true
			c.waiting = append(c.waiting, s)
		}
	case endStream:
		if len(p) == 0 {
			c.wbuf = appendFrameHeader(c.wbuf, 0, http2.FrameData, http2.FlagDataEndStream, s.id)
		}
		s.endSend()
	}
	c.exit()
	return n, nil
}

// WriteTrailers ends the stream with trailers (gRPC's grpc-status,
// say), after the body has been written. No fields: the stream ends
// with an empty DATA frame instead.
func (s *Stream) WriteTrailers(fields []Field) error {
	c := s.c
	if err := s.sendable(); err != nil {
		return err
	}
	if !s.answered {
		return ErrWrongRole
	}
	if len(fields) == 0 {
		_, err := s.WriteData(nil, true)
		return err
	}
	c.enter()
	c.encBuf = c.encBuf[:0]
	for _, f := range fields {
		c.encodeField(f)
	}
	c.writeHeaderBlock(s.id, true)
	s.endSend()
	c.exit()
	return nil
}

// endSend ends our side of the stream.
func (s *Stream) endSend() {
	s.sendEnded = true
	s.c.maybeClose(s)
}

// Reset ends the stream with RST_STREAM and code (http2.ErrCodeCancel
// when the exchange is abandoned; http2.ErrCodeNo after a complete
// response whose request body is not wanted, RFC 9113 §8.1). The
// handler is not told (it knows); nothing more is delivered for the
// stream. A stream that is over already is left alone.
func (s *Stream) Reset(code ErrCode) {
	c := s.c
	if s.closed || c.err != nil {
		return
	}
	c.enter()
	c.writeRST(s.id, code)
	c.closeStream(s)
	c.exit()
}

// Consumed returns n bytes of received DATA to the stream's and the
// connection's windows: the consumer has taken them (forwarded them,
// say). WINDOW_UPDATE frames are batched. A consumer that stops calling
// it stops the sender once the window is used: that is backpressure.
// Bytes of a stream that is over are given back by the machine itself.
func (s *Stream) Consumed(n int) {
	c := s.c
	if n <= 0 || s.closed || c.err != nil {
		return
	}
	k := int32(min(n, int(s.unconsumed)))
	if k == 0 {
		return
	}
	s.unconsumed -= k
	c.enter()
	c.creditConn(k)
	c.creditStream(s, k)
	c.exit()
}

// SendWindow returns how many body bytes WriteData would write now: the
// smaller of the stream's and the connection's send windows. It is 0
// while the driver's output is blocked, before the head has gone, and
// once the stream cannot send any more. A consumer that sizes its writes
// by it never writes short; one that finds it 0 calls WaitWritable.
func (s *Stream) SendWindow() int {
	c := s.c
	if s.sendable() != nil || !s.answered || c.outBlocked {
		return 0
	}
	return int(max(0, min(s.sendWindow, c.sendWindow)))
}

// WaitWritable asks for OnWritable once the stream may write again
// (window or output opened): for a consumer that found SendWindow 0 and
// so wrote nothing. It is the same wait a short WriteData starts.
func (s *Stream) WaitWritable() {
	c := s.c
	if s.closed || s.waiting || c.err != nil {
		return
	}
	s.waiting = true
	c.waiting = append(c.waiting, s)
}
