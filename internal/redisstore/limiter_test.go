package redisstore

import (
	"context"
	"crypto/x509"
	"hash/maphash"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/certgen"
	"github.com/helios-lb/helios/internal/ratelimit"
	"github.com/helios-lb/helios/internal/redisstore/redistest"
)

// offer calls Allow on l for key every gap until stop closes, counting
// what it allowed.
func offer(l ratelimit.Limiter, key string, lim ratelimit.Limit, gap time.Duration, stop <-chan struct{}, allowed *atomic.Int64) {
	t := time.NewTicker(gap)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if l.Allow([]byte(key), lim, time.Now().UnixNano()).Allowed {
				allowed.Add(1)
			}
		}
	}
}

// TestSharedLimitAcrossInstances: two instances (two Stores on one
// redis-server) offered several times the rate together allow the rate,
// within 5 % over 3 s once saturated (the first second spends the burst
// and the head starts).
func TestSharedLimitAcrossInstances(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	lim := ratelimit.Limit{Requests: 200, Per: time.Second, Burst: 100}
	ls := []*Limiter{testLimiter(t, srv, LimiterOptions{Name: "shared", Instances: 2}), testLimiter(t, srv, LimiterOptions{Name: "shared", Instances: 2})}
	var allowed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, l := range ls {
		for g := 0; g < 4; g++ { // loops per instance, as event loops
			wg.Add(1)
			go func() { defer wg.Done(); offer(l, "route", lim, 2*time.Millisecond, stop, &allowed) }()
		}
	}
	time.Sleep(time.Second)
	before, start := allowed.Load(), time.Now()
	time.Sleep(3 * time.Second)
	got, elapsed := float64(allowed.Load()-before), time.Since(start)
	close(stop)
	wg.Wait()
	want := 200 * elapsed.Seconds()
	t.Logf("allowed %.0f, want %.0f", got, want)
	if math.Abs(got-want) > 0.05*want {
		t.Errorf("got %.0f allowed by two instances in %v, want %.0f ± 5%%", got, elapsed, want)
	}
	for i, l := range ls {
		if l.Store().Errors() != 0 || l.Store().Down() {
			t.Errorf("instance %d: got %d store errors, down %v; want none", i, l.Store().Errors(), l.Store().Down())
		}
	}
}

// TestOutageFallsBackAndRecovers: redis-server stopped mid-run: every
// decision is still made (the instance's share decides), the store is
// down and counts errors; started again, the limit is shared again.
func TestOutageFallsBackAndRecovers(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	s := Open(Options{Addr: srv.Addr, Timeout: 200 * time.Millisecond})
	t.Cleanup(func() { s.Close() })
	l := s.Limiter(LimiterOptions{Name: "outage", Instances: 4})
	t.Cleanup(l.Close)
	lim := ratelimit.Limit{Requests: 1000, Per: time.Second, Burst: 100}
	key := []byte("k")

	l.Allow(key, lim, time.Now().UnixNano())
	waitFor(t, "tokens from the store", func() bool {
		return l.Allow(key, lim, time.Now().UnixNano()).Allowed && s.Errors() == 0
	})
	srv.Stop()
	waitFor(t, "the store marked down", func() bool {
		l.Allow(key, lim, time.Now().UnixNano())
		return s.Down()
	})
	if s.Errors() == 0 {
		t.Errorf("got no store errors counted during the outage, want some")
	}
	// The share: 1000/s over 4 instances = 250/s, burst 25. Offered one
	// request every 2 ms (500/s) for 1 s on a clock of our own, the
	// fallback allows about 250 + 25 (+ tokens still held).
	now := time.Now().UnixNano()
	allowed := 0
	for i := 0; i < 500; i++ {
		if l.Allow([]byte("fresh"), lim, now+int64(i)*int64(2*time.Millisecond)).Allowed {
			allowed++
		}
	}
	if want := 275.0; math.Abs(float64(allowed)-want) > 0.05*want {
		t.Errorf("store down: got %d allowed of 500 in 1 s, want the share, %.0f ± 5%%", allowed, want)
	}
	srv.Restart()
	waitFor(t, "the store back", func() bool { return !s.Down() })
	waitFor(t, "tokens from the store again", func() bool {
		return l.Allow([]byte("again"), lim, time.Now().UnixNano()).Allowed && !s.Down()
	})
}

// TestSlowStoreFallsBack: a store that accepts connections and never
// answers: a key waiting for tokens longer than Slow is decided by the
// share, and the timeout then marks the store down.
func TestSlowStoreFallsBack(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()
	s := Open(Options{Addr: ln.Addr().String(), Timeout: 2 * time.Second})
	defer s.Close()
	l := s.Limiter(LimiterOptions{Name: "slow", Instances: 2, Slow: 50 * time.Millisecond})
	defer l.Close()
	lim := ratelimit.Limit{Requests: 10, Per: time.Second, Burst: 0}
	key := []byte("k")
	start := time.Now().UnixNano()
	if d := l.Allow(key, lim, start); !d.Allowed {
		t.Fatalf("first request: got refused, want allowed ahead of its tokens")
	}
	if d := l.Allow(key, lim, start+int64(10*time.Millisecond)); d.Allowed {
		t.Errorf("second request 10 ms later, tokens asked for: got allowed, want refused (one ahead with burst 0)")
	}
	// Past Slow: the share (10 per 2 s) decides: one allowed, then one
	// every 200 ms.
	at := start + int64(60*time.Millisecond)
	if d := l.Allow(key, lim, at); !d.Allowed {
		t.Errorf("after Slow: got refused, want the share to allow one")
	}
	if d := l.Allow(key, lim, at+int64(100*time.Millisecond)); d.Allowed {
		t.Errorf("after Slow, 100 ms later: got allowed, want refused by the share (one per 200 ms)")
	}
	if d := l.Allow(key, lim, at+int64(200*time.Millisecond)); !d.Allowed {
		t.Errorf("after Slow, 200 ms later: got refused, want allowed by the share")
	}
	waitFor(t, "the timeout marking the store down", s.Down)
}

// TestTokensGoBack: tokens an instance holds and does not spend go back
// to the store when it closes. With 1 request an hour, the one request
// allowed leaves the key's arrival time an hour ahead in Redis, not two
// (the batch of one token asked for besides).
func TestTokensGoBack(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	s := Open(Options{Addr: srv.Addr})
	defer s.Close()
	l := s.Limiter(LimiterOptions{Name: "back"})
	lim := ratelimit.Limit{Requests: 1, Per: time.Hour, Burst: 9}
	if !l.Allow([]byte("k"), lim, time.Now().UnixNano()).Allowed {
		t.Fatal("first request: got refused, want allowed")
	}
	ahead := func() time.Duration {
		ctx := context.Background()
		tat, err := s.client.Get(ctx, "helios:rl:back:k").Int64()
		if err != nil {
			return 0
		}
		now, _ := s.client.Time(ctx).Result()
		return time.Duration(tat-now.UnixMicro()) * time.Microsecond
	}
	waitFor(t, "the batch (this request's token and one more)", func() bool { return ahead() > 90*time.Minute })
	l.Close()
	if got := ahead(); got < 50*time.Minute || got > 70*time.Minute {
		t.Errorf("after Close: got the key %v ahead in Redis, want about 1h (the unspent token given back)", got)
	}
}

// TestIdleKeyKeepsWhatItOwes: a key that went ahead of its tokens and
// was told the store is short stays known while idle, so that it does
// not get a second head start: 1 request an hour, burst 2, three
// requests at once (the head start) then, two idle seconds later (when
// idle keys' tokens go back), a fourth is refused.
func TestIdleKeyKeepsWhatItOwes(t *testing.T) {
	l := testLimiter(t, redistest.Start(t, redistest.Options{}), LimiterOptions{Name: "owes"})
	lim := ratelimit.Limit{Requests: 1, Per: time.Hour, Burst: 2}
	key := []byte("k")
	now := time.Now().UnixNano()
	for i := 0; i < 3; i++ {
		if !l.Allow(key, lim, now).Allowed {
			t.Fatalf("request %d of the head start: got refused, want allowed", i+1)
		}
	}
	waitFor(t, "the store's answer", func() bool { return !l.entryOf(key).queued })
	later := now + int64(2*time.Second)
	l.giveBack(context.Background(), later, false)
	// A store that a loaded machine made look down (a slow health check)
	// hands the decision to the instance's share, which would allow it.
	waitFor(t, "the store up", func() bool { return !l.store.Down() })
	if d := l.Allow(key, lim, later); d.Allowed {
		t.Errorf("a fourth request after two idle seconds: got allowed, want refused (the three took the burst)")
	}
}

// TestAllowAllocatesNothing: deciding a request of a key that holds
// tokens allocates nothing (it runs on the event loops).
func TestAllowAllocatesNothing(t *testing.T) {
	l := testLimiter(t, redistest.Start(t, redistest.Options{}), LimiterOptions{Name: "allocs"})
	lim := ratelimit.Limit{Requests: 1_000_000, Per: time.Second, Burst: 100_000}
	key := []byte("198.51.100.7")
	waitFor(t, "tokens", func() bool {
		l.Allow(key, lim, time.Now().UnixNano())
		return l.entryOf(key).tokens > 1000
	})
	now := time.Now().UnixNano()
	if n := testing.AllocsPerRun(500, func() { l.Allow(key, lim, now) }); n != 0 {
		t.Errorf("got %v allocations per decision, want 0", n)
	}
}

// testLimiter returns a Limiter on a Store of its own (an instance) on
// srv, both closed when the test ends.
func testLimiter(t *testing.T, srv *redistest.Server, o LimiterOptions) *Limiter {
	s := Open(Options{Addr: srv.Addr})
	t.Cleanup(func() { s.Close() })
	l := s.Limiter(o)
	t.Cleanup(l.Close)
	return l
}

// entryOf returns a copy of key's entry, read under its part's lock.
func (l *Limiter) entryOf(key []byte) entry {
	p := &l.parts[maphash.Bytes(l.seed, key)%shards]
	p.mu.Lock()
	defer p.mu.Unlock()
	return *p.keys[string(key)]
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10s for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTLSStore: rediss://, a store behind TLS (redis-server with a
// certificate of a test CA), checked against the given roots and server
// name: tokens come as over cleartext; a client that does not trust the
// CA gets none, and the instance limits with its share.
func TestTLSStore(t *testing.T) {
	ca, err := certgen.NewCA("redis test CA")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Issue(certgen.Request{Hosts: []string{"redis.test"}})
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := leaf.WriteFiles(t.TempDir(), "redis")
	if err != nil {
		t.Fatal(err)
	}
	srv := redistest.Start(t, redistest.Options{TLSCert: certFile, TLSKey: keyFile})
	roots := x509.NewCertPool()
	roots.AddCert(ca.Leaf)
	lim := ratelimit.Limit{Requests: 10, Per: time.Second, Burst: 5}
	for _, tt := range []struct {
		name  string
		roots *x509.CertPool
		ok    bool
	}{
		{"trusted", roots, true},
		{"untrusted", x509.NewCertPool(), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := Open(Options{Addr: srv.Addr, TLS: true, ServerName: "redis.test", RootCAs: tt.roots, Timeout: 500 * time.Millisecond})
			defer s.Close()
			l := s.Limiter(LimiterOptions{Name: "tls-" + tt.name})
			defer l.Close()
			key := []byte("k")
			l.Allow(key, lim, time.Now().UnixNano())
			waitFor(t, "the store's answer", func() bool { return !l.entryOf(key).queued || s.Down() })
			if got := l.entryOf(key).tokens > 0 && !s.Down(); got != tt.ok {
				t.Errorf("got tokens from the store %v (down %v), want %v", got, s.Down(), tt.ok)
			}
		})
	}
}
