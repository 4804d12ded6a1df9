package bench

import (
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

// writeOutputs writes results.json, report.md and the charts into dir.
func writeOutputs(dir string, res *Results) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"results.json":   append(b, '\n'),
		"throughput.svg": []byte(ThroughputSVG(res)),
		"latency.svg":    []byte(LatencySVG(res)),
	}
	var md strings.Builder
	WriteMarkdown(&md, res)
	files["report.md"] = []byte(md.String())
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
func seconds(s float64) string { return time.Duration(s * float64(time.Second)).String() }

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
	if d.Latency {
		l += " (" + kind + ")"
	}
	return l
}

// headlineContenders are the contenders of the headline table: Helios and
// the peers, in order.
func headlineContenders(res *Results) []string {
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
	if res.Settings.Quick {
		suite = "quick suite"
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

	writeHeadline(w, res, names, labels)

	fmt.Fprintf(w, "## Machine\n\n")
	m := res.Machine
	fmt.Fprintf(w, "- CPU: %s; %d CPU(s) available to the benchmark, %d online\n", m.CPUModel, m.CPUs, m.OnlineCPUs)
	fmt.Fprintf(w, "- Memory: %s MiB; kernel %s\n", formatNumber(float64(m.MemoryMiB), 0), m.Kernel)
	fmt.Fprintf(w, "- Load average (1, 5, 15 min): %s at the start, %s at the end — other work on the machine shows here\n", m.LoadAvgStart, m.LoadAvgEnd)
	fmt.Fprintf(w, "- Descriptor limit: %d; net.core.somaxconn %s; ephemeral ports %s\n\n", m.NoFile, m.Somaxconn, m.PortRange)

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
	fmt.Fprintf(w, "- Latency labelled *closed-loop* is wrk's own: a connection sends its next request only after the previous answer, so a stalling proxy is under-reported (coordinated omission). *open-loop* latency (latency-at-rate) runs from each request's intended send time at a fixed rate. h2load reports only mean and max.\n")
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

	fmt.Fprintf(w, "## Configs\n\nThe exact config each proxy ran with (also in configs/). Paths point into the run's temporary directory.\n\n")
	for _, k := range sortedKeys(res.Configs) {
		lang := "nginx"
		switch {
		case strings.HasPrefix(k, "helios"):
			lang = "yaml"
		case strings.HasPrefix(k, "haproxy"):
			lang = "haproxy"
		}
		fmt.Fprintf(w, "### %s\n\n```%s\n%s```\n\n", k, lang, res.Configs[k])
	}
	fmt.Fprintf(w, "## Files\n\n- results.json: every run's numbers (schema %q, documented in bench/README.md)\n- raw/: each load generator's output, with its command line\n- configs/: the configs above\n", res.Schema)
}

// writeHeadline writes one row per case: req/s, p99, CPU per request and
// errors per contender, with Helios's req/s ratio to each peer.
func writeHeadline(w io.Writer, res *Results, names, labels []string) {
	fmt.Fprintf(w, "## Headline\n\nMedians over the rounds; p99 is closed-loop (wrk) unless the case is open-loop.\n\n")
	head := []string{"scenario", "case"}
	for _, l := range labels {
		head = append(head, "req/s "+l)
	}
	for _, l := range labels[1:] {
		head = append(head, labels[0]+"/"+l)
	}
	for _, l := range labels {
		head = append(head, "p99 ms "+l)
	}
	for _, l := range labels {
		head = append(head, "CPU µs/req "+l)
	}
	for _, l := range labels {
		head = append(head, "errors "+l)
	}
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
				if ct := byName[name]; ct != nil {
					return ct.Summary[key]
				}
				return Stat{}
			}
			row := []string{s.Name, c.Name}
			for _, n := range names {
				row = append(row, cell(byName[n], MetricRPS, 0))
			}
			for _, n := range names[1:] {
				if r, ok := Ratio(stat(names[0], MetricRPS), stat(n, MetricRPS)); ok {
					row = append(row, fmt.Sprintf("%.2f", r))
				} else {
					row = append(row, "—")
				}
			}
			for _, n := range names {
				row = append(row, cell(byName[n], MetricLatP99, -1))
			}
			for _, n := range names {
				row = append(row, cell(byName[n], MetricCPUPerReq, 1))
			}
			for _, n := range names {
				row = append(row, cell(byName[n], MetricErrTotal, 0))
			}
			fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
		}
	}
	fmt.Fprintln(w)
	if len(skipped) > 0 {
		fmt.Fprintf(w, "%s\n\n", strings.Join(skipped, "\n"))
	}
}

// cell is a contender's median for key, or why there is none.
func cell(ct *ContenderResult, key string, decimals int) string {
	switch {
	case ct == nil:
		return "—"
	case ct.Skipped != "":
		return "skipped"
	case len(ct.Runs) > 0 && ct.Summary[MetricRPS].N == 0:
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
		writeCase(w, c)
	}
}

// caseParams describes a case's load in words.
func caseParams(c *CaseResult) string {
	parts := []string{fmt.Sprintf("%d connections", c.Connections), "GET " + c.Path}
	for _, k := range sortedKeys(c.Headers) {
		parts = append(parts, k+": "+c.Headers[k])
	}
	if c.Pipeline > 1 {
		parts = append(parts, fmt.Sprintf("pipelining depth %d", c.Pipeline))
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
	return strings.Join(parts, ", ")
}

// writeCase writes the metric | contenders | ratios | winner table.
func writeCase(w io.Writer, c *CaseResult) {
	fmt.Fprintf(w, "#### %s\n\n%s.\n\n", c.Name, caseParams(c))
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
		stats := make([]Stat, len(c.Contenders))
		for i, ct := range c.Contenders {
			stats[i] = ct.Summary[d.Key]
			switch {
			case ct.Skipped != "":
				row = append(row, "skipped")
			case stats[i].N == 0 && ct.Summary[MetricRPS].N == 0:
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
