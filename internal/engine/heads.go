package engine

import "github.com/helios-lb/helios/internal/http1"

// request is a client's request head as an exchange keeps it: the
// protocol-neutral head (httpmsg.Request) and, from an HTTP/1.1 client,
// what only HTTP/1.1 has (the version's minor number, chunked framing,
// keep-alive), parsed by the HTTP/1.1 codec. An HTTP/2 stream's request
// fills the neutral head and leaves the rest zero (h2request.go).
type request = http1.Request

// response is a backend's response head: the neutral head and, from an
// HTTP/1.1 backend, its framing. An HTTP/2 backend's answer fills the
// neutral head (h2upstream.go).
type response = http1.Response
