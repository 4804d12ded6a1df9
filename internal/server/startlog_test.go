package server

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/helios-lb/helios/internal/listener"
)

// fixedRlimit is a descriptor limit of n that cannot be raised.
func fixedRlimit(n uint64) listener.Rlimit {
	return listener.Rlimit{
		Get: func() (uint64, uint64, error) { return n, n, nil },
		Set: func(uint64, uint64) error { return nil },
	}
}

// TestStartIsQuiet guards issue 18 item 7: every start on a machine whose
// descriptor limit is below what the default max_connections needs logged
// a WARN, and each listener an INFO with "worst_total_mib":5429, which
// newcomers read as alarms. Now a server starts without a line at INFO or
// above (the daemon opens the log with one line saying what is served
// where), and the descriptor warning comes only when a max_connections
// the file sets cannot be met.
func TestStartIsQuiet(t *testing.T) {
	tests := []struct {
		name     string
		maxConns string
		warn     bool
	}{
		{name: "default max_connections", maxConns: ""},
		{name: "max_connections the limit holds", maxConns: ", max_connections: 100"},
		{name: "max_connections the limit cannot hold", maxConns: ", max_connections: 20000", warn: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			core, logs := observer.New(zap.DebugLevel)
			cfg := yamlConfig(t, `
listeners: [{name: web, address: "127.0.0.1:1"`+tt.maxConns+`}]
routes: [{name: ping, respond: {status: 200}}]
admin: {address: "127.0.0.1:9901"}
`, nil)
			s, _ := startServer(t, cfg, Options{Logger: zap.New(core), Rlimit: fixedRlimit(1000)})
			var loud []string
			for _, e := range logs.All() {
				if e.Level >= zapcore.InfoLevel {
					loud = append(loud, e.Level.String()+" "+e.Message)
				}
			}
			warned := len(logs.FilterMessageSnippet("descriptor limit").FilterLevelExact(zapcore.WarnLevel).All()) == 1
			if warned != tt.warn || len(loud) != map[bool]int{false: 0, true: 1}[tt.warn] {
				t.Errorf("got descriptor warning %v and lines at INFO or above %q; want warning %v and no other line", warned, loud, tt.warn)
			}
			if tt.warn {
				if got := logs.FilterMessageSnippet("descriptor limit").All()[0].ContextMap()["listeners"]; got == nil {
					t.Errorf("the warning does not name the listener")
				}
			}
			// The cap and the memory it commits are in the admin API.
			resp, err := http.Get("http://" + s.AdminAddr().String() + "/api/v1/listeners")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var v struct {
				Listeners []struct {
					Name           string `json:"name"`
					Address        string `json:"address"`
					MaxConnections int    `json:"max_connections"`
					ConnectionCap  int    `json:"connection_cap"`
					Memory         struct {
						WorstKiB      int `json:"worst_kib"`
						SlowReaderKiB int `json:"slow_reader_kib"`
						Connections   int `json:"connections"`
						WorstTotalMiB int `json:"worst_total_mib"`
					} `json:"memory"`
				} `json:"listeners"`
			}
			if err := json.Unmarshal(body, &v); err != nil || len(v.Listeners) != 1 {
				t.Fatalf("/api/v1/listeners: %v\n%s", err, body)
			}
			l := v.Listeners[0]
			// 1000 descriptors, less the reserve and the listening
			// sockets: all for clients, since respond routes need no
			// backend connection (before issue 25, half went to backends
			// regardless, and the cap was below 500).
			// The total is worst bytes times the cap, in MiB, and worst
			// bytes are WorstKiB KiB and less than a KiB more.
			m := l.Memory
			lo, hi := m.WorstKiB*l.ConnectionCap>>10, (m.WorstKiB+1)*l.ConnectionCap>>10
			if l.Name != "web" || l.Address != s.Addr("web").String() || l.MaxConnections > 1000 && (l.ConnectionCap >= 1000 || l.ConnectionCap <= 500) ||
				l.MaxConnections <= 500 && l.ConnectionCap != l.MaxConnections ||
				m.Connections != l.ConnectionCap || m.WorstKiB < m.SlowReaderKiB || m.SlowReaderKiB < 64 || m.WorstTotalMiB < lo || m.WorstTotalMiB > hi {
				t.Errorf("/api/v1/listeners: got %+v, want web at its address, capped between 500 and 1000 by 1000 descriptors, with the memory at the cap", l)
			}
		})
	}
}

// TestSummary: the start line says what is served where.
func TestSummary(t *testing.T) {
	bs := startBackends(t, 2)
	dir := t.TempDir()
	tests := []struct {
		name, yaml, want string
	}{
		{
			name: "one upstream",
			yaml: `
listeners: [{name: web, address: "127.0.0.1:1"}]
routes: [{name: app, match: {path_prefix: /}, upstream: app}]
upstreams: [{name: app, backends: [{address: "{{B1}}"}, {address: "{{B2}}"}]}]
admin: {address: "off"}
`,
			want: "proxying http://WEB -> {{B1}},{{B2}}",
		},
		{
			name: "routes of every kind",
			yaml: `
listeners: [{name: web, address: "127.0.0.1:1", h2c: true}]
routes:
  - {name: ping, match: {path: /ping}, respond: {status: 204}}
  - {name: files, match: {host: static.example, path_prefix: /s/}, static: {root: "` + dir + `"}}
  - {name: app, upstream: app}
upstreams: [{name: app, backends: [{address: "{{B1}}"}]}]
admin: {address: "127.0.0.1:9901"}
`,
			want: "serving http://WEB (and h2c): /ping respond 204, static.example/s/* files in " + dir + ", /* -> {{B1}}; admin on http://ADMIN",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := startServer(t, yamlConfig(t, tt.yaml, bs), Options{})
			r := strings.NewReplacer("WEB", s.Addr("web").String(), "{{B1}}", bs[0].addr, "{{B2}}", bs[1].addr)
			want := r.Replace(tt.want)
			if a := s.AdminAddr(); a != nil {
				want = strings.Replace(want, "ADMIN", a.String(), 1)
			}
			if got := s.Summary(); got != want {
				t.Errorf("got  %q\nwant %q", got, want)
			}
		})
	}
}
