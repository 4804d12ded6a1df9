package config

import (
	"strings"
	"testing"
)

// TestPoller: listeners[].poller, and engine, its deprecated old name,
// still read with a warning (issue 19).
func TestPoller(t *testing.T) {
	const base = "routes: [{name: r, respond: {status: 200}}]\nlisteners: [{name: web, address: \":8080\""
	tests := []struct {
		name, keys  string
		want        string
		warn, error string
	}{
		{name: "default", keys: "", want: PollerNative},
		{name: "portable", keys: ", poller: portable", want: PollerPortable},
		{name: "old name, loop", keys: ", engine: loop", want: PollerNative, warn: "t.yaml:2: listeners[0].engine: WARNING: engine is deprecated: write poller: native"},
		{name: "old name, portable", keys: ", engine: portable", want: PollerPortable, warn: "engine is deprecated: write poller: portable"},
		{name: "both, agreeing", keys: ", engine: portable, poller: portable", want: PollerPortable, warn: "engine is deprecated"},
		{name: "both, disagreeing", keys: ", engine: loop, poller: portable", error: `listeners[0].engine: "loop" says another poller than poller "portable"`},
		{name: "epoll alone", keys: ", poller: epoll", want: PollerEpoll},
		{name: "unknown poller", keys: ", poller: uring", error: `listeners[0].poller: "uring" is not a poller (native, epoll, portable)`},
		{name: "unknown engine", keys: ", engine: fast", error: `listeners[0].engine: "fast" is not an engine`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, ps := parseProblems(t, base+tt.keys+"}]\n", nil)
			if tt.error != "" {
				if ps == nil || !strings.Contains(ps.Error(), tt.error) {
					t.Fatalf("got problems %v, want one with %q", ps, tt.error)
				}
				return
			}
			if ps != nil && len(ps.Errors()) > 0 {
				t.Fatalf("got problems %v, want none", ps)
			}
			if got := cfg.Listeners[0].Poller; got != tt.want {
				t.Errorf("got poller %q, want %q", got, tt.want)
			}
			warnings := ""
			if len(cfg.Warnings) > 0 {
				warnings = cfg.Warnings.Error()
			}
			if tt.warn == "" && warnings != "" || tt.warn != "" && !strings.Contains(warnings, tt.warn) {
				t.Errorf("got warnings %q, want %q", warnings, tt.warn)
			}
		})
	}
}
