package static

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

// Answer is a planned answer. The caller owns it and should reuse it
// from one request to the next: its buffers grow to fit and are then
// kept, which is what makes Plan allocation-free.
//
// The caller sends, in order: a status line for Status with the fields
// it adds itself (Date, Connection, Server), Header, an empty line; then
// Body; then Length bytes of File from Offset. For HEAD, and wherever
// there is nothing to send, Body is nil and File is nil: Header still
// says what GET would get (its Content-Length included), so the caller
// frames the answer by Body and Length, never by Header.
type Answer struct {
	// Status is the status code, e.g. 200, 206, 304, 404.
	Status int
	// Header holds the answer's header fields, each "Name: value\r\n":
	// Content-Type, Content-Length (except on 304), ETag, Last-Modified,
	// Accept-Ranges, Content-Range, Location, Allow as the answer needs.
	// It never holds Date, Connection or Transfer-Encoding. It points
	// into the Answer's own buffer, valid until the next Plan.
	Header []byte
	// Body is a small fixed body (an error text, a redirect's link);
	// nil when there is none. It is valid until the next Plan.
	Body []byte
	// File is the open file to send from; nil when none. When set, the
	// caller must call File.Release exactly once, when it has finished
	// sending (or has given up: the client went away).
	File *File
	// Offset and Length are the byte range of File to send; both 0 when
	// File is nil.
	Offset, Length int64

	// buf backs Header and Body; p1 and p2 are scratch for the path.
	buf, p1, p2 []byte
}

// reset clears the fields Plan fills, keeping the buffers.
func (a *Answer) reset() {
	a.Status = 0
	a.Header = nil
	a.Body = nil
	a.File = nil
	a.Offset, a.Length = 0, 0
	a.buf = a.buf[:0]
}
