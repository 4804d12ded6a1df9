// Package wire declares the seam between the request pipeline
// (internal/proxy) and an HTTP wire engine (internal/engine).
//
// The pipeline decides what happens to a request: which route, which
// backend, whether to retry, what to record. The engine owns the bytes:
// parsing, framing, connection pools, streaming. Each side sees the other
// only through these interfaces, so the HTTP/1.1 engine can be replaced or
// tuned without touching balancing, health or metrics code.
package wire

import (
	"crypto/tls"
	"errors"
	"net/http"
	"net/netip"
	"time"

	"github.com/helios-lb/helios/internal/bodybuf"
	"github.com/helios-lb/helios/internal/httpmsg"
	"github.com/helios-lb/helios/internal/upstream"
)

// Errors an engine reports to the pipeline (Flow.Forwarded, Sent,
// Buffered), wrapped with detail.
// The pipeline classifies them with errors.Is, never by their text.
var (
	// ErrConnect means the request never reached the backend: the dial
	// failed or was refused. Always safe to retry elsewhere.
	ErrConnect = errors.New("backend unreachable")
	// ErrTimeout means the backend did not answer in time.
	ErrTimeout = errors.New("backend timed out")
	// ErrBackend means the backend broke the exchange: reset, early close,
	// or an unparsable response.
	ErrBackend = errors.New("backend failed")
	// ErrClientGone means the client went away or stopped reading; it
	// never counts against the backend.
	ErrClientGone = errors.New("client went away")
	// ErrClientTimeout means the client stopped sending its request (its
	// body stalled past the listener's timeouts): answered 408 when
	// nothing was sent yet, and never counted against the backend.
	ErrClientTimeout = errors.New("client timed out sending the request")
	// ErrBadRequest means the client's request could not be forwarded as
	// sent (for example a malformed chunked body).
	ErrBadRequest = errors.New("bad request")
	// ErrBackendBusy means the backend's connection cap was reached and
	// no connection came free in time (or its queue was full): nothing
	// was sent, so another backend may be tried; it is not the backend's
	// failure. With no other, the answer is 503.
	ErrBackendBusy = errors.New("backend at its connection cap")
	// ErrBodyTooLarge means the request body is larger than the route
	// allows (or than its buffer holds, when the route buffers whole
	// bodies): answered 413 when nothing was sent yet.
	ErrBodyTooLarge = errors.New("request body too large")
	// ErrBuffersFull means request buffering could not hold a body the
	// route buffers whole: the client connection's or the process's
	// request buffers are spent (by other requests, for now). Answered
	// 503 when nothing was sent yet; not the backend's failure.
	ErrBuffersFull = errors.New("request buffers full")
)

// BufferLimits say how an engine reads a request body before a backend is
// chosen (request buffering): up to Memory bytes in memory, then up to
// File bytes in a temporary file in Dir ("" for the system's). A body
// that outgrows both is forwarded with what was buffered and the rest
// streamed when Stream is set, and is too large otherwise.
type BufferLimits struct {
	Memory int
	File   int64
	Dir    string
	Stream bool
	// Discard reads the body and drops it (an origin that only wants it
	// gone, such as the built-in backend's /sink); the other limits do
	// not apply.
	Discard bool
}

// ResponseBuffer says how an engine may hold an answer for a client that
// reads it more slowly than its backend sends it (response buffering), so
// that the backend's connection is let go as soon as the whole answer is
// in: up to Memory bytes in memory, then up to File bytes in a temporary
// file, within what Budget leaves across the process (nil: no process
// cap). An answer that does not fit is not failed: it goes on with
// backpressure, as without buffering.
type ResponseBuffer struct {
	Memory int
	File   int64
	Budget *bodybuf.Budget
}

// Exchange is one request on a client connection and the means to answer
// it. Byte slices returned by its methods are valid until the answer has
// been sent; callers copy what they keep.
type Exchange interface {
	// Method returns the request method, e.g. "GET".
	Method() []byte
	// Host returns the request's host (from the Host header or an
	// absolute-form target), without a port; empty when absent.
	Host() []byte
	// Path returns the path of the request target, without the query.
	Path() []byte
	// ClientAddr returns the request's client address as the listener's
	// policy found it: the connection's peer (or the source of its PROXY
	// header), or, when that is a trusted proxy, the client its
	// forwarding field names. IPv4 addresses are never IPv4-mapped.
	ClientAddr() netip.Addr
	// Listener returns what the pipeline needs to know of the listener
	// the request came in on; nil when there is nothing.
	Listener() *Listener
	// HasBody reports whether the request carries a body.
	HasBody() bool
	// BodyStarted reports whether any of the request body has been read
	// from the client; a request whose body has started cannot be replayed.
	BodyStarted() bool
	// Upgrade returns the protocols the request asks to switch to (its
	// Upgrade header) when it asks for an upgrade, nil otherwise.
	Upgrade() []byte
	// RefuseUpgrade serves the request as a plain one: its Upgrade header
	// and Connection upgrade token are not forwarded, and a 101 from the
	// backend is a bad gateway.
	RefuseUpgrade()
	// BodyLength returns the declared length of the request body: 0 for
	// none, -1 when it is chunked (unknown until read).
	BodyLength() int64
	// BodyRead returns how many body bytes have been read from the client
	// so far (decoded).
	BodyRead() int64
	// LimitBody bounds the request body: reading past max bytes fails
	// with ErrBodyTooLarge. 0 is no bound.
	LimitBody(max int64)
	// Respond sends a complete response with a fixed body. header holds
	// its fields (nil: none); the engine adds Date and the framing.
	Respond(status int, header *httpmsg.Header, body []byte) error
	// Query returns the query of the request target, without the "?";
	// empty when there is none.
	Query() []byte
	// Proto returns the protocol version as the client sent it, e.g.
	// "HTTP/1.1".
	Proto() []byte
	// TLSVersion returns the TLS version of the client connection ("1.2",
	// "1.3"), or nil when it is cleartext.
	TLSVersion() []byte
	// Header returns the value of the first request header field named
	// name (compared case-insensitively), or nil when there is none.
	Header(name string) []byte
	// Request returns the request head, whatever protocol carried it.
	// The pipeline may edit it before the request is forwarded (its
	// fields, Target and Path, Authority and Host): every attempt goes
	// with the head as edited, by the forwarding rules every request
	// goes by. Values it sets must live until the exchange ends: memory
	// from Alloc, or memory the pipeline keeps.
	Request() *httpmsg.Request
	// Response returns the head of the backend's answer once Forwarded
	// has reported it (nil before, and for answers Helios makes itself).
	// The pipeline may edit its fields and status in Forwarded, before
	// it asks for ActSend.
	Response() *httpmsg.Response
	// BodyHeld returns the whole request body when the engine holds all
	// of it in memory and none of it has been sent: a body that came
	// with the head, or one request buffering kept in memory (decoded,
	// when it came chunked). ok is true, with a nil body, for a request
	// without one; false while some of the body is still to come, or
	// streams, or lies in a temporary file. The bytes are the exchange's
	// and must not be changed.
	BodyHeld() (body []byte, ok bool)
	// Waker returns a function that ends the ActWait the flow is about to
	// ask for, from any goroutine: the engine then calls Flow.Resume on
	// its own loop, as when the wait's Delay passes. It is how a flow
	// waits for work it runs off the loop (a password's bcrypt, a
	// subrequest) without blocking the loop. Calling it after that wait
	// ended, or twice, does nothing. It allocates: for slow paths only.
	Waker() func()
	// Alloc returns n bytes owned by the exchange, valid until it ends,
	// for values the pipeline puts in a head. The exchange lends the
	// storage rather than take a value: a slice made by the pipeline and
	// handed through an interface method escapes to the heap, an
	// allocation per request.
	Alloc(n int) []byte
	// Timing returns how the attempt that Flow.Forwarded reports on
	// went (valid during that call); the zero Timing for an engine that
	// does not measure.
	Timing() Timing
}

// Timing is how one forwarding attempt went, as the engine measured it on
// its own clock: an event loop stamps each stage with the time its
// current batch of events began (no system call per stamp), so each
// figure is exact to within one batch. A stage the attempt did not go
// through is zero.
type Timing struct {
	// Start is when the attempt began and End when it was reported
	// (Forwarded), in Unix nanoseconds.
	Start, End int64
	// Queue is the wait for a connection to a backend at its connection
	// cap (transport.max_conns_per_backend).
	Queue time.Duration
	// Connect is the time to open a new connection to the backend (TCP,
	// then TLS when the transport has it); zero on a reused connection.
	Connect time.Duration
	// FirstByte is the time from Start to the backend's response head;
	// zero when none came.
	FirstByte time.Duration
}

// Listener is a listener's policy that the pipeline applies: the engine
// hands it over with each exchange (Exchange.Listener).
type Listener struct {
	// Name is the listener's name.
	Name string
	// RedirectHTTPS answers every cleartext request (one whose scheme,
	// as the engine found it, is http) with 308 to the same host, path
	// and query over HTTPS, on HTTPSPort (left out when it is 443), but
	// for the routes that opt out. False: no redirect.
	RedirectHTTPS bool
	// HTTPSPort is the port RedirectHTTPS sends clients to; 0 is 443.
	HTTPSPort int
}

// Transport says how to reach one upstream's backends. Engines keep
// their connections to a backend by (Name, backend address, Settings), so
// a reload that keeps all three keeps the warm connections, and two
// upstreams naming the same backend never share a pool or its timeouts.
type Transport struct {
	// Name is the upstream's name.
	Name string
	// Settings tune the connections.
	Settings TransportSettings
	// TLS says how to make TLS connections to the backends when
	// Settings.TLS is set (tlsconf.Client implements it).
	TLS ClientTLS
}

// ClientTLS is the TLS an engine dials backends with.
type ClientTLS interface {
	// Config returns the configuration of a connection to the backend at
	// addr (its SNI and the name its certificate is checked against).
	Config(addr string) *tls.Config
	// CheckALPN refuses a handshake whose protocol is not what the
	// transport speaks (h2 for Protocol ProtoH2).
	CheckALPN(cs tls.ConnectionState) error
}

// Local is a net/http handler that an engine serves as an in-process
// backend (ActServeHTTP): the handler may block, so it runs on goroutines
// of its own, and the engine forwards the request to it as to any
// backend. Engines keep its connections by the pointer.
type Local struct {
	// Name names it in errors and logs.
	Name string
	// Handler answers the requests.
	Handler http.Handler
}

// TransportSettings tune the connections to an upstream's backends. The
// zero value of each field is noted; the struct is comparable.
type TransportSettings struct {
	// MaxIdlePerBackend caps the idle keep-alive connections kept per
	// backend. Zero: none are kept (every request dials).
	MaxIdlePerBackend int
	// IdleTimeout closes pooled connections idle for longer. Zero: kept
	// until the backend closes them.
	IdleTimeout time.Duration
	// DialTimeout bounds connecting. Zero: the operating system's limit.
	DialTimeout time.Duration
	// ResponseHeaderTimeout bounds the wait for the response head after
	// the request has been sent. Zero: no bound.
	ResponseHeaderTimeout time.Duration
	// ReadTimeout bounds each wait for response body bytes (like nginx
	// proxy_read_timeout). Zero: no bound.
	ReadTimeout time.Duration
	// MaxConnsPerBackend caps the connections (busy and idle) open to
	// one backend at once, like net/http's MaxConnsPerHost; requests over
	// it wait in order for one to be free. Zero: no cap.
	MaxConnsPerBackend int
	// MaxQueuePerBackend bounds the requests waiting for a connection to
	// one backend; more are answered 503. Zero: none wait.
	MaxQueuePerBackend int
	// QueueTimeout bounds a request's wait for a connection; then 503.
	// Zero: the wait is bounded by the queue only.
	QueueTimeout time.Duration
	// TryTimeout bounds each attempt from its start (after any request
	// buffering) to the response head, over the bounds above: an attempt
	// cut short while connecting fails as their DialTimeout would
	// (ErrConnect), while queued as QueueTimeout (ErrBackendBusy), and
	// while waiting for the head as ResponseHeaderTimeout (ErrTimeout).
	// Zero: no bound but those.
	TryTimeout time.Duration
	// Protocol is what is spoken to the backends. Zero: HTTP/1.1.
	Protocol Protocol
	// TLS makes the connections TLS, as Transport.TLS says. False:
	// cleartext. (A flag here, so that connections are pooled apart by
	// it; the configuration itself may be rebuilt by a reload without
	// dropping warm connections.)
	TLS bool
	// ProxyProtocol is the version of the PROXY protocol header each new
	// connection opens with, naming the client of the request it is made
	// for (ProxyV1, ProxyV2); a connection then carries only that
	// client's requests. Zero: none.
	ProxyProtocol uint8
}

// The TransportSettings.ProxyProtocol versions.
const (
	ProxyV1 uint8 = 1
	ProxyV2 uint8 = 2
)

// Protocol is a protocol spoken to backends.
type Protocol uint8

// The protocols an engine may speak to backends.
const (
	// ProtoHTTP1 is HTTP/1.1, a request at a time per connection.
	ProtoHTTP1 Protocol = iota
	// ProtoH2C is HTTP/2 without TLS, with prior knowledge: requests
	// are streams multiplexed on a few connections per backend, up to
	// the backend's SETTINGS_MAX_CONCURRENT_STREAMS each.
	ProtoH2C
	// ProtoH2 is HTTP/2 over TLS (Settings.TLS), agreed through ALPN,
	// multiplexed as ProtoH2C is.
	ProtoH2
)

// Action tells an engine that cannot block what to do next with a request
// (see Flow).
type Action uint8

// The actions a Flow asks for.
const (
	// ActRespond: send Flow.Answer with Exchange.Respond, then call Sent.
	ActRespond Action = iota + 1
	// ActServeHTTP: answer with Flow.Handler, a net/http handler (which
	// may block: the engine runs it on a goroutine of its own), then call
	// Sent.
	ActServeHTTP
	// ActForward: send the request to Flow.Target and report the response
	// head (or the error) with Forwarded. An engine that holds a response
	// from an earlier attempt drops it first: this is a retry.
	ActForward
	// ActSend: stream the response just received to the client, then
	// call Sent.
	ActSend
	// ActClose: there is no one to answer (the client went away); drop
	// any response held and close the connection.
	ActClose
	// ActBuffer: read the request body under Flow.BufferLimits, then
	// report with Buffered.
	ActBuffer
	// ActServeFile: answer with what Flow.Files plans (the engine sends
	// the file itself), then call Sent.
	ActServeFile
	// ActWait: wait Flow.Delay() without blocking, or until the function
	// Exchange.Waker gave is called, then call Flow.Resume and act on what
	// it returns: a retry's backoff (the attempt before has been reported
	// with Forwarded and its response dropped), or work the flow runs off
	// the loop (an authentication). A client that goes away during the
	// wait is reported with Forwarded, as during an attempt.
	ActWait
)

// Flow is one request's way through the pipeline, for engines that cannot
// block (an event loop): the engine asks what to do, does it without
// blocking, and reports back. After Sent (or ActClose) the engine calls
// Finish, and the Flow is ready for the connection's next request.
type Flow interface {
	// Begin routes the request on ex and returns the first action.
	Begin(ex Exchange) Action
	// Answer returns the answer to send for ActRespond: status, header
	// fields (nil: none) and body.
	Answer() (status int, header *httpmsg.Header, body []byte)
	// Handler returns the handler for ActServeHTTP.
	Handler() *Local
	// Files returns the planner for ActServeFile.
	Files() Files
	// Target returns where to forward for ActForward.
	Target() (*Transport, *upstream.Backend)
	// BufferLimits returns how to buffer the body for ActBuffer.
	BufferLimits() BufferLimits
	// Buffered reports how buffering went (errors wrap ErrBodyTooLarge,
	// ErrClientTimeout, ErrClientGone or ErrBadRequest) and returns
	// ActForward, ActRespond or ActClose.
	Buffered(err error) Action
	// Forwarded reports what forwarding to Target gave: the status of
	// the response head, or the error (wrapping ErrConnect, ErrTimeout,
	// ErrBackend, ErrClientGone, ErrClientTimeout, ErrBodyTooLarge or
	// ErrBadRequest). It
	// returns ActSend, ActForward (a retry), ActWait (a retry after a
	// backoff), ActRespond (an error answer) or ActClose.
	Forwarded(status int, err error) Action
	// Delay returns how long to wait for ActWait (at most, when the flow
	// wakes the wait itself).
	Delay() time.Duration
	// Resume ends an ActWait and returns what to do next: ActForward,
	// ActRespond or ActClose.
	Resume() Action
	// ResponseBuffer returns how the answer being sent (ActSend) may be
	// buffered for a slow client; nil: it streams with backpressure.
	ResponseBuffer() *ResponseBuffer
	// Sent reports how the answer went: the status sent, the body bytes
	// written, and the error that cut it short (wrapping ErrClientGone,
	// ErrBackend or ErrTimeout), if any.
	Sent(status int, n int64, err error)
	// AnswerHeader is called with the head of every answer about to be
	// written for the exchange, whatever made it (a backend, Respond, a
	// file, an error) and whatever the protocol, and returns the head to
	// write: h edited in place, or another the flow owns. shared says h
	// may not be edited (a fixed answer's fields, which other exchanges
	// use too). h may be nil (a fixed answer without fields).
	AnswerHeader(h *httpmsg.Header, shared bool) *httpmsg.Header
	// Finish records the request.
	Finish()
	// Refused records a request the engine answered itself before it
	// could go through the pipeline (a malformed head, a body that
	// stalled): status is what was sent, err why. ex's Method, Host and
	// Path are empty when the head could not be parsed.
	Refused(ex Exchange, status int, err error)
}

// Stepper is a pipeline an event-loop engine drives through Flows.
type Stepper interface {
	// NewFlow returns a Flow for one connection's requests.
	NewFlow() Flow
}
