package bench

import (
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestFormatNumber(t *testing.T) {
	tests := []struct {
		v    float64
		dec  int
		want string
	}{
		{60438.42, 0, "60,438"},
		{2604666.89, 0, "2,604,667"},
		{999, 0, "999"},
		{1.5234, -1, "1.52"},
		{0.2401, -1, "0.240"},
		{33.04, -1, "33.0"},
		{837.8, -1, "838"},
		{0, -1, "0"},
		{-1234.5, 1, "-1,234.5"},
	}
	for _, tt := range tests {
		if got := formatNumber(tt.v, tt.dec); got != tt.want {
			t.Errorf("formatNumber(%v, %d): got %q, want %q", tt.v, tt.dec, got, tt.want)
		}
	}
	if got := formatStat(Stat{Median: 5, Min: 4, Max: 6, N: 3}, 0); got != "5 (4–6)" {
		t.Errorf("formatStat: got %q, want %q", got, "5 (4–6)")
	}
	if got := formatStat(Stat{Median: 5, Min: 5, Max: 5, N: 1}, 0); got != "5" {
		t.Errorf("formatStat one round: got %q, want 5", got)
	}
}

// sampleResults is a small run: proxy-ka c100 with Helios and nginx over
// two rounds, a skipped scenario, and a failed run.
func sampleResults() *Results {
	run := func(round int, rps, p99 float64) *RunResult {
		m := map[string]float64{MetricRPS: rps, MetricLatAvg: p99 / 3, MetricLatP50: p99 / 3, MetricLatP90: p99 / 2,
			MetricLatP99: p99, MetricLatMax: p99 * 2, MetricErrTotal: 0, MetricErrTimeout: 0, MetricCPUPerReq: 14, MetricPeakRSS: 20, MetricRequests: rps * 5,
			MetricProbeP50: p99 / 4, MetricProbeP99: p99 / 2, MetricProbeP999: p99}
		return &RunResult{Round: round, Metrics: m, Raw: "raw/x.txt"}
	}
	h := &ContenderResult{Name: "helios", Label: "Helios", Peer: "helios", Config: "helios",
		Runs: []*RunResult{run(1, 59091, 4.74), run(2, 60000, 4.5), {Round: 3, Error: "Helios did not start: exited\nlog tail"}}}
	n := &ContenderResult{Name: "nginx", Label: "nginx", Peer: "nginx", Config: "nginx",
		Runs: []*RunResult{run(1, 62980, 3.63), run(2, 63000, 3.7), run(3, 61000, 3.5)}}
	h.summarize()
	n.summarize()
	c := &CaseResult{Case: Case{Name: "c100", Connections: 100, Path: "/", Strategy: "round_robin"},
		LatencyKind: "closed-loop", ProbeRateRPS: 600, Contenders: []*ContenderResult{h, n}}
	c.ratios()
	return &Results{
		Schema:   SchemaV2,
		Started:  time.Date(2026, 11, 21, 5, 34, 0, 0, time.UTC),
		Settings: Settings{Rounds: 3, DurationS: 8, WarmupS: 1, Peers: []string{"nginx"}, BasePort: 28080, ClientTimeoutS: 5},
		Machine:  Machine{Hostname: "vm", CPUModel: "Xeon", CPUs: 2},
		Profile:  planCPUs([]int{0, 1}, 2),
		Versions: map[string]string{"nginx": "nginx version: nginx/1.22.1"},
		Configs:  map[string]string{"helios": "listeners: []\n", "nginx": "worker_processes 2;\n"},
		Scenarios: []*ScenarioResult{
			{Name: "proxy-ka", What: "round-robin", Tool: ToolWrk, DurationS: 8, Cases: []*CaseResult{c}},
			{Name: "h2", What: "HTTP/2", Tool: ToolH2load, Skipped: "Helios rejects the config this scenario needs: line 21: listeners[1].tls: unknown key"},
		},
		FailedRuns: 1,
	}
}

func TestMarkdownReport(t *testing.T) {
	var b strings.Builder
	WriteMarkdown(&b, sampleResults())
	md := b.String()
	for _, want := range []string{
		"# helios bench: Helios vs nginx",
		"| scenario | case | req/s Helios | req/s nginx | Helios/nginx |",
		"| proxy-ka | c100 | 59,546 | 62,980 | 0.95 |",
		"| Metric | Helios | nginx | Helios/nginx | Winner |",
		"| Requests/sec | 59,546 (59,091–60,000) | 62,980 (61,000–63,000) | 0.95× | nginx +5.8% |",
		"p99 latency, ms (closed-loop)",
		"**h2** skipped: Helios rejects",
		"Helios round 3 failed: Helios did not start: exited log tail",
		"**Shared:**",
		"```nginx\nworker_processes 2;\n```",
		"```yaml\nlisteners: []\n```",
		"1 run(s) failed",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}

func TestChartsAreWellFormedSVG(t *testing.T) {
	res := sampleResults()
	for name, svg := range map[string]string{"throughput": ThroughputSVG(res), "latency": LatencySVG(res)} {
		if !strings.HasPrefix(svg, "<svg ") || !strings.Contains(svg, `xmlns="http://www.w3.org/2000/svg"`) {
			t.Errorf("%s: not an SVG document", name)
		}
		dec := xml.NewDecoder(strings.NewReader(svg))
		for {
			_, err := dec.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		for _, want := range []string{"proxy-ka c100", "Helios", "nginx"} {
			if !strings.Contains(svg, want) {
				t.Errorf("%s lacks %q", name, want)
			}
		}
	}
}

func TestWriteOutputs(t *testing.T) {
	dir := t.TempDir()
	if err := writeOutputs(dir, sampleResults()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back Results
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	c := back.Scenarios[0].Cases[0]
	if back.Schema != SchemaV2 || c.Name != "c100" || c.Connections != 100 || c.Contenders[1].Summary[MetricRPS].Median != 62980 {
		t.Errorf("round trip: got %+v", back)
	}
	if r := c.Ratios["Helios/nginx"][MetricRPS]; r < 0.94 || r > 0.95 {
		t.Errorf("ratio: got %v", r)
	}
	for _, f := range []string{"report.md", "throughput.svg", "latency.svg"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
}

func TestCaseParams(t *testing.T) {
	tests := []struct {
		tool string
		c    Case
		want string
	}{
		{ToolWrk, Case{Connections: 100, Path: "/", Headers: map[string]string{"Connection": "close"}, Strategy: "round_robin"},
			"100 connections, GET /, Connection: close"},
		{ToolWrk, Case{Connections: 25, Path: "/sink", BodyBytes: 1 << 20, Chunked: true, Strategy: "round_robin"},
			"25 connections, POST /sink, 1 MiB bodies chunked"},
		{ToolWrk, Case{Connections: 100, Path: "/sink", BodyBytes: 65536, Strategy: "round_robin"},
			"100 connections, POST /sink, 64 KiB bodies with a Content-Length"},
		{ToolWebSocket, Case{Connections: 100, Path: "/ws", BodyBytes: 128, Strategy: "round_robin"},
			"100 connections, WebSocket /ws, 128-byte messages"},
		{ToolTLS, Case{Connections: 100, Path: "/respond", Resume: true, Strategy: "round_robin"},
			"100 connections, a new TLS connection per GET /respond, resuming sessions"},
		{ToolIdle, Case{Connections: 5000, Path: "/respond", Protocol: "h2", Strategy: "round_robin"},
			"5000 connections, idle after one GET /respond each, h2"},
		{ToolH2load, Case{Connections: 1, Path: "/bytes/1073741824", Streams: 1, Requests: 1, Strategy: "round_robin"},
			"1 connections, GET /bytes/1073741824, 1 request(s) per run, 1 streams per connection"},
	}
	for _, tt := range tests {
		if got := caseParams(tt.tool, &CaseResult{Case: tt.c}); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
	}
}

// Render redraws a report from its results.json alone, and refuses a
// results.json of another schema.
func TestRender(t *testing.T) {
	dir := t.TempDir()
	res := sampleResults()
	if err := writeOutputs(dir, res); err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	for _, f := range []string{"report.md", "latency.svg"} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	if err := Render(dir); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil || string(got) != string(want) {
		t.Errorf("rendered report differs from the original (err %v)", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "latency.svg")); err != nil {
		t.Errorf("latency.svg not redrawn: %v", err)
	}
	res.Schema = "helios-bench/1"
	old := t.TempDir()
	if err := writeOutputs(old, res); err != nil {
		t.Fatal(err)
	}
	if err := Render(old); err == nil {
		t.Errorf("rendered a helios-bench/1 results.json without complaint")
	}
}
