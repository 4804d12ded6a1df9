package http1

import (
	"bufio"
	"bytes"
	"errors"
	"net/http"
	"slices"
	"testing"

	"github.com/helios-lb/helios/internal/httpmsg"
)

// responseVectors are response heads that have split caches and desynced
// connections elsewhere: framing in both Content-Length and
// Transfer-Encoding, codings that do not end in chunked, obs-fold, bare CR
// and NUL, HTTP/1.0 with chunked, header-less and reason-less heads.
var responseVectors = []string{
	"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, identity\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: xchunked\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding:\tchunked \r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\nConnection: X-Sum, close\r\nX-Sum: 1\r\n\r\n",
	"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n",
	"HTTP/1.0 200 OK\r\nContent-Length: 2\r\nConnection: Keep-Alive, X-A\r\nX-A: b\r\nKeep-Alive: timeout=5\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 007\r\nContent-Length: 7\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n 2\r\n\r\n",
	"HTTP/1.1 200 OK\r\nX-A: b\rContent-Length: 0\r\n\r\n",
	"HTTP/1.1 200 O\rK\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 200 O\x00K\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nX-A: \x00\r\n\r\n",
	"HTTP/1.1 200 \xe2\x9c\x93\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
	"HTTP/1.1 304 Not Modified\r\nContent-Length: 500\r\nConnection: close\r\n\r\n",
	"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
	"HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 599\n\n",
	"HTTP/1.1 200 OK\nProxy-Connection: keep-alive\nProxy-Authenticate: x\nTE: trailers\nUpgrade: h2c\n\n",
	"HTTP/1.1 200 OK\r\n\r\nbody until close",
}

// FuzzParseResponse parses backend response heads (findHeadEnd and
// parseResponse) and checks that a head either fails with
// ErrMalformedResponse or parses into a consistent response: one framing
// (none, fixed, chunked or until close), a connection that is not reused
// after unsafe framing, and a head that, rendered for the client by
// writeResponseHead, is clean on the wire and parses back to the same
// status, framing and fields. Where net/http reads the head too, the two
// agree on the framing.
func FuzzParseResponse(f *testing.F) {
	for _, tt := range responseTests {
		f.Add([]byte(crlf(tt.head)), tt.forHEAD, false)
		f.Add([]byte(tt.head), tt.forHEAD, true)
	}
	for _, tt := range responseRejectTests {
		f.Add([]byte(crlf(tt.head)), false, false)
	}
	for _, s := range responseVectors {
		f.Add([]byte(s), false, false)
		f.Add([]byte(s), true, true)
	}
	f.Fuzz(func(t *testing.T, in []byte, forHEAD, http10Client bool) {
		var r Response
		// Whatever the bytes, parsing must not panic, and fail only one way.
		if err := ParseResponse(in, &r, forHEAD); err != nil && !errors.Is(err, ErrMalformedResponse) {
			t.Fatalf("got %v, want nil or %v", err, ErrMalformedResponse)
		}
		end, _ := FindHeadEnd(in, 0)
		if end < 0 {
			return // the engines wait for more
		}
		head := in[:end]
		if err := ParseResponse(head, &r, forHEAD); err != nil {
			if !errors.Is(err, ErrMalformedResponse) {
				t.Fatalf("%q: got %v, want nil or %v", head, err, ErrMalformedResponse)
			}
			return
		}
		checkResponse(t, head, &r, forHEAD)
		compareResponseWithNetHTTP(t, head, &r, forHEAD)
		if r.Status >= 200 {
			// Interim answers are not relayed, and a 101 becomes a tunnel:
			// only final heads are rendered for the client.
			checkRelayedResponse(t, &r, forHEAD, http10Client)
		}
	})
}

// noResponseBody reports whether a response has no body whatever its
// header says (RFC 9112 §6.3 rules 1 and 2).
func noResponseBody(status int, forHEAD bool) bool {
	return forHEAD || status < 200 || status == 204 || status == 304
}

// checkResponse checks what parseResponse made of head on its own terms.
func checkResponse(t *testing.T, head []byte, r *Response, forHEAD bool) {
	t.Helper()
	if r.Status < 100 || r.Status > 599 || r.Minor > 1 {
		t.Fatalf("%q: got status %d, HTTP/1.%d", head, r.Status, r.Minor)
	}
	// RFC 9112 §4: reason-phrase = *( HTAB / SP / VCHAR / obs-text ).
	if !httpmsg.ValidValue(r.Reason) {
		t.Fatalf("%q: reason %q accepted", head, r.Reason)
	}
	for _, f := range r.Header.Fields {
		if !httpmsg.IsToken(f.Name) || !httpmsg.ValidValue(f.Value) || !bytes.Equal(httpmsg.TrimOWS(f.Value), f.Value) {
			t.Fatalf("%q: field %q: %q accepted", head, f.Name, f.Value)
		}
	}
	n := countKinds(r.Header.Fields)
	switch {
	case noResponseBody(r.Status, forHEAD):
		if r.ContentLength != 0 || r.Chunked || r.UntilClose {
			t.Fatalf("%q: got length %d, chunked %v, until close %v; want no body", head, r.ContentLength, r.Chunked, r.UntilClose)
		}
	case r.Chunked:
		if r.ContentLength != -1 || r.UntilClose || n[httpmsg.KindTransferEncoding] == 0 {
			t.Fatalf("%q: chunked with length %d, until close %v", head, r.ContentLength, r.UntilClose)
		}
	case r.UntilClose:
		if r.ContentLength != -1 {
			t.Fatalf("%q: until close with length %d", head, r.ContentLength)
		}
	default:
		if r.ContentLength < 0 || n[httpmsg.KindTransferEncoding] > 0 {
			t.Fatalf("%q: got length %d, with %d Transfer-Encoding fields; want a length and none", head, r.ContentLength, n[httpmsg.KindTransferEncoding])
		}
		for _, f := range r.Header.Fields {
			if cl, _ := httpmsg.ParseContentLength(f.Value); f.Kind == httpmsg.KindContentLength && cl != r.ContentLength {
				t.Fatalf("%q: got length %d, want %q", head, r.ContentLength, f.Value)
			}
		}
	}
	closeTok, keepTok := connectionTokens(r.Header.Fields)
	unsafe := r.UntilClose || // the end of the body is the end of the connection
		r.Minor == 0 && n[httpmsg.KindTransferEncoding] > 0 || // RFC 9112 §6.1: faulty framing
		!noResponseBody(r.Status, forHEAD) && n[httpmsg.KindTransferEncoding] > 0 && n[httpmsg.KindContentLength] > 0 // RFC 9112 §6.3 rule 3
	if r.KeepAlive && (unsafe || closeTok || r.Minor == 0 && !keepTok) {
		t.Fatalf("%q: connection kept alive", head)
	}
	if !r.KeepAlive && !unsafe && !closeTok && (r.Minor == 1 || keepTok) {
		t.Fatalf("%q: connection not kept alive", head)
	}
}

// checkRelayedResponse renders r as the engines send it to a client that
// made a GET (HEAD with forHEAD) in HTTP/1.1 (HTTP/1.0 with http10Client),
// and checks the result on the wire and parsed again.
func checkRelayedResponse(t *testing.T, r *Response, forHEAD, http10Client bool) {
	t.Helper()
	req := Request{Request: httpmsg.Request{Method: []byte("GET")}, Minor: 1}
	if forHEAD {
		req.Method = []byte("HEAD")
	}
	if http10Client {
		req.Minor = 0
	}
	bodyOut, chunkOut, closeAfter := Framing(req.Method, req.Minor, &r.Response)
	render := func(r *Response, chunkOut bool) []byte {
		return renderHead(t, func(w Sink) {
			WriteResponseHead(w, &r.Response, bodyOut, chunkOut)
			w.WriteString("\r\n")
		})
	}
	out := render(r, chunkOut)
	checkWireHead(t, out)
	var r2 Response
	if err := ParseResponse(out, &r2, forHEAD); err != nil {
		t.Fatalf("relayed head %q: got %v, want it parsed", out, err)
	}
	if r2.Status != r.Status || !bytes.Equal(r2.Reason, r.Reason) || r2.Minor != 1 {
		t.Fatalf("relayed head %q: got status line %d %q HTTP/1.%d, want %d %q HTTP/1.1", out, r2.Status, r2.Reason, r2.Minor, r.Status, r.Reason)
	}
	switch {
	case !bodyOut:
		if r2.ContentLength != 0 || r2.Chunked || r2.UntilClose {
			t.Fatalf("relayed head %q has a body", out)
		}
	case chunkOut:
		// An HTTP/1.1 client gets chunks whatever the backend's framing.
		if !r2.Chunked || !r2.KeepAlive {
			t.Fatalf("relayed head %q: got chunked %v, keep-alive %v; want both", out, r2.Chunked, r2.KeepAlive)
		}
	case r.Chunked || r.UntilClose:
		// An HTTP/1.0 client reads to the close.
		if !r2.UntilClose || !closeAfter {
			t.Fatalf("relayed head %q: got until close %v, closing %v; want both", out, r2.UntilClose, closeAfter)
		}
	default:
		if r2.ContentLength != r.ContentLength || r2.Chunked || r2.UntilClose {
			t.Fatalf("relayed head %q: got length %d, want %d", out, r2.ContentLength, r.ContentLength)
		}
	}
	// The end-to-end fields go on in order; hop-by-hop ones, those the
	// Connection header named and framing the body no longer has do not,
	// nor a Content-Length in a 204 (RFC 9110 §8.6 forbids it there).
	var want []httpmsg.Field
	for _, f := range r.Header.Fields {
		switch {
		case f.Drop, f.Kind.HopByHop(),
			f.Kind == httpmsg.KindTrailer && !chunkOut,
			f.Kind == httpmsg.KindContentLength && (r.Chunked || r.UntilClose || r.Status == 204):
			continue
		}
		want = append(want, f)
	}
	wantLines := fieldLines(want)
	if chunkOut {
		wantLines = append(wantLines, "Transfer-Encoding: chunked")
	}
	if got := fieldLines(r2.Header.Fields); !slices.Equal(got, wantLines) {
		t.Fatalf("relayed head %q: got fields %q, want %q", out, got, wantLines)
	}
	// What was relayed, relayed again, is the same bytes.
	bodyOut2, chunkOut2, _ := Framing(req.Method, req.Minor, &r2.Response)
	if bodyOut2 != bodyOut || chunkOut2 != chunkOut {
		t.Fatalf("relayed head %q: framing changed from body %v, chunked %v to %v, %v", out, bodyOut, chunkOut, bodyOut2, chunkOut2)
	}
	if again := render(&r2, chunkOut2); !bytes.Equal(again, out) {
		t.Fatalf("relayed twice: got %q, want %q", again, out)
	}
}

// compareResponseWithNetHTTP reads head with net/http's ReadResponse and,
// when both accept it, checks that they agree on the framing, and that
// Helios does not reuse a connection that net/http would close. Helios is
// deliberately more lenient than net/http with what it accepts from
// backends (several Transfer-Encoding fields, codings before chunked, any
// HTTP/1.x version), because it only ever reuses a connection whose
// framing is unambiguous; those differences are not checked.
func compareResponseWithNetHTTP(t *testing.T, head []byte, r *Response, forHEAD bool) {
	t.Helper()
	method := http.MethodGet
	if forHEAD {
		method = http.MethodHead
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(head)), &http.Request{Method: method})
	if err != nil {
		return
	}
	resp.Body.Close()
	if resp.StatusCode != r.Status {
		t.Fatalf("%q: net/http got status %d, Helios %d", head, resp.StatusCode, r.Status)
	}
	if resp.Close && r.KeepAlive {
		t.Fatalf("%q: net/http closes the connection, Helios keeps it", head)
	}
	if noResponseBody(r.Status, forHEAD) {
		return
	}
	if r.Minor == 0 && countKinds(r.Header.Fields)[httpmsg.KindTransferEncoding] > 0 {
		// net/http ignores Transfer-Encoding in HTTP/1.0 messages (its
		// issue 12785); Helios applies RFC 9112 §6.3 and then closes.
		return
	}
	goChunked := len(resp.TransferEncoding) > 0
	goUntilClose := !goChunked && resp.ContentLength < 0
	if goChunked != r.Chunked || goUntilClose != r.UntilClose || !goChunked && !goUntilClose && resp.ContentLength != r.ContentLength {
		t.Fatalf("%q: net/http got chunked %v, length %d; Helios chunked %v, until close %v, length %d",
			head, goChunked, resp.ContentLength, r.Chunked, r.UntilClose, r.ContentLength)
	}
}
