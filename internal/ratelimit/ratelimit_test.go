package ratelimit

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"
)

// TestAccuracy: offered three times the rate for 10 s, a key is allowed
// requests x seconds + burst, within 2 % (the target).
func TestAccuracy(t *testing.T) {
	for _, lim := range []Limit{
		{Requests: 100, Per: time.Second, Burst: 50},
		{Requests: 10, Per: time.Second, Burst: 1},
		{Requests: 600, Per: time.Minute, Burst: 5},
		{Requests: 1000, Per: time.Second, Burst: 1000},
	} {
		t.Run(fmt.Sprintf("%d per %s burst %d", lim.Requests, lim.Per, lim.Burst), func(t *testing.T) {
			l := New(0)
			const seconds = 10
			rate := float64(lim.Requests) / lim.Per.Seconds()
			offered := int(3 * rate * seconds)
			step := int64(seconds*time.Second) / int64(offered)
			start := int64(1_000_000_000_000)
			allowed := 0
			for i := 0; i < offered; i++ {
				if l.Allow([]byte("k"), lim, start+int64(i)*step).Allowed {
					allowed++
				}
			}
			want := rate*seconds + float64(lim.Burst)
			if math.Abs(float64(allowed)-want) > 0.02*want {
				t.Errorf("got %d allowed of %d offered, want %.0f ± 2%%", allowed, offered, want)
			}
		})
	}
}

func TestDecision(t *testing.T) {
	l := New(0)
	lim := Limit{Requests: 10, Per: time.Second, Burst: 2}
	now := int64(1e12)
	var ds []Decision
	for i := 0; i < 4; i++ {
		ds = append(ds, l.Allow([]byte("a"), lim, now))
	}
	for i, want := range []int{2, 1, 0} {
		if !ds[i].Allowed || ds[i].Remaining != want {
			t.Errorf("request %d: got allowed %v, remaining %d; want true, %d", i, ds[i].Allowed, ds[i].Remaining, want)
		}
	}
	if ds[3].Allowed || ds[3].RetryAfter != 100*time.Millisecond {
		t.Errorf("4th request: got allowed %v, retry after %v; want false, 100ms", ds[3].Allowed, ds[3].RetryAfter)
	}
	if d := l.Allow([]byte("b"), lim, now); !d.Allowed {
		t.Errorf("another key: got refused, want allowed (keys are apart)")
	}
	if d := l.Allow([]byte("a"), lim, now+int64(100*time.Millisecond)); !d.Allowed {
		t.Errorf("after RetryAfter: got refused, want allowed")
	}
}

// TestBoundedKeys: the table never holds more than its bound, and a key
// evicted for room starts again with its whole allowance.
func TestBoundedKeys(t *testing.T) {
	l := New(shards * 4)
	lim := Limit{Requests: 1, Per: time.Hour, Burst: 0}
	now := int64(1e12)
	for i := 0; i < 10_000; i++ {
		l.Allow([]byte(fmt.Sprint("key", i)), lim, now)
	}
	if n := l.Len(); n > shards*4 {
		t.Errorf("got %d keys held, want at most %d", n, shards*4)
	}
	if l.Evicted() == 0 {
		t.Errorf("got no evictions, want some")
	}
}

func TestConcurrent(t *testing.T) {
	l := New(1000)
	lim := Limit{Requests: 1000, Per: time.Second, Burst: 100}
	var wg sync.WaitGroup
	var mu sync.Mutex
	allowed := 0
	now := int64(1e12)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			for i := 0; i < 1000; i++ {
				if l.Allow([]byte("shared"), lim, now).Allowed {
					n++
				}
			}
			mu.Lock()
			allowed += n
			mu.Unlock()
		}()
	}
	wg.Wait()
	if allowed != 101 {
		t.Errorf("got %d allowed at one instant, want burst+1 = 101", allowed)
	}
}

// TestAllowAllocatesNothing decides requests of a known key, allowed
// (its timestamp updated) and refused, without allocating.
func TestAllowAllocatesNothing(t *testing.T) {
	for _, tt := range []struct {
		name    string
		step    int64
		allowed bool
	}{
		{"allowed", int64(20 * time.Millisecond), true},
		{"refused", 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := New(0)
			lim := Limit{Requests: 100, Per: time.Second, Burst: 10}
			key := []byte("198.51.100.7")
			now := int64(1e12)
			for range 20 {
				l.Allow(key, lim, now)
			}
			if d := l.Allow(key, lim, now+tt.step); d.Allowed != tt.allowed {
				t.Fatalf("got allowed %v, want %v", d.Allowed, tt.allowed)
			}
			if n := testing.AllocsPerRun(1000, func() { now += tt.step; l.Allow(key, lim, now) }); n != 0 {
				t.Errorf("got %v allocations for a known key, want 0", n)
			}
		})
	}
}

func BenchmarkAllow(b *testing.B) {
	l := New(0)
	lim := Limit{Requests: 1e6, Per: time.Second, Burst: 1000}
	keys := make([][]byte, 1024)
	for i := range keys {
		keys[i] = []byte(fmt.Sprint("10.0.", i/256, ".", i%256))
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		now := time.Now().UnixNano()
		for pb.Next() {
			l.Allow(keys[i%len(keys)], lim, now)
			i++
			now += 1000
		}
	})
}
