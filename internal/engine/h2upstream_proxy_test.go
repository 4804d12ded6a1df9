package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/helios-lb/helios/internal/netpoll"
	"github.com/helios-lb/helios/internal/wire"
	"golang.org/x/net/http2"
)

// Requests forwarded to HTTP/2 backends: heads, trailers, multiplexing,
// retries of refused streams, clients that leave.

// the body whole; the client gets the backend's status, fields and body
// (of declared length or not) whole.
func TestH2UpProxy(t *testing.T) { run(t, testH2UpProxy) }

func testH2UpProxy(t *testing.T, k netpoll.Kind) {
	big := randomBody(3<<20+17, 21)
	seen := make(chan h2upSeen, 4)
	be := startH2CBackend(t, 0, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(400)
			return
		}
		seen <- h2upSeen{method: r.Method, proto: r.Proto, host: r.Host, uri: r.RequestURI, header: r.Header.Clone(), length: r.ContentLength, body: body}
		w.Header().Add("Set-Cookie", "a=1")
		w.Header().Add("Set-Cookie", "b=2")
		w.Header().Set("X-Answer", "yes")
		switch r.URL.Path {
		case "/big":
			w.Header().Set("Content-Length", strconv.Itoa(len(big)))
			w.Write(big)
		case "/echo":
			// No declared length: more than x/net buffers before the
			// head goes.
			w.WriteHeader(201)
			w.Write(body)
		}
	}))
	tests := []struct {
		name    string
		method  string
		path    string
		body    []byte
		chunked bool
		te      bool
		status  int
		want    []byte
	}{
		{name: "GET with TE trailers", method: "GET", path: "/big?q=1", te: true, status: 200, want: big},
		{name: "POST with length", method: "POST", path: "/echo", body: big, status: 201, want: big},
		{name: "POST without length", method: "POST", path: "/echo", body: big, chunked: true, status: 201, want: big},
		{name: "POST small", method: "POST", path: "/echo", body: []byte("hello"), status: 201, want: []byte("hello")},
	}
	p := startH2UpProxy(t, k, h2upTo(be.addr))
	for _, ck := range upClientKinds {
		c := newUpClient(t, p.addr, ck.h2)
		for _, tt := range tests {
			t.Run(ck.name+"/"+tt.name, func(t *testing.T) {
				hdr := http.Header{"Host": {"front.example:8080"}, "X-Custom": {"v1"}}
				if tt.te {
					hdr["Te"] = []string{"trailers"}
				}
				if !ck.h2 {
					// Hop-by-hop fields an HTTP/2 client cannot send.
					hdr["Connection"] = []string{"X-Hop"}
					hdr["X-Hop"] = []string{"1"}
					hdr["Keep-Alive"] = []string{"timeout=5"}
					hdr["Proxy-Authorization"] = []string{"Basic eA=="}
				}
				r, err := c.do(context.Background(), tt.method, tt.path, tt.body, tt.chunked, hdr)
				if err != nil {
					t.Fatalf("got %v, want an answer", err)
				}
				s := recv(t, seen, "the request at the backend")
				if s.proto != "HTTP/2.0" || s.method != tt.method || s.host != "front.example:8080" || s.uri != tt.path {
					t.Errorf("backend: got %s %s %s (authority %s), want %s %s HTTP/2.0 (authority front.example:8080)",
						s.method, s.uri, s.proto, s.host, tt.method, tt.path)
				}
				for name, want := range map[string][]string{
					"X-Custom":          {"v1"},
					"X-Forwarded-For":   {"127.0.0.1"},
					"X-Forwarded-Proto": {"http"},
				} {
					if got := s.header[name]; !slices.Equal(got, want) {
						t.Errorf("backend's %s: got %q, want %q", name, got, want)
					}
				}
				for _, name := range []string{"Connection", "X-Hop", "Keep-Alive", "Proxy-Authorization", "Transfer-Encoding", "Upgrade", "Host"} {
					if got, ok := s.header[name]; ok {
						t.Errorf("backend's %s: got %q, want none", name, got)
					}
				}
				if got, want := s.header["Te"], map[bool][]string{true: {"trailers"}}[tt.te]; !slices.Equal(got, want) {
					t.Errorf("backend's te: got %q, want %q", got, want)
				}
				if !bytes.Equal(s.body, tt.body) {
					t.Errorf("backend's body: got %d bytes (sha256 %x), want %d (sha256 %x)", len(s.body), sha256.Sum256(s.body), len(tt.body), sha256.Sum256(tt.body))
				}
				if wantLen := int64(len(tt.body)); !tt.chunked && s.length != wantLen {
					t.Errorf("backend's content-length: got %d, want %d", s.length, wantLen)
				}
				if r.status != tt.status || r.header.Get("X-Answer") != "yes" || !slices.Equal(r.header["Set-Cookie"], []string{"a=1", "b=2"}) {
					t.Errorf("got (%d, X-Answer %q, Set-Cookie %q), want (%d, yes, [a=1 b=2])", r.status, r.header.Get("X-Answer"), r.header["Set-Cookie"], tt.status)
				}
				if r.body != string(tt.want) {
					t.Errorf("body: got %d bytes (sha256 %x), want %d (sha256 %x)", len(r.body), sha256.Sum256([]byte(r.body)), len(tt.want), sha256.Sum256(tt.want))
				}
				if tt.path == "/big?q=1" && r.length != int64(len(big)) {
					t.Errorf("content-length: got %d, want %d", r.length, len(big))
				}
				checkRecord(t, p, tt.status, nil)
			})
		}
	}
	if n := be.accepts.Load(); n != 1 {
		t.Errorf("got %d backend connections, want 1 (every stream on one)", n)
	}
}

// TestH2UpResponseTrailers has an h2c backend end its answer, of declared
// length or not, with trailers: an HTTP/2 client gets them as trailers;
// an HTTP/1.1 client gets them in the last chunk of an answer without
// length, and an answer of declared length whole.
func TestH2UpResponseTrailers(t *testing.T) { run(t, testH2UpResponseTrailers) }

func testH2UpResponseTrailers(t *testing.T, k netpoll.Kind) {
	body := randomBody(100<<10+3, 22)
	be := startH2CBackend(t, 0, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Sum, Grpc-Status")
		if r.URL.Path == "/length" {
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		}
		w.Write(body[:1000])
		w.(http.Flusher).Flush()
		w.Write(body[1000:])
		w.Header().Set("X-Sum", "42")
		w.Header().Set("Grpc-Status", "0")
	}))
	p := startH2UpProxy(t, k, h2upTo(be.addr))
	for _, ck := range upClientKinds {
		c := newUpClient(t, p.addr, ck.h2)
		for _, path := range []string{"/length", "/chunked"} {
			t.Run(ck.name+path, func(t *testing.T) {
				r := c.get(t, path)
				if r.status != 200 || r.body != string(body) {
					t.Errorf("got (%d, %d bytes), want (200, %d bytes intact)", r.status, len(r.body), len(body))
				}
				if path == "/length" && r.length != int64(len(body)) {
					t.Errorf("content-length: got %d, want %d", r.length, len(body))
				}
				wantTrailers := ck.h2 || path == "/chunked"
				for name, want := range map[string]string{"X-Sum": "42", "Grpc-Status": "0"} {
					got := r.trailer.Get(name)
					if !wantTrailers {
						want = ""
					}
					if got != want {
						t.Errorf("trailer %s: got %q, want %q", name, got, want)
					}
				}
				checkRecord(t, p, 200, nil)
			})
		}
	}
}

// TestH2UpTrailersOnly has the backend answer with HEADERS alone, ending
// the stream (gRPC's trailers-only answer): an HTTP/2 client gets one
// HEADERS frame with END_STREAM, with the backend's grpc-status, no DATA
// and no content-length; an HTTP/1.1 client gets an empty answer of
// length 0 with the fields in its head.
func TestH2UpTrailersOnly(t *testing.T) { run(t, testH2UpTrailersOnly) }

func testH2UpTrailersOnly(t *testing.T, k netpoll.Kind) {
	got := make(chan *h2PeerReq, 4)
	be := startH2Peer(t, nil, func(pc *h2Peer) {
		eachPeerRequest(pc, func(req *h2PeerReq) {
			got <- req
			pc.headers(req.id, true, ":status", "200", "content-type", "application/grpc", "grpc-status", "7", "grpc-message", "denied")
		})
	})
	p := startH2UpProxy(t, k, h2upTo(be.addr))
	t.Run("h2c", func(t *testing.T) {
		c := dialH2Raw(t, p.addr, nil, 0)
		c.request(1, "POST", "/pkg.Svc/Call", false, "content-type", "application/grpc", "te", "trailers")
		if err := c.fr.WriteData(1, true, []byte{0, 0, 0, 0, 0}); err != nil {
			t.Fatal(err)
		}
		req := recv(t, got, "the request at the backend")
		if te := req.field("te"); !slices.Equal(te, []string{"trailers"}) || !bytes.Equal(req.body, []byte{0, 0, 0, 0, 0}) {
			t.Errorf("backend: got te %q and body %x, want [trailers] and 0000000000", te, req.body)
		}
		r := c.response(1)
		if r.status != "200" || r.reset || r.dataFrames != 0 || r.trailers != nil {
			t.Errorf("got (status %q, reset %v, %d DATA frames, trailers %v), want one HEADERS frame ending the stream (200, no reset, 0, none)",
				r.status, r.reset, r.dataFrames, r.trailers)
		}
		if gs, gm, cl := r.field("grpc-status"), r.field("grpc-message"), r.field("content-length"); !slices.Equal(gs, []string{"7"}) || !slices.Equal(gm, []string{"denied"}) || cl != nil {
			t.Errorf("got grpc-status %q, grpc-message %q, content-length %q, want [7], [denied], none", gs, gm, cl)
		}
		checkWireFields(t, "trailers-only answer", r.fields)
		checkRecord(t, p, 200, nil)
	})
	t.Run("http1", func(t *testing.T) {
		c := dialRaw(t, p.addr)
		c.send("GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
		recv(t, got, "the request at the backend")
		r := c.read("GET")
		if r.status != 200 || r.body != "" || r.header.Get("Content-Length") != "0" || r.header.Get("Grpc-Status") != "7" || r.chunked {
			t.Errorf("got (%d, %q, content-length %q, grpc-status %q, chunked %v), want (200, empty, 0, 7, false)",
				r.status, r.body, r.header.Get("Content-Length"), r.header.Get("Grpc-Status"), r.chunked)
		}
		checkRecord(t, p, 200, nil)
		// The connection goes on.
		c.send("GET /fixed/next HTTP/1.1\r\nHost: x\r\n\r\n")
		if r := c.read("GET"); r.status != 200 || r.body != "fixed" {
			t.Errorf("next request: got (%d, %q), want (200, fixed)", r.status, r.body)
		}
		checkRecord(t, p, 200, nil)
	})
}

// TestH2UpMultiplexing sends 30 requests at once to a backend allowing 5
// streams per connection, which holds them until all 30 are in: every
// one is answered, on several connections but far fewer than 30; the
// next 30 go on the connections the first opened.
func TestH2UpMultiplexing(t *testing.T) { run(t, testH2UpMultiplexing) }

func testH2UpMultiplexing(t *testing.T, k netpoll.Kind) {
	const (
		n          = 30
		maxStreams = 5
		// At 5 streams a connection 30 need 6; a few more may be
		// dialled while the first waits for the backend's SETTINGS.
		most = 12
	)
	for _, ck := range upClientKinds {
		t.Run(ck.name, func(t *testing.T) {
			var arrived atomic.Int32
			var gate atomic.Pointer[chan struct{}]
			be := startH2CBackend(t, maxStreams, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				g := *gate.Load()
				arrived.Add(1)
				select {
				case <-g:
				case <-r.Context().Done():
					return
				}
				io.WriteString(w, "ok "+r.URL.Path)
			}))
			p := startH2UpProxy(t, k, h2upTo(be.addr))
			c := newUpClient(t, p.addr, ck.h2)
			round := func(t *testing.T) {
				t.Helper()
				g := make(chan struct{})
				gate.Store(&g)
				arrived.Store(0)
				errs := make(chan error, n)
				var wg sync.WaitGroup
				for i := range n {
					wg.Add(1)
					go func() {
						defer wg.Done()
						path := fmt.Sprintf("/m/%d", i)
						r, err := c.do(context.Background(), "GET", path, nil, false, nil)
						switch {
						case err != nil:
							errs <- fmt.Errorf("%s: got %v, want an answer", path, err)
						case r.status != 200 || r.body != "ok "+path:
							errs <- fmt.Errorf("%s: got (%d, %q), want (200, %q)", path, r.status, r.body, "ok "+path)
						}
					}()
				}
				waitFor(t, "every request to reach the backend", func() bool { return arrived.Load() == n })
				close(g)
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Error(err)
				}
				for range n {
					checkRecord(t, p, 200, nil)
				}
			}
			round(t)
			dialled := be.accepts.Load()
			if dialled < n/maxStreams || dialled > most {
				t.Errorf("got %d backend connections for %d requests at once, want %d to %d", dialled, n, n/maxStreams, most)
			}
			round(t)
			if got := be.accepts.Load(); got != dialled {
				t.Errorf("second round: got %d backend connections in all, want %d (the first round's, reused)", got, dialled)
			}
			if got := be.closed.Load(); got != 0 {
				t.Errorf("got %d backend connections closed, want 0", got)
			}
		})
	}
}

// TestH2UpRetryUnprocessed has the backend leave a stream unprocessed:
// refused (RST_STREAM REFUSED_STREAM) once, the request goes again on
// another stream of the connection and succeeds, body and all; refused
// every time, it goes 3 times more and then fails as a connect error
// (502); under a GOAWAY whose last stream is below it, it goes again on
// a new connection and succeeds. The client sees none of it.
func TestH2UpRetryUnprocessed(t *testing.T) { run(t, testH2UpRetryUnprocessed) }

func testH2UpRetryUnprocessed(t *testing.T, k netpoll.Kind) {
	tests := []struct {
		name string
		// act is what the backend does with the nth request it gets
		// (from 1, on any connection; pc.n numbers the connections):
		// true to answer it.
		act      func(pc *h2Peer, req *h2PeerReq, nth int) bool
		status   int
		wantErr  error
		requests int32 // the requests the backend gets
		accepts  int32
	}{
		{name: "refused once", act: func(pc *h2Peer, req *h2PeerReq, nth int) bool {
			if nth == 1 {
				pc.rst(req.id, http2.ErrCodeRefusedStream)
				return false
			}
			return true
		}, status: 200, requests: 2, accepts: 1},
		{name: "refused every time", act: func(pc *h2Peer, req *h2PeerReq, nth int) bool {
			pc.rst(req.id, http2.ErrCodeRefusedStream)
			return false
		}, status: 502, wantErr: wire.ErrConnect, requests: 1 + maxRefusedRetries, accepts: 1},
		{name: "GOAWAY below the stream", act: func(pc *h2Peer, req *h2PeerReq, nth int) bool {
			if pc.n == 1 {
				pc.goAway(0, http2.ErrCodeNo) // the stream is 1
				return false
			}
			return true
		}, status: 200, requests: 2, accepts: 2},
	}
	for _, ck := range upClientKinds {
		for _, method := range []string{"GET", "POST"} {
			for _, tt := range tests {
				t.Run(ck.name+"/"+method+"/"+tt.name, func(t *testing.T) {
					var reqs atomic.Int32
					bodies := make(chan string, 8)
					be := startH2Peer(t, nil, func(pc *h2Peer) {
						eachPeerRequest(pc, func(req *h2PeerReq) {
							bodies <- string(req.body)
							if tt.act(pc, req, int(reqs.Add(1))) {
								pc.answer(req.id, "ok:"+string(req.body))
							}
						})
					})
					p := startH2UpProxy(t, k, h2upTo(be.addr))
					c := newUpClient(t, p.addr, ck.h2)
					var body []byte
					if method == "POST" {
						body = []byte("hello")
					}
					r, err := c.do(context.Background(), method, "/r", body, false, nil)
					if err != nil {
						t.Fatalf("got %v, want an answer", err)
					}
					if r.status != tt.status || tt.status == 200 && r.body != "ok:"+string(body) {
						t.Errorf("got (%d, %q), want (%d, %q)", r.status, r.body, tt.status, "ok:"+string(body))
					}
					rec := checkRecord(t, p, tt.status, tt.wantErr)
					if rec.Attempts != 1 {
						t.Errorf("record: got %d attempts, want 1 (the retries are the engine's own)", rec.Attempts)
					}
					if got := reqs.Load(); got != tt.requests {
						t.Errorf("got %d requests at the backend, want %d", got, tt.requests)
					}
					for range tt.requests {
						if b := recv(t, bodies, "a request body"); b != string(body) {
							t.Errorf("backend's body: got %q, want %q", b, body)
						}
					}
					if got := be.accepts.Load(); got != tt.accepts {
						t.Errorf("got %d backend connections, want %d", got, tt.accepts)
					}
				})
			}
		}
	}
}

// TestH2UpRefusedBufferedBodyRetried has the backend refuse the stream
// of a request whose body request buffering holds whole (in memory and
// in a file): nothing was processed and the body is all at hand, so it
// goes again, as a body the read buffer holds does.
func TestH2UpRefusedBufferedBodyRetried(t *testing.T) { run(t, testH2UpRefusedBufferedBodyRetried) }

func testH2UpRefusedBufferedBodyRetried(t *testing.T, k netpoll.Kind) {
	body := randomBody(300<<10, 23)
	var reqs atomic.Int32
	be := startH2Peer(t, nil, func(pc *h2Peer) {
		eachPeerRequest(pc, func(req *h2PeerReq) {
			if reqs.Add(1) == 1 {
				pc.rst(req.id, http2.ErrCodeRefusedStream)
				return
			}
			pc.answer(req.id, fmt.Sprintf("%x", sha256.Sum256(req.body)))
		})
	})
	p := startH2UpProxy(t, k, h2upTo(be.addr))
	bufferRoute(t, p, wire.BufferLimits{Memory: 64 << 10, File: 1 << 20, Dir: t.TempDir()})
	c := newUpClient(t, p.addr, false)
	r, err := c.do(context.Background(), "POST", "/r", body, false, nil)
	if err != nil {
		t.Fatalf("got %v, want an answer", err)
	}
	if want := fmt.Sprintf("%x", sha256.Sum256(body)); r.status != 200 || r.body != want {
		t.Errorf("got (%d, %q), want (200, %q)", r.status, r.body, want)
	}
	checkRecord(t, p, 200, nil)
	if got := reqs.Load(); got != 2 {
		t.Errorf("got %d requests at the backend, want 2", got)
	}
}
