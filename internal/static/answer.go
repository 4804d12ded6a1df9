package static

import (
	"github.com/helios-lb/helios/internal/httpmsg"
	"github.com/helios-lb/helios/internal/wire"
)

// Request is what Plan needs of a request. An engine implements it over
// its parsed head; the byte slices returned need only stay valid until
// Plan returns, and Plan keeps none of them.
type Request interface {
	// Method returns the request method as received, e.g. "GET".
	Method() []byte
	// Path returns the path of the request target as received: without
	// the query, percent-escapes not decoded (Plan decodes them and
	// resolves dot segments the way the route matcher does).
	Path() []byte
	// Header returns the first value of the named field, nil when the
	// field is absent. name is in lower case.
	Header(name string) []byte
}

// Answer is a planned answer: the engine's neutral file answer
// (wire.FileAnswer). The caller owns it and should reuse it from one
// request to the next: its buffers grow to fit and are then kept, which
// is what makes Plan allocation-free.
//
// Header holds Content-Type, Content-Length (except on 304), ETag,
// Last-Modified, Accept-Ranges, Content-Range, Location and Allow as the
// answer needs, never Date, Connection or Transfer-Encoding; for HEAD,
// and wherever there is nothing to send, Body and File are nil while
// Header still says what GET would get (its Content-Length included), so
// the caller frames the answer by Body and Length, never by Header. Its
// slices point into the Answer's Scratch and the cache, valid until the
// next Plan. A File, when set, must be released exactly once.
type Answer = wire.FileAnswer

// The Answer's scratch buffers: buf backs Header values and Body; p1 and
// p2 are scratch for the path.
const (
	scratchBuf = iota
	scratchP1
	scratchP2
)

// reset clears the fields Plan fills, keeping the buffers.
func reset(a *Answer) {
	a.Status = 0
	a.Header.Reset()
	a.Body = nil
	a.File = nil
	a.Offset, a.Length = 0, 0
	a.Scratch[scratchBuf] = a.Scratch[scratchBuf][:0]
}

// Field names of the answers.
var (
	nameAllow         = []byte("Allow")
	nameContentType   = []byte("Content-Type")
	nameContentLength = []byte("Content-Length")
	nameContentRange  = []byte("Content-Range")
	nameAcceptRanges  = []byte("Accept-Ranges")
	nameETag          = []byte("ETag")
	nameLastModified  = []byte("Last-Modified")
	nameLocation      = []byte("Location")
	nameNoSniff       = []byte("X-Content-Type-Options")
	nameVary          = []byte("Vary")

	nameContentEncoding = []byte("Content-Encoding")

	valueAllow   = []byte("GET, HEAD")
	valueText    = []byte("text/plain; charset=utf-8")
	valueHTML    = []byte("text/html; charset=utf-8")
	valueBytes   = []byte("bytes")
	valueNoSniff = []byte("nosniff")
	valueZero    = []byte("0")

	valueAcceptEncoding = []byte("Accept-Encoding")
)

// field appends a field to the answer's head.
func field(a *Answer, name, value []byte) {
	a.Header.Fields = append(a.Header.Fields, httpmsg.Field{Name: name, Value: value, Kind: httpmsg.Classify(name)})
}
