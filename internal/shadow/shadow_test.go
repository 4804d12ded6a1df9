package shadow

import (
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/tlsconf"
	"github.com/helios-lb/helios/internal/upstream"
	"github.com/helios-lb/helios/internal/wire"
)

// seen is what a shadow backend saw of a request.
type seen struct {
	method, host, uri, proto, body, xff string
}

// recorder is a shadow backend's handler: it records each request and
// answers with a body (which the pool reads and drops).
type recorder struct {
	mu   sync.Mutex
	reqs []seen
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.reqs = append(rc.reqs, seen{r.Method, r.Host, r.RequestURI, r.Proto, string(b), r.Header.Get("X-Forwarded-For")})
	rc.mu.Unlock()
	io.WriteString(w, strings.Repeat("answer ", 1000))
}

// result is what Done reported.
type result struct {
	status int
	err    error
}

// copyTo returns a copy of a POST for the backend at addr over t, whose
// Done sends its result on the channel returned.
func copyTo(addr string, t *wire.Transport, timeout time.Duration) (*wire.MirrorRequest, chan result) {
	done := make(chan result, 1)
	r := &wire.MirrorRequest{
		Transport: t,
		Backend:   &upstream.Backend{State: upstream.NewState(nil), Addr: addr, Weight: 1},
		Method:    []byte("POST"), Authority: []byte("app.example"), Target: []byte("/orders?id=7"),
		Body:    []byte(`{"item":1}`),
		Timeout: timeout,
		Done:    func(_ *wire.MirrorRequest, status int, err error) { done <- result{status, err} },
	}
	r.Header.Add([]byte("X-Forwarded-For"), []byte("192.0.2.1"))
	r.Header.Add([]byte("Content-Type"), []byte("application/json"))
	return r, done
}

func wait(t *testing.T, done chan result) result {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("the copy was not done in 10s")
		return result{}
	}
}

// caFile writes the certificate of a TLS test server as a CA file.
func caFile(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(f, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestPoolSendsToEveryBackendKind sends a copy to HTTP/1.1, TLS, h2
// (HTTP/2 over TLS) and h2c backends: each gets the request as made
// (method, Host, target, fields, body), over the protocol its transport
// says, and the copy is done with the answer's status.
func TestPoolSendsToEveryBackendKind(t *testing.T) {
	tests := []struct {
		name      string
		start     func(h http.Handler) *httptest.Server
		settings  wire.TransportSettings
		tls       func(t *testing.T, srv *httptest.Server) wire.ClientTLS
		wantProto string
	}{
		{name: "http1", start: httptest.NewServer, wantProto: "HTTP/1.1"},
		{name: "h2c", start: func(h http.Handler) *httptest.Server {
			srv := httptest.NewUnstartedServer(h)
			srv.Config.Protocols = new(http.Protocols)
			srv.Config.Protocols.SetHTTP1(true)
			srv.Config.Protocols.SetUnencryptedHTTP2(true)
			srv.Start()
			return srv
		}, settings: wire.TransportSettings{Protocol: wire.ProtoH2C}, wantProto: "HTTP/2.0"},
		{name: "tls", start: httptest.NewTLSServer, settings: wire.TransportSettings{TLS: true},
			tls: func(t *testing.T, srv *httptest.Server) wire.ClientTLS {
				c, err := tlsconf.NewClient(tlsconf.ClientOptions{CAFile: caFile(t, srv), ServerName: "example.com"}, nil)
				if err != nil {
					t.Fatal(err)
				}
				return c
			}, wantProto: "HTTP/1.1"},
		{name: "h2", start: func(h http.Handler) *httptest.Server {
			srv := httptest.NewUnstartedServer(h)
			srv.EnableHTTP2 = true
			srv.StartTLS()
			return srv
		}, settings: wire.TransportSettings{TLS: true, Protocol: wire.ProtoH2},
			tls: func(t *testing.T, srv *httptest.Server) wire.ClientTLS {
				c, err := tlsconf.NewClient(tlsconf.ClientOptions{CAFile: caFile(t, srv), ServerName: "example.com", HTTP2: true}, nil)
				if err != nil {
					t.Fatal(err)
				}
				return c
			}, wantProto: "HTTP/2.0"},
	}
	p := New()
	defer p.Close()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := &recorder{}
			srv := tt.start(rc)
			defer srv.Close()
			s := tt.settings
			s.MaxIdlePerBackend, s.DialTimeout, s.ResponseHeaderTimeout = 4, time.Second, 5*time.Second
			tr := &wire.Transport{Name: "shadow-" + tt.name, Settings: s}
			if tt.tls != nil {
				tr.TLS = tt.tls(t, srv)
			}
			for range 3 {
				r, done := copyTo(srv.Listener.Addr().String(), tr, 5*time.Second)
				p.Mirror(r)
				if got := wait(t, done); got.err != nil || got.status != 200 {
					t.Fatalf("got status %d, error %v; want 200", got.status, got.err)
				}
			}
			rc.mu.Lock()
			defer rc.mu.Unlock()
			want := seen{"POST", "app.example", "/orders?id=7", tt.wantProto, `{"item":1}`, "192.0.2.1"}
			for i, got := range rc.reqs {
				if got != want {
					t.Errorf("request %d: got %+v, want %+v", i, got, want)
				}
			}
			if len(rc.reqs) != 3 {
				t.Errorf("got %d requests, want 3", len(rc.reqs))
			}
		})
	}
	// One copy at a time: the workers were reused (one, or two when a
	// copy came while the worker that did the last one was still on its
	// way back to wait).
	if n := p.Workers(); n < 1 || n > 2 {
		t.Errorf("workers after 12 copies one at a time: got %d, want 1 or 2", n)
	}
}

// TestPoolErrors checks how a copy that fails is done: a refused
// connection is a connect error, a shadow slower than the copy's timeout
// a timeout, reported when the timeout passes.
func TestPoolErrors(t *testing.T) {
	p := New()
	defer p.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := ln.Addr().String()
	ln.Close()
	tr := &wire.Transport{Name: "shadow", Settings: wire.TransportSettings{DialTimeout: time.Second, MaxIdlePerBackend: 1}}
	r, done := copyTo(refused, tr, time.Second)
	p.Mirror(r)
	if got := wait(t, done); !errors.Is(got.err, wire.ErrConnect) {
		t.Errorf("refused: got %v, want an error wrapping ErrConnect", got.err)
	}

	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(release)
	start := time.Now()
	r, done = copyTo(slow.Listener.Addr().String(), tr, 200*time.Millisecond)
	p.Mirror(r)
	got := wait(t, done)
	if !errors.Is(got.err, wire.ErrTimeout) {
		t.Errorf("slow shadow: got %v, want an error wrapping ErrTimeout", got.err)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("slow shadow: done after %v, want after its 200ms timeout", d)
	}
}

// TestPoolClose checks that Close cuts the copies in flight short, ends
// every worker, and that a copy handed over after it is done at once.
func TestPoolClose(t *testing.T) {
	p := New()
	release := make(chan struct{})
	defer close(release)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	tr := &wire.Transport{Name: "shadow", Settings: wire.TransportSettings{DialTimeout: time.Second, MaxIdlePerBackend: 4}}
	var dones []chan result
	for range 4 {
		r, done := copyTo(slow.Listener.Addr().String(), tr, time.Minute)
		p.Mirror(r)
		dones = append(dones, done)
	}
	if n := p.Workers(); n != 4 {
		t.Errorf("workers with 4 copies in flight: got %d, want 4", n)
	}
	p.Close()
	for i, done := range dones {
		if got := wait(t, done); got.err == nil {
			t.Errorf("copy %d in flight at Close: got no error, want one", i)
		}
	}
	if n := p.Workers(); n != 0 {
		t.Errorf("workers after Close: got %d, want 0", n)
	}
	r, done := copyTo(slow.Listener.Addr().String(), tr, time.Minute)
	p.Mirror(r)
	if got := wait(t, done); !errors.Is(got.err, wire.ErrMirrorClosed) {
		t.Errorf("after Close: got %v, want ErrMirrorClosed", got.err)
	}
}

// TestIdleWorkersEnd checks that a worker with nothing to do ends.
func TestIdleWorkersEnd(t *testing.T) {
	p := New()
	defer p.Close()
	p.idle = 50 * time.Millisecond
	srv := httptest.NewServer(&recorder{})
	defer srv.Close()
	r, done := copyTo(srv.Listener.Addr().String(), &wire.Transport{Name: "shadow", Settings: wire.TransportSettings{MaxIdlePerBackend: 1}}, 5*time.Second)
	p.Mirror(r)
	wait(t, done)
	deadline := time.Now().Add(5 * time.Second)
	for p.Workers() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("workers 5s after the last copy: got %d, want 0", p.Workers())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
