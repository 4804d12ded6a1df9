package engine

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"syscall"

	"github.com/helios-lb/helios/internal/httpmsg"

	"github.com/helios-lb/helios/internal/wire"
)

// maxResponseHead bounds a backend's response head.
const maxResponseHead = 64 << 10

// What goes to and comes from backends: request heads as forwarded,
// response heads as relayed, and how failures are classified.

// clientFault reports whether err is the client's doing: it left, its
// request stalled, or its body was malformed. Such errors never count
// against a backend.
func clientFault(err error) bool {
	return errors.Is(err, wire.ErrClientGone) || errors.Is(err, wire.ErrClientTimeout) ||
		errors.Is(err, wire.ErrBadRequest) || errors.Is(err, wire.ErrBodyTooLarge)
}

// isStale reports whether err looks like a reused connection the backend
// had already closed: EOF or reset before any response byte.
func isStale(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || isReset(err)
}

func idempotent(m []byte) bool {
	switch string(m) {
	case "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE":
		return true
	}
	return false
}

// classifyErr wraps a raw error with the wire sentinel the pipeline acts on.
func classifyErr(err error, addr string) error {
	switch {
	case clientFault(err),
		errors.Is(err, wire.ErrConnect), errors.Is(err, wire.ErrTimeout), errors.Is(err, wire.ErrBackend):
		return err
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("%w: %s: %w", wire.ErrTimeout, addr, err)
	default:
		return fmt.Errorf("%w: %s: %w", wire.ErrBackend, addr, err)
	}
}

// writeRequestHead renders r's head for a backend, as hop says: the
// request line in origin form, Host (the client's authority, or the
// backend's address when it named none), the fields the forwarding rules
// pass on (httpmsg.Forwarder: hop-by-hop dropped, X-Forwarded-* set), and
// framing regenerated: as the request had it, or, when bodyLen is not
// negative (a body buffered whole, chunked or not), Content-Length
// bodyLen.
func writeRequestHead(w *writer, fw *httpmsg.Forwarder, r *request, hop *httpmsg.Hop, bodyLen int64) {
	w.Write(r.Method)
	w.WriteString(" ")
	w.Write(r.Target)
	w.WriteString(" HTTP/1.1\r\nHost: ")
	w.Write(httpmsg.Authority(&r.Request, hop))
	w.WriteString("\r\n")
	fw.Fields(w, &r.Request, hop)
	writeFraming(w, r, bodyLen)
}

func methodWithoutBody(m []byte) bool {
	switch string(m) {
	case "GET", "HEAD", "DELETE", "OPTIONS", "TRACE":
		return true
	}
	return false
}

// framing chooses how a response goes to the client that sent req:
// whether it has a body, whether that body is chunked by us, and whether
// the connection must close after it (an HTTP/1.0 client cannot take
// chunks, so an unframed body runs to the close).
func framing(req *request, r *response) (bodyOut, chunkOut, closeAfter bool) {
	bodyOut = httpmsg.BodyAllowed(req.Method, r.Status)
	if bodyOut && r.ContentLength < 0 {
		if req.minor == 1 {
			chunkOut = true
		} else {
			closeAfter = true
		}
	}
	return
}

// writeResponseHead renders a backend's response head for the client,
// without the Connection field and the final empty line: status line,
// end-to-end fields (hop-by-hop dropped), and our own framing: chunked
// (chunkOut), or the length of a body whose length is known but came
// with no Content-Length field (an HTTP/2 backend's may not).
func writeResponseHead(w *writer, r *response, bodyOut, chunkOut bool) {
	w.WriteString("HTTP/1.1 ")
	if w.reserve(4) {
		w.buf[w.n] = byte('0' + r.Status/100)
		w.buf[w.n+1] = byte('0' + r.Status/10%10)
		w.buf[w.n+2] = byte('0' + r.Status%10)
		w.buf[w.n+3] = ' '
		w.n += 4
	}
	if r.Proto == httpmsg.HTTP2 {
		w.WriteString(http.StatusText(r.Status)) // HTTP/2 has no reason phrase
	} else {
		w.Write(r.Reason)
	}
	w.WriteString("\r\n")
	httpmsg.ResponseFields(w, &r.Response, chunkOut)
	switch {
	case chunkOut:
		w.WriteString("Transfer-Encoding: chunked\r\n")
	case bodyOut && r.ContentLength >= 0 && !hasField(&r.Header, httpmsg.KindContentLength):
		w.WriteString("Content-Length: ")
		w.writeInt(r.ContentLength)
		w.WriteString("\r\n")
	}
}

func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// writeFixedHead renders the head of an answer with a fixed body: status
// line, Date, the fields of header (nil: none) and Content-Length. RFC
// 9110 §8.6: no Content-Length in a 1xx or 204 answer; in a 304 it would
// describe the representation, not this body. The caller adds its
// Connection header and the blank line.
func writeFixedHead(w *writer, statusLine, dateLine []byte, header *httpmsg.Header, status, bodyLen int) {
	w.Write(statusLine)
	w.Write(dateLine)
	if header != nil {
		header.Emit(w)
	}
	if fixedBodyAllowed(status) {
		w.WriteString("Content-Length: ")
		w.writeInt(int64(bodyLen))
		w.WriteString("\r\n")
	}
}

// writeFixedBody writes body unless the status or a HEAD request has
// none, and returns the bytes it wrote.
func writeFixedBody(w *writer, status int, method, body []byte) int64 {
	if !fixedBodyAllowed(status) || httpmsg.EqualFold(method, "head") {
		return 0
	}
	w.Write(body)
	return int64(len(body))
}

func fixedBodyAllowed(status int) bool { return status >= 200 && status != 204 && status != 304 }

// writeFraming ends a forwarded request head: its body framing, the
// Connection field of an upgrade, and the empty line.
func writeFraming(w *writer, r *request, bodyLen int64) {
	switch {
	case bodyLen >= 0:
		w.WriteString("Content-Length: ")
		w.writeInt(bodyLen)
		w.WriteString("\r\n")
	case r.ContentLength < 0:
		w.WriteString("Transfer-Encoding: chunked\r\n")
	case r.ContentLength > 0:
		w.WriteString("Content-Length: ")
		w.writeInt(r.ContentLength)
		w.WriteString("\r\n")
	case !methodWithoutBody(r.Method) && hasField(&r.Header, httpmsg.KindContentLength):
		w.WriteString("Content-Length: 0\r\n")
	}
	if r.Upgrade != nil {
		w.WriteString("Connection: Upgrade\r\n")
	}
	w.WriteString("\r\n")
}

// hasField reports whether h has a field of kind k.
func hasField(h *httpmsg.Header, k httpmsg.Kind) bool {
	_, ok := h.GetKind(k)
	return ok
}
