package engine

import (
	"errors"
	"math"
	"time"

	"github.com/helios-lb/helios/internal/bodybuf"
	"github.com/helios-lb/helios/internal/h2"
	"github.com/helios-lb/helios/internal/httpmsg"
	"github.com/helios-lb/helios/internal/realip"
	"github.com/helios-lb/helios/internal/wire"
)

// Options tune client connections. The zero value of each field is noted.
type Options struct {
	// ReadHeaderTimeout bounds the time from the first byte of a request
	// head to its end. Zero: no bound.
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that sends nothing for
	// this long between requests, and bounds each wait for request body
	// bytes. Zero: no bound.
	IdleTimeout time.Duration
	// ReadTimeout, when positive, bounds reading a whole request, head and
	// body. Zero: no bound beyond the two above.
	ReadTimeout time.Duration
	// WriteTimeout bounds how long one write to the client may block (like
	// nginx send_timeout). Zero: no bound.
	WriteTimeout time.Duration
	// MaxHeaderBytes bounds the request head; larger heads get 431.
	// Zero: 64 KiB.
	MaxHeaderBytes int
	// MaxHeaderCount bounds the header fields of a request head; more get
	// 431. Zero: 100.
	MaxHeaderCount int
	// MaxMethodBytes bounds a request method's length; longer ones get
	// 501. Zero: 32.
	MaxMethodBytes int
	// UnderscoresInHeaders forwards header names with an underscore.
	// False: they are dropped (nginx's underscores_in_headers off).
	UnderscoresInHeaders bool
	// OutputBufferBytes bounds the answer that may wait for a client that
	// reads slowly; past it, reading from the backend stops until the
	// client catches up (backpressure). Zero: 64 KiB.
	OutputBufferBytes int
	// TLS, when set, makes the listener's connections TLS (handshaken
	// with its configuration; X-Forwarded-Proto says https). Nil:
	// cleartext. A connection whose handshake chose h2 by ALPN speaks
	// HTTP/2 (whether h2 is offered is the TLS configuration's NextProtos).
	TLS TLS
	// H2C accepts cleartext HTTP/2 with prior knowledge: a connection
	// that starts with the HTTP/2 connection preface speaks HTTP/2, any
	// other HTTP/1.1. False: the preface is an HTTP/1.1 request (and
	// refused as one).
	H2C bool
	// RequestBuffers is the process's budget for request buffering, in
	// memory and in temporary files, which every listener shares. Nil:
	// each body is bounded by its route's caps alone.
	RequestBuffers *bodybuf.Budget
	// RequestBufferConnBytes bounds what request buffering holds for one
	// client connection, memory and files together: the streams of an
	// HTTP/2 connection share it. Only with RequestBuffers; zero: no
	// bound beyond the routes' caps.
	RequestBufferConnBytes int64
	// RealIP says which peers are trusted proxies and where they say the
	// client is (X-Forwarded-For, Forwarded, X-Real-IP): a request from
	// one has the client its field names (Exchange.ClientAddr), its
	// forwarding fields are passed on and appended to, and its
	// X-Forwarded-Proto is the request's scheme; a request from anyone
	// else has the peer as its client, and its forwarding fields are
	// replaced. It also says which peers may send a PROXY header. Nil:
	// no peer is trusted.
	RealIP *realip.Resolver
	// ProxyProtocol says whether connections start with a PROXY protocol
	// header (clientpolicy.go). ProxyOff (zero): they do not.
	ProxyProtocol ProxyProtocol
	// ProxyTimeout bounds the wait for a PROXY header from accept. Zero:
	// 10s.
	ProxyTimeout time.Duration
	// MaxConnsPerIP caps the open connections of one client address
	// (after its PROXY header); a connection over it is closed at once.
	// Zero: no cap.
	MaxConnsPerIP int
	// Stats counts what the client policy refused. Nil: nothing is
	// counted.
	Stats *ListenerStats
	// Listener is what the pipeline learns of the listener from its
	// exchanges (Exchange.Listener). Nil: nothing.
	Listener *wire.Listener
	// HTTP2 shapes the listener's HTTP/2 connections (windows, stream
	// limit, abuse limits, counters: see h2.Config, whose zero values
	// are its defaults). Its IdleTimeout, when zero, is IdleTimeout; its
	// Buffers are the loop's own.
	HTTP2 h2.Config
}

// limits returns the parser's bounds.
func (o *Options) limits() httpmsg.Limits {
	return httpmsg.Limits{MaxFields: o.MaxHeaderCount, MaxMethod: o.MaxMethodBytes, Underscores: o.UnderscoresInHeaders}
}

// ConnMemory returns what one client connection may hold in buffers at
// worst with these options (a head of MaxHeaderBytes, a small body
// buffered behind it, a large backend response head, and a full output
// buffer), and what a connection streaming a large answer to a client
// that reads slowly holds (an ordinary head, a full output buffer). The
// kernel's socket buffers come on top.
func (o *Options) ConnMemory() (worst, slowReader int) {
	const state = 2 << 10 // connection structs, parsed fields
	mh := o.MaxHeaderBytes
	if mh <= 0 {
		mh = defaultMaxHeaderBytes
	}
	out := o.outputLimit() + readBufSize + writeBufSize
	worst = mh + readBufSize + maxLoopBody + writeBufSize + out + maxResponseHead + readBufSize + state
	slowReader = headBufSize + writeBufSize + out + readBufSize + state
	return worst, slowReader
}

// bufferAccount returns a new account for a client connection's request
// buffering, or nil when the listener has no budget.
func (o *Options) bufferAccount() *bodybuf.Account {
	if o.RequestBuffers == nil {
		return nil
	}
	n := o.RequestBufferConnBytes
	if n <= 0 {
		n = math.MaxInt64
	}
	return bodybuf.NewAccount(n, o.RequestBuffers)
}

// headerTimeout returns how long a request head may take to arrive:
// ReadHeaderTimeout, or ReadTimeout when that is shorter (it bounds the
// whole request, so the head too); 0 when neither is set.
func (o *Options) headerTimeout() time.Duration {
	rht := o.ReadHeaderTimeout
	if rt := o.ReadTimeout; rt > 0 && (rht <= 0 || rt < rht) {
		rht = rt
	}
	return rht
}

// outputLimit returns OutputBufferBytes or its default.
func (o *Options) outputLimit() int {
	if o.OutputBufferBytes > 0 {
		return o.OutputBufferBytes
	}
	return defaultOutputBufferBytes
}

const (
	defaultMaxHeaderBytes = 64 << 10
	// defaultOutputBufferBytes is Options.OutputBufferBytes' default: a
	// fast client never needs it (the socket takes what is written), a
	// slow one costs this much, not the 256 KiB it once did.
	defaultOutputBufferBytes = 64 << 10
	readBufSize              = 4 << 10
	headBufSize              = 2 << 10
	// bodyBufSize is a client read buffer that holds a small request
	// body whole behind a head of up to 4 KiB (readBody).
	bodyBufSize  = maxLoopBody + 4<<10
	writeBufSize = 4 << 10
)

var textPlain = httpmsg.HeaderOf("Content-Type", "text/plain; charset=utf-8")

// wrapClientErr marks a failed write to the client as the client's doing.
func wrapClientErr(err error) error {
	if err == nil {
		return nil
	}
	return errors.Join(wire.ErrClientGone, err)
}
