package server

import (
	"context"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/config"
	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/wire"
)

// fixedPorts gives each listener (and the admin listener, when on) a
// port of its own that stays the same across servers, so that two
// servers can be started on one address.
func fixedPorts(t *testing.T, cfg *config.Config) {
	t.Helper()
	for i := range cfg.Listeners {
		cfg.Listeners[i].Address = freeAddr(t)
	}
	if cfg.Admin.Enabled() {
		cfg.Admin.Address = freeAddr(t)
	}
}

// TestSecondServerRefusesTheAddress guards issue 12: two helios serve on
// one address both started and split the traffic (SO_REUSEPORT).
func TestSecondServerRefusesTheAddress(t *testing.T) {
	bs := startBackends(t, 1)
	cfg := yamlConfig(t, `
listeners: [{name: web, address: "127.0.0.1:1", sockets: 2}]
routes: [{name: app, match: {path_prefix: /}, upstream: app}]
upstreams: [{name: app, backends: [{address: "{{B1}}"}]}]
admin: {address: "off"}
`, bs)
	fixedPorts(t, cfg)
	startServer(t, cfg, Options{})
	_, err := New(cfg, Options{})
	want := "listener web: " + cfg.Listeners[0].Address + " is already in use by another process"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("got %v, want an error starting %q", err, want)
	}
}

// handover is a Sockets made of another server's HandoffSockets.
type handover struct {
	mu    sync.Mutex
	socks []HandoffSocket
}

func (h *handover) take(admin bool, address string) []*os.File {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*os.File
	rest := h.socks[:0]
	for _, s := range h.socks {
		if s.Admin == admin && s.Address == address {
			out = append(out, s.File)
		} else {
			rest = append(rest, s)
		}
	}
	h.socks = rest
	return out
}

func (h *handover) Listener(_, address string) []*os.File { return h.take(false, address) }
func (h *handover) Admin(address string) *os.File {
	if fs := h.take(true, address); len(fs) > 0 {
		return fs[0]
	}
	return nil
}

// TestHandedOverSocketsServeWithoutAGap: a second server takes the
// first one's sockets (listeners and admin) instead of refusing the
// address, and serves on them after the first has shut down.
func TestHandedOverSocketsServeWithoutAGap(t *testing.T) {
	bs := startBackends(t, 1)
	cfg := yamlConfig(t, `
listeners: [{name: web, address: "127.0.0.1:1", sockets: 2}]
routes: [{name: app, match: {path_prefix: /}, upstream: app}]
upstreams: [{name: app, backends: [{address: "{{B1}}"}]}]
admin: {address: "127.0.0.1:1"}
`, bs)
	fixedPorts(t, cfg)
	old, url := startServer(t, cfg, Options{})
	socks, err := old.HandoffSockets()
	if err != nil {
		t.Fatal(err)
	}
	if got := len(socks); got != 3 {
		t.Fatalf("handoff sockets: got %v, want 3 (two listener sockets and the admin one)", got)
	}
	h := &handover{socks: socks}
	next, _ := startServer(t, cfg, Options{Sockets: h})
	if len(h.socks) != 0 {
		t.Errorf("sockets not taken: %v", len(h.socks))
	}
	if got, want := next.Addr("web").String(), cfg.Listeners[0].Address; got != want {
		t.Errorf("address: got %v, want %v", got, want)
	}
	shutdown(t, old)
	c := &http.Client{Timeout: 2 * time.Second}
	for i := 0; i < 20; i++ {
		if code, _, _ := get(t, c, url+"/"); code != 200 {
			t.Fatalf("request %d after the old server left: got %v, want 200", i, code)
		}
		c.CloseIdleConnections()
	}
	if code, _, _ := get(t, c, "http://"+next.AdminAddr().String()+"/readyz"); code != 200 {
		t.Errorf("admin /readyz on the handed-over socket: got %v, want 200", code)
	}
}

func TestWaitHealthChecked(t *testing.T) {
	bs := startBackends(t, 2)
	cfg := yamlConfig(t, `
listeners: [{name: web, address: "127.0.0.1:1"}]
routes: [{name: app, match: {path_prefix: /}, upstream: app}]
upstreams:
  - {name: app, backends: [{address: "{{B1}}"}, {address: "{{B2}}"}], health_check: {interval: 500ms, timeout: 200ms}}
  - {name: unchecked, backends: [{address: "{{B1}}"}]}
admin: {address: "off"}
`, bs)
	s, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.HealthChecked() {
		t.Errorf("before start: got checked, want not")
	}
	s.Start()
	defer shutdown(t, s)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	if !s.WaitHealthChecked(ctx) {
		t.Fatalf("first health round not done within 3s")
	}
}

// blockingRecorder holds the event loop that records a request for
// /block until released.
type blockingRecorder struct{ release chan struct{} }

func (r blockingRecorder) Record(ex wire.Exchange, _ proxy.Record) {
	if string(ex.Path()) == "/block" {
		<-r.release
	}
}

// TestLoopsStuckSeesAStuckLoop: while a loop is held by a blocking
// call, LoopsStuck says so (the watchdog stops pinging), and it recovers
// when the loop does; idle loops are never stuck.
func TestLoopsStuckSeesAStuckLoop(t *testing.T) {
	rec := blockingRecorder{release: make(chan struct{})}
	cfg := yamlConfig(t, `
listeners: [{name: web, address: "127.0.0.1:1"}]
routes: [{name: ping, respond: {status: 200}}]
admin: {address: "off"}
`, nil)
	s, url := startServer(t, cfg, Options{Recorder: rec})
	time.Sleep(300 * time.Millisecond) // idle, waiting for events
	if s.LoopsStuck(100 * time.Millisecond) {
		t.Fatalf("idle loops: got stuck, want not")
	}
	go http.Get(url + "/block")
	// Wait until the request reached the recorder: the loop is stuck.
	deadline := time.Now().Add(3 * time.Second)
	stuck := false
	for time.Now().Before(deadline) && !stuck {
		time.Sleep(20 * time.Millisecond)
		stuck = s.LoopsStuck(100 * time.Millisecond)
	}
	if !stuck {
		t.Fatalf("a loop held by a blocking call: never reported stuck")
	}
	close(rec.release)
	deadline = time.Now().Add(2 * time.Second)
	for s.LoopsStuck(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after the loop was released: still stuck")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestBeginDrainKeepsServing(t *testing.T) {
	cfg := yamlConfig(t, `
listeners: [{name: web, address: "127.0.0.1:1"}]
routes: [{name: ping, respond: {status: 200}}]
admin: {address: "off"}
`, nil)
	s, url := startServer(t, cfg, Options{})
	s.BeginDrain()
	if ok, why := s.Ready(); ok || why != "draining" {
		t.Errorf("Ready: got %v %q, want false \"draining\"", ok, why)
	}
	if code, _, _ := get(t, http.DefaultClient, url+"/"); code != 200 {
		t.Errorf("request during the shutdown delay: got %v, want 200", code)
	}
}

// freeAddr returns a loopback address with a port free now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// shutdown drains s within five seconds.
func shutdown(t *testing.T, s *Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}
