// Package engine serves HTTP on event loops: one loop per processor, as
// nginx's workers are, each owning the client connections it accepts, its
// keep-alive pools to backends and its buffers, with readiness from
// internal/netpoll (epoll on Linux; Go's netpoller elsewhere, and in
// tests). Nothing on a loop blocks: work that must (host name lookups,
// request bodies spilled to disk, TLS handshakes, net/http handlers) runs
// on goroutines that post their results back.
//
// Every connection, whatever its protocol, is served by one state machine
// (conn.go; send.go sends an answer, connend.go ends a connection,
// exchange.go is its wire.Exchange side): an exchange reads a request head and body, asks the pipeline
// what to do through internal/wire (route, buffer, forward, answer, retry),
// does it without blocking, and reports back. The codecs it drives have no
// I/O and meet at the protocol-neutral heads of internal/httpmsg:
// internal/http1 parses HTTP/1.1 heads in place and writes heads and chunk
// framing (the engine reads the bytes and moves bodies: body.go,
// reqbody.go), internal/h2 is HTTP/2's machine, whose streams fill the same
// heads (h2conn.go, h2request.go, h2upstream.go), and answers leave as
// each client's protocol writes them (http1.WriteResponseHead for
// HTTP/1.1, HEADERS and DATA for HTTP/2, h2send.go).
// Backend connections, kept per loop in pools (pool.go), speak HTTP/1.1,
// TLS, h2c or h2 (upstream.go, upstream_tls.go, h2upstream.go and
// h2upstream_stream.go); engine.go is the API the server package drives,
// loop.go the loops themselves; upgrades become tunnels (tunnel.go);
// static files go out with sendfile(2) (file.go).
//
// DEVELOPERS.md has the map and the rules a loop's code keeps.
package engine
