package bench

import "time"

// SchemaV2 is the Schema of the results.json this version writes;
// bench/README.md documents it. Version 2 added the latency probe, the
// quiet-machine guard, A/B comparisons and the scenarios of issues 10 and
// 11.
const SchemaV2 = "helios-bench/2"

// Results is everything one `helios bench` invocation measured; it is
// written as results.json and rendered as report.md and the SVG charts.
type Results struct {
	Schema   string    `json:"schema"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Interrupted is true when the run was stopped early (Ctrl-C).
	Interrupted bool     `json:"interrupted,omitempty"`
	Command     []string `json:"command"`
	Settings    Settings `json:"settings"`
	Machine     Machine  `json:"machine"`
	Profile     Profile  `json:"profile"`
	// Versions maps a tool (helios, nginx, haproxy, wrk, h2load, go) to
	// what it says its version is.
	Versions map[string]string `json:"versions"`
	// Configs maps a config name ("helios", "nginx-least_conn",
	// "helios-features") to the exact text the proxy ran with.
	Configs   map[string]string `json:"configs"`
	Scenarios []*ScenarioResult `json:"scenarios"`
	// FailedRuns counts runs that ended in an error.
	FailedRuns int `json:"failed_runs"`
	// Guard is the quiet-machine guard's record; Noisy is true when it
	// gave up before at least one round.
	Guard *GuardReport `json:"guard,omitempty"`
	Noisy bool         `json:"noisy,omitempty"`

	outDir string
}

// Settings are the options the run used.
type Settings struct {
	Quick bool `json:"quick"`
	// DurationS is the default measured length of a run; a scenario with
	// its own duration (c10k) says so in its DurationS.
	DurationS float64 `json:"duration_s"`
	WarmupS   float64 `json:"warmup_s"`
	Rounds    int     `json:"rounds"`
	// Peers are the proxies compared with Helios.
	Peers []string `json:"peers"`
	// PeersMissing are the peers left out because they are not installed
	// (only when --peers did not name the peers).
	PeersMissing []string `json:"peers_missing,omitempty"`
	// ClientTimeoutS is the load generators' request timeout (wrk
	// --timeout).
	ClientTimeoutS float64 `json:"client_timeout_s"`
	// BasePort is the proxy's port; backends listen on the next three.
	BasePort int `json:"base_port"`
	// Scenarios is the --scenarios selection; empty for the full or
	// quick suite.
	Scenarios []string `json:"scenarios,omitempty"`
	// HeliosBin is the Helios build under test; Against, in an A/B run,
	// the build it is compared with.
	HeliosBin string `json:"helios_bin"`
	Against   string `json:"against,omitempty"`
}

// ScenarioResult is one scenario of the run.
type ScenarioResult struct {
	Name string `json:"name"`
	Seed string `json:"seed,omitempty"`
	What string `json:"what"`
	Tool string `json:"tool"`
	// DurationS is the measured length of each run.
	DurationS float64 `json:"duration_s"`
	// Skipped, when set, is why the scenario did not run (or stopped).
	Skipped string `json:"skipped,omitempty"`
	// Notes are facts the reader needs, such as where the peak rate of
	// latency-at-rate came from.
	Notes []string      `json:"notes,omitempty"`
	Cases []*CaseResult `json:"cases"`
}

// CaseResult is one case: its parameters and every contender's runs.
type CaseResult struct {
	Case
	// LatencyKind is how latency was measured: "closed-loop" (wrk),
	// "open-loop" (from the intended send time) or "h2load" (mean and max
	// only).
	LatencyKind string `json:"latency_kind"`
	// RateRPS is the open-loop target rate; 0 for closed-loop cases.
	RateRPS float64 `json:"rate_rps,omitempty"`
	// ProbeRateRPS is the latency probe's rate in every run of the case;
	// 0 when the case has no probe.
	ProbeRateRPS float64            `json:"probe_rate_rps,omitempty"`
	Contenders   []*ContenderResult `json:"contenders"`
	// Ratios maps "Helios/nginx" to metric -> ratio of the medians, for
	// every other contender and every metric both measured with a
	// non-zero denominator.
	Ratios map[string]map[string]float64 `json:"ratios,omitempty"`
	// AB maps a metric to the comparison of the two builds of an A/B run
	// (--against).
	AB map[string]ABComparison `json:"ab,omitempty"`

	noProbe bool // the peak measurement of latency-at-rate runs without one
}

// ContenderResult is one proxy (in one configuration) in a case.
type ContenderResult struct {
	// Name is stable: helios, helios-features-off, helios-policy-off,
	// nginx, haproxy.
	Name  string `json:"name"`
	Label string `json:"label"`
	Peer  string `json:"peer"`
	// Config names the config in Results.Configs.
	Config string `json:"config,omitempty"`
	// Skipped, when set, is why this proxy did not run the case.
	Skipped string       `json:"skipped,omitempty"`
	Runs    []*RunResult `json:"runs"`
	// Summary maps each metric to its median, min and max over the runs
	// without an error.
	Summary map[string]Stat `json:"summary"`
}

// RunResult is one measured run (one round of one contender).
type RunResult struct {
	Round   int                `json:"round"`
	Metrics map[string]float64 `json:"metrics,omitempty"`
	// Command is the load generator's command line.
	Command []string `json:"command,omitempty"`
	// Raw is the load generator's output file, relative to the output
	// directory.
	Raw   string `json:"raw,omitempty"`
	Error string `json:"error,omitempty"`
	// ProbeCommand, ProbeRaw and ProbeError are the latency probe's
	// command line, output file and failure, when the run had a probe.
	ProbeCommand []string `json:"probe_command,omitempty"`
	ProbeRaw     string   `json:"probe_raw,omitempty"`
	ProbeError   string   `json:"probe_error,omitempty"`
}

// allFailed reports whether c ran and every run failed.
func (c *ContenderResult) allFailed() bool {
	if len(c.Runs) == 0 {
		return false
	}
	for _, r := range c.Runs {
		if r.Error == "" {
			return false
		}
	}
	return true
}

// summarize fills c.Summary from its runs.
func (c *ContenderResult) summarize() {
	vals := map[string][]float64{}
	for _, r := range c.Runs {
		if r.Error != "" {
			continue
		}
		for k, v := range r.Metrics {
			vals[k] = append(vals[k], v)
		}
	}
	c.Summary = map[string]Stat{}
	for k, v := range vals {
		c.Summary[k] = Summarize(v)
	}
}

// ratios fills cr.Ratios: the first contender (Helios) over each other.
func (cr *CaseResult) ratios() {
	if len(cr.Contenders) < 2 {
		return
	}
	h := cr.Contenders[0]
	cr.Ratios = map[string]map[string]float64{}
	for _, o := range cr.Contenders[1:] {
		m := map[string]float64{}
		for k, hs := range h.Summary {
			if r, ok := Ratio(hs, o.Summary[k]); ok {
				m[k] = r
			}
		}
		if len(m) > 0 {
			cr.Ratios[h.Label+"/"+o.Label] = m
		}
	}
}
