package h1

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"syscall"

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

// writeRequestHead renders r's head for a backend at backendAddr:
// hop-by-hop fields dropped, X-Forwarded-* set for the client at remote,
// framing regenerated: as the request had it, or, when bodyLen is not
// negative (a body buffered whole, chunked or not), Content-Length
// bodyLen. For an in-process handler (local) the X-Forwarded-* fields are
// passed on as the client sent them, not added to: no proxy hop happens.
func writeRequestHead(w *writer, r *request, remote netip.Addr, tls bool, backendAddr string, bodyLen int64, local bool) {
	w.Write(r.method)
	w.WriteString(" ")
	w.Write(r.uri)
	w.WriteString(" HTTP/1.1\r\n")
	if r.hostOverride {
		w.field(hostName, r.authority)
	} else if !r.hasHost {
		// An HTTP/1.0 request may come without Host, but the request goes
		// on as HTTP/1.1, which requires one (RFC 9112 §3.2): name the
		// backend, as net/http's ReverseProxy does.
		w.WriteString("Host: ")
		w.WriteString(backendAddr)
		w.WriteString("\r\n")
	}
	xffAt := -1
	for i := range r.hdr.fields {
		f := &r.hdr.fields[i]
		if f.drop {
			continue
		}
		switch f.kind {
		case kOther, kTrailer:
			w.field(f.name, f.value)
		case kHost:
			if !r.hostOverride {
				w.field(f.name, f.value)
			}
		case kUpgrade:
			if r.upgrade {
				w.field(f.name, f.value)
			}
		case kXForwardedFor:
			if local {
				w.field(f.name, f.value)
			} else if xffAt < 0 {
				xffAt = i
			}
		case kXForwardedProto, kXForwardedHost:
			if local {
				w.field(f.name, f.value)
			}
		}
		// Everything else is hop-by-hop, framing, or rewritten below.
	}
	if r.idLen > 0 {
		w.field(requestIDName, r.id[:r.idLen])
	}
	if local {
		writeFraming(w, r, bodyLen)
		return
	}
	// X-Forwarded-For: prior values in order, then this client.
	w.WriteString("X-Forwarded-For: ")
	if xffAt >= 0 {
		for i := xffAt; i < len(r.hdr.fields); i++ {
			f := &r.hdr.fields[i]
			if f.kind == kXForwardedFor && !f.drop && len(f.value) > 0 {
				w.Write(f.value)
				w.WriteString(", ")
			}
		}
	}
	if w.reserve(64) {
		w.n += len(remote.AppendTo(w.buf[w.n:w.n]))
	}
	if tls {
		w.WriteString("\r\nX-Forwarded-Proto: https\r\n")
	} else {
		w.WriteString("\r\nX-Forwarded-Proto: http\r\n")
	}
	if len(r.authority) > 0 {
		w.field(xfHostName, r.authority)
	}
	writeFraming(w, r, bodyLen)
}

func methodWithoutBody(m []byte) bool {
	switch string(m) {
	case "GET", "HEAD", "DELETE", "OPTIONS", "TRACE":
		return true
	}
	return false
}

var (
	hostName   = []byte("Host")
	xfHostName = []byte("X-Forwarded-Host")
	// requestIDName is the field the pipeline's request id goes in.
	requestIDName = []byte("X-Request-Id")
)

// framing chooses how a response goes to the client that sent req:
// whether it has a body, whether that body is chunked by us, and whether
// the connection must close after it (an HTTP/1.0 client cannot take
// chunks, so an unframed body runs to the close).
func framing(req *request, r *response) (bodyOut, chunkOut, closeAfter bool) {
	bodyOut = !(equalFold(req.method, "head") || r.status < 200 || r.status == 204 || r.status == 304)
	if bodyOut && (r.chunked || r.untilClose) {
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
// end-to-end fields (hop-by-hop dropped), and our own framing.
func writeResponseHead(w *writer, r *response, chunkOut bool) {
	w.WriteString("HTTP/1.1 ")
	if w.reserve(4) {
		w.buf[w.n] = byte('0' + r.status/100)
		w.buf[w.n+1] = byte('0' + r.status/10%10)
		w.buf[w.n+2] = byte('0' + r.status%10)
		w.buf[w.n+3] = ' '
		w.n += 4
	}
	w.Write(r.reason)
	w.WriteString("\r\n")
	for i := range r.hdr.fields {
		f := &r.hdr.fields[i]
		if f.drop {
			continue
		}
		switch f.kind {
		case kConnection, kKeepAlive, kProxy, kTE, kUpgrade, kTransferEncoding:
			continue
		case kTrailer:
			if !chunkOut {
				continue
			}
		case kContentLength:
			if r.chunked || r.untilClose {
				// Transfer-Encoding won (a length comes with an until-close
				// body only next to one); the length is not to be trusted,
				// and must not go out next to our own chunked encoding.
				continue
			}
		}
		w.field(f.name, f.value)
	}
	if chunkOut {
		w.WriteString("Transfer-Encoding: chunked\r\n")
	}
}

func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// writeFixedHead renders the head of an answer with a fixed body: status
// line, Date, the caller's header lines and Content-Length. RFC 9110
// §8.6: no Content-Length in a 1xx or 204 answer; in a 304 it would
// describe the representation, not this body. The caller adds its
// Connection header and the blank line.
func writeFixedHead(w *writer, statusLine, dateLine, header []byte, status, bodyLen int) {
	w.Write(statusLine)
	w.Write(dateLine)
	w.Write(header)
	if fixedBodyAllowed(status) {
		w.WriteString("Content-Length: ")
		w.writeInt(int64(bodyLen))
		w.WriteString("\r\n")
	}
}

// writeFixedBody writes body unless the status or a HEAD request has
// none, and returns the bytes it wrote.
func writeFixedBody(w *writer, status int, method, body []byte) int64 {
	if !fixedBodyAllowed(status) || equalFold(method, "head") {
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
	case r.chunked:
		w.WriteString("Transfer-Encoding: chunked\r\n")
	case r.contentLength > 0:
		w.WriteString("Content-Length: ")
		w.writeInt(r.contentLength)
		w.WriteString("\r\n")
	case r.contentLength == 0 && !methodWithoutBody(r.method):
		w.WriteString("Content-Length: 0\r\n")
	}
	if r.upgrade {
		w.WriteString("Connection: Upgrade\r\n")
	}
	w.WriteString("\r\n")
}
