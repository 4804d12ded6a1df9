package bench

import (
	"fmt"
	"io"
	"time"
)

// progress keeps one status line up to date on a terminal: the run in
// hand, how many are done and an estimate of the time left. A nil writer
// makes every method a no-op.
type progress struct {
	w        io.Writer
	runs     int
	est      time.Duration
	done     int
	start    time.Time
	lastLine string
}

func newProgress(w io.Writer, runs int, est time.Duration) *progress {
	return &progress{w: w, runs: runs, est: est, start: time.Now()}
}

// next announces the next run.
func (p *progress) next(what string) {
	if p.w == nil {
		return
	}
	p.done++
	p.show(fmt.Sprintf("%s · run %d/%d · ETA %s", what, min(p.done, p.runs), p.runs, p.eta()))
}

// note shows an extra step that is not a counted run.
func (p *progress) note(what string) {
	if p.w != nil {
		p.show(fmt.Sprintf("%s · run %d/%d · ETA %s", what, p.done, p.runs, p.eta()))
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
		actual := time.Since(p.start) / time.Duration(p.done-1)
		left = time.Duration(p.runs-p.done+1) * actual
	}
	return left.Round(time.Second).String()
}

func (p *progress) show(line string) {
	p.lastLine = line
	fmt.Fprintf(p.w, "\r\x1b[K%s", line)
}

// finish clears the line.
func (p *progress) finish() {
	if p.w != nil && p.lastLine != "" {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}
