package h2

import (
	"errors"
	"strconv"

	"golang.org/x/net/http2"
)

// ErrCode is an HTTP/2 error code (RFC 9113 §7); use the ErrCode
// constants of golang.org/x/net/http2 (http2.ErrCodeCancel, ...).
type ErrCode = http2.ErrCode

// Errors the machine returns or passes to OnReset, wrapped with detail
// where there is any. Classify them with errors.Is.
var (
	// ErrClosed means the connection is over without a protocol
	// error: a graceful Shutdown or the peer's GOAWAY finished, the
	// idle timeout passed, or the driver called Close.
	ErrClosed = errors.New("h2: connection closed")
	// ErrRetryable marks a stream the peer never processed: it was
	// above the last stream id of the peer's GOAWAY, or refused with
	// REFUSED_STREAM (RFC 9113 §8.7). Its request can be sent again,
	// on another connection, whatever its method.
	ErrRetryable = errors.New("h2: stream not processed by the peer; safe to retry")
	// ErrStreamClosed is returned by writes on a stream whose sending
	// side is over: ended, reset by either side, or its connection gone.
	ErrStreamClosed = errors.New("h2: stream closed")
	// ErrBadPreface means the first bytes were not an HTTP/2 client
	// connection preface (an HTTP/1.1 request on an h2c port, say).
	// Nothing has been written; the driver closes the connection.
	ErrBadPreface = errors.New("h2: bad connection preface")
	// ErrCannotOpen is returned by OpenStream when CanOpen is false.
	ErrCannotOpen = errors.New("h2: connection cannot open another stream")
	// ErrStalled is passed to OnReset for a stream reset because its
	// send window stayed shut longer than Limits.StallTimeout.
	ErrStalled = errors.New("h2: stream stalled on a shut flow-control window")
	// ErrPingTimeout ends a connection whose liveness PING was not
	// answered within Config.PingTimeout.
	ErrPingTimeout = errors.New("h2: ping not answered")
	// ErrWrongRole is returned by a method called on a connection of
	// the other role (WriteHeaders on a client stream, say), or out of
	// order (WriteData before WriteHeaders).
	ErrWrongRole = errors.New("h2: method not allowed in this role or state")
)

// ConnError is a connection error (RFC 9113 §5.4.1), with the code
// and, when this side found it, the reason (also sent as GOAWAY's debug
// data). Remote false:
// this side found the error and has written GOAWAY with Code. Remote
// true: the peer's GOAWAY carried Code.
type ConnError struct {
	Code   ErrCode
	Reason string
	Remote bool
}

// Error describes the connection error.
func (e *ConnError) Error() string {
	s := "h2: connection error " + e.Code.String()
	if e.Remote {
		s += " from peer"
	}
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// StreamError is a stream error (RFC 9113 §5.4.2) of stream StreamID,
// passed to OnReset.
// Remote true: the peer reset the stream with Code. Remote false: this
// side reset it for the peer's protocol error and wrote RST_STREAM with
// Code. A REFUSED_STREAM from the peer is ErrRetryable.
type StreamError struct {
	StreamID uint32
	Code     ErrCode
	Reason   string
	Remote   bool
}

// Error describes the stream error.
func (e *StreamError) Error() string {
	s := "h2: stream " + strconv.FormatUint(uint64(e.StreamID), 10) + " reset " + e.Code.String()
	if e.Remote {
		s += " by peer"
	}
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// Is reports a refused stream as ErrRetryable.
func (e *StreamError) Is(target error) bool {
	return target == ErrRetryable && e.Remote && e.Code == http2.ErrCodeRefusedStream
}

// GoAwayError is passed to OnReset for a stream above LastStreamID,
// the last stream id of the peer's GOAWAY (with its Code and Debug data): the peer did not process it, so it is
// ErrRetryable.
type GoAwayError struct {
	LastStreamID uint32
	Code         ErrCode
	Debug        string
}

// Error describes the GOAWAY and says the stream may be retried.
func (e *GoAwayError) Error() string {
	s := "h2: peer sent GOAWAY " + e.Code.String() + " with last stream " + strconv.FormatUint(uint64(e.LastStreamID), 10) + "; stream not processed, safe to retry"
	if e.Debug != "" {
		s += " (" + e.Debug + ")"
	}
	return s
}

// Is reports a GoAwayError as ErrRetryable.
func (e *GoAwayError) Is(target error) bool { return target == ErrRetryable }

// closedError wraps the cause the driver gave Close with ErrClosed.
type closedError struct{ cause error }

func (e *closedError) Error() string {
	if e.cause == nil {
		return ErrClosed.Error()
	}
	return ErrClosed.Error() + ": " + e.cause.Error()
}

func (e *closedError) Unwrap() []error { return []error{ErrClosed, e.cause} }

func connErr(code ErrCode, reason string) *ConnError {
	return &ConnError{Code: code, Reason: reason}
}
