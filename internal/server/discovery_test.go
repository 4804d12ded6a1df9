package server

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/helios-lb/helios/internal/discovery/dnstest"
	"github.com/helios-lb/helios/internal/upstream"
)

// startBackendsOn starts a built-in backend on each of the loopback
// addresses ips (127.0.0.1, 127.0.0.2...), all on one port, as the
// addresses of a DNS name are; they are named b1..bn.
func startBackendsOn(t *testing.T, ips ...string) (bs []*testBackend, port int) {
	t.Helper()
	for try := 0; try < 20 && bs == nil; try++ {
		var lns []net.Listener
		for i, ip := range ips {
			ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
			if err != nil {
				break
			}
			if i == 0 {
				port = ln.Addr().(*net.TCPAddr).Port
			}
			lns = append(lns, ln)
		}
		if len(lns) < len(ips) {
			for _, ln := range lns {
				ln.Close()
			}
			port = 0
			continue
		}
		for i, ln := range lns {
			bs = append(bs, serveBackend(t, fmt.Sprintf("b%d", i+1), ln))
		}
	}
	if bs == nil {
		t.Fatalf("no port free on all of %v", ips)
	}
	return bs, port
}

// memberAddrs returns the addresses the first upstream serves now.
func memberAddrs(s *Server) []string {
	var out []string
	for _, b := range s.Pipeline().Graph().Upstreams[0].Members().Backends {
		out = append(out, b.Addr)
	}
	slices.Sort(out)
	return out
}

// waitMembers waits until the first upstream serves exactly addrs.
func waitMembers(t *testing.T, s *Server, addrs ...string) {
	t.Helper()
	slices.Sort(addrs)
	waitFor(t, 5*time.Second, fmt.Sprintf("members %v", addrs), func() bool { return slices.Equal(memberAddrs(s), addrs) })
}

// memberState returns the state of the first upstream's backend at addr,
// or nil.
func memberState(s *Server, addr string) *upstream.State {
	for _, b := range s.Pipeline().Graph().Upstreams[0].Members().Backends {
		if b.Addr == addr {
			return b.State
		}
	}
	return nil
}

// spread sends n GETs to url and counts the answers by backend name;
// every answer must be 200.
func spread(t *testing.T, url string, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for range n {
		status, _, name := get(t, http.DefaultClient, url)
		if status != 200 {
			t.Fatalf("GET %s: got %d, want 200", url, status)
		}
		got[name]++
	}
	return got
}

// getLater sends a GET of url on a goroutine; its status (0 for an
// error) comes on the channel.
func getLater(url string) <-chan int {
	ch := make(chan int, 1)
	go func() {
		resp, err := http.Get(url)
		if err != nil {
			ch <- 0
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		ch <- resp.StatusCode
	}()
	return ch
}

// idleConns returns the idle keep-alive connections every engine keeps to
// addr.
func idleConns(s *Server, addr string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, e := range s.engines {
		n += e.IdleBackendConns(addr)
	}
	return n
}

// TestDNSDiscovery guards issue 23: a dns backend follows its A records.
// A new address is added, one that stays keeps its state, one that goes
// is drained (its request in flight finishes, its idle connections
// close), and no request fails while it happens; a failed lookup and an
// empty answer keep the last good set and are counted; the view shows
// the source.
func TestDNSDiscovery(t *testing.T) {
	eachEngine(t, func(t *testing.T, engine string) {
		bs, port := startBackendsOn(t, "127.0.0.1", "127.0.0.2", "127.0.0.3")
		srv := dnstest.Start(t)
		srv.Set(t, "app.test", dns.TypeA, "app.test. 1 IN A 127.0.0.1", "app.test. 1 IN A 127.0.0.2")
		cfg := yamlConfig(t, fmt.Sprintf(`
listeners: [{name: web, address: "127.0.0.1:1"}]
routes: [{name: app, match: {path_prefix: /}, upstream: app}]
upstreams:
  - name: app
    backends: [{dns: app.test, port: %d, refresh: 100ms}]
discovery: {resolver: "%s", min_refresh: 50ms, timeout: 1s}
admin: {address: "127.0.0.1:1"}
`, port, srv.Addr()), nil)
		setEngine(cfg, engine)
		s, url := startServer(t, cfg, Options{})
		a1, a2, a3 := bs[0].addr, bs[1].addr, bs[2].addr
		if got := memberAddrs(s); !slices.Equal(got, []string{a1, a2}) {
			t.Fatalf("at start: got members %v, want %v (the first lookup runs before serving)", got, []string{a1, a2})
		}
		if got := spread(t, url+"/", 10); got["b1"] != 5 || got["b2"] != 5 {
			t.Fatalf("got %v, want b1 and b2 five times each", got)
		}
		kept := memberState(s, a2)

		// A slow request on b1, which is about to leave (round robin's
		// next turn after ten requests).
		slow := getLater(url + "/delay/600")
		waitFor(t, 5*time.Second, "a slow request in flight on b1", func() bool { return memberState(s, a1).Inflight() == 1 })
		tr := startTraffic(url+"/", 4)
		gone := memberState(s, a1)
		srv.Set(t, "app.test", dns.TypeA, "app.test. 1 IN A 127.0.0.2", "app.test. 1 IN A 127.0.0.3")
		waitMembers(t, s, a2, a3)
		if st := <-slow; st != 200 {
			t.Errorf("the request in flight on the removed backend: got %d, want 200", st)
		}
		if !gone.Removed() || gone.Available() {
			t.Errorf("the removed backend's state: removed %v, available %v, want removed and unavailable", gone.Removed(), gone.Available())
		}
		if memberState(s, a2) != kept {
			t.Errorf("the backend that stayed got a new state, want its state kept")
		}
		waitFor(t, 5*time.Second, "no idle connection to the removed backend", func() bool { return idleConns(s, a1) == 0 })
		before := bs[0].Requests()
		time.Sleep(200 * time.Millisecond)
		tr.stop()
		if f := tr.failed.Load(); f != 0 {
			t.Errorf("got %d failed GETs of %d while the set changed (last: %v), want 0", f, tr.ok.Load()+f, tr.lastErr.Load())
		}
		if got := bs[0].Requests(); got != before {
			t.Errorf("the removed backend got %d requests after it left, want 0", got-before)
		}
		if got := spread(t, url+"/", 10); got["b2"] != 5 || got["b3"] != 5 {
			t.Errorf("after the change: got %v, want b2 and b3 five times each", got)
		}

		// A failing server and an empty answer keep the set, counted.
		errs := func() float64 {
			v, _ := metric(t, s, "helios_discovery_errors_total", map[string]string{"upstream": "app", "source": "dns app.test:" + strconv.Itoa(port)})
			return v
		}
		srv.SetRcode("app.test", dns.RcodeServerFailure)
		waitFor(t, 5*time.Second, "a failed lookup counted", func() bool { return errs() >= 1 })
		srv.SetRcode("app.test", dns.RcodeSuccess)
		srv.Set(t, "app.test", dns.TypeA)
		n := errs()
		waitFor(t, 5*time.Second, "an empty answer counted", func() bool { return errs() > n })
		if got := memberAddrs(s); !slices.Equal(got, []string{a2, a3}) {
			t.Errorf("after failures: got members %v, want the last good set %v", got, []string{a2, a3})
		}
		_, ups := adminDo(t, s, "", "GET", "/api/v1/upstreams", "")
		for _, want := range []string{`"source": "dns app.test:` + strconv.Itoa(port) + `"`, `"last_error": "app.test: no records`, `"answered": true`} {
			if !strings.Contains(ups, want) {
				t.Errorf("GET /api/v1/upstreams: want %s in\n%s", want, ups)
			}
		}
	})
}

// TestDNSDiscoveryAllowEmpty checks allow_empty: an empty answer empties
// the upstream (503s, not ready), and the next answer fills it again.
func TestDNSDiscoveryAllowEmpty(t *testing.T) {
	bs, port := startBackendsOn(t, "127.0.0.1")
	srv := dnstest.Start(t)
	srv.Set(t, "app.test", dns.TypeA, "app.test. 1 IN A 127.0.0.1")
	s, url := startServer(t, yamlConfig(t, fmt.Sprintf(`
listeners: [{name: web, address: "127.0.0.1:1"}]
routes: [{name: app, match: {path_prefix: /}, upstream: app}]
upstreams:
  - name: app
    backends: [{dns: app.test, port: %d, refresh: 100ms}]
    allow_empty: true
discovery: {resolver: "%s", min_refresh: 50ms}
admin: {address: "off"}
`, port, srv.Addr()), nil), Options{})
	waitMembers(t, s, bs[0].addr)
	srv.Set(t, "app.test", dns.TypeA)
	waitMembers(t, s)
	if status, _, _ := get(t, http.DefaultClient, url+"/"); status != 503 {
		t.Errorf("with no backend: got %d, want 503", status)
	}
	if ok, _ := s.Ready(); ok {
		t.Errorf("with no backend: got ready, want not ready")
	}
	srv.Set(t, "app.test", dns.TypeA, "app.test. 1 IN A 127.0.0.1")
	waitMembers(t, s, bs[0].addr)
}

// TestSRVDiscovery checks srv backends: ports and weights from the
// records (weighted round robin gives exact shares), and a change of
// weights applied.
func TestSRVDiscovery(t *testing.T) {
	bs := startBackends(t, 2)
	srv := dnstest.Start(t)
	name := "_http._tcp.app.test"
	setSRV := func(w1, w2 int) {
		_, p1, _ := net.SplitHostPort(bs[0].addr)
		_, p2, _ := net.SplitHostPort(bs[1].addr)
		srv.Set(t, name, dns.TypeSRV,
			fmt.Sprintf("%s. 1 IN SRV 0 %d %s one.test.", name, w1, p1),
			fmt.Sprintf("%s. 1 IN SRV 0 %d %s two.test.", name, w2, p2))
	}
	setSRV(3, 1)
	srv.Set(t, "one.test", dns.TypeA, "one.test. 1 IN A 127.0.0.1")
	srv.Set(t, "two.test", dns.TypeA, "two.test. 1 IN A 127.0.0.1")
	s, url := startServer(t, yamlConfig(t, fmt.Sprintf(`
listeners: [{name: web, address: "127.0.0.1:1"}]
routes: [{name: app, match: {path_prefix: /}, upstream: app}]
upstreams:
  - name: app
    strategy: weighted_round_robin
    backends: [{srv: %s, refresh: 100ms}]
discovery: {resolver: "%s", min_refresh: 50ms}
admin: {address: "off"}
`, name, srv.Addr()), nil), Options{})
	if got := spread(t, url+"/", 40); got["b1"] != 30 || got["b2"] != 10 {
		t.Errorf("weights 3:1: got %v, want b1 30, b2 10", got)
	}
	setSRV(1, 1)
	waitFor(t, 5*time.Second, "the new weights", func() bool {
		ms := s.Pipeline().Graph().Upstreams[0].Members().Backends
		return len(ms) == 2 && ms[0].Weight == 1 && ms[1].Weight == 1
	})
	if got := spread(t, url+"/", 40); got["b1"] != 20 || got["b2"] != 20 {
		t.Errorf("weights 1:1: got %v, want 20 each", got)
	}
}

// TestBackendsFileDiscovery guards issue 23: backends_file is read again
// when it changes; backends that stay keep their state, those that go are
// drained; a broken file keeps the last good set and its problem is
// logged with FILE:LINE and counted; the file's backends join those the
// configuration lists.
func TestBackendsFileDiscovery(t *testing.T) {
	bs := startBackends(t, 3)
	dir := t.TempDir()
	path := filepath.Join(dir, "backends.yaml")
	write := func(content string) {
		t.Helper()
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write(fmt.Sprintf("- address: %s\n- address: %s\n", bs[1].addr, bs[2].addr))
	core, logs := observer.New(zap.InfoLevel)
	cfg := yamlConfig(t, fmt.Sprintf(`
listeners: [{name: web, address: "127.0.0.1:1"}]
routes: [{name: app, match: {path_prefix: /}, upstream: app}]
upstreams:
  - name: app
    backends: [{address: "%s"}]
    backends_file: %s
discovery: {file_refresh: 50ms}
admin: {address: "off"}
`, bs[0].addr, path), nil)
	s, url := startServer(t, cfg, Options{Logger: zap.New(core)})
	if got := memberAddrs(s); !slices.Equal(got, sorted(bs[0].addr, bs[1].addr, bs[2].addr)) {
		t.Fatalf("at start: got %v, want the configured backend and the file's two", got)
	}
	spread(t, url+"/", 6)
	kept := memberState(s, bs[1].addr)

	tr := startTraffic(url+"/", 4)
	write(fmt.Sprintf("[{\"address\": \"%s\", \"weight\": 2}]\n", bs[1].addr))
	waitMembers(t, s, bs[0].addr, bs[1].addr)
	time.Sleep(100 * time.Millisecond)
	tr.stop()
	if f := tr.failed.Load(); f != 0 {
		t.Errorf("got %d failed GETs while the file changed (last: %v), want 0", f, tr.lastErr.Load())
	}
	if memberState(s, bs[1].addr) != kept {
		t.Errorf("the backend that stayed in the file got a new state, want its state kept")
	}

	write(fmt.Sprintf("- address: %s\n- address: 127.0.0.1\n", bs[2].addr))
	source := map[string]string{"upstream": "app", "source": "file " + path}
	waitFor(t, 5*time.Second, "the broken file counted", func() bool {
		v, _ := metric(t, s, "helios_discovery_errors_total", source)
		return v == 1
	})
	if got := memberAddrs(s); !slices.Equal(got, sorted(bs[0].addr, bs[1].addr)) {
		t.Errorf("with a broken file: got %v, want the last good set", got)
	}
	want := path + `:2: [1].address: "127.0.0.1" is not host:port`
	if n := logs.FilterMessageSnippet("discovery: lookup failed").FilterFieldKey("error").Len(); n != 1 {
		t.Errorf("got %d log lines for the broken file, want 1", n)
	} else if got := logs.FilterMessageSnippet("discovery: lookup failed").All()[0].ContextMap()["error"]; !strings.Contains(fmt.Sprint(got), want) {
		t.Errorf("got log error %q, want it to hold %q", got, want)
	}
	time.Sleep(200 * time.Millisecond)
	if v, _ := metric(t, s, "helios_discovery_errors_total", source); v != 1 {
		t.Errorf("the same broken file counted %v times, want once", v)
	}
	write(fmt.Sprintf("- address: %s\n", bs[2].addr))
	waitMembers(t, s, bs[0].addr, bs[2].addr)
}

func sorted(s ...string) []string {
	slices.Sort(s)
	return s
}

// TestReloadDrainsRemovedBackend checks that a backend a reload takes out
// of its upstream is drained as one discovery removes is: marked removed
// and its idle connections closed, while one that stays keeps its state.
func TestReloadDrainsRemovedBackend(t *testing.T) {
	eachEngine(t, func(t *testing.T, engine string) {
		bs := startBackends(t, 2)
		const tmpl = `
listeners: [{name: web, address: "127.0.0.1:1"}]
routes: [{name: app, match: {path_prefix: /}, upstream: app}]
upstreams: [{name: app, backends: [%s]}]
admin: {address: "off"}
`
		both := fmt.Sprintf(`{address: "%s"}, {address: "%s"}`, bs[0].addr, bs[1].addr)
		cfg := yamlConfig(t, fmt.Sprintf(tmpl, both), nil)
		setEngine(cfg, engine)
		s, url := startServer(t, cfg, Options{})
		spread(t, url+"/", 10)
		waitFor(t, 5*time.Second, "idle connections to both backends", func() bool {
			return idleConns(s, bs[0].addr) > 0 && idleConns(s, bs[1].addr) > 0
		})
		gone, kept := memberState(s, bs[0].addr), memberState(s, bs[1].addr)
		next := yamlConfig(t, fmt.Sprintf(tmpl, fmt.Sprintf(`{address: "%s"}`, bs[1].addr)), nil)
		setEngine(next, engine)
		if err := s.Reload(next); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 5*time.Second, "no idle connection to the removed backend", func() bool { return idleConns(s, bs[0].addr) == 0 })
		if !gone.Removed() || memberState(s, bs[1].addr) != kept || kept.Removed() {
			t.Errorf("got removed %v for the backend that left, kept state %v, want removed, and the same state for the one that stayed",
				gone.Removed(), memberState(s, bs[1].addr) == kept)
		}
		if n := idleConns(s, bs[1].addr); n == 0 {
			t.Errorf("got no idle connection to the backend that stayed, want its warm connections kept")
		}
	})
}

// adminDo sends a request to the admin API with the token and returns the
// status and body.
func adminDo(t *testing.T, s *Server, token, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+s.AdminAddr().String()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestAdminBackendControl guards issue 23: drain, disable, enable and
// weight through the admin API, on real sockets, with traffic running.
// A drained backend takes no new request while the one in flight
// finishes, and no request fails; the admin state survives a reload;
// a disabled backend's health checks pause; weights change the shares;
// the view and the metrics show it all.
func TestAdminBackendControl(t *testing.T) {
	eachEngine(t, func(t *testing.T, engine string) {
		const token = "t0ken-t0ken-t0ken"
		bs := startBackends(t, 2)
		tmpl := `
listeners: [{name: web, address: "127.0.0.1:1"}]
routes: [{name: app, match: {path_prefix: /}, upstream: app}]
upstreams:
  - name: app
    strategy: weighted_round_robin
    backends: [{address: "{{B1}}"}, {address: "{{B2}}"}]
    health_check: {interval: 100ms, timeout: 80ms}
admin: {address: "127.0.0.1:1", token: t0ken-t0ken-t0ken}
`
		cfg := yamlConfig(t, tmpl, bs)
		setEngine(cfg, engine)
		s, url := startServer(t, cfg, Options{})
		b1 := "/api/v1/upstreams/app/backends/" + bs[0].addr
		state := map[string]string{"upstream": "app", "backend": bs[0].addr}
		spread(t, url+"/", 10)

		// A slow request on b1 (the weighted cycle's next turn), then
		// traffic, then the drain.
		slow := getLater(url + "/delay/500")
		waitFor(t, 5*time.Second, "the slow request in flight on b1", func() bool { return memberState(s, bs[0].addr).Inflight() == 1 })
		tr := startTraffic(url+"/", 4)
		time.Sleep(50 * time.Millisecond)
		status, body := adminDo(t, s, token, "POST", b1+"/drain", "")
		if status != 200 || !strings.Contains(body, `"admin_state": "draining"`) || strings.Contains(body, `"inflight": 0`) {
			t.Fatalf("POST drain: got %d %s, want 200, draining, the slow request in flight", status, body)
		}
		// Requests Helios sent it (health checks go on, so not what the
		// backend counts), once a pick racing with the drain is done.
		time.Sleep(20 * time.Millisecond)
		drained := memberState(s, bs[0].addr)
		drainedAt := drained.Requests()
		if st := <-slow; st != 200 {
			t.Errorf("the request in flight on the drained backend: got %d, want 200", st)
		}
		time.Sleep(200 * time.Millisecond)
		if got := drained.Requests(); got != drainedAt {
			t.Errorf("the drained backend got %d requests after the drain, want 0", got-drainedAt)
		}
		if status, body := adminDo(t, s, token, "GET", b1, ""); status != 200 || !strings.Contains(body, `"inflight": 0`) || !strings.Contains(body, `"available": false`) {
			t.Errorf("GET the drained backend: got %d %s, want nothing in flight, unavailable", status, body)
		}
		if v, _ := metric(t, s, "helios_backend_admin_state", state); v != 1 {
			t.Errorf("helios_backend_admin_state while draining: got %v, want 1", v)
		}

		// A reload that keeps the backend keeps its admin state.
		next := yamlConfig(t, tmpl, bs)
		setEngine(next, engine)
		if err := s.Reload(next); err != nil {
			t.Fatal(err)
		}
		if status, body := adminDo(t, s, token, "GET", b1, ""); !strings.Contains(body, `"admin_state": "draining"`) {
			t.Errorf("after a reload: got %d %s, want still draining", status, body)
		}

		// Disabled: out of rotation, and its checks pause.
		if status, body := adminDo(t, s, token, "POST", b1+"/disable", ""); status != 200 || !strings.Contains(body, `"admin_state": "disabled"`) {
			t.Errorf("POST disable: got %d %s", status, body)
		}
		checks := func() float64 {
			v, _ := metric(t, s, "helios_health_checks_total", map[string]string{"backend": bs[0].addr, "result": "pass"})
			return v
		}
		time.Sleep(150 * time.Millisecond) // a check under way may end
		c := checks()
		time.Sleep(400 * time.Millisecond)
		if got := checks(); got != c {
			t.Errorf("a disabled backend was checked %v times in 400ms, want 0", got-c)
		}
		if v, _ := metric(t, s, "helios_backend_admin_state", state); v != 2 {
			t.Errorf("helios_backend_admin_state while disabled: got %v, want 2", v)
		}

		// Enabled: back in rotation.
		if status, body := adminDo(t, s, token, "POST", b1+"/enable", ""); status != 200 || !strings.Contains(body, `"admin_state": "enabled"`) {
			t.Errorf("POST enable: got %d %s", status, body)
		}
		back := bs[0].Requests()
		waitFor(t, 5*time.Second, "traffic on the enabled backend", func() bool { return bs[0].Requests() > back+10 })
		tr.stop()
		if f := tr.failed.Load(); f != 0 {
			t.Errorf("got %d failed GETs of %d (last: %v), want 0", f, tr.ok.Load()+f, tr.lastErr.Load())
		}

		// Weights.
		status, body = adminDo(t, s, token, "PUT", b1+"/weight", `{"weight": 3}`)
		if status != 200 || !strings.Contains(body, `"weight": 3`) || !strings.Contains(body, `"configured_weight": 1`) {
			t.Errorf("PUT weight: got %d %s, want weight 3, configured 1", status, body)
		}
		if got := spread(t, url+"/", 40); got["b1"] != 30 || got["b2"] != 10 {
			t.Errorf("with weight 3:1: got %v, want b1 30, b2 10", got)
		}
		if v, _ := metric(t, s, "helios_backend_weight", state); v != 3 {
			t.Errorf("helios_backend_weight: got %v, want 3", v)
		}
		if status, body := adminDo(t, s, token, "DELETE", b1+"/weight", ""); status != 200 || strings.Contains(body, "configured_weight") {
			t.Errorf("DELETE weight: got %d %s, want the configured weight back", status, body)
		}
		if got := spread(t, url+"/", 40); got["b1"] != 20 || got["b2"] != 20 {
			t.Errorf("back to 1:1: got %v, want 20 each", got)
		}

		for _, tt := range []struct {
			method, path, body, token string
			want                      int
		}{
			{"POST", b1 + "/drain", "", "", 401},
			{"POST", b1 + "/drain", "", "wrong", 401},
			{"POST", "/api/v1/upstreams/app/backends/127.0.0.1:1/drain", "", token, 404},
			{"POST", "/api/v1/upstreams/nope/backends/" + bs[0].addr + "/drain", "", token, 404},
			{"PUT", b1 + "/weight", `{"weight": 0}`, token, 400},
			{"PUT", b1 + "/weight", `{"weight": 1001}`, token, 400},
			{"PUT", b1 + "/weight", `{"weigth": 2}`, token, 400},
			{"GET", b1 + "/drain", "", token, 405},
		} {
			if got, body := adminDo(t, s, tt.token, tt.method, tt.path, tt.body); got != tt.want {
				t.Errorf("%s %s %s: got %d %s, want %d", tt.method, tt.path, tt.body, got, body, tt.want)
			}
		}
		if status, body := adminDo(t, s, token, "GET", b1, ""); !strings.Contains(body, `"admin_state": "enabled"`) || !strings.Contains(body, `"weight": 1`) {
			t.Errorf("after refused changes: got %d %s, want enabled, weight 1", status, body)
		}
	})
}
