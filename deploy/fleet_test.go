package deploy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fleetAdminToken is the admin token the fleet test gives the instances.
const fleetAdminToken = "fleet-test-token"

// fleet is the Compose fleet example under test: its three instances'
// URLs and admin URLs.
type fleet struct {
	c           *compose
	web, admins []string
	client      *http.Client
}

// TestFleet is issue 23's fleet test on the real Docker engine, the
// example deploy/compose/fleet.yaml as it is: three Helios containers,
// backends found through Docker's DNS name, one rate limit shared through
// a Redis container (built FROM scratch from the host's redis-server).
//
//   - backends scaled 2 -> 4 -> 2: every instance sees the change within
//     refresh (1 s) + 1 s of docker-compose returning, and no request
//     fails meanwhile;
//   - the shared limit (100/s), offered six times over across the three,
//     allows 100/s x 10 s within 5 % over 10 s once it is saturated
//     (after 2 s: the burst and the instances' head starts are spent);
//   - the Redis container stopped and started while requests come: no
//     request fails, every instance goes to its share
//     (helios_rate_limit_store_fallback 1) and back.
//
// It runs under make fleet-test (HELIOS_FLEET_TEST=1), and skips where
// Docker is absent.
func TestFleet(t *testing.T) {
	if os.Getenv("HELIOS_FLEET_TEST") == "" {
		t.Skip("the fleet test runs with make fleet-test (HELIOS_FLEET_TEST=1): about two minutes on the Docker engine")
	}
	needDocker(t)
	cmd := findCompose(t)
	needTool(t, "redis-server", "redis-server")
	helios := buildHeliosImage(t)
	redis := fmt.Sprintf("helios-redis-e2e:%d", rand.Uint32())
	run(t, repoRoot(t), nil, filepath.Join(repoRoot(t), "deploy/redis/build-image.sh"), redis)
	t.Cleanup(func() { run(t, "", nil, "docker", "rmi", "-f", redis) })

	env := []string{"HELIOS_IMAGE=" + helios, "REDIS_IMAGE=" + redis, "HELIOS_ADMIN_TOKEN=" + fleetAdminToken}
	f := &fleet{client: &http.Client{Timeout: 10 * time.Second}}
	for i := 1; i <= 3; i++ {
		web, admin := freePort(t), freePort(t)
		env = append(env, fmt.Sprintf("HELIOS_PORT_%d=%s", i, web), fmt.Sprintf("HELIOS_ADMIN_PORT_%d=%s", i, admin))
		f.web = append(f.web, "http://127.0.0.1:"+web)
		f.admins = append(f.admins, "http://127.0.0.1:"+admin)
	}
	f.c = &compose{t: t, cmd: cmd, file: "deploy/compose/fleet.yaml", project: fmt.Sprintf("heliosfleet%d", rand.Uint32()), env: env}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", lastLines(f.c.run("logs", "--no-color", "--tail", "20"), 80))
		}
		f.c.run("down", "-v", "--timeout", "5")
	})
	f.c.run("up", "-d", "--scale", "backend=2")
	waitFor(t, 60*time.Second, "three instances answering, each with two backends", func() bool {
		for i := range f.web {
			if code, _, _ := get(f.web[i] + "/"); code != 200 || f.backends(i) != 2 {
				return false
			}
		}
		return true
	})

	t.Run("scale", func(t *testing.T) {
		l := f.load(t, "/", 1, 20*time.Millisecond)
		for _, n := range []int{4, 2} {
			f.c.run("up", "-d", "--no-recreate", "--scale", fmt.Sprintf("backend=%d", n))
			start := time.Now()
			waitFor(t, 10*time.Second, fmt.Sprintf("every instance seeing %d backends", n), func() bool {
				for i := range f.admins {
					if f.backends(i) != n {
						return false
					}
				}
				return true
			})
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("scaled to %d: the instances saw it %v after docker-compose returned, want within refresh (1s) + 1s", n, d.Round(10*time.Millisecond))
			}
			time.Sleep(time.Second) // requests go on to the new set
		}
		l.stop(t, false)
	})

	t.Run("shared rate limit", func(t *testing.T) {
		l := f.load(t, "/limited", 2, 10*time.Millisecond)
		time.Sleep(2 * time.Second)
		allowed0, limited0, start := l.allowed.Load(), l.limited.Load(), time.Now()
		time.Sleep(10 * time.Second)
		allowed, limited, elapsed := l.allowed.Load()-allowed0, l.limited.Load()-limited0, time.Since(start)
		l.stop(t, true)
		want := 100 * elapsed.Seconds()
		t.Logf("allowed %d, limited %d in %v; want %.0f", allowed, limited, elapsed.Round(time.Millisecond), want)
		if math.Abs(float64(allowed)-want) > 0.05*want {
			t.Errorf("got %d allowed by three instances in %v, want %.0f ± 5%%", allowed, elapsed.Round(time.Millisecond), want)
		}
	})

	t.Run("redis stopped and started", func(t *testing.T) {
		l := f.load(t, "/limited", 1, 10*time.Millisecond)
		f.c.run("stop", "--timeout", "5", "redis")
		waitFor(t, 15*time.Second, "every instance on its share", func() bool { return f.fallbacks() == 3 })
		time.Sleep(2 * time.Second)
		f.c.run("start", "redis")
		waitFor(t, 15*time.Second, "every instance sharing the limit again", func() bool { return f.fallbacks() == 0 })
		time.Sleep(time.Second)
		l.stop(t, true)
		if l.allowed.Load() == 0 {
			t.Errorf("got no request allowed, want the limit (or the shares) to allow some")
		}
	})
}

// adminGet fetches path from instance i's admin listener; "" on failure.
func (f *fleet) adminGet(i int, path string) string {
	req, _ := http.NewRequest("GET", f.admins[i]+path, nil)
	req.Header.Set("Authorization", "Bearer "+fleetAdminToken)
	res, err := f.client.Do(req)
	if err != nil {
		return ""
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		return ""
	}
	return string(b)
}

// backends returns how many backends instance i has in upstream app, -1
// when it cannot say.
func (f *fleet) backends(i int) int {
	var out struct {
		Upstreams []struct {
			Name     string            `json:"name"`
			Backends []json.RawMessage `json:"backends"`
		} `json:"upstreams"`
	}
	if json.Unmarshal([]byte(f.adminGet(i, "/api/v1/upstreams")), &out) != nil {
		return -1
	}
	for _, u := range out.Upstreams {
		if u.Name == "app" {
			return len(u.Backends)
		}
	}
	return -1
}

// fallbacks returns how many instances limit alone (their store is
// down), from their metrics.
func (f *fleet) fallbacks() int {
	n := 0
	for i := range f.admins {
		sc := bufio.NewScanner(strings.NewReader(f.adminGet(i, "/metrics")))
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), `helios_rate_limit_store_fallback{store="redis://redis:6379/0"} `); ok && v == "1" {
				n++
			}
		}
	}
	return n
}

// fleetLoad is requests sent to every instance until stopped.
type fleetLoad struct {
	stopc                    chan struct{}
	wg                       sync.WaitGroup
	start                    time.Time
	allowed, limited, failed atomic.Int64
	mu                       sync.Mutex
	failures                 []string
}

// load sends GET path to every instance from per goroutines each, one
// request every gap per goroutine, over keep-alive connections.
func (f *fleet) load(t *testing.T, path string, per int, gap time.Duration) *fleetLoad {
	l := &fleetLoad{stopc: make(chan struct{}), start: time.Now()}
	for _, base := range f.web {
		for g := 0; g < per; g++ {
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
				defer c.CloseIdleConnections()
				tk := time.NewTicker(gap)
				defer tk.Stop()
				for {
					select {
					case <-l.stopc:
						return
					case <-tk.C:
					}
					res, err := c.Get(base + path)
					switch {
					case err != nil:
						l.fail(base + path + ": " + err.Error())
					case res.StatusCode == 200:
						l.allowed.Add(1)
					case res.StatusCode == 429:
						l.limited.Add(1)
					default:
						l.fail(base + path + ": status " + strconv.Itoa(res.StatusCode))
					}
					if err == nil {
						io.Copy(io.Discard, res.Body)
						res.Body.Close()
					}
				}
			}()
		}
	}
	t.Cleanup(func() { l.halt() })
	return l
}

func (l *fleetLoad) fail(s string) {
	l.failed.Add(1)
	l.mu.Lock()
	if len(l.failures) < 5 {
		l.failures = append(l.failures, s)
	}
	l.mu.Unlock()
}

func (l *fleetLoad) halt() {
	select {
	case <-l.stopc:
	default:
		close(l.stopc)
	}
	l.wg.Wait()
}

// stop ends the load and fails the test if any request failed (429
// counts as an answer when limits is set); it returns how long it ran.
func (l *fleetLoad) stop(t *testing.T, limits bool) time.Duration {
	t.Helper()
	l.halt()
	if n := l.failed.Load(); n > 0 {
		t.Errorf("got %d requests failed (%v), want none", n, l.failures)
	}
	if !limits && l.limited.Load() > 0 {
		t.Errorf("got %d requests limited on an unlimited route, want none", l.limited.Load())
	}
	return time.Since(l.start)
}
