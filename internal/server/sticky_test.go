package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

const stickyConfig = `
listeners: [{name: web, address: "127.0.0.1:1", h2c: true}]
routes:
  - {name: app, match: {path_prefix: /}, upstream: app}
upstreams:
  - name: app
    strategy: %s
    sticky: {cookie: srv, ttl: 1h}
    backends: [{address: "{{B1}}"}, {address: "{{B2}}"}, {address: "{{B3}}"}%s]
admin: {address: "off"}
`

// stickyClient is a client of a sticky upstream: it sends back the
// cookie the last answer set whose name starts with prefix.
type stickyClient struct {
	c      *http.Client
	prefix string
	cookie string
	// backend is the one that served it so far; sets counts the answers
	// that set its cookie.
	backend string
	sets    int
}

// get sends one request and returns the backend that answered.
func (sc *stickyClient) get(t *testing.T, url string) string {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Cookie", "theme=dark; "+sc.cookie)
	resp, err := sc.c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: got status %d, want 200", url, resp.StatusCode)
	}
	for _, sc2 := range resp.Header.Values("Set-Cookie") {
		if v, _, _ := strings.Cut(sc2, ";"); strings.HasPrefix(v, sc.prefix) {
			sc.cookie = v
			sc.sets++
		}
	}
	return resp.Header.Get("X-Backend")
}

// TestStickySessionsThroughHelios sends 1,000 requests from 20 clients
// that keep the cookie their answers set, over HTTP/1.1 and h2c on every
// engine: each client stays on the backend it first reached, and only
// its first answer sets the cookie, whose value does not show the
// backend's address; a reload that keeps the backends (and changes the
// strategy and adds a fourth) keeps every client where it was for 1,000
// more; then a backend dies, and its clients move, get a new cookie
// once, and stay on their new backend.
func TestStickySessionsThroughHelios(t *testing.T) {
	eachEngine(t, func(t *testing.T, engine string) {
		for _, proto := range []string{"http1", "h2c"} {
			t.Run(proto, func(t *testing.T) {
				bs := startBackends(t, 4)
				cfg := yamlConfig(t, fmt.Sprintf(stickyConfig, "round_robin", ""), bs)
				setEngine(cfg, engine)
				s, url := startServer(t, cfg, Options{})
				clients := make([]*stickyClient, 20)
				for i := range clients {
					c := &http.Client{}
					if proto == "h2c" {
						c.Transport = newH2ServerClient(t, nil)
					}
					clients[i] = &stickyClient{c: c, prefix: "srv="}
				}
				// round rounds of one request per client, interleaved.
				round := func(what string, rounds int) {
					t.Helper()
					for range rounds {
						for i, sc := range clients {
							got := sc.get(t, url+"/")
							if sc.backend == "" {
								sc.backend = got
							}
							if got != sc.backend {
								t.Fatalf("%s: client %d: got backend %s, want %s (where it was)", what, i, got, sc.backend)
							}
						}
					}
				}
				round("before the reload", 50)
				seen := map[string]bool{}
				for i, sc := range clients {
					seen[sc.backend] = true
					if sc.sets != 1 {
						t.Errorf("client %d: got %d answers setting the cookie, want 1", i, sc.sets)
					}
					for _, b := range bs {
						host, port, _ := strings.Cut(b.addr, ":")
						if strings.Contains(sc.cookie, host) || strings.Contains(sc.cookie, port) {
							t.Errorf("client %d: cookie %q shows backend address %s", i, sc.cookie, b.addr)
						}
					}
				}
				if len(seen) != 3 {
					t.Errorf("backends the clients stuck to: got %v, want all 3", seen)
				}

				cfg2 := yamlConfig(t, fmt.Sprintf(stickyConfig, "least_conn", `, {address: "{{B4}}"}`), bs)
				setEngine(cfg2, engine)
				if err := s.Reload(cfg2); err != nil {
					t.Fatal(err)
				}
				round("after the reload", 50)
				for i, sc := range clients {
					if sc.sets != 1 {
						t.Errorf("client %d after the reload: got %d answers setting the cookie, want 1", i, sc.sets)
					}
				}

				// b1 dies: its clients are retried elsewhere (connect
				// errors are retried), get a new cookie, and stay.
				bs[0].stop()
				moved := 0
				for _, sc := range clients {
					if sc.backend == "b1" {
						sc.backend = ""
						moved++
					}
				}
				round("after b1 died", 10)
				for i, sc := range clients {
					if sc.backend == "b1" {
						t.Errorf("client %d: still on b1, which died", i)
					}
				}
				if moved == 0 {
					t.Fatal("no client was on b1")
				}
				sets := 0
				for _, sc := range clients {
					sets += sc.sets
				}
				if want := len(clients) + moved; sets != want {
					t.Errorf("answers setting the cookie: got %d, want %d (one per client, and one more per client of b1)", sets, want)
				}
			})
		}
	})
}

const stickySplitConfig = `
listeners: [{name: web, address: "127.0.0.1:1"}]
routes:
  - name: canary
    match: {path_prefix: /}
    split: [{upstream: v1, weight: %d}, {upstream: v2, weight: %d}]
upstreams:
  - {name: v1, sticky: {}, backends: [{address: "{{B1}}"}, {address: "{{B2}}"}]}
  - {name: v2, sticky: {}, backends: [{address: "{{B3}}"}, {address: "{{B4}}"}]}
admin: {address: "off"}
`

// TestStickySplitThroughHelios splits clients 50/50 between two sticky
// upstreams, then reloads with the weights at 95/5 and at 5/95: every
// client stays on its version and its backend.
func TestStickySplitThroughHelios(t *testing.T) {
	eachEngine(t, func(t *testing.T, engine string) {
		bs := startBackends(t, 4)
		cfg := yamlConfig(t, fmt.Sprintf(stickySplitConfig, 50, 50), bs)
		setEngine(cfg, engine)
		s, url := startServer(t, cfg, Options{})
		clients := make([]*stickyClient, 40)
		for i := range clients {
			clients[i] = &stickyClient{c: &http.Client{}, prefix: "helios_v"}
		}
		versions := map[string]int{}
		for i, sc := range clients {
			sc.backend = sc.get(t, url+"/")
			versions[map[string]string{"b1": "v1", "b2": "v1", "b3": "v2", "b4": "v2"}[sc.backend]]++
			if sc.sets != 1 || !strings.HasPrefix(sc.cookie, "helios_v") {
				t.Fatalf("client %d: got cookie %q set %d times, want one helios_v1 or helios_v2 cookie", i, sc.cookie, sc.sets)
			}
		}
		if versions["v1"] == 0 || versions["v2"] == 0 {
			t.Fatalf("clients per version at 50/50: got %v, want some on each", versions)
		}
		for _, w := range [][2]int{{95, 5}, {5, 95}} {
			cfg := yamlConfig(t, fmt.Sprintf(stickySplitConfig, w[0], w[1]), bs)
			setEngine(cfg, engine)
			if err := s.Reload(cfg); err != nil {
				t.Fatal(err)
			}
			for range 10 {
				for i, sc := range clients {
					if got := sc.get(t, url+"/"); got != sc.backend {
						t.Fatalf("weights %v: client %d: got backend %s, want %s (its version's)", w, i, got, sc.backend)
					}
				}
			}
		}
	})
}
