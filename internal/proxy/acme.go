package proxy

import (
	"bytes"

	"github.com/helios-lb/helios/internal/httpmsg"
	"github.com/helios-lb/helios/internal/wire"
)

// ACME is what the pipeline asks of automatic HTTPS (internal/acme's
// HTTP implements it): HTTP-01 answers before routing, and where a name
// managed by ACME is served over TLS, for the http -> https redirect.
type ACME interface {
	// Challenge returns the key authorization that answers an HTTP-01
	// request for host and path (RFC 8555, section 8.3) when this process
	// presented the challenge. It must not block.
	Challenge(host, path []byte) ([]byte, bool)
	// Solver returns the in-process handler that answers HTTP-01
	// requests for host from shared storage (a challenge another
	// instance presented); nil when host cannot have one.
	Solver(host []byte) *wire.Local
	// HTTPSPort returns the port of the TLS listener whose ACME
	// certificates carry host, 0 when none does. It must not block or
	// allocate.
	HTTPSPort(host []byte) int
}

// acmeChallengePrefix is the path of HTTP-01 requests.
var acmeChallengePrefix = []byte("/.well-known/acme-challenge/")

var (
	locationName     = []byte("Location")
	contentTypeName  = []byte("Content-Type")
	textPlainValue   = []byte("text/plain; charset=utf-8")
	acmeAnswerHeader = httpmsg.HeaderOf("Content-Type", "text/plain", "Cache-Control", "no-store")
)

// acmeChallenge answers an HTTP-01 request before routing: from memory
// when this process presented the challenge, else through the storage
// solver for a host ACME manages. ok is false for any other request.
func (f *flow) acmeChallenge(a ACME, ex wire.Exchange) (wire.Action, bool) {
	path := ex.Path()
	if !bytes.HasPrefix(path, acmeChallengePrefix) || string(ex.Method()) != "GET" {
		return 0, false
	}
	if body, ok := a.Challenge(ex.Host(), path); ok {
		return f.answer(200, acmeAnswerHeader, body), true
	}
	if loc := a.Solver(ex.Host()); loc != nil {
		f.local = loc
		f.last = wire.ActServeHTTP
		return wire.ActServeHTTP, true
	}
	return 0, false
}
