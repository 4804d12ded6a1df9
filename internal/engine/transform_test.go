package engine

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/helios-lb/helios/internal/compress"
	"github.com/helios-lb/helios/internal/netpoll"
	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/wire"
)

// lowerTransform is a body transform that lower-cases the body and marks
// its end, counting its calls and releases; it panics at call panicAt
// (0: never), as a buggy transform might.
type lowerTransform struct {
	calls, releases atomic.Int32
	panicAt         int32
	out             []byte
}

func (x *lowerTransform) Transform(p []byte, flush, end bool) ([]byte, error) {
	if n := x.calls.Add(1); n == x.panicAt {
		panic("transform bug")
	}
	x.out = append(x.out[:0], bytes.ToLower(p)...)
	if end {
		x.out = append(x.out, "<end>"...)
	}
	return x.out, nil
}

func (x *lowerTransform) Release() { x.releases.Add(1) }

// transformProxy is a proxy in front of a loopProxy backend (whose /big
// answers 1 MiB of "B") that runs every answer through a lowerTransform,
// handed out on xs.
func transformProxy(t *testing.T, k netpoll.Kind, h2 bool, panicAt int32) (*loopProxy, chan *lowerTransform) {
	backend := startLoopProxy(t, k, loopConfig{fixed: map[string]proxy.Fixed{"/big": bigFixed}})
	xs := make(chan *lowerTransform, 16)
	cfg := loopTo(backend.addr)
	cfg.transform = func(wire.Exchange) wire.BodyTransform {
		x := &lowerTransform{panicAt: panicAt}
		xs <- x
		return x
	}
	if h2 {
		p, _ := startH2Proxy(t, k, cfg, false)
		return p, xs
	}
	return startLoopProxy(t, k, cfg), xs
}

// released waits for the next transform to be released, and checks it
// was released once.
func released(t *testing.T, xs chan *lowerTransform) {
	t.Helper()
	var x *lowerTransform
	select {
	case x = <-xs:
	case <-time.After(testTimeout):
		t.Fatal("no answer went through a transform")
	}
	waitFor(t, "the transform to be released", func() bool { return x.releases.Load() > 0 })
	if n := x.releases.Load(); n != 1 {
		t.Errorf("got %d releases, want 1", n)
	}
}

// TestLoopTransform: an answer the pipeline hands a transform goes out
// through it, framed as one of unknown length (chunked over HTTP/1.1),
// and the transform is released once however the answer ends: sent
// whole, its client gone in the middle, the transform panicking (which
// costs its connection or stream, not the loop).
func TestLoopTransform(t *testing.T) { run(t, testLoopTransform) }

func testLoopTransform(t *testing.T, k netpoll.Kind) {
	want := strings.Repeat("b", len(bigFixed.Body)) + "<end>"
	t.Run("http1", func(t *testing.T) {
		p, xs := transformProxy(t, k, false, 0)
		c := dialRaw(t, p.addr)
		c.send("GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
		r := c.read("GET")
		if r.body != want || !r.chunked || r.header.Get("Content-Length") != "" {
			t.Errorf("got %d bytes (chunked %v, Content-Length %q), want the %d transformed, chunked", len(r.body), r.chunked, r.header.Get("Content-Length"), len(want))
		}
		released(t, xs)

		// Gone in the middle.
		c2 := dialRaw(t, p.addr)
		c2.send("GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
		c2.readHead()
		c2.nc.Close()
		released(t, xs)
	})
	t.Run("h2c", func(t *testing.T) {
		p, xs := transformProxy(t, k, true, 0)
		cl := newH2Client(t, p.addr, nil)
		r := cl.get("/big")
		if r.body != want || r.length != -1 {
			t.Errorf("got %d bytes (length %d), want the %d transformed, of unknown length", len(r.body), r.length, len(want))
		}
		released(t, xs)

		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "GET", cl.base+"/big", nil)
		res, err := cl.tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadFull(res.Body, make([]byte, 1000))
		cancel() // the stream is reset
		res.Body.Close()
		released(t, xs)
	})
}

// TestLoopTransformPanic: a transform that panics costs its connection
// (or its stream) alone, and is released all the same.
func TestLoopTransformPanic(t *testing.T) { run(t, testLoopTransformPanic) }

func testLoopTransformPanic(t *testing.T, k netpoll.Kind) {
	t.Run("http1", func(t *testing.T) {
		p, xs := transformProxy(t, k, false, 2)
		c := dialRaw(t, p.addr)
		c.send("GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
		io.Copy(io.Discard, c.br) // until the connection closes
		released(t, xs)
		if n := p.eng.Panics(); n != 1 {
			t.Errorf("got %d panics, want 1", n)
		}
		c2 := dialRaw(t, p.addr)
		c2.send("GET /fixed/a HTTP/1.1\r\nHost: x\r\n\r\n")
		if r := c2.read("GET"); r.status != 200 {
			t.Errorf("after the panic: got %d, want 200", r.status)
		}
	})
	t.Run("h2c", func(t *testing.T) {
		p, xs := transformProxy(t, k, true, 2)
		cl := newH2Client(t, p.addr, nil)
		if _, err := cl.do(context.Background(), "GET", "/big", nil, nil, nil); err == nil {
			t.Errorf("got the whole answer, want its stream reset")
		}
		released(t, xs)
		if r := cl.get("/fixed/a"); r.status != 200 {
			t.Errorf("after the panic: got %d, want 200 on the same connection", r.status)
		}
	})
}

// TestMatrixCompression: over every pairing of client and backend
// protocols, on every poller, a route's answers are compressed for a
// client that asks (of declared and undeclared length, in each coding),
// decode to what the backend sent, say so in their head, have no length
// (chunked over HTTP/1.1), and an answer that trickles reaches the
// client piece by piece; the route's encoders all go back to its pool.
func TestMatrixCompression(t *testing.T) {
	pol, err := compress.NewPolicy(compress.Options{Codings: []compress.Coding{compress.Zstd, compress.Brotli, compress.Gzip}})
	if err != nil {
		t.Fatal(err)
	}
	doc := bytes.Repeat([]byte(`{"id": 1, "name": "helios", "tags": ["a", "b", "c"]},`+"\n"), 1000)
	matrix(t, func(t *testing.T, c *cell) {
		next := make(chan struct{})
		c.be.handle(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			switch r.URL.Path {
			case "/fixed":
				w.Header().Set("Content-Length", strconv.Itoa(len(doc)))
				w.Write(doc)
			case "/stream":
				for rest := doc; len(rest) > 0; rest = rest[min(len(rest), 5000):] {
					w.Write(rest[:min(len(rest), 5000)])
					w.(http.Flusher).Flush()
				}
			case "/trickle":
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, "data: one\n\n")
				w.(http.Flusher).Flush()
				select {
				case <-next:
				case <-time.After(testTimeout):
				}
				io.WriteString(w, "data: two\n\n")
			}
		})
		for _, coding := range []compress.Coding{compress.Gzip, compress.Zstd, compress.Brotli} {
			for _, path := range []string{"/fixed", "/stream"} {
				resp, err := c.get(path, http.Header{"Accept-Encoding": {coding.String()}})
				if err != nil {
					t.Fatal(err)
				}
				what := coding.String() + " " + path
				if ce := resp.header.Get("Content-Encoding"); resp.status != 200 || ce != coding.String() || resp.header.Get("Vary") != "Accept-Encoding" {
					t.Fatalf("%s: got %d with Content-Encoding %q and Vary %q", what, resp.status, ce, resp.header.Get("Vary"))
				}
				if got := decodeAll(t, coding, strings.NewReader(resp.body)); !bytes.Equal(got, doc) {
					t.Errorf("%s: decoded %d bytes, want the %d sent", what, len(got), len(doc))
				}
				if resp.length != -1 || len(resp.body) > len(doc)/4 {
					t.Errorf("%s: got length %d and %d bytes, want none and compressed", what, resp.length, len(resp.body))
				}
			}
		}
		// Trickling: the first event comes while the backend holds the
		// second back.
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", c.base+"/trickle", nil)
		req.Header.Set("Accept-Encoding", "gzip")
		res, err := c.tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		zr, err := gzip.NewReader(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		first := make([]byte, len("data: one\n\n"))
		if _, err := io.ReadFull(zr, first); err != nil || string(first) != "data: one\n\n" {
			t.Fatalf("got %q, %v; want the first event before the second is sent", first, err)
		}
		close(next)
		if rest, err := io.ReadAll(zr); err != nil || string(rest) != "data: two\n\n" {
			t.Errorf("then got %q, %v; want the second event and the end", rest, err)
		}
		waitFor(t, "the encoders to go back to their pool", func() bool { return pol.Pool().InUse() == 0 })
	}, withConfig(loopConfig{compress: pol}))
}

// decodeAll decodes r from coding c.
func decodeAll(t *testing.T, c compress.Coding, r io.Reader) []byte {
	t.Helper()
	var d io.Reader
	switch c {
	case compress.Gzip:
		zr, err := gzip.NewReader(r)
		if err != nil {
			t.Fatal(err)
		}
		d = zr
	case compress.Zstd:
		zr, err := zstd.NewReader(r)
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		d = zr
	case compress.Brotli:
		d = brotli.NewReader(r)
	}
	out, err := io.ReadAll(d)
	if err != nil {
		t.Fatalf("decoding %v: %v", c, err)
	}
	return out
}
