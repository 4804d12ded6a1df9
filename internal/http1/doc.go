// Package http1 is Helios's HTTP/1.1 codec (RFC 9112), without I/O: it
// parses request and response heads that a connection has read into the
// protocol-neutral heads of internal/httpmsg (Request and Response add
// what only HTTP/1.1 has: the version's minor number, chunked framing,
// keep-alive), parses the framing lines of a chunked body, and writes
// heads and chunk framing into a Sink.
//
// Parsing copies nothing: field names and values are slices of the bytes
// given, which the caller keeps until the exchange ends. The checks every
// request passes whatever its protocol (method, target, Host, field count)
// are httpmsg's, shared with the HTTP/2 codec; the framing rules that keep
// a request from meaning two things to Helios and a backend (RFC 9112
// §6.3, §11.2) are here.
//
// Reading bytes, timers, and moving bodies are the engine's
// (internal/engine); the HTTP/2 codec is internal/h2.
package http1
