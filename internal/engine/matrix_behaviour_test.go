package engine

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Behaviours every protocol pairing has, run over the whole matrix
// (matrix_test.go).

// TestMatrixRoundTrip: a request reaches the backend with its method,
// target, authority and end-to-end fields, and X-Forwarded-* for the
// client; the answer's status, fields and body come back.
func TestMatrixRoundTrip(t *testing.T) {
	matrix(t, func(t *testing.T, c *cell) {
		c.be.handle(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Answer", "yes")
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(201)
			io.WriteString(w, "made "+r.URL.Path)
		})
		hdr := http.Header{"X-Custom": {"a b"}, "Accept": {"*/*"}, "X-Forwarded-For": {"203.0.113.9"}}
		resp, err := c.get("/things/1?x=1&y=%20", hdr)
		if err != nil {
			t.Fatal(err)
		}
		if resp.status != 201 || resp.body != "made /things/1" || resp.header.Get("X-Answer") != "yes" || resp.header.Get("Content-Type") != "text/plain" {
			t.Errorf("got %d %q %v, want 201 %q with X-Answer and Content-Type", resp.status, resp.body, resp.header, "made /things/1")
		}
		if resp.length != int64(len("made /things/1")) {
			t.Errorf("got length %d, want %d", resp.length, len("made /things/1"))
		}
		s := c.last()
		if s.method != "GET" || s.uri != "/things/1?x=1&y=%20" || s.host != c.p.addr {
			t.Errorf("backend got %s %s host %s, want GET /things/1?x=1&y=%%20 host %s", s.method, s.uri, s.host, c.p.addr)
		}
		proto := "http"
		if c.client.tls() {
			proto = "https"
		}
		for name, want := range map[string]string{
			"X-Custom": "a b", "Accept": "*/*",
			// The client is no trusted proxy: its own X-Forwarded-For
			// is replaced, never appended to (issue 20).
			"X-Forwarded-For":   "127.0.0.1",
			"X-Forwarded-Proto": proto,
			"X-Forwarded-Host":  c.p.addr,
		} {
			if got := strings.Join(s.header.Values(name), ","); got != want {
				t.Errorf("backend got %s %q, want %q", name, got, want)
			}
		}
		if id := s.header.Get("X-Request-Id"); len(id) != 32 {
			t.Errorf("backend got X-Request-Id %q, want a made id of 32 hex digits", id)
		}
	})
}

// TestMatrixBodies: request bodies of declared and undeclared length,
// small and large (more than an HTTP/2 stream's window, h2.
// DefaultStreamWindow), reach the backend whole, an undeclared one
// chunked to an HTTP/1.1 backend; answers of declared and undeclared
// length, large ones more than Go's HTTP/2 client's stream window (4
// MiB), come back whole and are recorded with their length; HEAD, 204
// and 304 answers have no body.
func TestMatrixBodies(t *testing.T) {
	big := randomBody(3<<20+7, 1)
	answer := randomBody(6<<20+3, 2)
	matrix(t, func(t *testing.T, c *cell) {
		c.be.handle(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/echo":
				b, _ := io.ReadAll(r.Body)
				w.Header().Set("X-Length", strconv.FormatInt(r.ContentLength, 10))
				w.Write(b)
			case "/length":
				w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
				w.Write(answer)
			case "/stream":
				// No length: chunked to HTTP/1.1, DATA to the end of the
				// stream over HTTP/2.
				for b := answer; len(b) > 0; {
					n := min(len(b), 100_000)
					w.Write(b[:n])
					w.(http.Flusher).Flush()
					b = b[n:]
				}
			case "/nobody":
				w.Header().Set("Content-Length", "100")
				w.WriteHeader(204)
			case "/notmod":
				w.Header().Set("ETag", `"x"`)
				w.WriteHeader(304)
			case "/head":
				w.Header().Set("Content-Length", "12345")
			}
		})
		for _, tt := range []struct {
			name       string
			body       []byte
			undeclared bool
		}{
			{"empty POST", nil, false},
			{"small", []byte("hello"), false},
			{"large", big, false},
			{"empty undeclared", []byte{}, true},
			{"small undeclared", []byte("hello"), true},
			{"large undeclared", big, true},
		} {
			var r io.Reader = bytes.NewReader(tt.body)
			if tt.undeclared {
				r = io.MultiReader(r) // hides the length: chunked, or DATA without content-length
			}
			req, _ := http.NewRequest("POST", "/echo", r)
			if !tt.undeclared {
				req.ContentLength = int64(len(tt.body))
			} else {
				req.ContentLength = -1
			}
			resp, err := c.do(req)
			if err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			if resp.status != 200 || resp.body != string(tt.body) {
				t.Errorf("%s: got %d and %d bytes back, want 200 and the %d sent", tt.name, resp.status, len(resp.body), len(tt.body))
			}
			s := c.last()
			if s.body != string(tt.body) {
				t.Errorf("%s: backend got %d bytes (sum %x), want %d (sum %x)", tt.name, len(s.body), sha256.Sum256([]byte(s.body)), len(tt.body), sha256.Sum256(tt.body))
			}
			if !tt.undeclared && (s.length != int64(len(tt.body)) || len(s.te) != 0) {
				t.Errorf("%s: backend got length %d, transfer-encoding %q, want %d and none", tt.name, s.length, s.te, len(tt.body))
			}
			// Go's HTTP/1.1 client sends an empty body of unknown length
			// as Content-Length: 0; an HTTP/2 client sends it as DATA
			// without a length, which is chunked to an HTTP/1.1 backend.
			sentUndeclared := tt.undeclared && (len(tt.body) > 0 || c.client.http2())
			if sentUndeclared && !c.backend.http2() && (strings.Join(s.te, ",") != "chunked" || s.length != -1) {
				t.Errorf("%s: backend got transfer-encoding %q, length %d, want chunked and no length", tt.name, s.te, s.length)
			}
			if rec := c.p.nextRec(t); rec.Status != 200 || rec.Err != nil {
				t.Errorf("%s: record: got (%v, %v), want (200, nil)", tt.name, rec.Status, rec.Err)
			}
		}
		for _, path := range []string{"/length", "/stream"} {
			resp, err := c.get(path, nil)
			if err != nil || resp.status != 200 || resp.body != string(answer) {
				t.Errorf("%s: got (%d, %d bytes, sum %x, %v), want (200, %d bytes, sum %x)", path, resp.status, len(resp.body),
					sha256.Sum256([]byte(resp.body)), err, len(answer), sha256.Sum256(answer))
			}
			if rec := c.p.nextRec(t); rec.Status != 200 || rec.Err != nil || rec.Bytes != int64(len(answer)) {
				t.Errorf("%s: record: got (%v, %v, %d bytes), want (200, nil, %d)", path, rec.Status, rec.Err, rec.Bytes, len(answer))
			}
		}
		for _, tt := range []struct {
			method, path string
			status       int
		}{{"GET", "/nobody", 204}, {"GET", "/notmod", 304}, {"HEAD", "/head", 200}} {
			req, _ := http.NewRequest(tt.method, tt.path, nil)
			resp, err := c.do(req)
			if err != nil || resp.status != tt.status || resp.body != "" {
				t.Errorf("%s %s: got %d %q, %v; want %d and no body", tt.method, tt.path, resp.status, resp.body, err, tt.status)
			}
			if tt.method == "HEAD" && resp.length != 12345 {
				t.Errorf("HEAD: got length %d, want the backend's 12345", resp.length)
			}
		}
	})
}

// TestMatrixTrailers: a request's trailers reach the backend and an
// answer's reach the client, wherever both sides can carry them; fields
// a trailer may not carry (RFC 9110 §6.5.1) are dropped, both ways.
func TestMatrixTrailers(t *testing.T) {
	matrix(t, func(t *testing.T, c *cell) {
		c.be.handle(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Trailer", "X-Sum, Set-Cookie")
			w.WriteHeader(200)
			io.WriteString(w, "body")
			w.(http.Flusher).Flush() // no length: chunked, so HTTP/1.1 can carry trailers
			w.Header().Set("X-Sum", "42")
			w.Header().Set("Set-Cookie", "sneaky=1")
		})
		req, _ := http.NewRequest("POST", "/t", io.MultiReader(strings.NewReader("data")))
		req.ContentLength = -1
		req.Trailer = http.Header{"X-Req-Sum": nil, "Authorization": nil}
		req.Body = &trailerBody{r: strings.NewReader("data"), set: func() {
			req.Trailer.Set("X-Req-Sum", "7")
			req.Trailer.Set("Authorization", "Bearer late")
		}}
		resp, err := c.do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.body != "body" || resp.trailer.Get("X-Sum") != "42" {
			t.Errorf("got %q with trailers %v, want %q and X-Sum: 42", resp.body, resp.trailer, "body")
		}
		if v := resp.trailer.Get("Set-Cookie"); v != "" {
			t.Errorf("client got Set-Cookie %q in a trailer, want it dropped", v)
		}
		if rec := c.p.nextRec(t); rec.Status != 200 || rec.Err != nil || rec.Bytes != int64(len("body")) {
			t.Errorf("record: got (%v, %v, %d bytes), want (200, nil, 4)", rec.Status, rec.Err, rec.Bytes)
		}
		s := c.last()
		if s.body != "data" || s.trailer.Get("X-Req-Sum") != "7" {
			t.Errorf("backend got %q with trailers %v, want %q and X-Req-Sum: 7", s.body, s.trailer, "data")
		}
		if v := s.trailer.Get("Authorization"); v != "" {
			t.Errorf("backend got Authorization %q in a trailer, want it dropped", v)
		}
	})
}

// trailerBody reads r, then sets the request's trailers (as a client
// that sums its body would) before its end.
type trailerBody struct {
	r   io.Reader
	set func()
}

func (b *trailerBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF && b.set != nil {
		b.set()
		b.set = nil
	}
	return n, err
}

func (b *trailerBody) Close() error { return nil }

// TestMatrixRequestID: a sane X-Request-Id from the client goes on as it
// is; a missing or insane one is replaced with one Helios makes.
func TestMatrixRequestID(t *testing.T) {
	matrix(t, func(t *testing.T, c *cell) {
		if _, err := c.get("/", http.Header{"X-Request-Id": {"client-id-1"}}); err != nil {
			t.Fatal(err)
		}
		if got := c.last().header.Values("X-Request-Id"); len(got) != 1 || got[0] != "client-id-1" {
			t.Errorf("sane id: backend got %q, want [client-id-1]", got)
		}
		if _, err := c.get("/", http.Header{"X-Request-Id": {strings.Repeat("x", 300)}}); err != nil {
			t.Fatal(err)
		}
		if got := c.last().header.Values("X-Request-Id"); len(got) != 1 || len(got[0]) != 32 {
			t.Errorf("insane id: backend got %q, want one made id", got)
		}
	})
}

// TestMatrixCookies: several Cookie fields (HTTP/2 clients split them,
// RFC 9113 §8.2.3) reach the backend as one.
func TestMatrixCookies(t *testing.T) {
	matrix(t, func(t *testing.T, c *cell) {
		if _, err := c.get("/", http.Header{"Cookie": {"a=1; b=2", "c=3"}}); err != nil {
			t.Fatal(err)
		}
		got := c.last().header.Values("Cookie")
		joined := strings.Join(got, "; ")
		if joined != "a=1; b=2; c=3" {
			t.Errorf("backend got cookies %q, want a=1; b=2; c=3", got)
		}
	})
}

// TestMatrixBackendFailures: a backend that cannot be reached is a 502,
// one that does not answer in time a 504, and the proxy goes on serving.
func TestMatrixBackendFailures(t *testing.T) {
	cfg := loopConfig{to: defaultTransport}
	cfg.to.ResponseHeaderTimeout = 100 * time.Millisecond
	matrix(t, func(t *testing.T, c *cell) {
		c.be.handle(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/slow" {
				time.Sleep(400 * time.Millisecond)
			}
		})
		resp, err := c.get("/slow", nil)
		if err != nil || resp.status != 504 {
			t.Errorf("slow backend: got %d, %v; want 504", resp.status, err)
		}
		if resp, err := c.get("/fine", nil); err != nil || resp.status != 200 {
			t.Errorf("after a timeout: got %d, %v; want 200", resp.status, err)
		}
		c.be.srv.CloseClientConnections()
		c.be.srv.Listener.Close()
		resp, err = c.get("/gone", nil)
		if err != nil || resp.status != 502 {
			t.Errorf("backend gone: got %d, %v; want 502", resp.status, err)
		}
	}, withConfig(cfg), inParallel())
}

// TestMatrixManyRequests: a hundred requests, ten at a time, on the
// client's pooled connections (streams, for HTTP/2) all come back right.
func TestMatrixManyRequests(t *testing.T) {
	matrix(t, func(t *testing.T, c *cell) {
		c.be.handle(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.URL.Path) })
		errs := make(chan error, 100)
		sem := make(chan struct{}, 10)
		for i := 0; i < 100; i++ {
			sem <- struct{}{}
			go func(i int) {
				defer func() { <-sem }()
				p := fmt.Sprintf("/r/%d", i)
				resp, err := c.get(p, nil)
				if err == nil && (resp.status != 200 || resp.body != p) {
					err = fmt.Errorf("%s: got %d %q", p, resp.status, resp.body)
				}
				errs <- err
			}(i)
		}
		for i := 0; i < 100; i++ {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
	})
}
