package bench

import (
	"strings"
	"testing"
	"time"
)

// fakeClock returns a progress whose clock moves only when told.
func fakeClock(p *progress) func(time.Duration) {
	now := p.start
	p.now = func() time.Time { return now }
	return func(d time.Duration) { now = now.Add(d) }
}

// Not on a terminal (CI, `| tee`), every run is a line of its own and no
// control characters are written.
func TestProgressLinesWhenNotATerminal(t *testing.T) {
	var b strings.Builder
	p := newProgress(&b, false, 3, 30*time.Second)
	advance := fakeClock(p)
	p.next("proxy-ka c100 · round 1/1 · Helios")
	advance(12 * time.Second)
	p.next("proxy-ka c100 · round 1/1 · nginx")
	p.note("quiet-machine guard: waiting (load 1.40 per CPU)")
	advance(12 * time.Second)
	p.next("proxy-ka c1000 · round 1/1 · Helios")
	advance(10 * time.Second)
	p.finish()
	want := []string{
		"[1/3 0s elapsed, ETA 30s] proxy-ka c100 · round 1/1 · Helios",
		"[2/3 12s elapsed, ETA 24s] proxy-ka c100 · round 1/1 · nginx",
		"[2/3 12s elapsed, ETA 24s] quiet-machine guard: waiting (load 1.40 per CPU)",
		"[3/3 24s elapsed, ETA 12s] proxy-ka c1000 · round 1/1 · Helios",
		"done: 3 run(s) in 34s",
	}
	got := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(got) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(got), len(want), b.String())
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: got %q, want %q", i+1, got[i], want[i])
		}
	}
	if strings.ContainsAny(b.String(), "\r\x1b") {
		t.Errorf("got control characters in %q", b.String())
	}
}

// On a terminal, one line is rewritten in place and cleared at the end.
func TestProgressTerminalLine(t *testing.T) {
	var b strings.Builder
	p := newProgress(&b, true, 2, 20*time.Second)
	fakeClock(p)
	p.next("respond ka-c100 · round 1/3 · Helios")
	p.finish()
	want := "\r\x1b[Krespond ka-c100 · round 1/3 · Helios · run 1/2 · ETA 20s\r\x1b[K"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
	if strings.Contains(b.String(), "\n") {
		t.Errorf("got a newline on a terminal: %q", b.String())
	}
}

func TestProgressNilWriter(t *testing.T) {
	p := newProgress(nil, false, 1, time.Second)
	p.next("x")
	p.note("y")
	p.finish()
	if p.done != 0 {
		t.Errorf("done: got %d, want 0 (nothing counted without a writer)", p.done)
	}
}
