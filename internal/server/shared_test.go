package server

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/helios-lb/helios/internal/config"
	"github.com/helios-lb/helios/internal/ratelimit"
	"github.com/helios-lb/helios/internal/redisstore"
	"github.com/helios-lb/helios/internal/redisstore/redistest"
)

// sharedLimitRoutes is a route limited to 200 requests a second in all,
// shared through the redis-server at {{REDIS}} by two instances. The
// burst, 200 ms of the rate, keeps what the instances are owed while a
// busy test machine holds their goroutines up.
const sharedLimitRoutes = `
routes:
  - name: api
    respond: {body: ok}
    rate_limit: {requests: 200, per: 1s, burst: 40, key: route, store: "redis://{{REDIS}}/0", instances: 2}
`

// tally counts a load's answers: allowed (200), limited (429) and failed
// (anything else, or no answer).
type tally struct {
	allowed, limited, failed atomic.Int64
	mu                       sync.Mutex
	failures                 []string
}

func (tl *tally) record(client string, res *http.Response, err error) {
	switch {
	case err != nil:
		tl.failed.Add(1)
		tl.note(fmt.Sprintf("%s: %v", client, err))
	case res.StatusCode == 200:
		tl.allowed.Add(1)
	case res.StatusCode == 429:
		tl.limited.Add(1)
	default:
		tl.failed.Add(1)
		tl.note(fmt.Sprintf("%s: status %d", client, res.StatusCode))
	}
}

func (tl *tally) note(s string) {
	tl.mu.Lock()
	if len(tl.failures) < 5 {
		tl.failures = append(tl.failures, s)
	}
	tl.mu.Unlock()
}

// load sends a request every gap over each client until stop closes.
func load(clients []protoClient, gap time.Duration, stop <-chan struct{}, tl *tally, wg *sync.WaitGroup) {
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk := time.NewTicker(gap)
			defer tk.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tk.C:
				}
				req, _ := http.NewRequest("GET", c.base+"/", nil)
				res, err := c.rt.RoundTrip(req)
				if err == nil {
					io.Copy(io.Discard, res.Body)
					res.Body.Close()
				}
				tl.record(c.name, res, err)
			}
		}()
	}
}

// TestSharedRateLimit is issue 23's shared limit: two Helios instances
// sharing a route's limit through redis-server, offered four times the
// rate over HTTP/1.1, TLS, h2 and h2c, allow rate x 3 s in all over 3 s
// once saturated, within 5 %; no request fails.
func TestSharedRateLimit(t *testing.T) {
	redis := redistest.Start(t, redistest.Options{})
	routes := strings.ReplaceAll(sharedLimitRoutes, "{{REDIS}}", redis.Addr)
	var clients []protoClient
	var servers []*Server
	for i := 0; i < 2; i++ {
		s, cs := policyServer(t, "", "", routes, nil, Options{})
		servers = append(servers, s)
		clients = append(clients, cs...)
	}
	var tl tally
	var wg sync.WaitGroup
	stop := make(chan struct{})
	load(clients, 10*time.Millisecond, stop, &tl, &wg)
	// Counted once saturated: the burst and the instances' head starts
	// are spent in the first second.
	time.Sleep(time.Second)
	allowed0, start := tl.allowed.Load(), time.Now()
	time.Sleep(3 * time.Second)
	got, elapsed := float64(tl.allowed.Load()-allowed0), time.Since(start)
	close(stop)
	wg.Wait()
	want := 200 * elapsed.Seconds()
	t.Logf("allowed %.0f, limited %d in %v; want %.0f allowed", got, tl.limited.Load(), elapsed, want)
	if math.Abs(got-want) > 0.05*want {
		t.Errorf("got %.0f allowed by two instances in %v, want %.0f ± 5%%", got, elapsed, want)
	}
	if tl.limited.Load() == 0 {
		t.Errorf("got no request limited, want most of them (four times the rate offered)")
	}
	if n := tl.failed.Load(); n > 0 {
		t.Errorf("got %d requests failed (%v), want none", n, tl.failures)
	}
	for i, s := range servers {
		if got, _ := metric(t, s, "helios_rate_limit_store_errors_total", nil); got != 0 {
			t.Errorf("instance %d: helios_rate_limit_store_errors_total: got %v, want 0", i, got)
		}
	}
}

// TestSharedRateLimitStoreOutage: redis-server stopped and started while
// requests come: none fails, the instance limits alone with its share
// meanwhile (helios_rate_limit_store_fallback 1, errors counted, one log
// line for the outage and one for the end), and shares the limit again
// once the store is back.
func TestSharedRateLimitStoreOutage(t *testing.T) {
	redis := redistest.Start(t, redistest.Options{})
	routes := strings.ReplaceAll(sharedLimitRoutes, "{{REDIS}}", redis.Addr)
	core, logs := observer.New(zap.InfoLevel)
	s, clients := policyServer(t, "", "", routes, nil, Options{Logger: zap.New(core)})
	store := map[string]string{"store": "redis://" + redis.Addr + "/0"}
	fallback := func() float64 { v, _ := metric(t, s, "helios_rate_limit_store_fallback", store); return v }

	var tl tally
	var wg sync.WaitGroup
	stop := make(chan struct{})
	load(clients, 10*time.Millisecond, stop, &tl, &wg)
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()
	time.Sleep(500 * time.Millisecond)
	if got := fallback(); got != 0 {
		t.Fatalf("before the outage: helios_rate_limit_store_fallback: got %v, want 0", got)
	}
	redis.Stop()
	waitFor(t, 5*time.Second, "the fallback in use", func() bool { return fallback() == 1 })
	before := tl.allowed.Load()
	time.Sleep(time.Second)
	during := tl.allowed.Load() - before
	redis.Restart()
	waitFor(t, 5*time.Second, "the fallback left", func() bool { return fallback() == 0 })
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()

	if n := tl.failed.Load(); n > 0 {
		t.Errorf("got %d requests failed (%v), want none", n, tl.failures)
	}
	// The share: 200/s over 2 instances, 100/s, for the second of the
	// outage, and its burst, 20.
	if during < 90 || during > 150 {
		t.Errorf("during the outage: got %d allowed in 1 s, want about the share, 100 + 20", during)
	}
	if got, _ := metric(t, s, "helios_rate_limit_store_errors_total", store); got <= 0 {
		t.Errorf("helios_rate_limit_store_errors_total: got %v, want more than 0", got)
	}
	if n := logs.FilterMessageSnippet("shared store unreachable").Len(); n != 1 {
		t.Errorf("got %d log lines for the outage, want 1", n)
	}
	if n := logs.FilterMessageSnippet("shared store reachable again").Len(); n != 1 {
		t.Errorf("got %d log lines for its end, want 1", n)
	}
}

// TestSharedRateLimitReload: a reload that keeps a route's store and
// instances keeps its shared limiter (the tokens it holds); one that
// drops the store closes it, and the store's connections with it once
// the generations replaced are closed.
func TestSharedRateLimitReload(t *testing.T) {
	redis := redistest.Start(t, redistest.Options{})
	routes := strings.ReplaceAll(sharedLimitRoutes, "{{REDIS}}", redis.Addr)
	cfg := func(routes string) *config.Config {
		return yamlConfig(t, "listeners: [{name: web, address: \"127.0.0.1:1\"}]\nadmin: {address: \"off\"}\n"+routes, nil)
	}
	s, _ := startServer(t, cfg(routes), Options{})
	limiter := func() ratelimit.Limiter { return s.Pipeline().Graph().RouteList[0].Policy.RateLimit.Limiter }
	first := limiter()
	if _, ok := first.(*redisstore.Limiter); !ok || len(s.Stores()) != 1 {
		t.Fatalf("got a %T and %d stores, want a shared limiter and its store", first, len(s.Stores()))
	}
	if err := s.Reload(cfg(routes)); err != nil {
		t.Fatal(err)
	}
	if limiter() != first {
		t.Errorf("a reload with the same store replaced the shared limiter")
	}
	if err := s.Reload(cfg(strings.ReplaceAll(routes, "instances: 2", "instances: 3"))); err != nil {
		t.Fatal(err)
	}
	if limiter() == first {
		t.Errorf("a reload with other instances kept the shared limiter, want a new one")
	}
	if err := s.Reload(cfg(strings.Replace(routes, `, store: "redis://`+redis.Addr+`/0", instances: 2`, "", 1))); err != nil {
		t.Fatal(err)
	}
	if _, ok := limiter().(*ratelimit.Local); !ok {
		t.Errorf("without store: got a %T, want a local limiter", limiter())
	}
	// The generations replaced close once requests on them are done
	// (oldGraphLinger after each reload).
	waitFor(t, oldGraphLinger+5*time.Second, "the store closed", func() bool { return len(s.Stores()) == 0 })
}
