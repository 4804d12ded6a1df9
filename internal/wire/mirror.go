package wire

import (
	"errors"
	"time"

	"github.com/helios-lb/helios/internal/httpmsg"
	"github.com/helios-lb/helios/internal/upstream"
)

// MirrorRequest is a copy of a request for a shadow backend
// (routes[].mirror): made by the pipeline, on the loop, from the request
// as it is forwarded, and sent by a Mirrorer away from the loops. Its
// answer is read and dropped; nothing of it reaches the client.
type MirrorRequest struct {
	// Transport says how to reach Backend.
	Transport *Transport
	// Backend is the shadow backend the copy goes to.
	Backend *upstream.Backend
	// Method, Authority and Target are the request line's parts:
	// Authority is what goes in Host, Target the path and query (or *).
	Method, Authority, Target []byte
	// Header holds the fields to send, by the forwarding rules (hop-by-hop
	// fields dropped, X-Forwarded-* added); framing fields excepted, the
	// Mirrorer frames Body itself.
	Header httpmsg.Header
	// Body is the request body; nil for none.
	Body []byte
	// Timeout bounds the copy, from its send to the end of its answer.
	Timeout time.Duration
	// Done is called once the copy is over, on the Mirrorer's goroutine:
	// with the answer's status, or with the error that ended it
	// (ErrMirrorClosed when the Mirrorer was closed). r's memory is the
	// caller's again once Done is called.
	Done func(r *MirrorRequest, status int, err error)
	// Buf holds the bytes the slices above point into; the pipeline
	// reuses it from copy to copy.
	Buf []byte
}

// ErrMirrorClosed is what Done reports for a copy a closed Mirrorer did
// not send.
var ErrMirrorClosed = errors.New("mirror sender closed")

// Mirrorer sends MirrorRequests away from the event loops. The pipeline
// bounds how many it hands over at once (mirror.max_inflight), so a
// Mirrorer never refuses one.
type Mirrorer interface {
	// Mirror takes r and returns at once: it never blocks. It calls
	// r.Done exactly once, maybe before Mirror returns.
	Mirror(r *MirrorRequest)
}
