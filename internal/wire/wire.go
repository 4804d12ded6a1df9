// Package wire declares the seam between the request pipeline
// (internal/proxy) and an HTTP wire engine (internal/h1).
//
// The pipeline decides what happens to a request: which route, which
// backend, whether to retry, what to record. The engine owns the bytes:
// parsing, framing, connection pools, streaming. Each side sees the other
// only through these interfaces, so the HTTP/1.1 engine can be replaced or
// tuned without touching balancing, health or metrics code.
package wire

import (
	"errors"
	"net/http"
	"net/netip"

	"github.com/helios-lb/helios/internal/upstream"
)

// Errors an engine returns from RoundTrip and Send, wrapped with detail.
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
	// ErrBadRequest means the client's request could not be forwarded as
	// sent (for example a malformed chunked body).
	ErrBadRequest = errors.New("bad request")
)

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
	// ClientAddr returns the address of the immediate client.
	ClientAddr() netip.Addr
	// HasBody reports whether the request carries a body.
	HasBody() bool
	// BodyStarted reports whether any of the request body has been read
	// from the client; a request whose body has started cannot be replayed.
	BodyStarted() bool
	// Respond sends a complete response with a fixed body. header holds
	// pre-rendered "Name: value\r\n" lines (may be nil).
	Respond(status int, header []byte, body []byte) error
	// ServeHTTP answers the request with a net/http handler, for actions
	// that are not on the hot path (static files). It returns the status
	// and the number of body bytes written.
	ServeHTTP(h http.Handler) (status int, bytes int64)
}

// Transport forwards requests to backends.
type Transport interface {
	// RoundTrip sends the request to b and reads the response head. On
	// success the caller must call exactly one of Send or Discard on the
	// returned Response. Errors wrap ErrConnect, ErrTimeout, ErrBackend,
	// ErrClientGone or ErrBadRequest.
	RoundTrip(ex Exchange, b *upstream.Backend) (Response, error)
	// Close releases idle connections.
	Close()
}

// Response is a backend's answer whose head has been read and whose body
// has not yet been forwarded.
type Response interface {
	// StatusCode returns the backend's status code.
	StatusCode() int
	// Send streams the response to the client and returns the body bytes
	// written. Errors wrap ErrBackend, ErrTimeout or ErrClientGone.
	Send() (int64, error)
	// Discard drops the response without sending it (the pipeline is going
	// to retry), releasing or closing the backend connection.
	Discard()
}

// Action tells an engine that cannot block what to do next with a request
// (see Flow).
type Action uint8

// The actions a Flow asks for.
const (
	// ActRespond: send Flow.Answer with Exchange.Respond, then call Sent.
	ActRespond Action = iota + 1
	// ActServeHTTP: answer with Flow.Handler (a net/http handler, which
	// may block), then call Sent.
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
)

// Flow is one request's way through the pipeline, for engines that cannot
// block (an event loop): the engine asks what to do, does it without
// blocking, and reports back. After Sent (or ActClose) the engine calls
// Finish, and the Flow is ready for the connection's next request.
type Flow interface {
	// Begin routes the request on ex and returns the first action.
	Begin(ex Exchange) Action
	// Answer returns the answer to send for ActRespond: status, header
	// lines ("Name: value\r\n") and body.
	Answer() (status int, header, body []byte)
	// Handler returns the handler for ActServeHTTP.
	Handler() http.Handler
	// Target returns where to forward for ActForward.
	Target() (Transport, *upstream.Backend)
	// Forwarded reports what forwarding to Target gave: the status of
	// the response head, or the error (errors as for RoundTrip). It
	// returns ActSend, ActForward (a retry), ActRespond (an error answer)
	// or ActClose.
	Forwarded(status int, err error) Action
	// Sent reports how the answer went: the status sent, the body bytes
	// written, and the error that cut it short (wrapping ErrClientGone,
	// ErrBackend or ErrTimeout), if any.
	Sent(status int, n int64, err error)
	// Finish records the request.
	Finish()
}

// Stepper is a pipeline an event-loop engine drives through Flows.
type Stepper interface {
	// NewFlow returns a Flow for one connection's requests.
	NewFlow() Flow
}
