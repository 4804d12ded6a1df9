package engine

import (
	"strings"
	"testing"

	"golang.org/x/net/http2"
)

// The HTTP/2 machine hands a stream's head over as slices of the bytes it
// was fed and of its HPACK decoder's buffers, valid only during its call;
// what an exchange keeps past it is copied into the stream's memory
// (streamRequest). These tests keep a head past the call while the
// connection's read buffer and its decoder are used again.

// pingSync sends a PING and reads until its acknowledgement: the server has
// read everything sent before it (SETTINGS are acknowledged on the way,
// and the server's PINGs too when autoPing is on; sync uses it after the
// server's SETTINGS).
func (c *h2Raw) pingSync() {
	c.t.Helper()
	data := [8]byte{'h', 'e', 'a', 'd', 's', 'y', 'n', 'c'}
	if err := c.fr.WritePing(false, data); err != nil {
		c.t.Fatal(err)
	}
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			c.t.Fatalf("waiting for the PING's acknowledgement: %v", err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				c.fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if f.IsAck() && f.Data == data {
				return
			}
			if !f.IsAck() && c.autoPing {
				c.fr.WritePing(true, f.Data)
			}
		case *http2.WindowUpdateFrame:
		default:
			c.t.Fatalf("got a %v frame while waiting for the PING's acknowledgement", f.Header().Type)
		}
	}
}

// TestLoopH2HeadOutlivesItsFrames sends a request whose small body comes
// later, so that its exchange holds the head until the body has come (it
// reads a small body whole before forwarding); meanwhile another stream's
// head is decoded and other frames are read into the connection's
// buffers. The backend must get the first request as it was sent: its
// pseudo-header fields, fields (Huffman-coded, from the dynamic table and
// literal) and cookies.
func TestLoopH2HeadOutlivesItsFrames(t *testing.T) {
	got := make(chan h1Request, 4)
	be := recordingBackend(t, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", got)
	modes(t, func(t *testing.T, m mode, _ matrixOpts) {
		p, tp := startFrontTLS(t, m, loopTo(be.addr))
		c := dialH2Raw(t, p.addr, tp, 0)
		// Indexed in the client's table by a first request, so that
		// the second sends it as an index into the server's.
		c.request(1, "GET", "/warm", true, "x-indexed", "from-the-dynamic-table")
		if r := c.response(1); r.status != "200" {
			t.Fatalf("warm-up: got status %q, want 200", r.status)
		}
		nextRequest(t, got)
		c.request(3, "POST", "/first?q=1", false, "content-length", "5",
			"x-huffman", "lowercase words code shorter", "x-literal", "~|~|~|~|~|~|~|~|",
			"x-indexed", "from-the-dynamic-table", "cookie", "a=1", "cookie", "b=2")
		c.pingSync()
		// Longer than the first's HEADERS frame, and read into the
		// same buffer: the first's literal bytes are overwritten.
		c.request(5, "GET", "/second", true,
			"x-huffman", "other words entirely here", "x-literal", "^^^^^^^^^^^^^^^^", "cookie", "c=3",
			"x-filler", strings.Repeat("^~", 100))
		// Answered while the first waits for its body.
		if r := c.response(5); r.status != "200" || string(r.body) != "ok" {
			t.Errorf("stream 5: got (%q, %q), want (200, ok)", r.status, r.body)
		}
		if err := c.fr.WriteData(3, true, []byte("hello")); err != nil {
			t.Fatal(err)
		}
		reqs := map[string]h1Request{}
		for range 2 {
			r := nextRequest(t, got)
			req, _ := r.parsed(t)
			reqs[req.URL.Path] = r
		}
		first, ok := reqs["/first"]
		if !ok {
			t.Fatalf("got requests %v, want /first and /second", reqs)
		}
		req, body := first.parsed(t)
		want := map[string]string{
			"X-Huffman": "lowercase words code shorter", "X-Literal": "~|~|~|~|~|~|~|~|",
			"X-Indexed": "from-the-dynamic-table", "Cookie": "a=1; b=2",
		}
		for name, v := range want {
			if got := req.Header.Values(name); len(got) != 1 || got[0] != v {
				t.Errorf("/first: got %s %q, want %q", name, got, v)
			}
		}
		if req.Method != "POST" || req.URL.RawQuery != "q=1" || body != "hello" {
			t.Errorf("/first: got %s ?%s with body %q, want POST ?q=1 with hello", req.Method, req.URL.RawQuery, body)
		}
		second, _ := reqs["/second"].parsed(t)
		if got := second.Header.Get("X-Huffman"); got != "other words entirely here" {
			t.Errorf("/second: got X-Huffman %q, want %q", got, "other words entirely here")
		}
		if r := c.response(3); r.status != "200" || string(r.body) != "ok" {
			t.Errorf("stream 3: got (%q, %q), want (200, ok)", r.status, r.body)
		}
	}, onlyClients(clientH2, clientH2C), onlyBackends(backendH1))
}
