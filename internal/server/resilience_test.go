package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// metric returns the value of the series of family name whose labels
// include want, read from the server's registry.
func metric(t *testing.T, s *Server, name string, want map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := s.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for k, v := range want {
				if got[k] != v {
					continue series
				}
			}
			return value(m), true
		}
	}
	return 0, false
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return 0
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

// traffic runs GET loops against url until stopped and counts failures.
type traffic struct {
	ok, failed atomic.Int64
	lastErr    atomic.Value
	cancel     context.CancelFunc
	wg         sync.WaitGroup
}

func startTraffic(url string, workers int) *traffic {
	ctx, cancel := context.WithCancel(context.Background())
	tr := &traffic{cancel: cancel}
	c := &http.Client{Timeout: 5 * time.Second}
	for i := 0; i < workers; i++ {
		tr.wg.Add(1)
		go func() {
			defer tr.wg.Done()
			for ctx.Err() == nil {
				resp, err := c.Get(url)
				if err != nil {
					tr.failed.Add(1)
					tr.lastErr.Store(err.Error())
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					tr.failed.Add(1)
					tr.lastErr.Store(resp.Status)
					continue
				}
				tr.ok.Add(1)
			}
		}()
	}
	return tr
}

func (tr *traffic) stop() {
	tr.cancel()
	tr.wg.Wait()
}

const checkedConfig = `
listeners: [{name: web, address: "127.0.0.1:1"}]
routes:
  - {name: app, match: {path_prefix: /}, upstream: app}
upstreams:
  - name: app
    strategy: round_robin
    backends: [{address: "{{B1}}"}, {address: "{{B2}}"}, {address: "{{B3}}"}]
    health_check: {path: /healthz, interval: 100ms, timeout: 80ms, fails: 2, passes: 2}
    passive: {max_fails: 3, fail_window: 10s, eject_for: 200ms, max_eject_for: 1s}
admin: {address: "127.0.0.1:1"}
`

func TestBackendDiesAndComesBack(t *testing.T) {
	bs := startBackends(t, 3)
	s, url := startServer(t, yamlConfig(t, checkedConfig, bs), Options{})
	victim := map[string]string{"upstream": "app", "backend": bs[1].addr}
	waitFor(t, 2*time.Second, "first health checks", func() bool {
		v, ok := metric(t, s, "helios_health_checks_total", map[string]string{"backend": bs[1].addr, "result": "pass"})
		return ok && v >= 1
	})

	tr := startTraffic(url+"/", 4)
	time.Sleep(300 * time.Millisecond)
	bs[1].stop()
	// fails: 2 at interval 100ms (±10 %): down after about 200ms.
	took := waitFor(t, 2*time.Second, "helios_backend_up 0 for the dead backend", func() bool {
		v, ok := metric(t, s, "helios_backend_up", victim)
		return ok && v == 0
	})
	t.Logf("marked down %v after the kill", took)
	if v, _ := metric(t, s, "helios_backend_up", map[string]string{"backend": bs[0].addr}); v != 1 {
		t.Errorf("a live backend shows helios_backend_up %v, want 1", v)
	}
	time.Sleep(300 * time.Millisecond)
	before := tr.ok.Load()
	bs[1].restart(t)
	took = waitFor(t, 2*time.Second, "helios_backend_up 1 after the restart", func() bool {
		v, _ := metric(t, s, "helios_backend_up", victim)
		return v == 1
	})
	t.Logf("back up %v after the restart", took)
	waitFor(t, 2*time.Second, "the restarted backend getting traffic", func() bool { return bs[1].Requests() > 0 })
	tr.stop()
	if f := tr.failed.Load(); f != 0 {
		t.Errorf("got %d failed GETs (last: %v) of %d, want 0", f, tr.lastErr.Load(), tr.ok.Load()+f)
	}
	if tr.ok.Load() <= before {
		t.Error("no traffic got through after the restart")
	}
	// Admin JSON agrees.
	ups := adminUpstreams(t, s, "")
	if len(ups) != 1 || len(ups[0].Backends) != 3 {
		t.Fatalf("got %+v, want one upstream with three backends", ups)
	}
	for i, b := range ups[0].Backends {
		if b.Health != "up" || !b.Available {
			t.Errorf("admin: backend %d %s: got health %q available %v, want up and available", i, b.Address, b.Health, b.Available)
		}
		v, _ := metric(t, s, "helios_backend_requests_total", map[string]string{"backend": b.Address})
		if float64(b.Requests) < v || float64(b.Requests) > v+50 {
			t.Errorf("admin says backend %s got %d requests, metrics %v", b.Address, b.Requests, v)
		}
	}
}

type upstreamView struct {
	Name     string `json:"name"`
	Backends []struct {
		Address   string `json:"address"`
		Available bool   `json:"available"`
		Health    string `json:"health"`
		Breaker   string `json:"breaker"`
		Requests  uint64 `json:"requests"`
		Failures  uint64 `json:"failures"`
		Ejected   bool   `json:"ejected"`
	} `json:"backends"`
}

func adminUpstreams(t *testing.T, s *Server, token string) []upstreamView {
	t.Helper()
	status, body := adminDo(t, s, token, "GET", "/api/v1/upstreams", "")
	if status != 200 {
		t.Fatalf("GET /api/v1/upstreams: got %d %s", status, body)
	}
	var v struct {
		Upstreams []upstreamView `json:"upstreams"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	return v.Upstreams
}

func TestFailingBackendTripsItsBreaker(t *testing.T) {
	bs := startBackends(t, 3)
	cfg := yamlConfig(t, `
listeners: [{name: web, address: "127.0.0.1:1"}]
routes: [{name: app, match: {path_prefix: /}, upstream: app}]
upstreams:
  - name: app
    backends: [{address: "{{B1}}"}, {address: "{{B2}}"}, {address: "{{B3}}"}]
    circuit_breaker: {consecutive_failures: 3, open_for: 30s}
admin: {address: "127.0.0.1:1"}
`, bs)
	s, url := startServer(t, cfg, Options{})
	bs[0].SetFailing(503)
	c := &http.Client{}
	for i := 0; i < 90; i++ {
		if status, body, _ := get(t, c, url+"/"); status != 200 {
			t.Fatalf("request %d: got %d %q, want 200 (the others carry the load)", i, status, body)
		}
	}
	if v, _ := metric(t, s, "helios_circuit_breaker_state", map[string]string{"backend": bs[0].addr}); v != 2 {
		t.Errorf("failing backend: got helios_circuit_breaker_state %v, want 2 (open)", v)
	}
	if v, _ := metric(t, s, "helios_circuit_breaker_state", map[string]string{"backend": bs[1].addr}); v != 0 {
		t.Errorf("healthy backend: got helios_circuit_breaker_state %v, want 0 (closed)", v)
	}
	// Three failures open it; after that it gets nothing.
	if n := bs[0].Requests(); n != 3 {
		t.Errorf("failing backend got %d requests, want 3 (the breaker's consecutive_failures)", n)
	}
	if n := bs[1].Requests() + bs[2].Requests(); n != 90 {
		t.Errorf("healthy backends got %d requests, want all 90", n)
	}
	if v, _ := metric(t, s, "helios_retries_total", map[string]string{"upstream": "app"}); v != 3 {
		t.Errorf("got helios_retries_total %v, want 3 (one per 503)", v)
	}
	if v, _ := metric(t, s, "helios_requests_total", map[string]string{"route": "app", "code": "200"}); v != 90 {
		t.Errorf("got helios_requests_total{code=200} %v, want 90", v)
	}
	ups := adminUpstreams(t, s, "")
	if b := ups[0].Backends[0]; b.Breaker != "open" || b.Available || b.Failures != 3 {
		t.Errorf("admin view of the failing backend: got %+v, want breaker open, unavailable, 3 failures", b)
	}
}

func TestReloadsUnderTrafficLoseNothing(t *testing.T) {
	bs := startBackends(t, 3)
	tmpl := func(strategy, body string) string {
		return `
listeners: [{name: web, address: "127.0.0.1:1"}]
routes:
  - {name: ping, match: {path: /ping}, respond: {status: 200, body: "` + body + `"}}
  - {name: app, match: {path_prefix: /}, upstream: app}
upstreams:
  - name: app
    strategy: ` + strategy + `
    backends: [{address: "{{B1}}"}, {address: "{{B2}}"}, {address: "{{B3}}"}]
    health_check: {interval: 50ms, timeout: 40ms}
    circuit_breaker: {}
admin: {address: "off"}
`
	}
	cfgs := []string{tmpl("round_robin", "a"), tmpl("least_conn", "b"), tmpl("p2c", "c")}
	s, url := startServer(t, yamlConfig(t, cfgs[0], bs), Options{})
	addr := s.Addr("web").String()
	tr := startTraffic(url+"/", 4)
	pings := startTraffic(url+"/ping", 1)
	for i := 0; i < 100; i++ {
		cfg := yamlConfig(t, cfgs[i%3], bs)
		cfg.Listeners[0].Address = addr // the same socket stays
		if err := s.Reload(cfg); err != nil {
			t.Fatalf("reload %d: %v", i, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	tr.stop()
	pings.stop()
	if f := tr.failed.Load() + pings.failed.Load(); f != 0 {
		t.Errorf("got %d failed requests (last: %v, %v) across 100 reloads, want 0", f, tr.lastErr.Load(), pings.lastErr.Load())
	}
	if tr.ok.Load() < 100 {
		t.Errorf("only %d requests went through during the reloads", tr.ok.Load())
	}
	if got := s.Addr("web").String(); got != addr {
		t.Errorf("listener moved from %s to %s across reloads", addr, got)
	}
}

func TestBadReloadLeavesOldConfigServing(t *testing.T) {
	bs := startBackends(t, 1)
	dir := t.TempDir()
	file := filepath.Join(dir, "helios.yaml")
	good := func(body string) string {
		return fmt.Sprintf(`
listeners: [{name: web, address: "127.0.0.1:1"}]
routes:
  - {name: ping, match: {path: /ping}, respond: {status: 200, body: %q}}
  - {name: app, match: {path_prefix: /}, upstream: app}
upstreams: [{name: app, backends: [{address: "%s"}]}]
admin: {address: "127.0.0.1:1", token: secret-secret-secret}
`, body, bs[0].addr)
	}
	os.WriteFile(file, []byte(good("v1")), 0o644)
	cfg := yamlConfig(t, good("v1"), bs)
	s, url := startServer(t, cfg, Options{ConfigPath: file})
	post := func(token string) (int, string) { return adminDo(t, s, token, "POST", "/api/v1/reload", "") }
	if code, _ := post(""); code != 401 {
		t.Errorf("reload without the token: got %d, want 401", code)
	}
	if code, _ := post("wrong"); code != 401 {
		t.Errorf("reload with a wrong token: got %d, want 401", code)
	}

	// The file on disk listens on port 1 (a placeholder); reloads keep the
	// test's socket only if the address is the same, so the bad file is
	// bad in other ways and the good one is rewritten with the real port.
	os.WriteFile(file, []byte(strings.Replace(good("v2"), "upstream: app", "upstream: nope", 1)+"\nbogus: 1\n"), 0o644)
	code, body := post("secret-secret-secret")
	if code != 422 || !strings.Contains(body, `upstream \"nope\" is not defined`) || !strings.Contains(body, "bogus: unknown key") {
		t.Errorf("bad reload: got %d %s, want 422 listing both problems", code, body)
	}
	if _, got, _ := get(t, http.DefaultClient, url+"/ping"); got != "v1" {
		t.Errorf("after a bad reload: got %q, want v1", got)
	}
	os.WriteFile(file, []byte(strings.Replace(good("v2"), "127.0.0.1:1\"}]", s.Addr("web").String()+"\"}]", 1)), 0o644)
	if code, body := post("secret-secret-secret"); code != 200 {
		t.Fatalf("good reload: got %d %s, want 200", code, body)
	}
	if _, got, _ := get(t, http.DefaultClient, url+"/ping"); got != "v2" {
		t.Errorf("after a good reload: got %q, want v2", got)
	}
}

func TestAdminEndpoints(t *testing.T) {
	bs := startBackends(t, 1)
	cfg := yamlConfig(t, `
listeners: [{name: web, address: "127.0.0.1:1"}]
routes: [{name: app, match: {path_prefix: /}, upstream: app}]
upstreams: [{name: app, backends: [{address: "{{B1}}"}]}]
admin: {address: "127.0.0.1:1", token: "t0ken-t0ken-t0ken"}
`, bs)
	s, url := startServer(t, cfg, Options{})
	get(t, http.DefaultClient, url+"/")
	base := "http://" + s.AdminAddr().String()
	tests := []struct {
		path, token string
		status      int
		contains    string
	}{
		{"/healthz", "", 200, "ok"},
		{"/readyz", "", 200, "ready"},
		{"/metrics", "", 401, ""},
		{"/metrics", "t0ken-t0ken-t0ken", 200, `helios_requests_total{code="200",route="app",upstream="app"} 1`},
		{"/metrics", "t0ken-t0ken-t0ken", 200, "go_goroutines"},
		{"/metrics", "t0ken-t0ken-t0ken", 200, `helios_open_connections{listener="web"}`},
		{"/api/v1/upstreams", "", 401, ""},
		{"/api/v1/upstreams", "t0ken-t0ken-t0ken", 200, `"address": "` + bs[0].addr + `"`},
		{"/debug/pprof/", "t0ken-t0ken-t0ken", 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.path+" token="+tt.token, func(t *testing.T) {
			req, _ := http.NewRequest("GET", base+tt.path, nil)
			if tt.token != "" {
				req.Header.Set("Authorization", "Bearer "+tt.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status || !strings.Contains(string(body), tt.contains) {
				t.Errorf("got %d, want %d containing %q; body:\n%.600s", resp.StatusCode, tt.status, tt.contains, body)
			}
		})
	}
	// Not ready once the only backend is down, nor while draining.
	s.cur.Load().graph.Upstreams[0].Backends[0].SetDown(true)
	if ok, why := s.Ready(); ok || !strings.Contains(why, "no available backend") {
		t.Errorf("with the only backend down: got ready=%v %q, want not ready", ok, why)
	}
	s.cur.Load().graph.Upstreams[0].Backends[0].SetDown(false)
	s.draining.Store(true)
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 {
		t.Errorf("readyz while draining: got %d, want 503", resp.StatusCode)
	}
}
