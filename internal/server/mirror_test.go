package server

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

const mirrorConfig = `
listeners: [{name: web, address: "127.0.0.1:1", h2c: true}]
routes:
  - name: streamed
    match: {path: /sink}
    upstream: app
    request_buffering: "off"
    mirror: {upstream: shadow, max_inflight: 4}
  - name: app
    match: {path_prefix: /}
    upstream: app
    mirror: {upstream: shadow, percent: 100, max_inflight: 4, timeout: 30s}
upstreams:
  - {name: app, backends: [{address: "{{B1}}"}]}
  - {name: shadow, backends: [{address: "%s"}]}
admin: {address: "off"}
`

// slowShadow is a shadow backend that records what it gets and answers
// after 5 s (or when Helios gives up on the copy).
type slowShadow struct {
	mu   sync.Mutex
	reqs []string
}

func (s *slowShadow) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.reqs = append(s.reqs, fmt.Sprintf("%s %s %s id=%t", r.Method, r.RequestURI, b, len(r.Header.Get("X-Request-Id")) == 32))
	s.mu.Unlock()
	select {
	case <-time.After(5 * time.Second):
	case <-r.Context().Done():
	}
}

func (s *slowShadow) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.reqs...)
}

// TestMirrorWithASlowShadow mirrors every request of a route to a shadow
// that takes 5 s to answer, over HTTP/1.1 and h2c on every engine: the
// clients' 50 requests each complete well within 1 s (the shadow's
// latency never reaches them), the shadow gets max_inflight (4) copies
// with their bodies, and the other 46 are dropped and counted in
// helios_mirror_dropped_total{reason="busy"}; the bound holds across a
// reload; a request whose body streams is not copied, and counted.
func TestMirrorWithASlowShadow(t *testing.T) {
	eachEngine(t, func(t *testing.T, engine string) {
		for _, proto := range []string{"http1", "h2c"} {
			t.Run(proto, func(t *testing.T) {
				shadow := &slowShadow{}
				ss := httptest.NewServer(shadow)
				defer ss.Close()
				bs := startBackends(t, 1)
				cfg := yamlConfig(t, fmt.Sprintf(mirrorConfig, ss.Listener.Addr().String()), bs)
				setEngine(cfg, engine)
				s, url := startServer(t, cfg, Options{})
				defer ss.CloseClientConnections() // before the server waits for its handlers
				c := &http.Client{Timeout: 10 * time.Second}
				if proto == "h2c" {
					c.Transport = newH2ServerClient(t, nil)
				}
				post := func(path, body string) time.Duration {
					t.Helper()
					start := time.Now()
					resp, err := c.Post(url+path, "text/plain", strings.NewReader(body))
					if err != nil {
						t.Fatalf("POST %s: %v", path, err)
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						t.Fatalf("POST %s: got status %d, want 200", path, resp.StatusCode)
					}
					return time.Since(start)
				}
				var slowest time.Duration
				for i := range 50 {
					slowest = max(slowest, post("/echo", fmt.Sprintf("order %d", i)))
				}
				if slowest > time.Second {
					t.Errorf("slowest of 50 client requests: got %v, want well within 1s (the shadow takes 5s)", slowest)
				}
				waitFor(t, 5*time.Second, "4 copies at the shadow", func() bool { return len(shadow.seen()) == 4 })
				// The copies go on workers of their own: in any order.
				got := shadow.seen()
				slices.Sort(got)
				for i := range got {
					if want := fmt.Sprintf("POST /echo order %d id=true", i); got[i] != want {
						t.Errorf("copies at the shadow: got %q, want the first four orders", got)
						break
					}
				}
				labels := func(kv ...string) map[string]string {
					m := map[string]string{"route": "app", "upstream": "shadow"}
					for i := 0; i+1 < len(kv); i += 2 {
						m[kv[i]] = kv[i+1]
					}
					return m
				}
				if got, _ := metric(t, s, "helios_mirror_dropped_total", labels("reason", "busy")); got != 46 {
					t.Errorf("helios_mirror_dropped_total{reason=busy}: got %v, want 46", got)
				}
				if got, _ := metric(t, s, "helios_mirror_inflight", labels()); got != 4 {
					t.Errorf("helios_mirror_inflight: got %v, want 4", got)
				}

				// A reload keeps the count of copies in flight, and so
				// the bound.
				cfg2 := yamlConfig(t, fmt.Sprintf(mirrorConfig, ss.Listener.Addr().String()), bs)
				setEngine(cfg2, engine)
				if err := s.Reload(cfg2); err != nil {
					t.Fatal(err)
				}
				if d := post("/echo", "after the reload"); d > time.Second {
					t.Errorf("after the reload: got %v, want well within 1s", d)
				}
				if got, _ := metric(t, s, "helios_mirror_dropped_total", labels("reason", "busy")); got != 47 {
					t.Errorf("helios_mirror_dropped_total{reason=busy} after a reload: got %v, want 47", got)
				}

				// A body that streams (request_buffering off, larger than
				// what comes with the head) is not copied.
				post("/sink", strings.Repeat("x", 200<<10))
				if got, _ := metric(t, s, "helios_mirror_dropped_total", map[string]string{"route": "streamed", "reason": "body"}); got != 1 {
					t.Errorf("helios_mirror_dropped_total{route=streamed,reason=body}: got %v, want 1", got)
				}
				if n := len(shadow.seen()); n != 4 {
					t.Errorf("copies at the shadow: got %d, want still 4", n)
				}
			})
		}
	})
}
