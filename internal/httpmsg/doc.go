// Package httpmsg is the protocol-neutral HTTP message that every codec
// produces and consumes and that the pipeline reads and edits: request and
// response heads whose field names and values are slices of a connection's
// buffers (no copy, no allocation on the way through), and the rules that
// hold whatever the protocol: which fields are hop-by-hop, which may not
// travel in trailers, and what a proxy adds when it forwards a request.
//
// An HTTP/1.1 head parsed from the wire and an HTTP/2 head decoded from
// HPACK fill the same Request or Response; an HTTP/1.1 writer and an
// HTTP/2 encoder serialise it. No protocol is rendered as another's text.
//
// Bodies are not part of the head: each codec hands the engine a body as
// data and an end (with trailers, which are a Header of their own).
package httpmsg
