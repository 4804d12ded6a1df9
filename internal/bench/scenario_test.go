package bench

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// The names are a contract with users' scripts and the table.
func TestEmbeddedScenarioNames(t *testing.T) {
	ss, err := LoadScenarios()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"proxy-ka", "proxy-close", "respond", "static", "https-ka", "https-local", "tls-handshake", "h2", "h2-bulk", "grpc",
		"idle-conns", "pipeline", "upload", "websocket", "c10k", "slow-backend", "hash", "backend-down", "features-on", "features-on-tracing", "policy", "latency-at-rate", "compress",
		"discovery", "shared-limit"}
	if got := scenarioNames(ss); !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	byName := map[string]Scenario{}
	for _, s := range ss {
		byName[s.Name] = s
	}
	conns := func(name string) []int {
		var c []int
		for _, x := range byName[name].Cases {
			c = append(c, x.Connections)
		}
		return c
	}
	if got := conns("proxy-ka"); !slices.Equal(got, []int{100, 500, 1000}) {
		t.Errorf("proxy-ka connections: got %v, want [100 500 1000]", got)
	}
	for _, c := range byName["compress"].Cases {
		if c.Path != "/json/20480" || c.Compress == "" || c.Headers["Accept-Encoding"] != c.Compress {
			t.Errorf("compress %s: got path %s, compress %q, headers %v; want a 20 KiB JSON asked for with its coding", c.Name, c.Path, c.Compress, c.Headers)
		}
		if want := map[string]int{"gzip-c100": 5, "gzip1-c100": 1}[c.Name]; c.GzipLevel != want {
			t.Errorf("compress %s: gzip level %d, want %d", c.Name, c.GzipLevel, want)
		}
	}
	if got := conns("proxy-close"); !slices.Equal(got, []int{100, 1000}) {
		t.Errorf("proxy-close connections: got %v, want [100 1000]", got)
	}
	for _, c := range byName["proxy-close"].Cases {
		if c.Headers["Connection"] != "close" {
			t.Errorf("proxy-close %s: got headers %v, want Connection: close", c.Name, c.Headers)
		}
	}
	if c := byName["c10k"]; c.Cases[0].Connections != 10000 || time.Duration(c.Duration) != 30*time.Second {
		t.Errorf("c10k: got %d connections for %v, want 10000 for 30s", c.Cases[0].Connections, time.Duration(c.Duration))
	}
	var depths []int
	for _, c := range byName["pipeline"].Cases {
		depths = append(depths, c.Pipeline)
	}
	if !slices.Equal(depths, []int{10, 50}) {
		t.Errorf("pipeline depths: got %v, want [10 50]", depths)
	}
	var strategies []string
	for _, c := range byName["slow-backend"].Cases {
		strategies = append(strategies, c.Strategy)
		if time.Duration(c.SlowBackend) != 50*time.Millisecond {
			t.Errorf("slow-backend %s: delay %v, want 50ms", c.Name, time.Duration(c.SlowBackend))
		}
	}
	if !slices.Equal(strategies, []string{"round_robin", "least_conn", "p2c"}) {
		t.Errorf("slow-backend strategies: got %v", strategies)
	}
	var rates []float64
	for _, c := range byName["latency-at-rate"].Cases {
		rates = append(rates, c.RateOfPeak)
	}
	if !slices.Equal(rates, []float64{0.5, 0.8, 0.95}) {
		t.Errorf("latency-at-rate: got %v, want [0.5 0.8 0.95]", rates)
	}
	if !slices.Contains(byName["h2"].Requires, RequireTLS) || byName["h2"].Tool != ToolH2load {
		t.Errorf("h2: got %+v, want h2load requiring tls", byName["h2"])
	}
	// Issue 10: 64 KiB and 1 MiB bodies, with a Content-Length and chunked.
	type upload struct {
		bytes   int
		chunked bool
	}
	var uploads []upload
	for _, c := range byName["upload"].Cases {
		uploads = append(uploads, upload{c.BodyBytes, c.Chunked})
		if c.Path != "/sink" {
			t.Errorf("upload %s: path %s, want /sink", c.Name, c.Path)
		}
	}
	if want := []upload{{65536, false}, {65536, true}, {1 << 20, false}, {1 << 20, true}}; !slices.Equal(uploads, want) {
		t.Errorf("upload: got %v, want %v", uploads, want)
	}
	// Issue 11: everything TLS needs tls; gRPC needs h2c backends too.
	for _, name := range []string{"https-ka", "tls-handshake", "h2", "h2-bulk", "grpc", "idle-conns"} {
		if !slices.Contains(byName[name].Requires, RequireTLS) {
			t.Errorf("%s: requires %v, want tls", name, byName[name].Requires)
		}
	}
	if !slices.Contains(byName["grpc"].Requires, RequireGRPC) {
		t.Errorf("grpc: requires %v, want grpc", byName["grpc"].Requires)
	}
	if c := byName["h2-bulk"].Cases[0]; c.Requests != 1 || c.Path != "/bytes/1073741824" || c.Connections != 1 {
		t.Errorf("h2-bulk: got %+v, want one request for 1 GiB on one connection", c)
	}
	var resume []bool
	for _, c := range byName["tls-handshake"].Cases {
		resume = append(resume, c.Resume)
	}
	if !slices.Equal(resume, []bool{false, true}) {
		t.Errorf("tls-handshake resume: got %v, want [false true]", resume)
	}
}

func TestSelect(t *testing.T) {
	ss, err := LoadScenarios()
	if err != nil {
		t.Fatal(err)
	}
	names := func(sels []Selection) string {
		var out []string
		for _, s := range sels {
			for _, c := range s.Run {
				out = append(out, s.Name+"/"+c.Name)
			}
		}
		return strings.Join(out, " ")
	}
	tests := []struct {
		name  string
		specs []string
		quick bool
		want  string
	}{
		{"quick", nil, true, "proxy-ka/c100 proxy-ka/c1000"},
		{"one case", []string{"respond/close-c100"}, false, "respond/close-c100"},
		{"file order, not flag order", []string{"static", "proxy-close"}, false, "proxy-close/c100 proxy-close/c1000 static/c100"},
		{"quick with a named scenario without a quick list", []string{"static"}, true, "static/c100"},
		{"quick with proxy-ka named", []string{"proxy-ka"}, true, "proxy-ka/c100 proxy-ka/c1000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sels, err := Select(ss, tt.specs, tt.quick)
			if err != nil {
				t.Fatal(err)
			}
			if got := names(sels); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	all, err := Select(ss, nil, false)
	if err != nil || len(all) != len(ss) {
		t.Errorf("all: got %d scenarios, %v, want %d", len(all), err, len(ss))
	}
	for _, bad := range [][]string{{"nope"}, {"proxy-ka/c7"}} {
		if _, err := Select(ss, bad, false); err == nil {
			t.Errorf("Select(%v): got no error", bad)
		}
	}
}

func TestParseScenariosRejects(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"unknown key", "- {name: a, what: x, cases: [{name: c, conection: 1}]}", "conection"},
		{"duplicate case", "- {name: a, what: x, cases: [{name: c}, {name: c}]}", "duplicate"},
		{"bad strategy", "- {name: a, what: x, cases: [{name: c, strategy: fastest}]}", "fastest"},
		{"rate without open-loop", "- {name: a, what: x, cases: [{name: c, rate_of_peak: 0.5}]}", "rate_of_peak"},
		{"open-loop without rate", "- {name: a, what: x, tool: open-loop, cases: [{name: c}]}", "rate_of_peak"},
		{"unknown quick case", "- {name: a, what: x, quick: [z], cases: [{name: c}]}", "quick"},
		{"bad duration", "- {name: a, what: x, duration: soon, cases: [{name: c}]}", "soon"},
		{"consistent_hash without users", "- {name: a, what: x, cases: [{name: c, strategy: consistent_hash}]}", "hash_users"},
		{"users without consistent_hash", "- {name: a, what: x, cases: [{name: c, hash_users: 10}]}", "hash_users"},
		{"users with h2load", "- {name: a, what: x, tool: h2load, cases: [{name: c, strategy: consistent_hash, hash_users: 10}]}", "hash_users is for wrk"},
		{"users with a body", "- {name: a, what: x, cases: [{name: c, strategy: consistent_hash, hash_users: 10, body_bytes: 5}]}", "hash_users is for wrk"},
		{"zipf_s without users", "- {name: a, what: x, cases: [{name: c, zipf_s: 1.2}]}", "zipf_s"},
		{"unknown coding", "- {name: a, what: x, cases: [{name: c, compress: deflate}]}", "compress"},
		{"coding for another tool", "- {name: a, what: x, tool: websocket, cases: [{name: c, compress: gzip}]}", "compress"},
		{"gzip level out of range", "- {name: a, what: x, cases: [{name: c, compress: gzip, gzip_level: 10}]}", "gzip_level"},
		{"gzip level for zstd", "- {name: a, what: x, cases: [{name: c, compress: zstd, gzip_level: 1}]}", "gzip_level"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseScenarios([]byte(tt.yaml))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error mentioning %q", err, tt.want)
			}
		})
	}
}

func TestCaseDefaults(t *testing.T) {
	ss, err := ParseScenarios([]byte(`
- name: s
  what: x
  defaults: {path: /respond, headers: {Connection: close}}
  cases:
    - {name: a}
    - {name: b, path: /, connections: 7}
`))
	if err != nil {
		t.Fatal(err)
	}
	a, b := ss[0].Cases[0], ss[0].Cases[1]
	if a.Path != "/respond" || a.Connections != 100 || a.Strategy != "round_robin" || a.Headers["Connection"] != "close" {
		t.Errorf("a: got %+v", a)
	}
	if b.Path != "/" || b.Connections != 7 || b.Headers["Connection"] != "close" {
		t.Errorf("b: got %+v", b)
	}
	if ss[0].Tool != ToolWrk {
		t.Errorf("tool: got %q, want wrk", ss[0].Tool)
	}
}

func TestScenarioDuration(t *testing.T) {
	c10k := Scenario{Duration: Duration(30 * time.Second)}
	plain := Scenario{}
	tests := []struct {
		name string
		o    Options
		s    Scenario
		want time.Duration
	}{
		{"full default", Options{}, plain, 6 * time.Second},
		{"full, own duration", Options{}, c10k, 30 * time.Second},
		{"quick", Options{Quick: true}, c10k, 5 * time.Second},
		{"--duration wins", Options{Duration: 3 * time.Second}, c10k, 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.o.scenarioDuration(tt.s); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// The hash scenario hashes X-User from 10,000 Zipf-distributed users, on
// a fair pool and with a slow third backend.
func TestHashScenario(t *testing.T) {
	ss, err := LoadScenarios()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(ss, func(s Scenario) bool { return s.Name == "hash" })
	if i < 0 {
		t.Fatal("no hash scenario")
	}
	var names []string
	for _, c := range ss[i].Cases {
		names = append(names, c.Name)
		if c.Strategy != "consistent_hash" || c.HashUsers != 10000 || c.ZipfS != 1.1 || c.Connections != 100 {
			t.Errorf("hash %s: got strategy %s, %d users, s=%v, %d connections; want consistent_hash, 10000, 1.1, 100",
				c.Name, c.Strategy, c.HashUsers, c.ZipfS, c.Connections)
		}
	}
	if !slices.Equal(names, []string{"c100", "slow-c100"}) || time.Duration(ss[i].Cases[1].SlowBackend) != 50*time.Millisecond {
		t.Errorf("hash cases: got %v (slow-c100's delay %v), want [c100 slow-c100] with 50ms", names, time.Duration(ss[i].Cases[1].SlowBackend))
	}
}
