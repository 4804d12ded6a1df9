package engine

import (
	"io"
	"net/netip"

	"github.com/helios-lb/helios/internal/bodybuf"
	"github.com/helios-lb/helios/internal/httpmsg"
	"github.com/helios-lb/helios/internal/wire"
)

// clientSide is what an exchange does that depends on the protocol its
// client speaks: reading the request, and writing the answer. HTTP/1.1
// (with or without TLS) is h1client, on the connection's own socket
// (client_h1.go); an HTTP/2 stream is h2client, whose bytes go through its
// connection's internal/h2 machine (client_h2.go, h2send.go). Everything
// else an exchange does (routing, the pipeline's decisions, backends,
// buffering, transforms, deadlines) is one code for both; a third
// protocol is one more implementation of this interface.
type clientSide interface {
	// event handles readiness of the client: a socket's, or what a stream's connection passes on.
	event(c *lconn, ev uint32)
	// close releases the client connection, or forgets the stream.
	close(c *lconn)
	// proto is the protocol version the client spoke.
	proto(c *lconn) []byte
	// respond sends a complete answer with a fixed body (header final).
	respond(c *lconn, status int, header *httpmsg.Header, body []byte) error
	// serveFile sends a planned file answer's head and starts its body.
	serveFile(c *lconn, a *wire.FileAnswer)
	// pumpFile sends the file range until it is done or the client has to be waited for.
	pumpFile(c *lconn)
	// startSend writes a backend's answer head and starts its body.
	startSend(c *lconn)
	// pump moves the answer's body from the backend until one side has to wait.
	pump(c *lconn)
	// endOutput ends the answer and moves to the next request, or closes.
	endOutput(c *lconn)
	// src is what the request's bytes are read from.
	src(c *lconn) io.Reader
	// maybeMore reports whether more of the request may be read now without waiting.
	maybeMore(c *lconn) bool
	// reqTrailer returns the trailer section of the request's body.
	reqTrailer(c *lconn) *trailerSection
	// destAddr is the address the client connected to.
	destAddr(c *lconn) netip.AddrPort
	// readHead reads the request's head; false while it waits for more,
	// or when the request was refused or the client closed.
	readHead(c *lconn) bool
	// abandon lets go of a client whose exchange panicked twice: its
	// state is beyond use.
	abandon(c *lconn)
	// bufferAccount is the budget account the request's buffered body is
	// charged to (lconn.bufferAccount).
	bufferAccount(c *lconn) *bodybuf.Account
	// flush sends what the answer has written so far; false when the
	// client is gone (the exchange has ended).
	flush(c *lconn) bool
	// waitWritable arms what bounds a wait for the client to take more of
	// the answer.
	waitWritable(c *lconn)
	// room is how much of the answer's body the client takes now, and
	// whether the answer's end may be written; err when the client has
	// gone.
	room(c *lconn) (n int, canEnd bool, err error)
	// writePiece writes a piece of the answer's body; false when the
	// exchange has ended (the client is gone).
	writePiece(c *lconn, p []byte) bool
	// endBody ends the answer's body with its trailer section.
	endBody(c *lconn, tr *trailerSection)
	// hold makes what a backend's event writes to the client leave with
	// the rest of the loop's batch.
	hold(c *lconn)
	// wrote reports whether all the answer has written has gone out (an
	// HTTP/2 stream's window may hold some back), so its end may follow.
	wrote(c *lconn) bool
}

// h1client is an HTTP/1.1 client: the exchange's own connection.
type h1client struct{}

// h2client is an HTTP/2 client: the exchange is one of its streams
// (lconn.h2s).
type h2client struct{}

// client returns the protocol side of the exchange: the one place that
// tells an HTTP/2 stream from an HTTP/1.1 connection for the answer's path.
func (c *lconn) client() clientSide {
	if c.h2s != nil {
		return h2client{}
	}
	return h1client{}
}
