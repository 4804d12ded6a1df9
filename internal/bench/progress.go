package bench

import (
	"fmt"
	"io"
	"time"
)

// progress reports the run in hand, how many are done and an estimate of
// the time left. On a terminal it keeps one status line up to date with \r;
// anywhere else (CI, a pipe to tee) it prints one line per run, so that a
// log shows what happened and when. A nil writer makes every method a no-op.
type progress struct {
	w        io.Writer
	terminal bool
	runs     int
	est      time.Duration
	done     int
	start    time.Time
	now      func() time.Time
	lastLine string
}

// newProgress reports to w; terminal selects the \r status line.
func newProgress(w io.Writer, terminal bool, runs int, est time.Duration) *progress {
	return &progress{w: w, terminal: terminal, runs: runs, est: est, start: time.Now(), now: time.Now}
}

// next announces the next run.
func (p *progress) next(what string) {
	if p.w == nil {
		return
	}
	p.done++
	p.show(what)
}

// note shows an extra step that is not a counted run.
func (p *progress) note(what string) {
	if p.w != nil {
		p.show(what)
	}
}

// eta scales the planned time left by how the runs so far compared with
// the plan.
func (p *progress) eta() string {
	if p.runs == 0 {
		return "—"
	}
	perRun := p.est / time.Duration(p.runs)
	left := time.Duration(p.runs-min(p.done-1, p.runs)) * perRun
	if p.done > 1 {
		actual := p.now().Sub(p.start) / time.Duration(p.done-1)
		left = time.Duration(p.runs-p.done+1) * actual
	}
	return max(left, 0).Round(time.Second).String()
}

func (p *progress) show(what string) {
	if p.terminal {
		p.lastLine = fmt.Sprintf("%s · run %d/%d · ETA %s", what, min(p.done, p.runs), p.runs, p.eta())
		fmt.Fprintf(p.w, "\r\x1b[K%s", p.lastLine)
		return
	}
	elapsed := p.now().Sub(p.start).Round(time.Second)
	fmt.Fprintf(p.w, "[%d/%d %s elapsed, ETA %s] %s\n", min(p.done, p.runs), p.runs, elapsed, p.eta(), what)
}

// finish clears the status line, or says how long it all took.
func (p *progress) finish() {
	switch {
	case p.w == nil:
	case p.terminal && p.lastLine != "":
		fmt.Fprint(p.w, "\r\x1b[K")
	case !p.terminal:
		fmt.Fprintf(p.w, "done: %d run(s) in %s\n", p.done, p.now().Sub(p.start).Round(time.Second))
	}
}
