package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/backend"
	"github.com/helios-lb/helios/internal/config"
)

// testBackend is a built-in backend (the code behind `helios backend`)
// listening on a loopback port.
type testBackend struct {
	*backend.Backend
	addr string
	ln   net.Listener
}

// startBackends starts n built-in backends named b1..bn.
func startBackends(t *testing.T, n int) []*testBackend {
	t.Helper()
	var bs []*testBackend
	for i := 1; i <= n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		bs = append(bs, serveBackend(t, fmt.Sprintf("b%d", i), ln))
	}
	return bs
}

// serveBackend serves a built-in backend named name on ln until the test
// ends.
func serveBackend(t *testing.T, name string, ln net.Listener) *testBackend {
	b := &testBackend{Backend: backend.New(name), addr: ln.Addr().String(), ln: ln}
	go b.Serve(ln)
	t.Cleanup(func() {
		ln.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		b.Shutdown(ctx)
	})
	return b
}

// stop closes a backend's listener and its connections: the backend is
// gone, as if its process died.
func (b *testBackend) stop() {
	b.ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	b.Shutdown(ctx)
}

// restart brings a stopped backend back on the same address, as a new
// process would.
func (b *testBackend) restart(t *testing.T) {
	t.Helper()
	var err error
	for i := 0; i < 50; i++ {
		if b.ln, err = net.Listen("tcp", b.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("restarting backend on %s: %v", b.addr, err)
	}
	b.Backend = backend.New(b.Name())
	go b.Serve(b.ln)
	t.Cleanup(func() { b.ln.Close() })
}

// yamlConfig parses a config template; {{B1}}.. are replaced with the
// backends' addresses. The listener named "web" is moved to port 0 after
// validation so tests never collide on ports.
func yamlConfig(t *testing.T, tmpl string, bs []*testBackend) *config.Config {
	t.Helper()
	for i, b := range bs {
		tmpl = strings.ReplaceAll(tmpl, fmt.Sprintf("{{B%d}}", i+1), b.addr)
	}
	cfg, err := config.Parse([]byte(tmpl), "test.yaml", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	for i := range cfg.Listeners {
		cfg.Listeners[i].Address = "127.0.0.1:0"
		// `make test` runs these tests once per engine.
		if e := os.Getenv("HELIOS_TEST_ENGINE"); e != "" {
			cfg.Listeners[i].Poller = e
		}
	}
	if cfg.Admin.Enabled() {
		cfg.Admin.Address = "127.0.0.1:0"
	}
	return cfg
}

// startServer runs Helios with cfg and returns it and the base URL of its
// "web" listener. It is shut down when the test ends.
func startServer(t *testing.T, cfg *config.Config, o Options) (*Server, string) {
	t.Helper()
	s, err := New(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	return s, "http://" + s.Addr("web").String()
}

const threeBackends = `
listeners: [{name: web, address: "127.0.0.1:1"}]
routes:
  - {name: ping, match: {path: /ping}, respond: {status: 200, body: "pong"}}
  - {name: app, match: {path_prefix: /}, upstream: app}
upstreams:
  - name: app
    strategy: round_robin
    backends: [{address: "{{B1}}"}, {address: "{{B2}}"}, {address: "{{B3}}"}]
admin: {address: "off"}
`

// oneBackend is a listener "web" whose every request goes to {{B1}}.
const oneBackend = `
listeners: [{name: web, address: "127.0.0.1:1"}]
routes: [{name: app, match: {path_prefix: /}, upstream: app}]
upstreams: [{name: app, backends: [{address: "{{B1}}"}]}]
admin: {address: "off"}
`

// get fetches url and returns status, body and the X-Backend header.
func get(t *testing.T, c *http.Client, url string) (int, string, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading body: %v", url, err)
	}
	return resp.StatusCode, string(body), resp.Header.Get("X-Backend")
}

// rawExchange writes req on a new connection and returns everything read
// until the server closes it or the deadline passes.
func rawExchange(t *testing.T, addr, req string) string {
	t.Helper()
	out, _ := rawExchangeErr(t, addr, req)
	return out
}

// rawExchangeErr is rawExchange with the read's error: nil when the
// server closed the connection within the deadline.
func rawExchangeErr(t *testing.T, addr, req string) (string, error) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(c)
	return string(out), err
}
