package tlsconf

import (
	"context"
	"crypto/tls"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"
)

// gateCounts returns g's counts by result label, versions and resumption
// summed.
func gateCounts(g *Gate) map[string]uint64 {
	out := make(map[string]uint64)
	g.Stats().Each(func(result, _ string, _ bool, n uint64) { out[result] += n })
	return out
}

// TestGateSheds checks the gate's admission at the cap: the oldest
// handshake waiting for its client is shed for a new one, a working one
// never is, and the new one is refused only when none waits.
func TestGateSheds(t *testing.T) {
	type op struct {
		begin   string // a handshake to begin, named
		wait    string // a handshake that now waits for its client
		end     string // a handshake that ends (with an error if shed)
		limit   int    // the cap for begin
		admit   bool   // begin: want it admitted
		stopped []string
	}
	tests := []struct {
		name       string
		ops        []op
		inProgress int64
		counts     map[string]uint64
	}{
		{
			name: "no cap",
			ops: []op{
				{begin: "a", admit: true}, {begin: "b", admit: true}, {begin: "c", admit: true},
			},
			inProgress: 3,
			counts:     map[string]uint64{},
		},
		{
			name: "at the cap with none waiting: refused",
			ops: []op{
				{begin: "a", limit: 2, admit: true}, {begin: "b", limit: 2, admit: true},
				{begin: "c", limit: 2, admit: false},
			},
			inProgress: 2,
			counts:     map[string]uint64{"refused": 1},
		},
		{
			name: "the oldest waiting one is shed, a working older one is not",
			ops: []op{
				{begin: "a", limit: 3, admit: true}, {begin: "b", limit: 3, admit: true}, {begin: "c", limit: 3, admit: true},
				{wait: "c"}, {wait: "b"},
				{begin: "d", limit: 3, admit: true, stopped: []string{"b"}},
				{wait: "d"},
				{begin: "e", limit: 3, admit: true, stopped: []string{"c"}},
				{end: "b"}, {end: "c"},
				{begin: "f", limit: 3, admit: true, stopped: []string{"d"}},
				{begin: "g", limit: 3, admit: false},
			},
			inProgress: 3,
			counts:     map[string]uint64{"shed": 2, "refused": 1},
		},
		{
			name: "a place freed by an end is taken without shedding",
			ops: []op{
				{begin: "a", limit: 1, admit: true}, {wait: "a"}, {end: "a"},
				{begin: "b", limit: 1, admit: true},
			},
			inProgress: 1,
			counts:     map[string]uint64{"failed": 1},
		},
		{
			name: "a lower cap sheds as many as it takes",
			ops: []op{
				{begin: "a", admit: true}, {begin: "b", admit: true}, {begin: "c", admit: true},
				{wait: "a"}, {wait: "b"}, {wait: "c"},
				{begin: "d", limit: 2, admit: true, stopped: []string{"a", "b"}},
			},
			inProgress: 2,
			counts:     map[string]uint64{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var g Gate
			hs := map[string]*Handshake{}
			var stopped []string
			for i, o := range tt.ops {
				switch {
				case o.begin != "":
					stopped = nil
					name := o.begin
					h := g.Begin(o.limit, func() { stopped = append(stopped, name) })
					if got := h != nil; got != o.admit {
						t.Fatalf("op %d: begin %s: got admitted %v, want %v", i, name, got, o.admit)
					}
					if h != nil {
						hs[name] = h
					}
					if !slices.Equal(stopped, o.stopped) {
						t.Fatalf("op %d: begin %s: got %v stopped, want %v", i, name, stopped, o.stopped)
					}
				case o.wait != "":
					hs[o.wait].Waiting(true)
				case o.end != "":
					hs[o.end].End(tls.ConnectionState{}, context.Canceled)
				}
			}
			if got := g.InProgress(); got != tt.inProgress {
				t.Errorf("in progress: got %d, want %d", got, tt.inProgress)
			}
			if got := gateCounts(&g); !maps.Equal(got, tt.counts) {
				t.Errorf("counts: got %v, want %v", got, tt.counts)
			}
		})
	}
}

// TestGateEnd checks how an ended handshake is counted: by its error, as
// shed when it was shed and failed, as ok when it was shed but finished
// anyway, and that NoHello counts apart.
func TestGateEnd(t *testing.T) {
	var g Gate
	ok := g.Begin(0, func() {})
	ok.End(tls.ConnectionState{Version: tls.VersionTLS13}, nil)
	timeout := g.Begin(0, func() {})
	timeout.End(tls.ConnectionState{}, context.DeadlineExceeded)
	victim := g.Begin(1, func() {})
	victim.Waiting(true)
	late := g.Begin(1, func() {}) // sheds victim
	late.Waiting(true)
	finished := g.Begin(1, func() {}) // sheds late, which then finishes
	victim.End(tls.ConnectionState{}, context.Canceled)
	late.End(tls.ConnectionState{Version: tls.VersionTLS13}, nil)
	finished.End(tls.ConnectionState{}, errors.New("bad record MAC"))
	g.NoHello()
	want := map[string]uint64{"ok": 2, "timeout": 1, "shed": 1, "failed": 1, "no_hello": 1}
	if got := gateCounts(&g); !maps.Equal(got, want) {
		t.Errorf("counts: got %v, want %v", got, want)
	}
	if got := g.InProgress(); got != 0 {
		t.Errorf("in progress: got %d, want 0", got)
	}
}

// TestGateConcurrent begins, waits, sheds and ends handshakes from many
// goroutines, for the race detector: every place is given back.
func TestGateConcurrent(t *testing.T) {
	var g Gate
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				h := g.Begin(4, func() {})
				if h == nil {
					continue
				}
				h.Waiting(true)
				_ = g.Waiting()
				h.Waiting(false)
				h.End(tls.ConnectionState{}, nil)
			}
		}()
	}
	wg.Wait()
	if got := g.InProgress(); got != 0 {
		t.Errorf("in progress: got %d, want 0", got)
	}
	if got := g.Waiting(); got != 0 {
		t.Errorf("waiting: got %d, want 0", got)
	}
}
