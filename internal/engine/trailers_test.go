package engine

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Trailers carry only what a trailer may (RFC 9110 §6.5.1): fields such
// as Set-Cookie, Authorization or Content-Type are dropped from every
// trailer relayed, from backends to clients and from clients to
// backends, over HTTP/1.1 (chunked) and HTTP/2 on either side; fields
// meant for trailers pass.

// trailerSent is the trailer every sender here writes: the fields kept
// and, mixed in, fields a trailer may not carry.
var trailerSent = [][2]string{
	{"X-Sum", "42"},
	{"Set-Cookie", "session=forged"},
	{"Content-Digest", "sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:"},
	{"Authorization", "Bearer forged"},
	{"Cookie", "a=b"},
	{"Content-Type", "text/html"},
	{"Location", "/elsewhere"},
	{"Proxy-Authenticate", "Basic"},
	{"Grpc-Status", "0"},
}

// trailerKept is what a recipient may see of trailerSent.
var trailerKept = map[string]string{"X-Sum": "42", "Content-Digest": trailerSent[2][1], "Grpc-Status": "0"}

// checkTrailer checks that a recipient got the fields of trailerSent a
// trailer may carry, and none of the others.
func checkTrailer(t *testing.T, got http.Header) {
	t.Helper()
	for name, v := range trailerKept {
		if g := got.Get(name); g != v {
			t.Errorf("trailer %s: got %q, want %q", name, g, v)
		}
	}
	for name, vs := range got {
		// A name without values is only declared (the Trailer field).
		if _, ok := trailerKept[name]; !ok && len(vs) > 0 {
			t.Errorf("trailer %s: got %q, want it dropped", name, vs)
		}
	}
}

// chunkedTrailerLines renders trailerSent as HTTP/1.1 trailer lines.
func chunkedTrailerLines() string {
	var sb strings.Builder
	for _, f := range trailerSent {
		sb.WriteString(f[0] + ": " + f[1] + "\r\n")
	}
	return sb.String()
}

// h2TrailerFields renders trailerSent as h2Peer field pairs.
func h2TrailerFields() []string {
	var fs []string
	for _, f := range trailerSent {
		fs = append(fs, strings.ToLower(f[0]), f[1])
	}
	return fs
}

// TestLoopResponseTrailerFieldsDropped relays a backend's trailer, of
// HTTP/1.1 (chunked) or h2c backends, to every client protocol.
func TestLoopResponseTrailerFieldsDropped(t *testing.T) {
	h1be := startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
		for readReqHead(br) != "" {
			io.WriteString(nc, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n"+chunkedTrailerLines()+"\r\n")
		}
	})
	// An HTTP/2 backend: /length declares the body's length (its
	// trailers travel beside the rendered answer), /chunked does not.
	h2be := startH2Peer(t, nil, func(pc *h2Peer) {
		eachPeerRequest(pc, func(req *h2PeerReq) {
			head := []string{":status", "200"}
			if req.field(":path")[0] == "/length" {
				head = append(head, "content-length", "5")
			}
			pc.headers(req.id, false, head...)
			pc.data(req.id, false, []byte("hello"))
			pc.headers(req.id, true, h2TrailerFields()...)
		})
	})
	modes(t, func(t *testing.T, m mode, _ matrixOpts) {
		cfg, paths := loopTo(h1be.addr), []string{"/chunked"}
		if m.backend == backendH2C {
			cfg, paths = h2upTo(h2be.addr), []string{"/length", "/chunked"}
		}
		c := startFront(t, m, cfg)
		for _, path := range paths {
			if path == "/length" && !m.client.http2() {
				continue // an HTTP/1.1 answer of declared length has no trailer
			}
			t.Run(path[1:], func(t *testing.T) {
				if m.client.http2() {
					r := newH2Client(t, c.p.addr, c.front).get(path)
					if r.status != 200 || r.body != "hello" {
						t.Fatalf("got (%d, %q), want (200, hello)", r.status, r.body)
					}
					checkTrailer(t, r.trailer)
					return
				}
				rc := c.raw(t)
				rc.send("GET " + path + " HTTP/1.1\r\nHost: a\r\nTE: trailers\r\n\r\n")
				r := rc.read("GET")
				if r.status != 200 || r.body != "hello" {
					t.Fatalf("got (%d, %q), want (200, hello)", r.status, r.body)
				}
				checkTrailer(t, r.trailer)
			})
		}
	}, onlyBackends(backendH1, backendH2C))
}

// TestLoopRequestTrailerFieldsDropped relays a client's trailer, from
// every client protocol, to HTTP/1.1 (chunked) and h2c backends.
func TestLoopRequestTrailerFieldsDropped(t *testing.T) {
	got := make(chan h1Request, 1)
	h1be := recordingBackend(t, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", got)
	// The HTTP/2 backend hands on the trailers of each request.
	h2got := make(chan []string, 1)
	h2be := startH2Peer(t, nil, func(pc *h2Peer) {
		eachPeerRequest(pc, func(req *h2PeerReq) {
			// A request ended by its trailers comes as those (the head
			// and body before them are the peer's to forget).
			if len(req.field(":method")) > 0 {
				return
			}
			var fs []string
			for _, f := range req.fields {
				fs = append(fs, f.Name, f.Value)
			}
			h2got <- fs
			pc.answer(req.id, "ok")
		})
	})
	trailerOf := func(t *testing.T, h2 bool) http.Header {
		t.Helper()
		if !h2 {
			req, body := nextRequest(t, got).parsed(t)
			if body != "hello" {
				t.Errorf("backend's body: got %q, want hello", body)
			}
			return req.Trailer
		}
		h := http.Header{}
		select {
		case fs := <-h2got:
			for i := 0; i+1 < len(fs); i += 2 {
				h.Add(fs[i], fs[i+1])
			}
		case <-time.After(testTimeout):
			t.Fatal("no trailers reached the HTTP/2 backend")
		}
		return h
	}
	modes(t, func(t *testing.T, m mode, _ matrixOpts) {
		cfg := loopTo(h1be.addr)
		if m.backend == backendH2C {
			cfg = h2upTo(h2be.addr)
		}
		c := startFront(t, m, cfg)
		if !m.client.http2() {
			rc := c.raw(t)
			rc.send("POST /upload HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n" + chunkedTrailerLines() + "\r\n")
			if r := rc.read("POST"); r.status != 200 || r.body != "ok" {
				t.Fatalf("got (%d, %q), want (200, ok)", r.status, r.body)
			}
			checkTrailer(t, trailerOf(t, m.backend.http2()))
			return
		}
		trailer := http.Header{}
		src := http.Header{}
		for _, f := range trailerSent {
			trailer[f[0]] = nil
			src.Add(f[0], f[1])
		}
		body := &trailerBody{r: struct{ io.Reader }{bytes.NewReader([]byte("hello"))}, set: func() {
			for k, v := range src {
				trailer[k] = v
			}
		}}
		r, err := newH2Client(t, c.p.addr, c.front).do(context.Background(), "POST", "/upload", body, nil, trailer)
		if err != nil || r.status != 200 || r.body != "ok" {
			t.Fatalf("got (%v, %d, %q), want (nil, 200, ok)", err, r.status, r.body)
		}
		checkTrailer(t, trailerOf(t, m.backend.http2()))
	}, onlyBackends(backendH1, backendH2C))
}
