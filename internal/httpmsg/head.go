package httpmsg

import "unsafe"

// Proto is the HTTP version a message came in or goes out with.
type Proto uint8

// The protocols a codec speaks.
const (
	HTTP10 Proto = iota + 1
	HTTP11
	HTTP2
)

// String returns the version as a request line or an access log writes
// it ("HTTP/1.1", "HTTP/2.0").
func (p Proto) String() string {
	switch p {
	case HTTP10:
		return "HTTP/1.0"
	case HTTP11:
		return "HTTP/1.1"
	case HTTP2:
		return "HTTP/2.0"
	}
	return ""
}

// Request is a request head, whatever protocol carried it. Slices point
// into the buffers of the connection that received it, pinned until the
// exchange ends; a rule that edits the head points them at memory of its
// own that lives as long.
type Request struct {
	// Method, e.g. "GET".
	Method []byte
	// Scheme is "http" or "https": HTTP/2's :scheme, or what the
	// connection is for HTTP/1.1 (or its absolute-form target).
	Scheme []byte
	// Authority is host[:port] as the client named it (HTTP/2's
	// :authority, the Host field, or an absolute-form target); empty
	// when it named none (an HTTP/1.0 request may not).
	Authority []byte
	// Host is Authority without its port, lower or mixed case as sent:
	// what routes match.
	Host []byte
	// Target is the request target to forward: path and query in origin
	// form ("/a?b"), or "*" for OPTIONS.
	Target []byte
	// Path is Target without its query.
	Path []byte
	// Proto is the version the request came in.
	Proto Proto
	// Header holds the fields, pseudo-header fields excluded. The Host
	// field of an HTTP/1.1 request is there too; forwarding writes
	// Authority in its place.
	Header Header
	// ContentLength is the declared length of the body: -1 when none was
	// declared (HTTP/1.1 chunked, or an HTTP/2 stream without
	// content-length whose HEADERS did not end it), 0 when there is no
	// body.
	ContentLength int64
	// Upgrade is the protocol the request asks to switch to (HTTP/1.1's
	// Upgrade with Connection: upgrade), nil when it asks for none.
	Upgrade []byte
	// Expect100 says the client waits for 100 Continue before it sends
	// its body.
	Expect100 bool
}

// Reset empties r for the next request, keeping the backing array of
// its fields.
func (r *Request) Reset() {
	h := r.Header
	h.Reset()
	*r = Request{Header: h, ContentLength: -1}
}

// Rebase points the slices of r that lie in from at the same offsets in
// to, a copy of from's bytes at least as long: a connection whose read
// buffer is replaced by a larger one (to hold a body behind the head)
// lets the old one go at once. Slices elsewhere (a rule's own memory, the
// scheme's constants) are left alone.
func (r *Request) Rebase(from, to []byte) {
	rb := rebaser{from: from, to: to}
	r.Method = rb.slice(r.Method)
	r.Scheme = rb.slice(r.Scheme)
	r.Authority = rb.slice(r.Authority)
	r.Host = rb.slice(r.Host)
	r.Target = rb.slice(r.Target)
	r.Path = rb.slice(r.Path)
	r.Upgrade = rb.slice(r.Upgrade)
	for i := range r.Header.Fields {
		f := &r.Header.Fields[i]
		f.Name, f.Value = rb.slice(f.Name), rb.slice(f.Value)
	}
}

// rebaser moves slices of from to the same offsets in to.
type rebaser struct{ from, to []byte }

// Slice returns s moved to to when it lies in from, else s.
func (rb rebaser) slice(s []byte) []byte {
	if len(s) == 0 || len(rb.from) == 0 {
		return s
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(rb.from)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	if p < base || p >= base+uintptr(len(rb.from)) {
		return s
	}
	off := int(p - base)
	return rb.to[off : off+len(s) : off+len(s)]
}

// RebaseSlice moves one slice as Rebase moves a head's.
func RebaseSlice(s, from, to []byte) []byte { return rebaser{from: from, to: to}.slice(s) }

// HasBody reports whether the request carries a body.
func (r *Request) HasBody() bool { return r.ContentLength != 0 }

// Query returns the query of the target, without the "?"; nil when
// there is none.
func (r *Request) Query() []byte {
	if len(r.Target) > len(r.Path) && r.Target[len(r.Path)] == '?' {
		return r.Target[len(r.Path)+1:]
	}
	return nil
}

// Response is a response head, whatever protocol carried it. Slices
// point into the buffers of the connection that received it, or into
// memory the answer's maker keeps alive until it is sent.
type Response struct {
	// Status is the status code, 100 to 599.
	Status int
	// Reason is HTTP/1.1's reason phrase (nil: the standard one is
	// written; HTTP/2 has none).
	Reason []byte
	// Proto is the version the response came in.
	Proto Proto
	// Header holds the fields.
	Header Header
	// ContentLength is the declared length of the body: -1 when none was
	// declared (chunked, until the connection closes, or a stream
	// without content-length), 0 when there is no body.
	ContentLength int64
}

// Reset empties r for the next response, keeping the backing array of
// its fields.
func (r *Response) Reset() {
	h := r.Header
	h.Reset()
	*r = Response{Header: h, ContentLength: -1}
}

// BodyAllowed reports whether a response with this status to a request
// with this method has a body (RFC 9110 §6.4.1, §9.3.2): not a HEAD's,
// not a 1xx, 204 or 304.
func BodyAllowed(method []byte, status int) bool {
	return !EqualFold(method, "head") && status >= 200 && status != 204 && status != 304
}
