package http1

import (
	"bytes"
	"errors"
	"strconv"

	"github.com/helios-lb/helios/internal/httpmsg"
)

// Errors of a message's framing.
var (
	// ErrMalformedChunk is a chunked body that breaks RFC 9112 §7.1.
	ErrMalformedChunk = errors.New("http1: malformed chunked encoding")
	// ErrMalformedResponse is a backend's response head that breaks RFC 9112.
	ErrMalformedResponse = errors.New("http1: malformed response")
	// ErrTrailerTooLarge is a trailer section over MaxTrailerBytes.
	ErrTrailerTooLarge = errors.New("http1: trailer section too large")
)

// MaxTrailerBytes bounds the trailer section of a chunked body.
const MaxTrailerBytes = 16 << 10

// MaxChunkLine bounds a chunk-size line (with its extensions).
const MaxChunkLine = 4096

// ParseChunkSize parses "hex[;ext]" with at most 15 significant hex
// digits, so the size cannot overflow. Leading zeros do not count: RFC
// 9112 §7.1 puts no bound on them (the line itself is bounded).
func ParseChunkSize(line []byte) (int64, bool) {
	if i := bytes.IndexByte(line, ';'); i >= 0 {
		line = line[:i]
	}
	line = httpmsg.TrimOWS(line)
	if len(line) == 0 {
		return 0, false
	}
	for len(line) > 1 && line[0] == '0' {
		line = line[1:]
	}
	if len(line) > 15 {
		return 0, false
	}
	var n int64
	for _, c := range line {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		n = n<<4 | int64(d)
	}
	return n, true
}

// Read implements io.Reader over the decoded body, for handlers that want

// ParseTrailerLine splits a line of a chunked body's trailer section
// into its name and value, or reports that it is malformed.
func ParseTrailerLine(line []byte) (name, value []byte, ok bool) {
	name, value, problem := fieldLine(line)
	if problem != "" || !httpmsg.ValidValue(value) {
		return nil, nil, false
	}
	return name, value, true
}

// WriteChunk writes p as one chunk of a chunked body.
func WriteChunk(w Sink, p []byte) {
	WriteChunkHead(w, int64(len(p)))
	w.Write(p)
	WriteChunkEnd(w)
}

// finalChunkEnd follows a chunked body's last piece of data when no
// trailer fields do: the piece's CRLF, the last chunk and the empty line.
const finalChunkEnd = ChunkEnd + LastChunk

// thenWriter is a Sink that can write a piece and the short framing
// behind it together (the engine's buffered writer: in one system call
// where it would send a large piece at once).
type thenWriter interface {
	WriteThen(p []byte, s string)
}

// WriteFinalChunk writes p as the last chunk of data of a chunked body
// (p not empty) and the body's end behind it, with no trailer fields:
// the bytes of WriteChunk and WriteLastChunk(w, nil), given to a Sink
// that has WriteThen as the piece and its framing together.
func WriteFinalChunk(w Sink, p []byte) {
	WriteChunkHead(w, int64(len(p)))
	if tw, ok := w.(thenWriter); ok {
		tw.WriteThen(p, finalChunkEnd)
		return
	}
	w.Write(p)
	w.WriteString(finalChunkEnd)
}

// WriteChunkHead writes the size line of a chunk of n bytes; its data and
// closing CRLF follow.
func WriteChunkHead(w Sink, n int64) {
	w.WriteHex(n)
	w.WriteString("\r\n")
}

// AppendChunkHead appends WriteChunkHead's size line to b.
func AppendChunkHead(b []byte, n int64) []byte {
	return append(strconv.AppendInt(b, n, 16), "\r\n"...)
}

// ChunkEnd is what ends a chunk's data (WriteChunkEnd), and LastChunk the
// end of a chunked body with no trailer fields (WriteLastChunk), as
// constants for writers that gather slices.
const (
	ChunkEnd  = "\r\n"
	LastChunk = "0\r\n\r\n"
)

// WriteLastChunk ends a chunked body: the last chunk, the trailer section
// (its fields that may travel in a trailer) and the empty line.
func WriteLastChunk(w Sink, trailer *httpmsg.Header) {
	w.WriteString("0\r\n")
	if trailer != nil {
		httpmsg.TrailerFields(w, trailer)
	}
	w.WriteString("\r\n")
}

// WriteChunkedFraming writes the field that says a body goes chunked.
func WriteChunkedFraming(w Sink) { w.WriteString("Transfer-Encoding: chunked\r\n") }

// WriteChunkEnd ends a chunk's data, written after WriteChunkHead.
func WriteChunkEnd(w Sink) { w.WriteString(ChunkEnd) }
