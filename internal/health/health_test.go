package health

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/clock"
	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/upstream"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func backends(c clock.Clock, n int) ([]*upstream.Backend, []*Tracker) {
	var bs []*upstream.Backend
	var ts []*Tracker
	for i := 0; i < n; i++ {
		st := upstream.NewState(c)
		bs = append(bs, &upstream.Backend{State: st, Addr: fmt.Sprintf("10.0.0.%d:80", i+1), Weight: 1, Index: i})
		ts = append(ts, NewTracker(st))
	}
	return bs, ts
}

func TestActiveCheckTransitions(t *testing.T) {
	fc := clock.NewFake(t0)
	bs, ts := backends(fc, 1)
	var results []int // statuses the probe returns, in order
	probe := func(context.Context, string) (int, error) {
		s := results[0]
		results = results[1:]
		if s == 0 {
			return 0, errors.New("connection refused")
		}
		return s, nil
	}
	var changes []string
	c := NewChecker(CheckPolicy{Path: "/healthz", Interval: 2 * time.Second, Timeout: time.Second, Fails: 2, Passes: 2,
		Expect: func(s int) bool { return s >= 200 && s < 400 }}, []string{bs[0].Addr}, ts, probe)
	c.OnChange = func(addr string, down bool, reason string) {
		changes = append(changes, fmt.Sprintf("down=%v %s", down, reason))
	}

	steps := []struct {
		status   int // 0: a connection error
		wantDown bool
	}{
		{200, false},
		{500, false}, // one failure is not enough (fails: 2)
		{200, false}, // and a pass resets the streak
		{500, false},
		{0, true}, // second failure in a row: down
		{200, true},
		{0, true},   // a failure resets the pass streak
		{200, true}, // one pass is not enough (passes: 2)
		{302, false},
	}
	for i, s := range steps {
		results = append(results, s.status)
		c.CheckOnce(context.Background(), 0)
		fc.Advance(2 * time.Second)
		if got := bs[0].Down(); got != s.wantDown {
			t.Fatalf("step %d (status %d): got down=%v, want %v", i, s.status, got, s.wantDown)
		}
		if got := bs[0].Available(); got == s.wantDown {
			t.Fatalf("step %d: got available=%v while down=%v", i, got, s.wantDown)
		}
	}
	want := []string{"down=true connection refused", "down=false "}
	if fmt.Sprint(changes) != fmt.Sprint(want) {
		t.Errorf("got changes %q, want %q", changes, want)
	}
	snap := ts[0].Snapshot()
	if snap.Down || !snap.LastCheck.Equal(t0.Add(16*time.Second)) {
		t.Errorf("got snapshot %+v, want up, last checked at step 9", snap)
	}
}

func TestRecoveryByChecksEndsAnEjection(t *testing.T) {
	fc := clock.NewFake(t0)
	bs, ts := backends(fc, 2)
	g := applied("app", bs, ts, &PassivePolicy{MaxFails: 1, FailWindow: time.Second, EjectFor: time.Hour, MaxEjectFor: time.Hour}, nil)
	g.Done(bs[0], nil, proxy.Failure)
	status := 500
	probe := func(context.Context, string) (int, error) { return status, nil }
	c := NewChecker(CheckPolicy{Path: "/", Interval: time.Second, Timeout: time.Second, Fails: 1, Passes: 2,
		Expect: func(s int) bool { return s == 200 }}, []string{bs[0].Addr}, ts[:1], probe)
	c.CheckOnce(context.Background(), 0)
	status = 200
	c.CheckOnce(context.Background(), 0)
	if bs[0].Available() {
		t.Fatal("available after one pass with passes: 2")
	}
	c.CheckOnce(context.Background(), 0)
	if !bs[0].Available() {
		t.Error("still unavailable after the checks brought it back up, want the ejection ended")
	}
}

func TestCheckerRunsAndStops(t *testing.T) {
	bs, ts := backends(nil, 3)
	calls := make(chan string, 100)
	probe := func(_ context.Context, addr string) (int, error) {
		calls <- addr
		return 503, nil
	}
	c := NewChecker(CheckPolicy{Path: "/", Interval: 20 * time.Millisecond, Timeout: 10 * time.Millisecond, Fails: 2, Passes: 1,
		Expect: func(s int) bool { return s == 200 }}, []string{bs[0].Addr, bs[1].Addr, bs[2].Addr}, ts, probe)
	c.Start()
	deadline := time.After(2 * time.Second)
	for !(bs[0].Down() && bs[1].Down() && bs[2].Down()) {
		select {
		case <-deadline:
			t.Fatal("backends answering 503 were not all marked down within 2s")
		case <-time.After(5 * time.Millisecond):
		}
	}
	c.Stop()
	for len(calls) > 0 {
		<-calls
	}
	time.Sleep(60 * time.Millisecond)
	if n := len(calls); n != 0 {
		t.Errorf("got %d checks after Stop, want 0", n)
	}
}

func TestPassiveEjectionAndExpiry(t *testing.T) {
	fc := clock.NewFake(t0)
	bs, ts := backends(fc, 3)
	pol := &PassivePolicy{MaxFails: 3, FailWindow: 10 * time.Second, EjectFor: 30 * time.Second, MaxEjectFor: 100 * time.Second}
	g := applied("app", bs, ts, pol, nil)
	var ejections []time.Duration
	g.OnEject = func(_ string, d time.Duration) { ejections = append(ejections, d) }
	fail := func(i int) { g.Done(bs[i], nil, proxy.Failure) }

	// Failures spread wider than the window never eject.
	for i := 0; i < 5; i++ {
		fail(0)
		fc.Advance(6 * time.Second)
	}
	if !bs[0].Available() {
		t.Fatal("failures 6s apart with max_fails 3 in 10s ejected the backend")
	}
	// Three within the window do.
	fc.Advance(20 * time.Second)
	fail(0)
	fail(0)
	if !bs[0].Available() {
		t.Fatal("ejected after 2 failures, want 3")
	}
	fail(0)
	if bs[0].Available() {
		t.Fatal("not ejected after 3 failures within the window")
	}
	// Successes and the ignored outcomes of gone clients do not count.
	g.Done(bs[1], nil, proxy.Success)
	for i := 0; i < 5; i++ {
		g.Done(bs[1], nil, proxy.Ignored)
	}
	if !bs[1].Available() {
		t.Error("client cancellations ejected a backend")
	}
	fc.Advance(29 * time.Second)
	if bs[0].Available() {
		t.Error("available 29s into a 30s ejection")
	}
	fc.Advance(2 * time.Second)
	if !bs[0].Available() {
		t.Error("still ejected after 31s of a 30s ejection")
	}
	// Failing again soon after: the ejection doubles, then caps.
	fail(0)
	fail(0)
	fail(0)
	fc.Advance(59 * time.Second)
	if bs[0].Available() {
		t.Error("second ejection shorter than 60s")
	}
	fc.Advance(2 * time.Second)
	for i := 0; i < 3; i++ {
		fail(0)
	}
	want := []time.Duration{30 * time.Second, 60 * time.Second, 100 * time.Second}
	if fmt.Sprint(ejections) != fmt.Sprint(want) {
		t.Errorf("got ejection lengths %v, want %v", ejections, want)
	}
	// After staying in longer than max_eject_for, it starts over at 30s.
	fc.Advance(101*time.Second + 101*time.Second)
	ejections = nil
	for i := 0; i < 3; i++ {
		fail(0)
	}
	if fmt.Sprint(ejections) != fmt.Sprint([]time.Duration{30 * time.Second}) {
		t.Errorf("got %v after a long healthy stretch, want [30s]", ejections)
	}
}

func TestPassiveNeverEjectsTheLastBackend(t *testing.T) {
	fc := clock.NewFake(t0)
	bs, ts := backends(fc, 2)
	g := applied("app", bs, ts, &PassivePolicy{MaxFails: 1, FailWindow: time.Second, EjectFor: time.Minute, MaxEjectFor: time.Hour}, nil)
	g.Done(bs[0], nil, proxy.Failure)
	if bs[0].Available() {
		t.Fatal("backend 0 not ejected")
	}
	g.Done(bs[1], nil, proxy.Failure)
	if !bs[1].Available() {
		t.Error("the last available backend was ejected, want it kept")
	}
}

func TestBreakerClosedOpenHalfOpenClosed(t *testing.T) {
	fc := clock.NewFake(t0)
	bs, ts := backends(fc, 2)
	// gobreaker keeps its own (real) time for the open period, so the
	// breaker's open_for is short; the backend's availability follows the
	// injected clock.
	openFor := 50 * time.Millisecond
	g := applied("app", bs, ts, nil, &BreakerPolicy{ConsecutiveFailures: 3, FailureRatio: 0.5, MinRequests: 100,
		Interval: 10 * time.Second, OpenFor: openFor, HalfOpenRequests: 1})
	attempt := func(o proxy.Outcome) bool {
		tk, ok := g.Admit(bs[0])
		if ok {
			g.Done(bs[0], tk, o)
		}
		return ok
	}
	// Client cancellations never count.
	for i := 0; i < 10; i++ {
		attempt(proxy.Ignored)
	}
	if got := ts[0].BreakerState(); got != 0 {
		t.Fatalf("after 10 ignored outcomes: got breaker state %d, want 0 (closed)", got)
	}
	attempt(proxy.Failure)
	attempt(proxy.Failure)
	if got := ts[0].BreakerState(); got != 0 || !bs[0].Available() {
		t.Fatalf("after 2 failures: got state %d, available %v; want closed", got, bs[0].Available())
	}
	attempt(proxy.Failure)
	if got := ts[0].BreakerState(); got != 2 {
		t.Fatalf("after 3 failures in a row: got state %d, want 2 (open)", got)
	}
	if bs[0].Available() {
		t.Error("backend with an open breaker is available")
	}
	if attempt(proxy.Success) {
		t.Error("open breaker admitted an attempt")
	}
	if !bs[1].Available() || ts[1].BreakerState() != 0 {
		t.Error("the other backend's breaker was affected")
	}

	// Open period over: available again, one trial admitted (half-open).
	fc.Advance(openFor)
	time.Sleep(openFor + 10*time.Millisecond)
	if !bs[0].Available() {
		t.Fatal("not available after open_for")
	}
	tk, ok := g.Admit(bs[0])
	if !ok {
		t.Fatal("half-open breaker refused the trial attempt")
	}
	if got := ts[0].BreakerState(); got != 1 {
		t.Errorf("during the trial: got state %d, want 1 (half-open)", got)
	}
	if _, ok := g.Admit(bs[0]); ok {
		t.Error("half-open breaker admitted a second trial with half_open_requests 1")
	}
	g.Done(bs[0], tk, proxy.Success)
	if got := ts[0].BreakerState(); got != 0 || !bs[0].Available() {
		t.Errorf("after a successful trial: got state %d, available %v; want closed and available", got, bs[0].Available())
	}
}

func TestBreakerFailureRatio(t *testing.T) {
	bs, ts := backends(nil, 1)
	g := applied("app", bs, ts, nil, &BreakerPolicy{ConsecutiveFailures: 0, FailureRatio: 0.5, MinRequests: 10,
		Interval: 10 * time.Second, OpenFor: time.Minute, HalfOpenRequests: 1})
	// Alternate success and failure: 50 % failures, but never 2 in a row.
	for i := 0; i < 9; i++ {
		tk, _ := g.Admit(bs[0])
		o := proxy.Success
		if i%2 == 1 {
			o = proxy.Failure
		}
		g.Done(bs[0], tk, o)
	}
	if got := ts[0].BreakerState(); got != 0 {
		t.Fatalf("below min_requests: got state %d, want closed", got)
	}
	for i := 0; i < 2; i++ {
		tk, _ := g.Admit(bs[0])
		g.Done(bs[0], tk, proxy.Failure)
	}
	if got := ts[0].BreakerState(); got != 2 {
		t.Errorf("6 failures of 11 with ratio 0.5 and min 10: got state %d, want open", got)
	}
}

func TestReloadKeepsOrReplacesBreaker(t *testing.T) {
	bs, ts := backends(nil, 1)
	pol := &BreakerPolicy{ConsecutiveFailures: 1, FailureRatio: 0.5, MinRequests: 10, Interval: time.Second, OpenFor: time.Minute, HalfOpenRequests: 1}
	g := applied("app", bs, ts, nil, pol)
	tk, _ := g.Admit(bs[0])
	g.Done(bs[0], tk, proxy.Failure)
	if ts[0].BreakerState() != 2 {
		t.Fatal("breaker did not open")
	}
	same := *pol
	applied("app", bs, ts, nil, &same)
	if ts[0].BreakerState() != 2 || bs[0].Available() {
		t.Error("a reload with the same policy lost the open breaker")
	}
	applied("app", bs, ts, nil, nil)
	if ts[0].BreakerState() != -1 || !bs[0].Available() {
		t.Error("removing the breaker left the backend unavailable")
	}
}

// applied builds a guard and applies it, as the server does when a
// configuration goes live.
func applied(name string, bs []*upstream.Backend, ts []*Tracker, p *PassivePolicy, b *BreakerPolicy) *Guard {
	g := NewGuard(name, bs, ts, p, b)
	g.Apply()
	return g
}

// TestFailuresWhileEjectedDoNotEscalate guards issue 9 item 2: one SIGKILL
// of a backend under load logged six ejections in 6 ms (30s, 1m, 2m, 4m, 5m,
// 5m) because each in-flight request that failed after the ejection counted
// towards a new, longer one. Failures reported while a backend is ejected
// are its past, not news: they neither start an ejection nor extend one
// (Envoy ignores them too), and only an ejection that follows the end of
// the previous one is longer.
func TestFailuresWhileEjectedDoNotEscalate(t *testing.T) {
	pol := &PassivePolicy{MaxFails: 3, FailWindow: 10 * time.Second, EjectFor: 30 * time.Second, MaxEjectFor: 300 * time.Second}
	tests := []struct {
		name string
		// lateFailures arrive this long after the ejection, all at once.
		lateAfter    time.Duration
		lateFailures int
		want         []time.Duration
	}{
		{name: "in-flight failures at the instant of ejection", lateAfter: 0, lateFailures: 97, want: []time.Duration{30 * time.Second}},
		{name: "failures during the ejection", lateAfter: 20 * time.Second, lateFailures: 9, want: []time.Duration{30 * time.Second}},
		{name: "failures after the ejection ended double it", lateAfter: 31 * time.Second, lateFailures: 9, want: []time.Duration{30 * time.Second, 60 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := clock.NewFake(t0)
			bs, ts := backends(fc, 3)
			g := applied("app", bs, ts, pol, nil)
			var got []time.Duration
			g.OnEject = func(_ string, d time.Duration) { got = append(got, d) }
			for i := 0; i < 3; i++ {
				g.Done(bs[0], nil, proxy.Failure)
			}
			until, _ := bs[0].State.EjectedUntil()
			fc.Advance(tt.lateAfter)
			for i := 0; i < tt.lateFailures; i++ {
				g.Done(bs[0], nil, proxy.Failure)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("got ejections %v, want %v", got, tt.want)
			}
			if len(tt.want) == 1 {
				if now, _ := bs[0].State.EjectedUntil(); !now.Equal(until) && !now.IsZero() {
					t.Errorf("got ejected until %v, want %v (not extended)", now, until)
				}
			}
		})
	}
}

// TestConcurrentFailuresEjectOnce guards the race behind issue 9 item 2:
// failures arriving together must not each pass the threshold and eject
// again on the heels of the first.
func TestConcurrentFailuresEjectOnce(t *testing.T) {
	fc := clock.NewFake(t0)
	bs, ts := backends(fc, 3)
	g := applied("app", bs, ts, &PassivePolicy{MaxFails: 3, FailWindow: 10 * time.Second, EjectFor: 30 * time.Second, MaxEjectFor: 300 * time.Second}, nil)
	var mu sync.Mutex
	var got []time.Duration
	g.OnEject = func(_ string, d time.Duration) {
		mu.Lock()
		got = append(got, d)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			g.Done(bs[0], nil, proxy.Failure)
		}()
	}
	close(start)
	wg.Wait()
	if want := []time.Duration{30 * time.Second}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got ejections %v, want %v", got, want)
	}
}
