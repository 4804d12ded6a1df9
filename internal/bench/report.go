package bench

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Render rewrites report.md and the charts of the results.json in dir, as
// this version draws them (results.json itself is left as it is).
func Render(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		return err
	}
	var res Results
	if err := json.Unmarshal(b, &res); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(dir, "results.json"), err)
	}
	if res.Schema != SchemaV2 {
		return fmt.Errorf("%s: schema %q; this version renders %q", dir, res.Schema, SchemaV2)
	}
	files := renderFiles(&res)
	delete(files, "results.json")
	return writeFiles(dir, files)
}

// writeOutputs writes results.json, report.md and the charts into dir.
func writeOutputs(dir string, res *Results) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	files := renderFiles(res)
	files["results.json"] = append(b, '\n')
	return writeFiles(dir, files)
}

// renderFiles returns report.md and the charts of res, by file name.
func renderFiles(res *Results) map[string][]byte {
	var md strings.Builder
	WriteMarkdown(&md, res)
	return map[string][]byte{
		"report.md":        []byte(md.String()),
		"throughput.svg":   []byte(ThroughputSVG(res)),
		"latency.svg":      []byte(LatencySVG(res)),
		"latency-rate.svg": []byte(RateSVG(res)),
	}
}

// writeFiles writes each file into dir.
func writeFiles(dir string, files map[string][]byte) error {
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// formatNumber formats v with the given decimals and thousands separators;
// decimals -1 picks them by size (3 below 1, 2 below 10, 1 below 100).
func formatNumber(v float64, decimals int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "—"
	}
	if decimals < 0 {
		a := math.Abs(v)
		switch {
		case a == 0:
			decimals = 0
		case a < 1:
			decimals = 3
		case a < 10:
			decimals = 2
		case a < 100:
			decimals = 1
		default:
			decimals = 0
		}
	}
	s := strconv.FormatFloat(v, 'f', decimals, 64)
	intPart, frac, _ := strings.Cut(s, ".")
	neg := strings.HasPrefix(intPart, "-")
	intPart = strings.TrimPrefix(intPart, "-")
	var b strings.Builder
	for i, r := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	out := b.String()
	if frac != "" {
		out += "." + frac
	}
	if neg {
		out = "-" + out
	}
	return out
}

// seconds formats a number of seconds as a Go duration: "8s", "500ms".
func seconds(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond).String()
}

// formatStat formats a median with its min-max range when the rounds
// differ: "60,438 (58,901–61,220)".
func formatStat(s Stat, decimals int) string {
	if s.N == 0 {
		return "—"
	}
	v := formatNumber(s.Median, decimals)
	if s.N > 1 && s.Min != s.Max {
		v += fmt.Sprintf(" (%s–%s)", formatNumber(s.Min, decimals), formatNumber(s.Max, decimals))
	}
	return v
}

// metricLabel is the row label of d in a case measured with kind.
func metricLabel(d MetricDef, kind string) string {
	l := d.Label
	if d.Unit != "" {
		l += ", " + d.Unit
	}
	switch {
	case d.Probe:
		l += " (probe, open-loop)"
	case d.Latency:
		l += " (" + kind + ")"
	}
	return l
}

// headlineContenders are the contenders of the headline table: Helios and
// the peers, in order; in an A/B run, the new and the old Helios.
func headlineContenders(res *Results) []string {
	if res.Settings.Against != "" {
		return []string{abNew, abOld}
	}
	return append([]string{"helios"}, res.Settings.Peers...)
}

// contenderLabel returns how reports name the contender called name.
func contenderLabel(name string) string {
	if p, ok := peerByName(name); ok {
		return p.Label
	}
	return name
}

// WriteMarkdown renders the report.
func WriteMarkdown(w io.Writer, res *Results) {
	names := headlineContenders(res)
	labels := make([]string, len(names))
	for i, n := range names {
		labels[i] = contenderLabel(n)
	}
	suite := "full suite"
	switch {
	case len(res.Settings.Scenarios) > 0:
		suite = "scenarios " + strings.Join(res.Settings.Scenarios, ", ")
	case res.Settings.Quick:
		suite = "quick suite"
	}
	if res.Settings.Against != "" {
		labels = []string{"Helios new", "Helios old"}
	}
	fmt.Fprintf(w, "# helios bench: %s\n\n", strings.Join(labels, " vs "))
	fmt.Fprintf(w, "%s on %s, %s: %d round(s) of %s per run after a %s warm-up, proxy on %d CPU(s).",
		res.Started.Format("2006-01-02 15:04 MST"), res.Machine.Hostname, suite, res.Settings.Rounds,
		seconds(res.Settings.DurationS), seconds(res.Settings.WarmupS), res.Profile.CPUs)
	if res.Interrupted {
		fmt.Fprint(w, " **Interrupted before the end: some scenarios are missing.**")
	}
	if res.FailedRuns > 0 {
		fmt.Fprintf(w, " **%d run(s) failed; see below.**", res.FailedRuns)
	}
	fmt.Fprint(w, "\n\n")
	if res.Noisy && res.Guard != nil {
		fmt.Fprintf(w, "**Noisy:** the quiet-machine guard gave up before %d of %d rounds (%s). Other work on the machine ran beside these measurements: the ratios within this run still compare like with like, but absolute numbers are low and ranges wide. See [Quiet-machine guard](#quiet-machine-guard).\n\n",
			res.Guard.GaveUp(), len(res.Guard.Checks), firstWhy(res.Guard))
	}
	if len(res.Settings.PeersMissing) > 0 {
		var missing []string
		for _, n := range res.Settings.PeersMissing {
			missing = append(missing, contenderLabel(n))
		}
		fmt.Fprintf(w, "Not compared: %s (not installed on this machine; `make bench-deps` installs every peer).\n\n", strings.Join(missing, ", "))
	}

	if res.Settings.Against != "" {
		writeABHeadline(w, res)
	} else {
		writeHeadline(w, res, names, labels)
	}

	fmt.Fprintf(w, "## Machine\n\n")
	m := res.Machine
	fmt.Fprintf(w, "- CPU: %s; %d CPU(s) available to the benchmark, %d online\n", m.CPUModel, m.CPUs, m.OnlineCPUs)
	fmt.Fprintf(w, "- Memory: %s MiB; kernel %s\n", formatNumber(float64(m.MemoryMiB), 0), m.Kernel)
	fmt.Fprintf(w, "- Load average (1, 5, 15 min): %s at the start, %s at the end — other work on the machine shows here\n", m.LoadAvgStart, m.LoadAvgEnd)
	fmt.Fprintf(w, "- Descriptor limit: %d; net.core.somaxconn %s; ephemeral ports %s\n\n", m.NoFile, m.Somaxconn, m.PortRange)

	writeGuard(w, res.Guard)

	p := res.Profile
	fmt.Fprintf(w, "## CPU profile\n\n")
	fmt.Fprintf(w, "- The proxy under test is pinned with taskset to CPU(s) %s: Helios runs with GOMAXPROCS=%d, nginx with worker_processes %d, HAProxy with nbthread %d.\n",
		p.ProxyCPUs, p.CPUs, p.CPUs, p.CPUs)
	if p.Shared {
		fmt.Fprintf(w, "- **Shared:** %s\n\n", p.Note)
	} else {
		fmt.Fprintf(w, "- %s\n\n", p.Note)
	}

	fmt.Fprintf(w, "## Method\n\n")
	fmt.Fprintf(w, "- Every proxy gets the same three `helios backend` processes (ports %d-%d), the same port (%d), the same timeouts and retry policy (see the configs below).\n",
		res.Settings.BasePort+1, res.Settings.BasePort+3, res.Settings.BasePort)
	fmt.Fprintf(w, "- Each run starts the proxy afresh, warms it up with the run's own load for %s, then measures. Rounds interleave the proxies (Helios, then each peer, then Helios again); tables give the median over rounds with the min–max range in parentheses. Only compare numbers from the same invocation.\n",
		seconds(res.Settings.WarmupS))
	fmt.Fprintf(w, "- Latency labelled *probe, open-loop* comes from a latency probe (dpbench's method): during every saturating run a separate `helios bench loadgen` sends the case's request at a fixed rate of about 1%% of the load (%s of the warm-up's rate, at least %s; each case's rate is in its table) over a pool of %d connections that may grow to %d, and measures each request from its intended send time, so a stall is counted in full (no coordinated omission). These are the report's latency figures. Latency labelled *closed-loop* is the saturating generator's own (wrk): a connection sends its next request only after the previous answer, so it measures its own queue and under-reports a stall; it is kept as detail. *open-loop* latency (latency-at-rate) is the open-loop generator's own at a fixed rate. h2load reports only mean and max.\n",
		"1%", formatRate(probeMinRate), probeConnections, probeMaxConnections)
	fmt.Fprintf(w, "- Errors are the load generator's: connect, read, write, timeout (no answer within %s), non-2xx/3xx answers, and for the open-loop generator requests it could not send on schedule.\n",
		seconds(res.Settings.ClientTimeoutS))
	fmt.Fprintf(w, "- Proxy CPU per request: utime+stime of all the proxy's processes (nginx master and workers) from /proc/PID/stat, before and after the measured run, divided by the requests completed. Peak RSS: the sum of VmRSS over those processes, sampled every 100 ms (shared pages count once per process).\n")
	fmt.Fprintf(w, "- Winner: the best median and its lead over the runner-up (for lower-is-better metrics a negative percentage); *(ranges overlap)* means the rounds' ranges intersect, so the lead is within this machine's noise.\n\n")

	fmt.Fprintf(w, "## Versions\n\n| tool | version |\n|---|---|\n")
	for _, k := range sortedKeys(res.Versions) {
		fmt.Fprintf(w, "| %s | %s |\n", k, mdEscape(res.Versions[k]))
	}
	fmt.Fprintln(w)

	fmt.Fprintf(w, "## Scenarios\n\n")
	for _, s := range res.Scenarios {
		writeScenario(w, s)
	}

	fmt.Fprintf(w, "## Charts\n\n![Throughput per case](throughput.svg)\n\n![Latency percentiles per case](latency.svg)\n\n")
	if curves, _ := rateCurves(res); len(curves) > 0 {
		fmt.Fprintf(w, "![Latency against offered rate](latency-rate.svg)\n\n")
	}

	fmt.Fprintf(w, "## Configs\n\nThe exact config each proxy ran with (also in configs/). Paths point into the run's temporary directory.\n\n")
	for _, k := range sortedKeys(res.Configs) {
		lang := "nginx"
		switch {
		case strings.HasPrefix(k, "helios"):
			lang = "yaml"
		case strings.HasPrefix(k, "haproxy"):
			lang = "haproxy"
		case strings.HasPrefix(k, "caddy"):
			lang = "caddy"
		}
		fmt.Fprintf(w, "### %s\n\n```%s\n%s```\n\n", k, lang, res.Configs[k])
	}
	fmt.Fprintf(w, "## Files\n\n- results.json: every run's numbers (schema %q, documented in bench/README.md)\n- raw/: each load generator's output, with its command line\n- configs/: the configs above\n", res.Schema)
}

// latencyKeys maps a percentile of the report's latency ("p50", "p99",
// "p99.9") to its metric: the probe's, or the open-loop generator's own.
var latencyKeys = map[string][2]string{
	"p50":   {MetricProbeP50, MetricLatP50},
	"p90":   {MetricProbeP90, MetricLatP90},
	"p99":   {MetricProbeP99, MetricLatP99},
	"p99.9": {MetricProbeP999, MetricLatP999},
	"max":   {MetricProbeMax, MetricLatMax},
}

// latencyKey returns the metric that holds percentile q of a case's report
// latency: the latency probe's when the case ran with one, the open-loop
// generator's in an open-loop case, and "" when the case has no open-loop
// latency (closed-loop figures are never headline figures).
func latencyKey(c *CaseResult, q string) string {
	switch {
	case c.ProbeRateRPS > 0:
		return latencyKeys[q][0]
	case c.LatencyKind == "open-loop":
		return latencyKeys[q][1]
	}
	return ""
}

// bestPeer returns the peer (not Helios) with the best median of key in a
// case, by the metric's direction, and whether there is one.
func bestPeer(byName map[string]*ContenderResult, peers []string, key string, better Better) (string, Stat, bool) {
	var (
		name  string
		best  Stat
		found bool
	)
	for _, n := range peers {
		ct := byName[n]
		if ct == nil || ct.Skipped != "" {
			continue
		}
		st := ct.Summary[key]
		if st.N == 0 {
			continue
		}
		if !found || better == Higher && st.Median > best.Median || better == Lower && st.Median < best.Median {
			name, best, found = n, st, true
		}
	}
	return name, best, found
}

// firstWhy is the first reason the guard gave, for the headline.
func firstWhy(g *GuardReport) string {
	for _, c := range g.Checks {
		if !c.Quiet && len(c.Why) > 0 {
			return "first: " + c.Why[0]
		}
	}
	return "no reason recorded"
}

// writeGuard writes the quiet-machine guard's section: its limits and the
// rounds it waited for or gave up on.
func writeGuard(w io.Writer, g *GuardReport) {
	if g == nil {
		return
	}
	fmt.Fprintf(w, "## Quiet-machine guard\n\n")
	fmt.Fprintf(w, "Before each round the guard sampled the machine for %s and waited (up to %s per round, %s in all) until the 1-minute load average was at most %.2f per CPU (within a minute of the benchmark's own load, which the average still holds: the runnable tasks outside the benchmark), no process outside the benchmark used more than %.0f%% of a CPU, and the hypervisor stole at most %.0f%% of CPU time.\n\n",
		seconds(g.WindowS), seconds(g.WaitS), seconds(g.BudgetS), g.MaxLoadPerCPU, g.MaxProcCPU*100, g.MaxSteal*100)
	var waited float64
	var rows []string
	for _, c := range g.Checks {
		waited += c.WaitedS
		if c.Quiet && c.WaitedS < 2*g.WindowS {
			continue
		}
		verdict := "quiet"
		if !c.Quiet {
			verdict = "**gave up**"
		}
		found := fmt.Sprintf("load %.2f, runnable %.1f, steal %.0f%%", c.Found.LoadAvg1, c.Found.Runnable, c.Found.Steal*100)
		if len(c.Found.Busy) > 0 {
			b := c.Found.Busy[0]
			found += fmt.Sprintf(", busiest %s (pid %d) %.0f%%", b.Name, b.PID, b.CPU*100)
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %d | %s | %s | %s |", c.Scenario, c.Case, c.Round, seconds(c.WaitedS), verdict, mdEscape(found)))
	}
	fmt.Fprintf(w, "%d round(s) checked, %d found quiet at once, %d gave up; %s spent sampling and waiting.\n\n",
		len(g.Checks), len(g.Checks)-len(rows), g.GaveUp(), seconds(math.Round(waited*10)/10))
	if len(rows) > 0 {
		fmt.Fprintf(w, "| scenario | case | round | waited | verdict | last sample |\n|---|---|---|---|---|---|\n%s\n\n", strings.Join(rows, "\n"))
	}
}

// writeHeadline writes one row per case: req/s of every contender, Helios's
// ratio to each peer and to the best of them, p99 latency (the probe's) with
// the ratio to the best peer's, CPU per request and errors.
func writeHeadline(w io.Writer, res *Results, names, labels []string) {
	fmt.Fprintf(w, "## Headline\n\nMedians over the rounds. p99 is the latency probe's (an open-loop client at about 1%% of the load beside the saturating generator, from each request's intended send time), or the open-loop generator's own in latency-at-rate; wrk's closed-loop percentiles are in the tables per case. *best* is the best of the peers in that column.\n\n")
	if res.Settings.Rounds < 2 {
		fmt.Fprintf(w, "**One round, noise unknown:** every number below is a single measurement on this machine, so no winners are named and the ratios may be noise. Compare with 3 rounds or more (`--rounds`).\n\n")
	}
	peers := names[1:]
	withBest := len(peers) > 1
	head := []string{"scenario", "case"}
	for _, l := range labels {
		head = append(head, "req/s "+l)
	}
	for _, l := range labels[1:] {
		head = append(head, labels[0]+"/"+l)
	}
	if withBest {
		head = append(head, labels[0]+"/best")
	}
	for _, l := range labels {
		head = append(head, "p99 ms "+l)
	}
	if withBest {
		head = append(head, "p99 "+labels[0]+"/best")
	}
	for _, l := range labels {
		head = append(head, "CPU µs/req "+l)
	}
	head = append(head, "errors "+strings.Join(labels, " / "))
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat("---|", len(head)))
	var skipped []string
	for _, s := range res.Scenarios {
		if s.Skipped != "" {
			skipped = append(skipped, fmt.Sprintf("- **%s** skipped: %s", s.Name, s.Skipped))
		}
		for _, c := range s.Cases {
			byName := map[string]*ContenderResult{}
			for _, ct := range c.Contenders {
				byName[ct.Name] = ct
			}
			stat := func(name, key string) Stat {
				if ct := byName[name]; ct != nil && key != "" {
					return ct.Summary[key]
				}
				return Stat{}
			}
			ratio := func(a, b Stat) string {
				if r, ok := Ratio(a, b); ok {
					return fmt.Sprintf("%.2f", r)
				}
				return "—"
			}
			row := []string{s.Name, c.Name}
			for _, n := range names {
				row = append(row, cell(byName[n], MetricRPS, 0))
			}
			for _, n := range peers {
				row = append(row, ratio(stat(names[0], MetricRPS), stat(n, MetricRPS)))
			}
			if withBest {
				row = append(row, ratioToBest(byName, names[0], peers, MetricRPS, Higher))
			}
			p99 := latencyKey(c, "p99")
			for _, n := range names {
				if p99 == "" {
					row = append(row, "—")
					continue
				}
				row = append(row, cell(byName[n], p99, -1))
			}
			if withBest {
				row = append(row, ratioToBest(byName, names[0], peers, p99, Lower))
			}
			for _, n := range names {
				row = append(row, cell(byName[n], MetricCPUPerReq, 1))
			}
			var errs []string
			for _, n := range names {
				errs = append(errs, cell(byName[n], MetricErrTotal, 0))
			}
			row = append(row, strings.Join(errs, " / "))
			fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
		}
	}
	fmt.Fprintln(w)
	if len(skipped) > 0 {
		fmt.Fprintf(w, "%s\n\n", strings.Join(skipped, "\n"))
	}
}

// ratioToBest is Helios's median of key over the best peer's, with that
// peer's label: "1.04 (nginx)".
func ratioToBest(byName map[string]*ContenderResult, helios string, peers []string, key string, better Better) string {
	if key == "" {
		return "—"
	}
	name, best, ok := bestPeer(byName, peers, key, better)
	h := byName[helios]
	if !ok || h == nil {
		return "—"
	}
	r, ok := Ratio(h.Summary[key], best)
	if !ok {
		return "—"
	}
	return fmt.Sprintf("%.2f (%s)", r, contenderLabel(name))
}

// cell is a contender's median for key, or why there is none.
func cell(ct *ContenderResult, key string, decimals int) string {
	switch {
	case ct == nil:
		return "—"
	case ct.Skipped != "":
		return "skipped"
	case ct.allFailed():
		return "failed"
	}
	s := ct.Summary[key]
	if s.N == 0 {
		return "—"
	}
	return formatNumber(s.Median, decimals)
}

// writeScenario writes a scenario's section: one seed-style table per case.
func writeScenario(w io.Writer, s *ScenarioResult) {
	fmt.Fprintf(w, "### %s\n\n%s", s.Name, s.What)
	if s.Seed != "" {
		fmt.Fprintf(w, " (seed %s)", s.Seed)
	}
	fmt.Fprintf(w, ". Tool: %s; %s per run.\n\n", s.Tool, seconds(s.DurationS))
	if s.Skipped != "" {
		fmt.Fprintf(w, "**Skipped:** %s\n\n", mdEscape(s.Skipped))
	}
	for _, n := range s.Notes {
		fmt.Fprintf(w, "%s\n\n", n)
	}
	for _, c := range s.Cases {
		writeCase(w, s.Tool, c)
	}
}

// caseParams describes a case of a scenario run with tool in words.
func caseParams(tool string, c *CaseResult) string {
	request := "GET " + c.Path
	switch {
	case tool == ToolWebSocket:
		request = fmt.Sprintf("WebSocket %s, %d-byte messages", c.Path, cmp.Or(c.BodyBytes, 128))
	case tool == ToolTLS && c.Resume:
		request = "a new TLS connection per GET " + c.Path + ", resuming sessions"
	case tool == ToolTLS:
		request = "a new TLS connection (full handshake) per GET " + c.Path
	case tool == ToolIdle:
		request = fmt.Sprintf("idle after one GET %s each, %s", c.Path, cmp.Or(c.Protocol, "http/1.1"))
	case c.Path == grpcPath:
		request = fmt.Sprintf("gRPC unary calls to %s, %d-byte messages", c.Path, grpcMessageBytes)
	case c.BodyBytes > 0:
		request = fmt.Sprintf("POST %s, %s bodies", c.Path, formatBytes(c.BodyBytes))
		if c.Chunked {
			request += " chunked"
		} else {
			request += " with a Content-Length"
		}
	}
	parts := []string{fmt.Sprintf("%d connections", c.Connections), request}
	if c.Requests > 0 {
		parts = append(parts, fmt.Sprintf("%d request(s) per run", c.Requests))
	}
	for _, k := range sortedKeys(c.Headers) {
		parts = append(parts, k+": "+c.Headers[k])
	}
	if c.Pipeline > 1 {
		parts = append(parts, fmt.Sprintf("pipelining depth %d", c.Pipeline))
	}
	if c.HashUsers > 0 {
		parts = append(parts, fmt.Sprintf("%s from %s users (Zipf, s=%g)", HashHeader, formatNumber(float64(c.HashUsers), 0), c.ZipfS))
	}
	if c.Streams > 0 {
		parts = append(parts, fmt.Sprintf("%d streams per connection", c.Streams))
	}
	if c.Strategy != "round_robin" || c.SlowBackend > 0 {
		parts = append(parts, "strategy "+c.Strategy)
	}
	if c.SlowBackend > 0 {
		d, _ := c.SlowBackend.MarshalText()
		parts = append(parts, "third backend "+string(d)+" slow")
	}
	if c.KillBackendAt > 0 {
		parts = append(parts, fmt.Sprintf("third backend killed at %.0f%% of the run", c.KillBackendAt*100))
	}
	if c.RateRPS > 0 {
		parts = append(parts, fmt.Sprintf("open loop at %s req/s (%.0f%% of the peak)", formatNumber(c.RateRPS, 0), c.RateOfPeak*100))
	}
	if c.ProbeRateRPS > 0 {
		parts = append(parts, fmt.Sprintf("latency probe at %s req/s", formatNumber(c.ProbeRateRPS, 0)))
	}
	return strings.Join(parts, ", ")
}

// formatBytes writes a size in KiB or MiB when it is a whole number of them.
func formatBytes(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d-byte", n)
}

// rateLabel names the per-second rate of a scenario's tool.
func rateLabel(tool string) string {
	switch tool {
	case ToolWebSocket:
		return "Messages/sec"
	case ToolTLS:
		return "Handshakes/sec"
	}
	return "Requests/sec"
}

// writeCase writes the metric | contenders | ratios | winner table of a
// case of a scenario run with tool.
func writeCase(w io.Writer, tool string, c *CaseResult) {
	fmt.Fprintf(w, "#### %s\n\n%s.\n\n", c.Name, caseParams(tool, c))
	var labels []string
	for _, ct := range c.Contenders {
		labels = append(labels, ct.Label)
	}
	head := append([]string{"Metric"}, labels...)
	var ratioKeys []string
	for _, ct := range c.Contenders[1:] {
		k := c.Contenders[0].Label + "/" + ct.Label
		ratioKeys = append(ratioKeys, k)
		head = append(head, k)
	}
	head = append(head, "Winner")
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat("---|", len(head)))
	for _, d := range Metrics {
		if !showMetric(c, d) {
			continue
		}
		row := []string{metricLabel(d, c.LatencyKind)}
		if d.Key == MetricRPS {
			row[0] = rateLabel(tool)
		}
		stats := make([]Stat, len(c.Contenders))
		for i, ct := range c.Contenders {
			stats[i] = ct.Summary[d.Key]
			switch {
			case ct.Skipped != "":
				row = append(row, "skipped")
			case ct.allFailed():
				row = append(row, "failed")
			default:
				row = append(row, formatStat(stats[i], d.Decimals))
			}
		}
		for _, k := range ratioKeys {
			if r, ok := c.Ratios[k][d.Key]; ok {
				row = append(row, fmt.Sprintf("%.2f×", r))
			} else {
				row = append(row, "—")
			}
		}
		better := d.Better
		if d.Key == MetricRPS && c.RateRPS > 0 {
			// At a fixed rate, throughput is the target, not a contest.
			better, row[0] = Neutral, fmt.Sprintf("Requests/sec (achieved; target %s)", formatNumber(c.RateRPS, 0))
		}
		row = append(row, Winner(better, labels, stats))
		fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
	}
	fmt.Fprintln(w)
	var notes []string
	for _, ct := range c.Contenders {
		if ct.Skipped != "" {
			notes = append(notes, fmt.Sprintf("- %s skipped: %s", ct.Label, ct.Skipped))
		}
		for _, r := range ct.Runs {
			if r.Error != "" {
				notes = append(notes, fmt.Sprintf("- %s round %d failed: %s", ct.Label, r.Round, mdEscape(truncate(r.Error, 600))))
			}
			if r.ProbeError != "" {
				notes = append(notes, fmt.Sprintf("- %s round %d: the latency probe failed: %s", ct.Label, r.Round, mdEscape(truncate(r.ProbeError, 300))))
			}
		}
	}
	if len(notes) > 0 {
		fmt.Fprintf(w, "%s\n\n", strings.Join(notes, "\n"))
	}
}

// showMetric says whether a case's table has a row for d: metrics nobody
// measured, error kinds that never happened and CPU seconds are left out.
func showMetric(c *CaseResult, d MetricDef) bool {
	if d.Key == MetricCPUSeconds {
		return false
	}
	measured, nonzero := false, false
	for _, ct := range c.Contenders {
		s := ct.Summary[d.Key]
		if s.N > 0 {
			measured = true
			nonzero = nonzero || s.Max != 0
		}
	}
	if slices.Contains(errorKinds, d.Key) {
		return nonzero
	}
	return measured
}

// truncate shortens s to at most n bytes, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// mdEscape keeps text from breaking a Markdown table.
func mdEscape(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}
