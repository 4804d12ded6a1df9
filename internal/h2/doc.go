// Package h2 is HTTP/2 (RFC 9113) as a connection state machine that an
// event loop drives: Helios's server side for clients (TLS with ALPN h2,
// or h2c with prior knowledge) and its client side for h2 and h2c
// backends (gRPC services), multiplexed.
//
// A Conn never blocks, starts no goroutine and takes no lock. The driver
// — an event loop, or in tests a goroutine per connection — pushes into
// it what the socket gave and the time, and it writes frames to an Output
// and calls a handler back. All of one Conn's methods, its Streams'
// methods and its handler calls run on one goroutine at a time.
//
// # Driving a Conn
//
//   - Create it with NewServerConn on an accepted connection (it writes
//     the server preface at once) or NewClientConn on a dialled one (the
//     client preface; streams may be opened at once).
//   - Feed it what the socket gave. Feed consumes whole frames only: the
//     driver keeps the unconsumed tail and feeds it again, with more
//     bytes, once they arrive. The read buffer must hold FrameBufferSize
//     bytes (16 KiB + 9 by default); the bytes are only read during the
//     call, so the buffer may go back to a free list whenever nothing is
//     left unconsumed.
//   - Output.Write must not block: the driver writes what the socket
//     takes and keeps the rest (as internal/engine's fdWriter does). Output
//     is written only from within the Conn's and its Streams' methods,
//     once per call (in pieces of about 64 KiB when there is more), so a
//     batch of frames costs one write. When the kept backlog is high the
//     driver calls SetOutputBlocked(true) — DATA then waits (bounded
//     memory for slow readers) — and SetOutputBlocked(false) once it has
//     drained; a backlog that stays high past Limits.WriteTimeout ends
//     the connection.
//   - Tick it about once a second with the time: SETTINGS
//     acknowledgement, idle, stalled windows, slow readers, liveness
//     pings, the second GOAWAY of a shutdown, and the windows of the
//     flood counters all run on it.
//   - Shutdown starts a graceful close (drain, reload): GOAWAY, open
//     streams finish. Close tells the machine the socket is gone.
//   - When Done reports true (Feed and Tick also return the reason), the
//     driver writes out what it holds and closes the socket. After a
//     graceful end it should shut down its write side first and give the
//     peer a moment to read, so that the final GOAWAY is not lost to a
//     reset.
//
// # Streams and handlers
//
// A server's handler gets OnRequest with the parsed and validated head
// (RFC 9113 §8.2-8.3: lowercase names, no connection-specific fields, TE
// only "trailers", pseudo-header rules, content-length against the body;
// a malformed request is reset and never reaches the handler), then the
// body with OnData and trailers with OnTrailers, and answers with
// Stream.WriteHeaders, WriteData and WriteTrailers. A client opens
// streams with Conn.OpenStream while CanOpen allows (the server's
// SETTINGS_MAX_CONCURRENT_STREAMS) and gets OnResponse. Received body
// bytes hold window until the consumer calls Stream.Consumed, so a
// consumer that stops stops the sender. WriteData writes what the
// windows allow and OnWritable says when to write the rest. OnReset ends
// a stream that did not finish; a stream a GOAWAY left unprocessed, or
// that the peer refused, carries an error matching ErrRetryable.
//
// # Limits
//
// Limits bounds what a peer can make a connection do (rapid reset,
// CONTINUATION floods, HPACK bombs, SETTINGS, PING and empty-frame
// floods, streams over the concurrent limit, reset floods, stalled
// windows, slow readers),
// with defaults documented on each field; a peer that passes one loses
// its connection (GOAWAY ENHANCE_YOUR_CALM) and a Stats counter goes up.
//
// # Wire
//
// Frames are parsed and written by the package itself, with the
// constants of golang.org/x/net/http2; header blocks are encoded and
// decoded with golang.org/x/net/http2/hpack, one Encoder and Decoder per
// connection. Server push is not supported (a client's PUSH_PROMISE is a
// PROTOCOL_ERROR; a client Conn advertises SETTINGS_ENABLE_PUSH 0);
// PRIORITY is parsed and ignored; extended CONNECT (RFC 8441) is
// available with Config.EnableConnectProtocol. The subpackage h2spectest
// runs the h2spec conformance suite against any listener.
package h2
