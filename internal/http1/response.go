package http1

import (
	"bytes"

	"github.com/helios-lb/helios/internal/httpmsg"
)

// (ContentLength -1 when the body's length is not declared), and what
// only HTTP/1.1 has. An HTTP/2 backend's answer fills the neutral head
// (h2upstream.go).
type Response struct {
	httpmsg.Response
	Minor   byte
	Chunked bool
	// UntilClose: the body runs until the backend closes (no framing).
	UntilClose bool
	KeepAlive  bool
	HasTrailer bool
	// Streams: the answer says it is a stream whose parts must not be
	// held back (an event stream, gRPC, or X-Accel-Buffering: no), so
	// response buffering leaves it alone.
	Streams bool
}

func (r *Response) Reset() {
	r.Response.Reset()
	r.Minor, r.Chunked, r.UntilClose, r.KeepAlive, r.HasTrailer = 0, false, false, false, false
}

// ParseResponse parses a complete response head. headRequest says whether
// it answers a HEAD request (no body whatever the headers say).
func ParseResponse(head []byte, r *Response, headRequest bool) error {
	r.Reset()
	line, rest := nextLine(head)
	if len(line) < 12 || string(line[:7]) != "HTTP/1." || line[8] != ' ' {
		return ErrMalformedResponse
	}
	switch line[7] {
	case '0':
		r.Minor = 0
	case '1':
		r.Minor = 1
	default:
		return ErrMalformedResponse
	}
	d0, d1, d2 := line[9], line[10], line[11]
	if d0 < '1' || d0 > '5' || d1 < '0' || d1 > '9' || d2 < '0' || d2 > '9' {
		return ErrMalformedResponse
	}
	r.Status = int(d0-'0')*100 + int(d1-'0')*10 + int(d2-'0')
	if len(line) > 12 {
		if line[12] != ' ' {
			return ErrMalformedResponse
		}
		r.Reason = line[13:]
		// RFC 9112 §4: no controls but HTAB. The reason is relayed to the
		// client, and a bare CR in it could read as a line break there
		// (§2.2).
		if !httpmsg.ValidValue(r.Reason) {
			return ErrMalformedResponse
		}
	}
	var (
		clSeen, teSeen int
		conn           connFields
		teLast         []byte
	)
	for {
		var name, value []byte
		var problem string
		name, value, rest, problem = nextField(rest)
		if problem != "" {
			return ErrMalformedResponse
		}
		if name == nil {
			break
		}
		if !httpmsg.ValidValue(value) {
			return ErrMalformedResponse
		}
		k := httpmsg.Classify(name)
		r.Header.Fields = append(r.Header.Fields, httpmsg.Field{Name: name, Value: value, Kind: k})
		switch k {
		case httpmsg.KindContentLength:
			n, ok := httpmsg.ParseContentLength(value)
			if !ok || (clSeen > 0 && n != r.ContentLength) {
				return ErrMalformedResponse
			}
			clSeen++
			r.ContentLength = n
		case httpmsg.KindTransferEncoding:
			teSeen++
			teLast = value
		case httpmsg.KindConnection:
			if !conn.add(value) {
				return ErrMalformedResponse
			}
		case httpmsg.KindTrailer:
			r.HasTrailer = true
		case httpmsg.KindContentType, httpmsg.KindOther:
			r.Streams = r.Streams || streamField(k, name, value)
		}
	}
	closeTok, keepTok, _ := conn.mark(&r.Header)
	r.KeepAlive = !closeTok && (r.Minor == 1 || keepTok)
	if teSeen > 0 && r.Minor == 0 {
		// RFC 9112 §6.1: an HTTP/1.0 message with Transfer-Encoding has
		// faulty framing; close the connection after it.
		r.KeepAlive = false
	}

	// RFC 9112 §6.3: message body length.
	switch {
	case headRequest || r.Status < 200 || r.Status == 204 || r.Status == 304:
		r.ContentLength = 0
		r.Chunked = false
	case teSeen > 0:
		// Transfer-Encoding overrides Content-Length; a message with both
		// may be an attack, so the connection is not reused.
		if clSeen > 0 {
			r.KeepAlive = false
		}
		r.ContentLength = -1
		if lastCodingChunked(teLast) {
			r.Chunked = true
		} else {
			r.UntilClose = true
			r.KeepAlive = false
		}
	case clSeen > 0:
	default:
		r.UntilClose = true
		r.KeepAlive = false
	}
	return nil
}

// streamField reports whether a response field marks the answer as a
// stream that response buffering must leave alone: a Content-Type of
// text/event-stream or application/grpc (and its +proto, +json...
// forms), or X-Accel-Buffering: no (nginx's way for a backend to ask).
func streamField(k httpmsg.Kind, name, value []byte) bool {
	if k == httpmsg.KindContentType {
		return httpmsg.HasPrefixFold(value, "text/event-stream") || httpmsg.HasPrefixFold(value, "application/grpc")
	}
	return len(name) == len("x-accel-buffering") && httpmsg.EqualFold(name, "x-accel-buffering") && httpmsg.EqualFold(value, "no")
}

// lastCodingChunked reports whether the final transfer coding in a
// Transfer-Encoding value is chunked.
func lastCodingChunked(v []byte) bool {
	if i := bytes.LastIndexByte(v, ','); i >= 0 {
		v = v[i+1:]
	}
	return httpmsg.EqualFold(httpmsg.TrimOWS(v), "chunked")
}
