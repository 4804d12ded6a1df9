package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c"
)

// h2cBackend is an HTTP/2 (h2c, prior knowledge) backend that answers
// with the SHA-256 of the request body, what it saw of the request in
// headers, and counts the connections it accepted.
type h2cBackend struct {
	addr     string
	accepted atomic.Int64
	// gate, when set, holds every request until it is closed.
	gate chan struct{}
}

func startH2CBackend(t *testing.T, maxStreams uint32, gate chan struct{}) *h2cBackend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &h2cBackend{addr: ln.Addr().String(), gate: gate}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if b.gate != nil {
			<-b.gate
		}
		sum := sha256.New()
		n, _ := io.Copy(sum, r.Body)
		w.Header().Set("X-Proto", r.Proto)
		w.Header().Set("X-Body-Bytes", fmt.Sprint(n))
		w.Header().Set("X-TE", r.Header.Get("Te"))
		fmt.Fprintf(w, "%x", sum.Sum(nil))
	})
	srv := &http.Server{Handler: h2c.NewHandler(h, &http2.Server{MaxConcurrentStreams: maxStreams})}
	cl := &countingListener{Listener: ln, n: &b.accepted}
	go srv.Serve(cl)
	t.Cleanup(func() { srv.Close() })
	return b
}

type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// TestH2CUpstream forwards HTTP/1.1 requests to an HTTP/2 backend: the
// request goes out as HTTP/2, a body the route buffers (in memory and in
// a temporary file) arrives whole, and TE: trailers is passed on.
func TestH2CUpstream(t *testing.T) {
	b := startH2CBackend(t, 0, nil)
	yaml := strings.ReplaceAll(`
listeners: [{name: web, address: "127.0.0.1:1"}]
routes: [{name: app, match: {path_prefix: /}, upstream: app, request_buffering: "on", request_buffer_memory_bytes: 65536}]
upstreams: [{name: app, backends: [{address: "{{H2C}}"}], transport: {protocol: h2c}}]
admin: {address: "off"}
`, "{{H2C}}", b.addr)
	_, base := startServer(t, yamlConfig(t, yaml, nil), Options{})
	for _, size := range []int{0, 100, 64 << 10, 300 << 10} {
		t.Run(fmt.Sprintf("body-%d", size), func(t *testing.T) {
			body := make([]byte, size)
			rand.Read(body)
			req, _ := http.NewRequest("POST", base+"/up", bytes.NewReader(body))
			req.Header.Set("TE", "trailers")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("status: got %d, want 200 (%s)", resp.StatusCode, got)
			}
			if p := resp.Header.Get("X-Proto"); p != "HTTP/2.0" {
				t.Errorf("backend saw %q, want HTTP/2.0", p)
			}
			if n := resp.Header.Get("X-Body-Bytes"); n != fmt.Sprint(size) {
				t.Errorf("backend read %s bytes, want %d", n, size)
			}
			if want := fmt.Sprintf("%x", sha256.Sum256(body)); string(got) != want {
				t.Errorf("body digest: got %s, want %s", got, want)
			}
			if te := resp.Header.Get("X-TE"); te != "trailers" {
				t.Errorf("backend's TE: got %q, want trailers", te)
			}
		})
	}
}

// TestH2CUpstreamStreamLimit: a backend that allows two concurrent
// streams per connection gets more connections when more requests are in
// flight, and every request is answered.
func TestH2CUpstreamStreamLimit(t *testing.T) {
	gate := make(chan struct{})
	b := startH2CBackend(t, 2, gate)
	yaml := strings.ReplaceAll(`
listeners: [{name: web, address: "127.0.0.1:1", h2c: true}]
routes: [{name: app, match: {path_prefix: /}, upstream: app}]
upstreams: [{name: app, backends: [{address: "{{H2C}}"}], transport: {protocol: h2c}}]
admin: {address: "off"}
`, "{{H2C}}", b.addr)
	_, base := startServer(t, yamlConfig(t, yaml, nil), Options{})
	// One HTTP/2 client connection to Helios carries all the requests;
	// Helios's engine has two loops, each with its own connections.
	client := &http.Client{Transport: &http2.Transport{AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}}
	const n = 10
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := client.Get(base + "/")
			if err != nil {
				errs <- err
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				errs <- fmt.Errorf("status %d", resp.StatusCode)
			}
		}()
	}
	// Ten requests at two streams a connection need five connections at
	// least (one loop serves this one client connection).
	waitFor(t, 10*time.Second, "the backend to see five connections", func() bool { return b.accepted.Load() >= 5 })
	close(gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
