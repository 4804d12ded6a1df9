package http1

import (
	"net/http"
	"strconv"

	"github.com/helios-lb/helios/internal/httpmsg"
)

// Sink is where the serialisers write: a buffered writer over a
// connection (the engine's), or any buffer. Writes are not checked one by
// one: a Sink keeps its first error for whoever flushes it.
type Sink interface {
	// Field writes one field as a line, "name: value\r\n".
	httpmsg.FieldSink
	Write(p []byte) (int, error)
	WriteString(s string) (int, error)
	// WriteInt writes v in decimal.
	WriteInt(v int64)
	// WriteHex writes v in lower-case hexadecimal.
	WriteHex(v int64)
}

// WriteRequestHead writes a request head as forwarded to a backend:
// request line, Host, the fields a proxy may pass on (httpmsg.Forwarder:
// hop-by-hop dropped, X-Forwarded-* set), and framing regenerated: as the
// request had it, or, when bodyLen is not negative (a body buffered
// whole, chunked or not), Content-Length bodyLen. The head is written
// through its empty line.
func WriteRequestHead(w Sink, fw *httpmsg.Forwarder, r *httpmsg.Request, hop *httpmsg.Hop, bodyLen int64) {
	w.Write(r.Method)
	w.WriteString(" ")
	w.Write(r.Target)
	w.WriteString(" HTTP/1.1\r\nHost: ")
	w.Write(httpmsg.Authority(r, hop))
	w.WriteString("\r\n")
	fw.Fields(w, r, hop)
	writeFraming(w, r, bodyLen)
}

// writeFraming ends a forwarded request head: its body framing, the
// Connection field of an upgrade, and the empty line.
func writeFraming(w Sink, r *httpmsg.Request, bodyLen int64) {
	switch {
	case bodyLen >= 0:
		w.WriteString("Content-Length: ")
		w.WriteInt(bodyLen)
		w.WriteString("\r\n")
	case r.ContentLength < 0:
		w.WriteString("Transfer-Encoding: chunked\r\n")
	case r.ContentLength > 0:
		w.WriteString("Content-Length: ")
		w.WriteInt(r.ContentLength)
		w.WriteString("\r\n")
	case !MethodWithoutBody(r.Method) && r.Header.HasKind(httpmsg.KindContentLength):
		w.WriteString("Content-Length: 0\r\n")
	}
	if r.Upgrade != nil {
		w.WriteString("Connection: Upgrade\r\n")
	}
	w.WriteString("\r\n")
}

// MethodWithoutBody reports whether requests of method m carry no body
// by their nature, so a forwarded one needs no "Content-Length: 0".
func MethodWithoutBody(m []byte) bool {
	switch string(m) {
	case "GET", "HEAD", "DELETE", "OPTIONS", "TRACE":
		return true
	}
	return false
}

// Framing chooses how a response goes to a client whose request was an
// HTTP/1.minor one with method: whether it has a body, whether that body
// is chunked by Helios, and whether the connection must close after it
// (an HTTP/1.0 client cannot take chunks, so an unframed body runs to
// the close).
func Framing(method []byte, minor byte, r *httpmsg.Response) (bodyOut, chunkOut, closeAfter bool) {
	bodyOut = httpmsg.BodyAllowed(method, r.Status)
	if bodyOut && r.ContentLength < 0 {
		if minor == 1 {
			chunkOut = true
		} else {
			closeAfter = true
		}
	}
	return
}

// WriteResponseHead writes a response head for a client, without the
// Connection field and the final empty line: status line, end-to-end
// fields (hop-by-hop dropped), and Helios's own framing: chunked
// (chunkOut), or the length of a body whose length is known but came
// with no Content-Length field (an HTTP/2 backend's may not).
func WriteResponseHead(w Sink, r *httpmsg.Response, bodyOut, chunkOut bool) {
	w.WriteString("HTTP/1.1 ")
	w.WriteInt(int64(r.Status))
	w.WriteString(" ")
	if r.Proto == httpmsg.HTTP2 {
		w.WriteString(http.StatusText(r.Status)) // HTTP/2 has no reason phrase
	} else {
		w.Write(r.Reason)
	}
	w.WriteString("\r\n")
	httpmsg.ResponseFields(w, r, chunkOut)
	switch {
	case chunkOut:
		w.WriteString("Transfer-Encoding: chunked\r\n")
	case bodyOut && r.ContentLength >= 0 && !r.Header.HasKind(httpmsg.KindContentLength):
		w.WriteString("Content-Length: ")
		w.WriteInt(r.ContentLength)
		w.WriteString("\r\n")
	}
}

// WriteFixedHead writes the head of an answer with a fixed body: status
// line, Date line, the fields of header (nil: none) and Content-Length.
// RFC 9110 §8.6: no Content-Length in a 1xx or 204 answer; in a 304 it
// would describe the representation, not this body. The caller adds its
// Connection field and the empty line (WriteConnection, EndHead).
func WriteFixedHead(w Sink, statusLine, dateLine []byte, header *httpmsg.Header, status, bodyLen int) {
	w.Write(statusLine)
	w.Write(dateLine)
	if header != nil {
		header.Emit(w)
	}
	if FixedBodyAllowed(status) {
		w.WriteString("Content-Length: ")
		w.WriteInt(int64(bodyLen))
		w.WriteString("\r\n")
	}
}

// WriteFixedBody writes body unless the status or a HEAD request has
// none, and returns the bytes it wrote.
func WriteFixedBody(w Sink, status int, method, body []byte) int64 {
	if !FixedBodyAllowed(status) || httpmsg.EqualFold(method, "head") {
		return 0
	}
	w.Write(body)
	return int64(len(body))
}

// FixedBodyAllowed reports whether an answer with status carries a body.
func FixedBodyAllowed(status int) bool { return status >= 200 && status != 204 && status != 304 }

// WriteConnection writes the Connection field a response to an
// HTTP/1.minor client needs: close when the connection ends after it;
// keep-alive for an HTTP/1.0 client that keeps it; none otherwise.
func WriteConnection(w Sink, closing bool, minor byte) {
	if closing {
		w.WriteString("Connection: close\r\n")
	} else if minor == 0 {
		w.WriteString("Connection: keep-alive\r\n")
	}
}

// EndHead writes the empty line that ends a head.
func EndHead(w Sink) { w.WriteString("\r\n") }

// Continue is the interim answer to a request that expects 100-continue.
const Continue = "HTTP/1.1 100 Continue\r\n\r\n"

// WriteSwitching writes a backend's 101 answer that switches the
// connection to another protocol (an upgrade: WebSocket) for the client,
// through its empty line: its fields but the hop-by-hop ones, and
// "Connection: Upgrade".
func WriteSwitching(w Sink, r *httpmsg.Response) {
	w.WriteString("HTTP/1.1 101 Switching Protocols\r\n")
	httpmsg.ResponseFields(w, r, true)
	w.WriteString("Connection: Upgrade\r\n\r\n")
}

// StatusLines holds rendered "HTTP/1.1 NNN Reason\r\n" lines, made once
// (NewStatusLines) and shared.
type StatusLines [600][]byte

// NewStatusLines renders the status line of every code from 100 to 599.
func NewStatusLines() *StatusLines {
	var s StatusLines
	for code := 100; code < 600; code++ {
		text := http.StatusText(code)
		if text == "" {
			text = "status code " + strconv.Itoa(code)
		}
		s[code] = []byte("HTTP/1.1 " + strconv.Itoa(code) + " " + text + "\r\n")
	}
	return &s
}

// Line returns the status line for code (codes outside 100..599 are
// rendered as 500; callers validate statuses before).
func (s *StatusLines) Line(code int) []byte {
	if code < 100 || code >= 600 {
		code = 500
	}
	return s[code]
}
