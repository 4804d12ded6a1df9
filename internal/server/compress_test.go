package server

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/helios-lb/helios/internal/backend"
)

// The compression tests put Helios (a TLS listener "web" with HTTP/2,
// and a cleartext listener "plain" with h2c) in front of an origin that
// answers in every way the compression rules tell apart, and ask it over
// HTTP/1.1, TLS, h2 and h2c, on every engine.

const compressYAML = h2Listeners + `routes:
  - name: files
    match: {path_prefix: /files/}
    static: {root: "{{ROOT}}", strip_prefix: /files, precompressed: [br, gzip]}
    compress: {encodings: [zstd, br, gzip], types: [text/*, application/json, application/javascript], min_bytes: 1000}
  - name: raw
    match: {path_prefix: /raw/}
    upstream: origin
  - name: unbuffered
    match: {path_prefix: /off/}
    upstream: origin
    response_buffering: "off"
    compress: {encodings: [gzip], types: [text/*], level: 1}
  - name: app
    match: {path_prefix: /}
    upstream: origin
    compress: {encodings: [zstd, br, gzip], types: [text/*, application/json], min_bytes: 1000, level: 1}
upstreams: [{name: origin, backends: [{address: "{{ORIGIN}}"}], retries: {attempts: 0}}]
admin: {address: "off"}
`

// bigBlocks is how many times /big sends its block (64 MiB in all).
const bigBlocks = 64

// compressOrigin is the backend of the compression tests.
type compressOrigin struct {
	addr string
	doc  []byte // the JSON document most answers carry
	// encoded is doc gzipped, as /encoded sends it.
	encoded []byte
	// block is 1 MiB of text that compresses poorly (six bits a byte),
	// which /big sends bigBlocks times, counting what it wrote.
	block      []byte
	bigWritten atomic.Int64
	// gates hold /events answers between their two events.
	mu    sync.Mutex
	gates map[string]chan struct{}
}

// startCompressOrigin starts the origin on loopback until the test ends.
func startCompressOrigin(t *testing.T) *compressOrigin {
	o := &compressOrigin{doc: backend.JSON(64 << 10), gates: map[string]chan struct{}{}}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(o.doc)
	zw.Close()
	o.encoded = gz.Bytes()
	rng := rand.New(rand.NewPCG(7, 8))
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/"
	o.block = make([]byte, 1<<20)
	for i := range o.block {
		o.block[i] = alphabet[rng.IntN(len(alphabet))]
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(o.serve))
	srv.Start()
	t.Cleanup(srv.Close)
	o.addr = srv.Listener.Addr().String()
	return o
}

// gate returns the gate of the /events answer id.
func (o *compressOrigin) gate(id string) chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	g := o.gates[id]
	if g == nil {
		g = make(chan struct{})
		o.gates[id] = g
	}
	return g
}

func (o *compressOrigin) serve(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	path := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, "/raw"), "/off")
	switch path {
	case "/json", "/notransform", "/png":
		h.Set("ETag", `"v1"`)
		h.Set("Content-Length", strconv.Itoa(len(o.doc)))
		if path == "/notransform" {
			h.Set("Cache-Control", "public, no-transform")
		}
		if path == "/png" {
			h.Set("Content-Type", "image/png")
		}
		w.Write(o.doc)
	case "/stream":
		// No length: pieces flushed as they are written (chunked).
		for rest := o.doc; len(rest) > 0; {
			n := min(len(rest), 4096)
			w.Write(rest[:n])
			w.(http.Flusher).Flush()
			rest = rest[n:]
		}
	case "/encoded":
		h.Set("Content-Encoding", "gzip")
		h.Set("Content-Length", strconv.Itoa(len(o.encoded)))
		w.Write(o.encoded)
	case "/range":
		h.Set("Content-Range", fmt.Sprintf("bytes 0-99/%d", len(o.doc)))
		h.Set("Content-Length", "100")
		w.WriteHeader(206)
		w.Write(o.doc[:100])
	case "/nocontent":
		w.WriteHeader(204)
	case "/notmodified":
		h.Set("ETag", `"v1"`)
		w.WriteHeader(304)
	case "/small":
		w.Write(o.doc[:100])
	case "/events":
		h.Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-o.gate(r.URL.Query().Get("id")):
		case <-r.Context().Done():
			return
		case <-time.After(10 * time.Second):
		}
		io.WriteString(w, "data: two\n\n")
	case "/big":
		h.Set("Content-Type", "text/plain")
		h.Set("Content-Length", strconv.Itoa(bigBlocks*len(o.block)))
		for range bigBlocks {
			for rest := o.block; len(rest) > 0; rest = rest[64<<10:] {
				if _, err := w.Write(rest[:64<<10]); err != nil {
					return
				}
				o.bigWritten.Add(64 << 10)
			}
		}
	case "/broken":
		// A backend that dies in the middle of its answer.
		h.Set("Content-Type", "text/plain")
		h.Set("Content-Length", strconv.Itoa(4*len(o.block)))
		w.Write(o.block)
		w.(http.Flusher).Flush()
		time.Sleep(50 * time.Millisecond)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	default:
		w.WriteHeader(404)
	}
}

// compressEnv is a running Helios in front of an origin, with the
// files of the static route.
type compressEnv struct {
	s       *Server
	o       *compressOrigin
	certs   *testCerts
	js      []byte // files/app.js
	jsBr    []byte // its brotli sibling
	clients []compressClient
}

// startCompressEnv starts the origin and Helios on engine.
func startCompressEnv(t *testing.T, engine string) *compressEnv {
	t.Helper()
	e := &compressEnv{o: startCompressOrigin(t), certs: newTestCerts(t)}
	e.certs.write(t, "site", "site.example", "127.0.0.1")
	root := t.TempDir()
	e.js = bytes.Repeat([]byte("function hello(name) { return 'hello ' + name; }\n"), 200)
	var br bytes.Buffer
	bw := brotli.NewWriterLevel(&br, 11)
	bw.Write(e.js)
	bw.Close()
	e.jsBr = br.Bytes()
	for name, b := range map[string][]byte{"doc.json": e.o.doc, "app.js": e.js, "app.js.br": e.jsBr} {
		if err := os.WriteFile(filepath.Join(root, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	yaml := strings.NewReplacer("{{ORIGIN}}", e.o.addr, "{{ROOT}}", root).Replace(compressYAML)
	cfg := h2ServerConfig(t, yaml, e.certs, nil, engine)
	e.s, _ = startServer(t, cfg, Options{})
	e.clients = compressClients(t, e.s, e.certs)
	return e
}

// compressClient is one way of asking Helios: a protocol and a listener.
type compressClient struct {
	name string
	rt   http.RoundTripper
	base string
	// http11 says the answers come over HTTP/1.1 (chunked when their
	// length is unknown).
	http11 bool
}

// compressClients are HTTP/1.1 in the clear, HTTP/1.1 over TLS, h2 and
// h2c, none of which asks for or decodes a coding by itself.
func compressClients(t *testing.T, s *Server, certs *testCerts) []compressClient {
	tlsConf := &tls.Config{RootCAs: certs.pool, ServerName: "site.example"}
	h1 := &http.Transport{DisableCompression: true}
	h1tls := &http.Transport{DisableCompression: true, TLSClientConfig: tlsConf,
		TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}
	t.Cleanup(h1.CloseIdleConnections)
	t.Cleanup(h1tls.CloseIdleConnections)
	plain, web := "http://"+s.Addr("plain").String(), "https://"+s.Addr("web").String()
	return []compressClient{
		{name: "http1", rt: h1, base: plain, http11: true},
		{name: "tls", rt: h1tls, base: web, http11: true},
		{name: "h2", rt: newH2ServerClient(t, certs), base: web},
		{name: "h2c", rt: newH2ServerClient(t, nil), base: plain},
	}
}

// start sends a request with Accept-Encoding ae ("" for none) and
// returns the answer, its body still to read.
func (c compressClient) start(t *testing.T, method, path, ae string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, c.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ae != "" {
		req.Header.Set("Accept-Encoding", ae)
	}
	res, err := c.rt.RoundTrip(req)
	if err != nil {
		t.Fatalf("%s %s over %s: %v", method, path, c.name, err)
	}
	return res
}

// do is start, and the body read as it came (coded).
func (c compressClient) do(t *testing.T, method, path, ae string) (*http.Response, []byte) {
	t.Helper()
	res := c.start(t, method, path, ae)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, path, err)
	}
	return res, body
}

// decoder returns a reader that decodes r from coding ce ("" for none).
func decoder(t *testing.T, ce string, r io.Reader) io.Reader {
	t.Helper()
	switch ce {
	case "":
		return r
	case "gzip":
		zr, err := gzip.NewReader(r)
		if err != nil {
			t.Fatalf("gzip: %v", err)
		}
		return zr
	case "zstd":
		zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
		if err != nil {
			t.Fatalf("zstd: %v", err)
		}
		t.Cleanup(zr.Close)
		return zr
	case "br":
		return brotli.NewReader(r)
	}
	t.Fatalf("unknown coding %q", ce)
	return nil
}

// decode decodes a whole body from coding ce.
func decode(t *testing.T, ce string, body []byte) []byte {
	t.Helper()
	out, err := io.ReadAll(decoder(t, ce, bytes.NewReader(body)))
	if err != nil {
		t.Fatalf("decoding %s: %v", ce, err)
	}
	return out
}

// varies reports whether the answer says Vary: Accept-Encoding.
func varies(res *http.Response) bool {
	for _, v := range res.Header.Values("Vary") {
		for _, tok := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "accept-encoding") {
				return true
			}
		}
	}
	return false
}

// TestCompressedAnswers: for every client and engine, every coding, and
// an answer of known length, a streamed one and a static file, the body
// decodes to the original; the head says Content-Encoding and Vary, has
// no Content-Length (chunked over HTTP/1.1), and a weak ETag.
func TestCompressedAnswers(t *testing.T) {
	eachEngine(t, func(t *testing.T, engine string) {
		e := startCompressEnv(t, engine)
		for _, c := range e.clients {
			t.Run(c.name, func(t *testing.T) {
				for _, coding := range []string{"gzip", "zstd", "br"} {
					for _, path := range []string{"/json", "/stream", "/files/doc.json"} {
						res, body := c.do(t, "GET", path, coding)
						what := coding + " " + path
						if res.StatusCode != 200 || res.Header.Get("Content-Encoding") != coding {
							t.Fatalf("%s: got %d with Content-Encoding %q, want 200 with %s", what, res.StatusCode, res.Header.Get("Content-Encoding"), coding)
						}
						if got := decode(t, coding, body); !bytes.Equal(got, e.o.doc) {
							t.Errorf("%s: decoded %d bytes, want the %d of the original", what, len(got), len(e.o.doc))
						}
						if len(body) >= len(e.o.doc)/2 {
							t.Errorf("%s: got %d bytes for %d, want them compressed", what, len(body), len(e.o.doc))
						}
						if !varies(res) || res.Header.Get("Content-Length") != "" || res.ContentLength != -1 {
							t.Errorf("%s: got Vary %q, Content-Length %q; want Accept-Encoding and none", what, res.Header.Values("Vary"), res.Header.Get("Content-Length"))
						}
						if c.http11 && !slices.Equal(res.TransferEncoding, []string{"chunked"}) {
							t.Errorf("%s: got Transfer-Encoding %v, want chunked", what, res.TransferEncoding)
						}
						if etag := res.Header.Get("ETag"); path != "/stream" && !strings.HasPrefix(etag, `W/"`) {
							t.Errorf("%s: got ETag %q, want a weak one", what, etag)
						}
					}
				}
			})
		}
		e.checkEncodersBack(t)
	})
}

// checkEncodersBack checks every encoder of every route went back to its
// pool.
func (e *compressEnv) checkEncodersBack(t *testing.T) {
	t.Helper()
	waitFor(t, 5*time.Second, "encoders to go back to their pools", func() bool {
		for _, rt := range e.s.Pipeline().Graph().RouteList {
			if rt.Compress != nil && rt.Compress.Pool().InUse() != 0 {
				return false
			}
		}
		return true
	})
}

// TestCompressionNegotiation: the coding is the one the client's
// Accept-Encoding gives the highest q-value among the route's, ties
// going to the route's order; none acceptable sends the answer as it is,
// with Vary.
func TestCompressionNegotiation(t *testing.T) {
	eachEngine(t, func(t *testing.T, engine string) {
		e := startCompressEnv(t, engine)
		tests := []struct{ ae, want string }{
			{"gzip, deflate, br, zstd", "zstd"},
			{"gzip;q=0.5, br", "br"},
			{"br;q=0.2, gzip;q=0.9, zstd;q=0.8", "gzip"},
			{"*", "zstd"},
			{"zstd;q=0, *;q=0.1", "br"},
			{"GZIP", "gzip"},
			{"deflate, identity", ""},
			{"gzip;q=0, br;q=0, zstd;q=0", ""},
			{"", ""},
		}
		for _, c := range e.clients {
			for _, tt := range tests {
				res, body := c.do(t, "GET", "/json", tt.ae)
				if got := res.Header.Get("Content-Encoding"); got != tt.want {
					t.Errorf("%s: Accept-Encoding %q: got %q, want %q", c.name, tt.ae, got, tt.want)
					continue
				}
				if !varies(res) || !bytes.Equal(decode(t, tt.want, body), e.o.doc) {
					t.Errorf("%s: Accept-Encoding %q: got Vary %q and a body that does not decode to the original", c.name, tt.ae, res.Header.Values("Vary"))
				}
			}
		}
	})
}

// TestCompressionExclusions: answers already encoded, partial, marked
// no-transform, without a body, to HEAD, small, of another type, or on
// a route without compress go as they are; those that vary only with
// the request (HEAD) say so.
func TestCompressionExclusions(t *testing.T) {
	eachEngine(t, func(t *testing.T, engine string) {
		e := startCompressEnv(t, engine)
		doc := string(e.o.doc)
		tests := []struct {
			name, method, path string
			status             int
			body               string
			vary               bool
			length             int // Content-Length; -1: not checked
		}{
			{name: "encoded", method: "GET", path: "/encoded", status: 200, body: string(e.o.encoded), length: len(e.o.encoded)},
			{name: "partial", method: "GET", path: "/range", status: 206, body: doc[:100], length: 100},
			{name: "no-transform", method: "GET", path: "/notransform", status: 200, body: doc, length: len(doc)},
			{name: "204", method: "GET", path: "/nocontent", status: 204, length: -1},
			{name: "304", method: "GET", path: "/notmodified", status: 304, length: -1},
			{name: "HEAD", method: "HEAD", path: "/json", status: 200, vary: true, length: len(doc)},
			{name: "small", method: "GET", path: "/small", status: 200, body: doc[:100], length: 100},
			{name: "other type", method: "GET", path: "/png", status: 200, body: doc, length: len(doc)},
			{name: "route without compress", method: "GET", path: "/raw/json", status: 200, body: doc, length: len(doc)},
		}
		for _, c := range e.clients {
			for _, tt := range tests {
				res, body := c.do(t, tt.method, tt.path, "gzip, br, zstd")
				what := c.name + " " + tt.name
				if ce := res.Header.Get("Content-Encoding"); res.StatusCode != tt.status || string(body) != tt.body ||
					ce != "" && tt.name != "encoded" || tt.name == "encoded" && ce != "gzip" {
					t.Errorf("%s: got %d with Content-Encoding %q and %d bytes, want %d as it was (%d bytes)",
						what, res.StatusCode, ce, len(body), tt.status, len(tt.body))
				}
				if varies(res) != tt.vary {
					t.Errorf("%s: got Vary %q, want Accept-Encoding %v", what, res.Header.Values("Vary"), tt.vary)
				}
				if cl := res.Header.Get("Content-Length"); tt.length >= 0 && cl != strconv.Itoa(tt.length) {
					t.Errorf("%s: got Content-Length %q, want %d", what, cl, tt.length)
				}
				if etag := res.Header.Get("ETag"); strings.HasPrefix(etag, "W/") {
					t.Errorf("%s: got ETag %q, want the backend's", what, etag)
				}
			}
		}
		// HTTP/1.0: no chunked framing to carry a body of unknown length.
		out := rawExchange(t, e.s.Addr("plain").String(), "GET /json HTTP/1.0\r\nAccept-Encoding: gzip\r\n\r\n")
		head, body, _ := strings.Cut(out, "\r\n\r\n")
		if low := strings.ToLower(head); strings.Contains(low, "content-encoding") || !strings.Contains(low, "vary: accept-encoding") || body != doc {
			t.Errorf("HTTP/1.0: got head\n%s\nand %d bytes, want no coding, Vary, and the original", head, len(body))
		}
	})
}

// TestCompressedAnswerTrickles: an answer that comes in pieces (server-
// sent events) reaches the client, decodable, as each piece comes: the
// first event is read while the backend holds the second back.
func TestCompressedAnswerTrickles(t *testing.T) {
	eachEngine(t, func(t *testing.T, engine string) {
		e := startCompressEnv(t, engine)
		n := 0
		for _, c := range e.clients {
			for _, coding := range []string{"gzip", "zstd", "br"} {
				n++
				id := strconv.Itoa(n)
				what := c.name + " " + coding
				res := c.start(t, "GET", "/events?id="+id, coding)
				if got := res.Header.Get("Content-Encoding"); got != coding {
					t.Fatalf("%s: got Content-Encoding %q, want %s", what, got, coding)
				}
				first := make(chan string, 1)
				dec := make(chan io.Reader, 1)
				go func() {
					d := decoder(t, coding, res.Body)
					dec <- d
					buf := make([]byte, len("data: one\n\n"))
					io.ReadFull(d, buf)
					first <- string(buf)
				}()
				select {
				case got := <-first:
					if got != "data: one\n\n" {
						t.Errorf("%s: got %q first, want the first event", what, got)
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("%s: the first event did not arrive while the backend held the second back", what)
				}
				close(e.o.gate(id))
				rest, err := io.ReadAll(<-dec)
				if err != nil || string(rest) != "data: two\n\n" {
					t.Errorf("%s: then got %q, %v; want the second event and the end", what, rest, err)
				}
				res.Body.Close()
			}
		}
		e.checkEncodersBack(t)
	})
}

// settled waits until the origin has written nothing more for a while
// and returns what it wrote.
func (o *compressOrigin) settled(t *testing.T) int64 {
	t.Helper()
	last, since := o.bigWritten.Load(), time.Now()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if n := o.bigWritten.Load(); n != last {
			last, since = n, time.Now()
		} else if time.Since(since) > 500*time.Millisecond {
			return last
		}
	}
	t.Fatalf("the origin kept writing (%d bytes) to a client that reads nothing", last)
	return 0
}

// liveHeap returns the bytes of live heap after a collection.
func liveHeap() int64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// TestCompressionBackpressure: a client that does not read a 64 MiB
// compressed answer, over HTTP/1.1 and HTTP/2, gets it whole when it
// reads at last, and the answer is never held whole in memory: on a route
// without response buffering, the backend is stopped (the answer is not
// compressed ahead); with it (the default), the backend is let go and
// the answer waits in the spool's file, compressed on its way out.
func TestCompressionBackpressure(t *testing.T) {
	if raceEnabled {
		t.Skip("64 MiB through gzip is slow under the race detector")
	}
	eachEngine(t, func(t *testing.T, engine string) {
		e := startCompressEnv(t, engine)
		total := int64(bigBlocks * len(e.o.block))
		// read reads a 64 MiB answer whose client did not read until
		// the origin stopped writing; before is the live heap when it
		// was asked for.
		read := func(t *testing.T, body io.Reader, before int64, buffered bool) {
			t.Helper()
			o := e.o
			stalled := o.settled(t)
			if grown := liveHeap() - before; grown > 16<<20 {
				t.Errorf("the heap grew by %d bytes while the client did not read, want it flat", grown)
			}
			switch {
			case buffered && stalled != total:
				t.Errorf("the origin wrote %d of %d bytes, want all: the answer buffered, the backend let go", stalled, total)
			case !buffered && stalled > total/4:
				t.Errorf("the origin wrote %d of %d bytes to a client that reads nothing, want it stopped far before", stalled, total)
			}
			d := decoder(t, "gzip", body)
			buf := make([]byte, len(o.block))
			for i := range bigBlocks {
				if _, err := io.ReadFull(d, buf); err != nil || !bytes.Equal(buf, o.block) {
					t.Fatalf("block %d of the answer: %v, or not what was sent", i, err)
				}
			}
			if n, _ := io.Copy(io.Discard, d); n != 0 {
				t.Errorf("got %d bytes past the answer's end", n)
			}
		}
		for _, route := range []struct {
			prefix   string
			buffered bool
		}{{"/off", false}, {"", true}} {
			name := map[bool]string{false: "unbuffered", true: "buffered"}[route.buffered]
			t.Run(name+"/http1", func(t *testing.T) {
				e.o.bigWritten.Store(0)
				before := liveHeap()
				// A small receive buffer, so that the client's socket
				// holds little of what it does not read.
				d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
					return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 16<<10) })
				}}
				conn, err := d.Dial("tcp", e.s.Addr("plain").String())
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				io.WriteString(conn, "GET "+route.prefix+"/big HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n")
				conn.SetDeadline(time.Now().Add(60 * time.Second))
				res, err := http.ReadResponse(bufio.NewReader(conn), nil)
				if err != nil || res.Header.Get("Content-Encoding") != "gzip" {
					t.Fatalf("got %v, %v; want a gzip answer", res, err)
				}
				read(t, res.Body, before, route.buffered)
			})
			t.Run(name+"/h2c", func(t *testing.T) {
				e.o.bigWritten.Store(0)
				before := liveHeap()
				res := compressClient{name: "h2c", rt: newH2ServerClient(t, nil), base: "http://" + e.s.Addr("plain").String()}.
					start(t, "GET", route.prefix+"/big", "gzip")
				defer res.Body.Close()
				if res.Header.Get("Content-Encoding") != "gzip" {
					t.Fatalf("got Content-Encoding %q, want gzip", res.Header.Get("Content-Encoding"))
				}
				read(t, res.Body, before, route.buffered)
			})
		}
		e.checkEncodersBack(t)
	})
}

// TestCompressionEncodersGoBack: an answer's encoder goes back to its
// pool when the client goes away in the middle of it, and when the
// backend fails in the middle of it, for every client.
func TestCompressionEncodersGoBack(t *testing.T) {
	eachEngine(t, func(t *testing.T, engine string) {
		e := startCompressEnv(t, engine)
		pool := e.s.Pipeline().Graph().RouteList[3].Compress.Pool()
		for _, c := range e.clients {
			t.Run(c.name+" client gone", func(t *testing.T) {
				res := c.start(t, "GET", "/big", "gzip")
				if _, err := io.ReadFull(res.Body, make([]byte, 32<<10)); err != nil {
					t.Fatal(err)
				}
				if n := pool.InUse(); n != 1 {
					t.Errorf("got %d encoders in use while the answer streams, want 1", n)
				}
				res.Body.Close() // mid-answer: the connection (or stream) goes
				e.checkEncodersBack(t)
			})
			t.Run(c.name+" backend failed", func(t *testing.T) {
				res := c.start(t, "GET", "/broken", "gzip")
				if _, err := io.ReadAll(res.Body); err == nil {
					t.Errorf("got the whole answer, want it cut short")
				}
				res.Body.Close()
				e.checkEncodersBack(t)
			})
		}
	})
}

// TestPrecompressedThroughTheProxy: a static route's precompressed
// sibling goes to the clients that accept its coding as it is on disk;
// others get the route's own compression, or the original.
func TestPrecompressedThroughTheProxy(t *testing.T) {
	eachEngine(t, func(t *testing.T, engine string) {
		e := startCompressEnv(t, engine)
		for _, c := range e.clients {
			res, body := c.do(t, "GET", "/files/app.js", "gzip, br")
			if res.Header.Get("Content-Encoding") != "br" || !bytes.Equal(body, e.jsBr) ||
				res.Header.Get("Content-Length") != strconv.Itoa(len(e.jsBr)) || !varies(res) ||
				!strings.HasPrefix(res.Header.Get("Content-Type"), "text/javascript") {
				t.Errorf("%s: got %q, %q, %d bytes, head %v; want the brotli sibling as it is", c.name,
					res.Header.Get("Content-Encoding"), res.Header.Get("Content-Type"), len(body), res.Header)
			}
			if !bytes.Equal(decode(t, "br", body), e.js) {
				t.Errorf("%s: the sibling does not decode to the original", c.name)
			}
			res, body = c.do(t, "HEAD", "/files/app.js", "br")
			if res.Header.Get("Content-Encoding") != "br" || res.Header.Get("Content-Length") != strconv.Itoa(len(e.jsBr)) || len(body) != 0 {
				t.Errorf("%s: HEAD: got %q with Content-Length %q; want br with the sibling's length", c.name, res.Header.Get("Content-Encoding"), res.Header.Get("Content-Length"))
			}
			res, body = c.do(t, "GET", "/files/app.js", "zstd")
			if res.Header.Get("Content-Encoding") != "zstd" || !bytes.Equal(decode(t, "zstd", body), e.js) || len(res.Header.Values("Vary")) != 1 {
				t.Errorf("%s: without a zstd sibling: got %q, Vary %q; want the route's own zstd, one Vary", c.name, res.Header.Get("Content-Encoding"), res.Header.Values("Vary"))
			}
			res, body = c.do(t, "GET", "/files/app.js", "")
			if res.Header.Get("Content-Encoding") != "" || !bytes.Equal(body, e.js) || !varies(res) {
				t.Errorf("%s: no coding accepted: got %q and %d bytes; want the original with Vary", c.name, res.Header.Get("Content-Encoding"), len(body))
			}
		}
		e.checkEncodersBack(t)
	})
}
