package server

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/helios-lb/helios/internal/clock"
)

// getAs fetches url with the given header lines ("Name: value") and
// returns the status and the X-Backend header.
func getAs(t *testing.T, c *http.Client, url string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range header {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Add(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("X-Backend")
}

const hashedBackends = `
listeners: [{name: web, address: "127.0.0.1:1"}]
routes:
  - {name: app, match: {path_prefix: /}, upstream: app}
upstreams:
  - name: app
    strategy: consistent_hash
    hash_key: %s
    backends: [{address: "{{B1}}"}, {address: "{{B2}}"}, {address: "{{B3}}"}]
admin: {address: "off"}
`

// TestConsistentHashThroughHelios sends requests keyed by a header, a
// cookie and a query parameter through real sockets: a key always reaches
// one backend, keys spread over the backends, and requests without the
// key go round robin (the default hash_fallback).
func TestConsistentHashThroughHelios(t *testing.T) {
	tests := []struct {
		key    string
		header func(user string) []string
		path   func(user string) string
	}{
		{key: "header:X-User", header: func(u string) []string { return []string{"X-User: " + u} }},
		{key: "cookie:uid", header: func(u string) []string { return []string{"Cookie: theme=dark; uid=" + u} }},
		{key: "query:user", path: func(u string) string { return "/?user=" + u }},
	}
	eachEngine(t, func(t *testing.T, engine string) {
		bs := startBackends(t, 3)
		for _, tt := range tests {
			t.Run(tt.key, func(t *testing.T) {
				cfg := yamlConfig(t, fmt.Sprintf(hashedBackends, tt.key), bs)
				setEngine(cfg, engine)
				_, url := startServer(t, cfg, Options{})
				c := &http.Client{}
				seen := map[string]bool{}
				for u := range 30 {
					user := fmt.Sprintf("user-%d", u)
					var hdr []string
					path := "/"
					if tt.header != nil {
						hdr = tt.header(user)
					}
					if tt.path != nil {
						path = tt.path(user)
					}
					_, first := getAs(t, c, url+path, hdr...)
					for range 3 {
						if status, got := getAs(t, c, url+path, hdr...); status != 200 || got != first {
							t.Fatalf("%s: got %d from %q, want 200 from %q", user, status, got, first)
						}
					}
					seen[first] = true
				}
				if len(seen) != 3 {
					t.Errorf("backends reached by 30 keys: got %v, want all 3", seen)
				}
				keyless := map[string]bool{}
				for range 3 {
					_, b := getAs(t, c, url+"/")
					keyless[b] = true
				}
				if len(keyless) != 3 {
					t.Errorf("3 requests without the key: got backends %v, want 3 different (round robin)", keyless)
				}
			})
		}
	})
}

// TestBoundedLoadThroughHelios holds nine requests with one hot key in
// flight, one after the other: with bounded_load 1.25 over three backends
// none takes more than ceil(1.25 × 9/3) = 4 of them; without a bound all
// nine would go to the key's backend.
func TestBoundedLoadThroughHelios(t *testing.T) {
	eachEngine(t, func(t *testing.T, engine string) {
		bs := startBackends(t, 3)
		cfg := yamlConfig(t, fmt.Sprintf(hashedBackends, "header:X-User")+`
`, bs)
		cfg.Upstreams[0].BoundedLoad = 1.25
		setEngine(cfg, engine)
		s, url := startServer(t, cfg, Options{})
		inflight := func() (n int64) {
			for _, b := range s.Pipeline().Graph().Upstreams[0].Backends {
				n += b.Inflight()
			}
			return n
		}
		var wg sync.WaitGroup
		got := make([]string, 9)
		for i := range got {
			wg.Go(func() {
				_, got[i] = getAs(t, &http.Client{}, url+"/delay/1500", "X-User: hot")
			})
			// The next one is picked once this one is in flight.
			waitFor(t, 5*time.Second, "request in flight", func() bool { return inflight() == int64(i+1) })
		}
		wg.Wait()
		counts := map[string]int{}
		for _, b := range got {
			counts[b]++
		}
		for b, n := range counts {
			if n > 4 {
				t.Errorf("backend %s: got %d of 9 hot requests, want at most 4 (all: %v)", b, n, counts)
			}
		}
	})
}

const splitConfig = `
listeners: [{name: web, address: "127.0.0.1:1"}]
routes:
  - name: canary
    match: {path_prefix: /}
    split:
      - {upstream: v1, weight: %d, match: {cookie: version, value: v1}}
      - {upstream: v2, weight: %d, match: {header: X-Canary}}
upstreams:
  - {name: v1, backends: [{address: "{{B1}}"}]}
  - {name: v2, backends: [{address: "{{B2}}"}]}
admin: {address: "off"}
`

// TestSplitThroughHelios checks a canary split through real sockets: the
// weights share the requests, a header or cookie pins its variant, a
// reload changes the weights, and the requests are counted per variant in
// helios_requests_total.
func TestSplitThroughHelios(t *testing.T) {
	eachEngine(t, func(t *testing.T, engine string) {
		bs := startBackends(t, 2)
		cfg := yamlConfig(t, fmt.Sprintf(splitConfig, 1, 0), bs)
		setEngine(cfg, engine)
		reg := prometheus.NewRegistry()
		s, url := startServer(t, cfg, Options{Registry: reg})
		c := &http.Client{}
		check := func(what, want string, header ...string) {
			t.Helper()
			for range 10 {
				if status, got := getAs(t, c, url+"/", header...); status != 200 || got != want {
					t.Fatalf("%s: got %d from %q, want 200 from %q", what, status, got, want)
				}
			}
		}
		check("weights 1:0", "b1")
		check("pinned by header", "b2", "X-Canary: 1")
		cfg2 := yamlConfig(t, fmt.Sprintf(splitConfig, 0, 1), bs)
		setEngine(cfg2, engine)
		if err := s.Reload(cfg2); err != nil {
			t.Fatal(err)
		}
		check("weights 0:1 after a reload", "b2")
		check("pinned by cookie", "b1", "Cookie: version=v1")

		counts := map[string]float64{}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "helios_requests_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["route"] == "canary" && labels["code"] == "200" {
					counts[labels["upstream"]] += m.GetCounter().GetValue()
				}
			}
		}
		if counts["v1"] != 20 || counts["v2"] != 20 {
			t.Errorf("helios_requests_total{route=canary}: got %v, want 20 for v1 and 20 for v2", counts)
		}
	})
}

// TestSlowStartOnReload adds a backend by a reload to an upstream with
// slow_start: it gets nothing at first, about its effective share half way
// through the window, and its full share at the end (time from a fake
// clock).
func TestSlowStartOnReload(t *testing.T) {
	const two = `
listeners: [{name: web, address: "127.0.0.1:1"}]
routes: [{name: app, match: {path_prefix: /}, upstream: app}]
upstreams:
  - name: app
    slow_start: 10s
    backends: [{address: "{{B1}}"}, {address: "{{B2}}"}%s]
admin: {address: "off"}
`
	eachEngine(t, func(t *testing.T, engine string) {
		bs := startBackends(t, 3)
		clk := clock.NewFake(time.Unix(1_000_000, 0))
		cfg := yamlConfig(t, fmt.Sprintf(two, ""), bs)
		setEngine(cfg, engine)
		s, url := startServer(t, cfg, Options{Clock: clk})
		c := &http.Client{}
		share := func() map[string]int {
			counts := map[string]int{}
			for range 300 {
				_, b := getAs(t, c, url+"/")
				counts[b]++
			}
			return counts
		}
		// The first generation's backends start at full share.
		if got := share(); got["b1"] != 150 || got["b2"] != 150 {
			t.Fatalf("before the reload: got %v, want 150 each", got)
		}
		cfg2 := yamlConfig(t, fmt.Sprintf(two, `, {address: "{{B3}}"}`), bs)
		setEngine(cfg2, engine)
		if err := s.Reload(cfg2); err != nil {
			t.Fatal(err)
		}
		if got := share(); got["b3"] != 0 {
			t.Errorf("at the start of its slow start: b3 got %d of 300, want 0 (all: %v)", got["b3"], got)
		}
		clk.Advance(5 * time.Second)
		// Effective weight 0.5 against 2: a share of 0.5/2.5 = 60 of 300.
		if got := share(); got["b3"] < 40 || got["b3"] > 80 {
			t.Errorf("half way: b3 got %d of 300, want about 60 (all: %v)", got["b3"], got)
		}
		clk.Advance(5 * time.Second)
		if got := share(); got["b3"] != 100 {
			t.Errorf("after the window: b3 got %d of 300, want 100 (all: %v)", got["b3"], got)
		}
	})
}

// TestHashKeyOverH2C keys consistent_hash by a cookie and sends the same
// users over HTTP/1.1 and over h2c, whose client splits the Cookie header
// into one field per cookie (RFC 9113 §8.2.3): each user reaches the same
// backend either way, so keys are read alike whatever the protocol.
func TestHashKeyOverH2C(t *testing.T) {
	eachEngine(t, func(t *testing.T, engine string) {
		bs := startBackends(t, 3)
		cfg := yamlConfig(t, fmt.Sprintf(hashedBackends, "cookie:uid"), bs)
		cfg.Listeners[0].H2C = true
		setEngine(cfg, engine)
		_, url := startServer(t, cfg, Options{})
		h1 := &http.Client{}
		h2 := &http.Client{Transport: newH2ServerClient(t, nil)}
		seen := map[string]bool{}
		for u := range 20 {
			cookie := fmt.Sprintf("Cookie: theme=dark; uid=user-%d; lang=en", u)
			_, want := getAs(t, h1, url+"/", cookie)
			for range 3 {
				if status, got := getAs(t, h2, url+"/", cookie); status != 200 || got != want {
					t.Fatalf("user %d over h2c: got %d from %q, want 200 from %q (as over HTTP/1.1)", u, status, got, want)
				}
			}
			seen[want] = true
		}
		if len(seen) < 2 {
			t.Errorf("backends reached by 20 users: got %v, want more than one", seen)
		}
	})
}
