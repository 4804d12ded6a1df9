package bench

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

func TestGuardJudge(t *testing.T) {
	var g GuardSettings
	g.defaults()
	tests := []struct {
		name   string
		s      QuietSample
		recent bool
		quiet  bool
		why    string
	}{
		{"idle machine", QuietSample{LoadAvg1: 0.3, Runnable: 0.1, Busy: []ProcCPU{{1, "init", 0.01}}}, false, true, ""},
		{"load average too high", QuietSample{LoadAvg1: 6.07}, false, false, "1-minute load average 3.04 per CPU (limit 0.50)"},
		// Within a minute of its own load the benchmark's runs are still in
		// the load average: the runnable count outside it decides.
		{"own load in the average", QuietSample{LoadAvg1: 4.5, Runnable: 0.2}, true, true, ""},
		{"others runnable after own load", QuietSample{LoadAvg1: 4.5, Runnable: 2.2}, true, false, "1.10 runnable tasks per CPU outside the benchmark (limit 0.50)"},
		{"a busy process", QuietSample{LoadAvg1: 0.4, Busy: []ProcCPU{{31104, "server.test", 1.93}, {77, "kdamond.0", 0.01}}}, false, false, "pid 31104 (server.test) used 193% of a CPU (limit 5%)"},
		{"a process at the limit", QuietSample{Busy: []ProcCPU{{9, "x", 0.05}}}, false, true, ""},
		{"stolen time", QuietSample{Steal: 0.12}, false, false, "12% of CPU time stolen by the hypervisor (limit 5%)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			quiet, why := g.judge(tt.s, 2, tt.recent)
			if quiet != tt.quiet {
				t.Errorf("quiet: got %v, want %v (why %q)", quiet, tt.quiet, why)
			}
			if got := strings.Join(why, "; "); got != tt.why {
				t.Errorf("why: got %q, want %q", got, tt.why)
			}
		})
	}
}

// fakeGuard returns a guard whose samples come from samples in turn (the
// last repeats) and whose clock moves only by the sample window and its
// sleeps.
func fakeGuard(set GuardSettings, samples ...QuietSample) (*guard, *int) {
	set.defaults()
	now := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	calls := 0
	g := &guard{set: set, cpus: 2, now: func() time.Time { return now }}
	g.sample = func(_ context.Context, w time.Duration) (QuietSample, error) {
		now = now.Add(w)
		s := samples[min(calls, len(samples)-1)]
		calls++
		return s, nil
	}
	g.sleep = func(_ context.Context, d time.Duration) error { now = now.Add(d); return nil }
	return g, &calls
}

func TestGuardWait(t *testing.T) {
	quiet := QuietSample{LoadAvg1: 0.2}
	busy := QuietSample{LoadAvg1: 0.2, Busy: []ProcCPU{{42, "go", 0.9}}}
	tests := []struct {
		name       string
		set        GuardSettings
		samples    []QuietSample
		spent      time.Duration
		wantQuiet  bool
		wantWaited float64
		wantCalls  int
	}{
		{"quiet at once", GuardSettings{}, []QuietSample{quiet}, 0, true, 1, 1},
		{"quiet after two busy samples", GuardSettings{}, []QuietSample{busy, busy, quiet}, 0, true, 7, 3},
		// 30s wait, 1s samples and 2s pauses: ten samples, then it gives up.
		{"gives up after the wait", GuardSettings{}, []QuietSample{busy}, 0, false, 28, 10},
		{"no waiting", GuardSettings{Wait: -1}, []QuietSample{busy}, 0, false, 1, 1},
		{"budget nearly spent", GuardSettings{Budget: time.Minute}, []QuietSample{busy}, 55 * time.Second, false, 4, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, calls := fakeGuard(tt.set, tt.samples...)
			g.spent = tt.spent
			rec, err := g.wait(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if rec.Quiet != tt.wantQuiet || rec.WaitedS != tt.wantWaited || *calls != tt.wantCalls {
				t.Errorf("got quiet %v after %vs and %d samples, want %v after %vs and %d", rec.Quiet, rec.WaitedS, *calls, tt.wantQuiet, tt.wantWaited, tt.wantCalls)
			}
			if !rec.Quiet && len(rec.Why) == 0 {
				t.Errorf("gave up without saying why")
			}
			if want := tt.spent + time.Duration(tt.wantWaited*float64(time.Second)); g.spent != want {
				t.Errorf("spent: got %v, want %v", g.spent, want)
			}
		})
	}
}

// Right after the benchmark's own load the load average is its own; a
// minute later it counts again.
func TestGuardOwnLoad(t *testing.T) {
	s := QuietSample{LoadAvg1: 4, Runnable: 0}
	g, _ := fakeGuard(GuardSettings{Wait: -1}, s)
	g.loadEnded()
	if rec, _ := g.wait(context.Background()); !rec.Quiet {
		t.Errorf("just after own load: got not quiet (%v), want quiet", rec.Why)
	}
	g.sleep(context.Background(), ownLoadMemory)
	if rec, _ := g.wait(context.Background()); rec.Quiet {
		t.Errorf("a minute later: got quiet, want the load average to count")
	}
}

func TestParseProcStat(t *testing.T) {
	in := "cpu  100 5 50 800 10 0 5 30 7 0\ncpu0 50 2 25 400 5 0 2 15 0 0\nintr 1 2\nprocs_running 3\nprocs_blocked 0\n"
	cs, running, err := parseProcStat([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	// Guest time (7) is already in user time and is not added again.
	if cs.total != 1000 || cs.steal != 30 || running != 3 {
		t.Errorf("got total %d steal %d running %d, want 1000 30 3", cs.total, cs.steal, running)
	}
	if _, _, err := parseProcStat([]byte("intr 1\n")); err == nil {
		t.Errorf("got no error for a stat without a cpu line")
	}
}

// The benchmark's own processes (itself, its backends, a proxy's workers)
// never count as other load; a process that started during the window
// counts in full.
func TestBusyOutside(t *testing.T) {
	type p = struct {
		ppid  int
		name  string
		ticks uint64
	}
	before := procSnapshot{1: p{0, "init", 10}, 100: p{1, "helios", 500}, 101: p{100, "helios", 40}, 102: p{101, "nginx", 70},
		200: p{1, "go", 1000}, 300: p{1, "idle", 5}}
	after := procSnapshot{1: p{0, "init", 10}, 100: p{1, "helios", 600}, 101: p{100, "helios", 90}, 102: p{101, "nginx", 150},
		200: p{1, "go", 1180}, 300: p{1, "idle", 5}, 400: p{1, "cc1", 30}}
	got := busyOutside(before, after, 100, 2*time.Second)
	want := []ProcCPU{{200, "go", 0.9}, {400, "cc1", 0.15}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("got %v, want %v", got[i], want[i])
		}
	}
}

// A run the guard gave up on says so in its first lines, with the reason,
// and the guard's section lists the round.
func TestReportMarksNoisyRuns(t *testing.T) {
	res := sampleResults()
	var set GuardSettings
	set.defaults()
	res.Guard = set.report()
	res.Guard.Checks = []GuardCheck{
		{Scenario: "proxy-ka", Case: "c100", Round: 1, Quiet: true, WaitedS: 1, Found: QuietSample{LoadAvg1: 0.2}},
		{Scenario: "proxy-ka", Case: "c100", Round: 2, Quiet: false, WaitedS: 28, Found: QuietSample{LoadAvg1: 6.07, Busy: []ProcCPU{{31104, "server.test", 1.93}}},
			Why: []string{"pid 31104 (server.test) used 193% of a CPU (limit 5%)"}},
	}
	res.Noisy = true
	var b strings.Builder
	WriteMarkdown(&b, res)
	md := b.String()
	head, _, _ := strings.Cut(md, "## Headline")
	if want := "**Noisy:** the quiet-machine guard gave up before 1 of 2 rounds (first: pid 31104 (server.test) used 193% of a CPU (limit 5%))."; !strings.Contains(head, want) {
		t.Errorf("report opening lacks %q:\n%s", want, head)
	}
	for _, want := range []string{
		"2 round(s) checked, 1 found quiet at once, 1 gave up; 29s spent sampling and waiting.",
		"| proxy-ka | c100 | 2 | 28s | **gave up** | load 6.07, runnable 0.0, steal 0%, busiest server.test (pid 31104) 193% |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	res.Noisy = false
	b.Reset()
	WriteMarkdown(&b, res)
	if strings.Contains(b.String(), "**Noisy:**") {
		t.Errorf("a quiet run is marked noisy")
	}
}

// The benchmark's own runnable threads are found in /proc/PID/task; this
// test's own process has at least the running thread that reads them.
func TestRunningTasksCountsOwnThreads(t *testing.T) {
	ps := procSampler{procRoot: "/proc", self: os.Getpid()}
	if n := ps.runningTasks(map[int]bool{os.Getpid(): true}); n < 1 {
		t.Errorf("got %d running threads in this process, want at least 1", n)
	}
	if n := ps.runningTasks(map[int]bool{1 << 30: true}); n != 0 {
		t.Errorf("a process that does not exist: got %d running threads, want 0", n)
	}
}
