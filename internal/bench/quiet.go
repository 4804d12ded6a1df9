package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// GuardSettings configure the quiet-machine guard, which runs before each
// round: it waits, up to a bound, until the machine is quiet, and records
// what it found. Zero fields take the defaults noted.
type GuardSettings struct {
	// MaxLoadPerCPU is the highest load per CPU that counts as quiet: the
	// 1-minute load average divided by the CPUs, or, within a minute after
	// the benchmark's own load (which the load average still holds), the
	// tasks outside the benchmark found runnable during the sample. Zero
	// means 0.5.
	MaxLoadPerCPU float64
	// MaxProcCPU is the share of one CPU (0.05 = 5%) any process outside
	// the benchmark may use during the sample. Zero means 0.05.
	MaxProcCPU float64
	// MaxSteal is the share of CPU time the hypervisor may steal (other
	// machines on the same host) during the sample. Zero means 0.05.
	MaxSteal float64
	// Wait bounds the wait before one round; negative means no waiting
	// (the guard still samples and records). Zero means 30s.
	Wait time.Duration
	// Budget bounds the guard's waiting over the whole run; once spent,
	// rounds are sampled but not waited for. Zero means 5 minutes.
	Budget time.Duration
	// Window is how long one sample lasts. Zero means 1s.
	Window time.Duration
}

// defaults fills the zero fields of g.
func (g *GuardSettings) defaults() {
	if g.MaxLoadPerCPU <= 0 {
		g.MaxLoadPerCPU = 0.5
	}
	if g.MaxProcCPU <= 0 {
		g.MaxProcCPU = 0.05
	}
	if g.MaxSteal <= 0 {
		g.MaxSteal = 0.05
	}
	if g.Wait == 0 {
		g.Wait = 30 * time.Second
	}
	if g.Budget <= 0 {
		g.Budget = 5 * time.Minute
	}
	if g.Window <= 0 {
		g.Window = time.Second
	}
}

// ownLoadMemory is how long the benchmark's own load stays in the 1-minute
// load average enough to matter (it decays by e each minute).
const ownLoadMemory = time.Minute

// ProcCPU is a process outside the benchmark and the share of one CPU it
// used during a sample.
type ProcCPU struct {
	PID  int     `json:"pid"`
	Name string  `json:"name"`
	CPU  float64 `json:"cpu"`
}

// QuietSample is what the guard saw over one sample window.
type QuietSample struct {
	// LoadAvg1 is the 1-minute load average at the end of the window.
	LoadAvg1 float64 `json:"loadavg1"`
	// Runnable is the mean number of runnable tasks outside the
	// benchmark during the window (procs_running less the benchmark's own
	// threads in state R).
	Runnable float64 `json:"runnable"`
	// Steal is the share of CPU time stolen by the hypervisor.
	Steal float64 `json:"steal"`
	// Busy are the processes outside the benchmark that used CPU, busiest
	// first (at most five).
	Busy []ProcCPU `json:"busy,omitempty"`
}

// GuardCheck is the guard's record of one round.
type GuardCheck struct {
	Scenario string `json:"scenario"`
	Case     string `json:"case"`
	Round    int    `json:"round"`
	// Quiet is true when the machine was quiet before the round started;
	// false means the guard gave up (wait or budget spent).
	Quiet bool `json:"quiet"`
	// WaitedS is how long the guard waited.
	WaitedS float64 `json:"waited_s"`
	// Found is the last sample, and Why what made it not quiet.
	Found QuietSample `json:"found"`
	Why   []string    `json:"why,omitempty"`
}

// judge says whether a sample is quiet for a machine with cpus CPUs, and
// if not, why. ownLoadRecent means the benchmark ran load within the last
// minute, so the load average is mostly its own and the runnable count
// stands in for it.
func (g GuardSettings) judge(s QuietSample, cpus int, ownLoadRecent bool) (bool, []string) {
	var why []string
	n := float64(max(cpus, 1))
	if ownLoadRecent {
		if s.Runnable/n > g.MaxLoadPerCPU {
			why = append(why, fmt.Sprintf("%.2f runnable tasks per CPU outside the benchmark (limit %.2f)", s.Runnable/n, g.MaxLoadPerCPU))
		}
	} else if s.LoadAvg1/n > g.MaxLoadPerCPU {
		why = append(why, fmt.Sprintf("1-minute load average %.2f per CPU (limit %.2f)", s.LoadAvg1/n, g.MaxLoadPerCPU))
	}
	for _, p := range s.Busy {
		if p.CPU > g.MaxProcCPU {
			why = append(why, fmt.Sprintf("pid %d (%s) used %.0f%% of a CPU (limit %.0f%%)", p.PID, p.Name, p.CPU*100, g.MaxProcCPU*100))
		}
	}
	if s.Steal > g.MaxSteal {
		why = append(why, fmt.Sprintf("%.0f%% of CPU time stolen by the hypervisor (limit %.0f%%)", s.Steal*100, g.MaxSteal*100))
	}
	return len(why) == 0, why
}

// guard waits for a quiet machine before each round. The operating system
// is reached through sample, sleep and now, so that tests drive it.
type guard struct {
	set  GuardSettings
	cpus int
	// sample watches the machine for a window.
	sample func(ctx context.Context, window time.Duration) (QuietSample, error)
	sleep  func(ctx context.Context, d time.Duration) error
	now    func() time.Time
	// note, when set, is told why the guard waits.
	note func(string)

	spent    time.Duration // waiting so far, against the budget
	lastLoad time.Time     // end of the benchmark's last load
}

// pause between samples while waiting.
const guardPause = 2 * time.Second

// loadEnded tells the guard the benchmark's own load just stopped.
func (g *guard) loadEnded() { g.lastLoad = g.now() }

// wait samples the machine until it is quiet or the wait or the budget is
// spent, and returns the record. An error is returned only when ctx ends.
func (g *guard) wait(ctx context.Context) (GuardCheck, error) {
	start := g.now()
	var rec GuardCheck
	for {
		s, err := g.sample(ctx, g.set.Window)
		if err != nil {
			return rec, err
		}
		recent := !g.lastLoad.IsZero() && g.now().Sub(g.lastLoad) < ownLoadMemory
		quiet, why := g.set.judge(s, g.cpus, recent)
		waited := g.now().Sub(start)
		rec = GuardCheck{Quiet: quiet, WaitedS: waited.Round(time.Millisecond).Seconds(), Found: s, Why: why}
		if quiet {
			g.spent += waited
			return rec, nil
		}
		// Give up when another pause and sample would overrun the wait or
		// the budget.
		next := waited + guardPause + g.set.Window
		if g.set.Wait < 0 || next > g.set.Wait || g.spent+next > g.set.Budget {
			g.spent += waited
			return rec, nil
		}
		if g.note != nil {
			g.note("waiting for a quiet machine: " + strings.Join(why, "; "))
		}
		if err := g.sleep(ctx, guardPause); err != nil {
			return rec, err
		}
	}
}

// GuardReport is what results.json records of the guard: its settings
// and a check per round.
type GuardReport struct {
	MaxLoadPerCPU float64      `json:"max_load_per_cpu"`
	MaxProcCPU    float64      `json:"max_proc_cpu"`
	MaxSteal      float64      `json:"max_steal"`
	WaitS         float64      `json:"wait_s"`
	BudgetS       float64      `json:"budget_s"`
	WindowS       float64      `json:"window_s"`
	Checks        []GuardCheck `json:"checks"`
}

// report starts the guard's record with its settings.
func (g GuardSettings) report() *GuardReport {
	return &GuardReport{MaxLoadPerCPU: g.MaxLoadPerCPU, MaxProcCPU: g.MaxProcCPU, MaxSteal: g.MaxSteal,
		WaitS: max(g.Wait, 0).Seconds(), BudgetS: g.Budget.Seconds(), WindowS: g.Window.Seconds()}
}

// GaveUp counts the rounds that started on a machine the guard did not
// find quiet.
func (g *GuardReport) GaveUp() int {
	n := 0
	for _, c := range g.Checks {
		if !c.Quiet {
			n++
		}
	}
	return n
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// procSampler samples the machine from /proc (procRoot), counting the
// process self and its descendants as the benchmark.
type procSampler struct {
	procRoot string
	self     int
}

// cpuStat is the first line of /proc/stat: CPU time in clock ticks.
type cpuStat struct {
	total, steal uint64
}

// parseProcStat reads the aggregate cpu line and procs_running of
// /proc/stat.
func parseProcStat(b []byte) (cpuStat, int, error) {
	var cs cpuStat
	running := -1
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) > 8 && f[0] == "cpu":
			for i, v := range f[1:] {
				n, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					return cs, 0, fmt.Errorf("/proc/stat cpu line: %w", err)
				}
				// user nice system idle iowait irq softirq steal guest
				// guest_nice: guest time is already in user and nice.
				if i < 8 {
					cs.total += n
				}
				if i == 7 {
					cs.steal = n
				}
			}
		case len(f) == 2 && f[0] == "procs_running":
			running, _ = strconv.Atoi(f[1])
		}
	}
	if cs.total == 0 || running < 0 {
		return cs, 0, fmt.Errorf("/proc/stat: no cpu or procs_running line")
	}
	return cs, running, nil
}

// procSnapshot is every process's parent, name and CPU ticks.
type procSnapshot map[int]struct {
	ppid  int
	name  string
	ticks uint64
}

// snapshot reads every process under procRoot.
func (ps procSampler) snapshot() procSnapshot {
	snap := procSnapshot{}
	ents, _ := os.ReadDir(ps.procRoot)
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(ps.procRoot, e.Name(), "stat"))
		if err != nil {
			continue
		}
		st, err := parseStat(b)
		if err != nil {
			continue
		}
		name := ""
		if i, j := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')'); i >= 0 && j > i {
			name = string(b[i+1 : j])
		}
		snap[pid] = struct {
			ppid  int
			name  string
			ticks uint64
		}{st.ppid, name, st.ticks}
	}
	return snap
}

// tree returns self and its descendants in snap.
func (snap procSnapshot) tree(self int) map[int]bool {
	ours := map[int]bool{self: true}
	for changed := true; changed; {
		changed = false
		for pid, p := range snap {
			if !ours[pid] && ours[p.ppid] {
				ours[pid], changed = true, true
			}
		}
	}
	return ours
}

// runningTasks counts the threads of the processes in pids that are
// running or runnable (state R), from /proc/PID/task/TID/stat.
func (ps procSampler) runningTasks(pids map[int]bool) int {
	n := 0
	for pid := range pids {
		dir := filepath.Join(ps.procRoot, strconv.Itoa(pid), "task")
		tasks, _ := os.ReadDir(dir)
		for _, t := range tasks {
			b, err := os.ReadFile(filepath.Join(dir, t.Name(), "stat"))
			if err != nil {
				continue
			}
			if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'R' {
				n++
			}
		}
	}
	return n
}

// busyOutside returns the processes of after that are not self or its
// descendants, with the share of a CPU each used between the snapshots,
// busiest first.
func busyOutside(before, after procSnapshot, self int, window time.Duration) []ProcCPU {
	ours := after.tree(self)
	var busy []ProcCPU
	for pid, p := range after {
		// A process missing from before started during the window: all
		// its time was spent in it.
		b := before[pid]
		if ours[pid] || p.ticks <= b.ticks {
			continue
		}
		cpu := float64(p.ticks-b.ticks) / clockTicks / window.Seconds()
		busy = append(busy, ProcCPU{PID: pid, Name: p.name, CPU: cpu})
	}
	slices.SortFunc(busy, func(a, b ProcCPU) int { return cmpFloat(b.CPU, a.CPU) })
	return busy[:min(len(busy), 5)]
}

// sample watches the machine for window: processes before and after, and
// procs_running ten times along the way.
func (ps procSampler) sample(ctx context.Context, window time.Duration) (QuietSample, error) {
	read := func() (cpuStat, int, error) {
		b, err := os.ReadFile(filepath.Join(ps.procRoot, "stat"))
		if err != nil {
			return cpuStat{}, 0, err
		}
		return parseProcStat(b)
	}
	cs0, _, err := read()
	if err != nil {
		return QuietSample{}, err
	}
	before := ps.snapshot()
	ours := before.tree(ps.self)
	const steps = 10
	var running float64
	for range steps {
		if err := sleepCtx(ctx, window/steps); err != nil {
			return QuietSample{}, err
		}
		_, n, err := read()
		if err != nil {
			return QuietSample{}, err
		}
		// Less the benchmark's own runnable threads (the sampler's
		// among them): a backend still closing the last run's
		// connections is not other work.
		running += float64(max(n-max(ps.runningTasks(ours), 1), 0))
	}
	after := ps.snapshot()
	cs1, _, err := read()
	if err != nil {
		return QuietSample{}, err
	}
	s := QuietSample{Runnable: running / steps, Busy: busyOutside(before, after, ps.self, window)}
	if d := cs1.total - cs0.total; d > 0 {
		s.Steal = float64(cs1.steal-cs0.steal) / float64(d)
	}
	if f := strings.Fields(readTrim(filepath.Join(ps.procRoot, "loadavg"))); len(f) > 0 {
		s.LoadAvg1, _ = strconv.ParseFloat(f[0], 64)
	}
	return s, nil
}
