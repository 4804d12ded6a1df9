package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/user"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/helios-lb/helios/internal/tracing/collector"
)

// Options configure a benchmark. Zero fields take the defaults noted.
type Options struct {
	// Scenarios are scenario names, or name/case; nil means all (or, with
	// Quick, the quick set).
	Scenarios []string
	// CPUs is N, the proxy's CPU count. Zero means 2.
	CPUs int
	// Duration is the measured length of each run. Zero means 6s (5s with
	// Quick) and lets scenarios with their own length (c10k: 30s) keep it;
	// a non-zero Duration applies to every scenario.
	Duration time.Duration
	// Rounds is the number of interleaved rounds. Zero means 3 (1 with
	// Quick).
	Rounds int
	// Warmup is the unmeasured load each proxy gets after it starts and
	// before each measured run. Zero means 1s; negative means none.
	Warmup time.Duration
	// Peers are the proxies compared with Helios: nginx, haproxy, caddy.
	// nil means every one of them that is installed; an empty non-nil
	// slice means Helios alone.
	Peers []string
	// Out is the output directory. "" means bench/results/DATE-HOST when
	// ./bench exists, else ./helios-bench-DATE-HOST.
	Out string
	// Quick runs the quick suite: proxy-ka at c100 and c1000, one round,
	// 5s each.
	Quick bool
	// HeliosBin is the helios binary under test (its serve and validate);
	// "" means this one. The backends and the load generator are always
	// this binary's, so that two builds meet the same ones.
	HeliosBin string
	// BasePort is the proxy's port; backends use the next three, TLS the
	// fourth after it, the admin/metrics listener BasePort+10. Zero means
	// 28080.
	BasePort int
	// ClientTimeout is the load generators' request timeout (wrk
	// --timeout). Zero means 5s.
	ClientTimeout time.Duration
	// Progress, when set, receives the progress: one status line kept up
	// to date when ProgressTerminal is set, else a line per run.
	Progress io.Writer
	// ProgressTerminal says Progress is a terminal.
	ProgressTerminal bool
	// Log, when set, receives a line per notable event (skips, failures).
	Log io.Writer
	// Args is the command line, recorded in the results.
	Args []string
	// Plan, when set, receives the plan (scenarios, runs, estimated time)
	// and Run returns without running anything.
	Plan io.Writer
	// Against, when set, is another Helios binary to compare with the one
	// under test (A/B): no peers run, Rounds defaults to 6 and the order of
	// the two alternates every round.
	Against string
	// Guard configures the quiet-machine guard run before each round.
	// Zero fields take its defaults, except that with Quick a zero Budget
	// means one minute.
	Guard GuardSettings
}

// defaults fills the zero fields of o.
func (o *Options) defaults() {
	if o.CPUs <= 0 {
		o.CPUs = 2
	}
	if o.Rounds <= 0 && o.Against != "" {
		o.Rounds = abRounds
	}
	if o.Rounds <= 0 {
		o.Rounds = 3
		if o.Quick {
			o.Rounds = 1
		}
	}
	if o.Warmup == 0 {
		o.Warmup = time.Second
	}
	if o.BasePort <= 0 {
		o.BasePort = 28080
	}
	if o.ClientTimeout <= 0 {
		o.ClientTimeout = 5 * time.Second
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Quick && o.Guard.Budget == 0 {
		o.Guard.Budget = time.Minute
	}
	o.Guard.defaults()
}

// defaultDuration is the run length when --duration is not given.
func (o *Options) defaultDuration() time.Duration {
	switch {
	case o.Duration > 0:
		return o.Duration
	case o.Quick:
		return 5 * time.Second
	}
	return 6 * time.Second
}

// scenarioDuration is the measured length of each run of s.
func (o *Options) scenarioDuration(s Scenario) time.Duration {
	if o.Duration == 0 && !o.Quick && s.Duration > 0 {
		return time.Duration(s.Duration)
	}
	return o.defaultDuration()
}

// ErrRunsFailed is returned (with complete results) when some runs failed.
var ErrRunsFailed = errors.New("some runs failed; see the report")

// runner holds the state of one benchmark.
type runner struct {
	opt       Options
	res       *Results
	sels      []Selection
	tmp, out  string
	heliosBin string // the helios under test: serve, validate
	selfBin   string // this binary: backends, the slow origin, loadgen
	tools     map[string]string
	cert      certFiles
	ps        procs
	backends  [3]*proc
	grpc      [3]*proc      // the h2c backends, started when a case needs them
	slow      time.Duration // the third backend's current delay
	prog      *progress
	guard     *guard
	client    *http.Client
	noFile    uint64

	peak          float64 // latency-at-rate's reference req/s
	featuresFound bool    // Helios's features have been probed once
	// sink receives traced Helios's spans (started when a selected case
	// traces; nil otherwise).
	sink *collector.Collector
	// dns answers the discovery scenario's lookups (nil when no selected
	// case finds its backends by DNS).
	dns *dnsServer
}

// Run runs the benchmark and writes report.md, results.json and the charts
// into the output directory. It returns the results even when some runs
// failed (with ErrRunsFailed) or the context was cancelled; it returns nil
// results when it could not start (a missing tool returns a
// *MissingToolsError).
func Run(ctx context.Context, opt Options) (*Results, error) {
	opt.defaults()
	all, err := LoadScenarios()
	if err != nil {
		return nil, err
	}
	sels, err := Select(all, opt.Scenarios, opt.Quick)
	if err != nil {
		return nil, err
	}
	var missingPeers []string
	if opt.Against != "" {
		if len(opt.Peers) > 0 {
			return nil, errors.New("--against compares two Helios builds; it runs no peers (leave out --peers)")
		}
		if st, err := os.Stat(opt.Against); err != nil || st.IsDir() {
			return nil, fmt.Errorf("--against %s: not a helios binary", opt.Against)
		}
		opt.Peers = []string{}
	}
	if opt.Peers == nil {
		opt.Peers, missingPeers = installedPeers()
	}
	for _, p := range opt.Peers {
		if pe, ok := peerByName(p); !ok || pe.Name == "helios" {
			return nil, fmt.Errorf("unknown peer %q (have %s)", p, strings.Join(peerNames(), ", "))
		}
	}
	r := &runner{opt: opt, sels: sels, client: &http.Client{
		Timeout:   3 * time.Second,
		Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil},
	}}
	if r.selfBin, err = os.Executable(); err != nil {
		return nil, err
	}
	r.heliosBin = opt.HeliosBin
	if r.heliosBin == "" {
		r.heliosBin = r.selfBin
	}
	r.noFile = raiseNoFile()
	m := readMachine()
	m.NoFile = r.noFile
	r.res = &Results{
		Schema:  SchemaV2,
		Started: time.Now().UTC().Truncate(time.Second),
		Command: opt.Args,
		Settings: Settings{
			Quick: opt.Quick, DurationS: opt.defaultDuration().Seconds(), WarmupS: max(opt.Warmup, 0).Seconds(),
			Rounds: opt.Rounds, Peers: opt.Peers, PeersMissing: missingPeers,
			ClientTimeoutS: opt.ClientTimeout.Seconds(), BasePort: opt.BasePort,
			Scenarios: opt.Scenarios, HeliosBin: r.heliosBin, Against: opt.Against,
		},
		Machine:  m,
		Profile:  planCPUs(allowedCPUs(), opt.CPUs),
		Versions: map[string]string{},
		Configs:  map[string]string{},
	}

	if r.tmp, err = os.MkdirTemp("", "helios-bench-"); err != nil {
		return nil, err
	}
	defer os.RemoveAll(r.tmp)
	defer r.ps.stopAll()
	defer func() {
		if r.sink != nil {
			r.sink.Close()
		}
		if r.dns != nil {
			r.dns.close()
		}
	}()
	if err := r.prepare(ctx); err != nil {
		return nil, err
	}
	if opt.Plan != nil {
		r.writePlan(opt.Plan)
		return nil, nil
	}
	r.out, err = outputDir(opt.Out, m.Hostname, r.res.Started)
	if err != nil {
		return nil, err
	}
	for _, d := range []string{r.out, filepath.Join(r.out, "raw"), filepath.Join(r.out, "configs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}

	runs, est := r.plan()
	r.prog = newProgress(opt.Progress, opt.ProgressTerminal, runs, est)
	r.guard = &guard{set: opt.Guard, cpus: m.CPUs, sample: procSampler{procRoot: "/proc", self: os.Getpid()}.sample,
		sleep: sleepCtx, now: time.Now, note: r.prog.note}
	r.res.Guard = opt.Guard.report()
	runErr := r.runAll(ctx)
	r.prog.finish()

	r.res.Finished = time.Now().UTC().Truncate(time.Second)
	r.res.Machine.LoadAvgEnd = loadAvg()
	r.res.Interrupted = ctx.Err() != nil
	r.res.outDir = r.out
	if err := writeOutputs(r.out, r.res); err != nil {
		return r.res, err
	}
	switch {
	case runErr != nil:
		return r.res, runErr
	case ctx.Err() != nil:
		return r.res, ctx.Err()
	case r.res.FailedRuns > 0:
		return r.res, ErrRunsFailed
	}
	return r.res, nil
}

// installedPeers splits the peers into those whose tool is installed and
// those whose is not.
func installedPeers() (have, missing []string) {
	have = []string{}
	for _, p := range Peers[1:] {
		if _, err := lookTools([]string{p.Tool}); err != nil {
			missing = append(missing, p.Name)
			continue
		}
		have = append(have, p.Name)
	}
	return have, missing
}

// OutputDir returns where the results of r went.
func (r *Results) OutputDir() string { return r.outDir }

// outputDir picks and returns the output directory.
func outputDir(out, host string, t time.Time) (string, error) {
	if out != "" {
		return out, nil
	}
	name := t.Local().Format("2006-01-02T1504") + "-" + sanitize(host)
	if st, err := os.Stat("bench"); err == nil && st.IsDir() {
		return filepath.Join("bench", "results", name), nil
	}
	return "helios-bench-" + name, nil
}

// sanitize keeps a host name safe as a file name.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '_'
	}, s)
}

// peerData is what p's template is rendered with for case c; traced
// turns Helios's tracing on at c.TraceRatio.
func (r *runner) peerData(p Peer, s Scenario, c Case, features, traced bool) PeerData {
	dir := filepath.Join(r.tmp, p.Name)
	d := PeerData{
		Dir:               dir,
		Listen:            r.addr(0),
		Backends:          []string{r.addr(portBackend1), r.addr(portBackend1 + 1), r.addr(portBackend1 + 2)},
		CPUs:              r.res.Profile.CPUs,
		Strategy:          c.Strategy,
		HashBalance:       hashBalance,
		StaticRoot:        filepath.Join(r.tmp, "static"),
		RespondBody:       `{"ok":true}`,
		Features:          features,
		Policy:            c.Policy,
		AdminListen:       r.addr(portAdmin),
		AccessLog:         filepath.Join(dir, "access.log"),
		NoFile:            int(min(r.noFile, 1<<20)),
		MaxConnections:    20000,
		PairedConnections: min(20000, (int(min(r.noFile, 1<<20))-200)/2),
		UpstreamKeepalive: 1024,
		RetryAttempts:     2,
		T:                 DefaultTimeouts,
	}
	if c.Strategy == "consistent_hash" {
		d.HashHeader = HashHeader
	}
	if c.Discovery {
		d.Resolver, d.SRV = r.addr(portDNS), benchSRVName
	}
	if c.SharedLimit {
		d.RateLimit, d.RateLimitStore = true, "redis://"+r.addr(portRedis)+"/0"
	}
	if slices.Contains(s.Requires, RequireTLS) {
		d.TLSListen = r.addr(portTLS)
		d.CertFile, d.KeyFile, d.CertKeyFile = r.cert.Cert, r.cert.Key, r.cert.Both
	}
	if slices.Contains(s.Requires, RequireGRPC) {
		d.GRPCBackends = []string{r.addr(portGRPC1), r.addr(portGRPC1 + 1), r.addr(portGRPC1 + 2)}
		d.GRPCPrefix = path.Dir(grpcPath) + "/"
	}
	if traced && p.Name == "helios" && c.TraceRatio > 0 {
		d.TraceEndpoint, d.TraceRatio = r.sinkEndpoint(), c.TraceRatio
	}
	d.NginxHTTP2On = nginxHasHTTP2Directive(r.res.Versions["nginx"])
	if c.Compress != "" {
		d.Compress, d.CompressLevel = c.Compress, cmp.Or(c.GzipLevel, defaultGzipLevel)
	}
	if p.Name == "nginx" && os.Geteuid() == 0 {
		// As root, nginx's workers would switch to nobody, who cannot
		// read the temporary directory.
		d.User, d.Group = "root", "root"
		if u, err := user.Current(); err == nil {
			d.User = u.Username
			if g, err := user.LookupGroupId(u.Gid); err == nil {
				d.Group = g.Name
			}
		}
	}
	return d
}

// contender is one proxy in one configuration within a case.
type contender struct {
	peer     Peer
	features bool
	// traced: Helios traces at the case's TraceRatio.
	traced bool
	// fixed gives Helios the backends' addresses where the case finds
	// them by DNS (the discovery scenario's baseline).
	fixed bool
	// localLimit keeps the case's rate limit in the process where the
	// case shares it through Redis (the shared-limit scenario's baseline).
	localLimit bool
	// noPolicy runs the case with the edge policy off (Helios's
	// baseline of the policy scenario).
	noPolicy bool
	// bin, when set, is the binary run instead of the peer's own (the
	// --against build).
	bin string
	res *ContenderResult
}

// contenders returns Helios, Helios in each baseline configuration the
// case asks for (features, tracing or policy off, fixed addresses, a local
// limit), and the peers unless the case compares Helios with itself; in an
// A/B run, the new and the old Helios.
func (r *runner) contenders(c Case) []*contender {
	helios, _ := peerByName("helios")
	if r.opt.Against != "" {
		return []*contender{
			{peer: helios, features: c.Features, traced: c.TraceRatio > 0, res: &ContenderResult{Name: abNew, Label: "new", Peer: helios.Name}},
			{peer: helios, features: c.Features, traced: c.TraceRatio > 0, bin: r.opt.Against, res: &ContenderResult{Name: abOld, Label: "old", Peer: helios.Name}},
		}
	}
	cs := []*contender{{peer: helios, features: c.Features, traced: c.TraceRatio > 0}}
	if c.TracingOffBaseline {
		cs = append(cs, &contender{peer: helios, features: c.Features, res: &ContenderResult{Name: "helios-tracing-off", Label: "Helios, tracing off"}})
	}
	if c.FeaturesOffBaseline {
		cs = append(cs, &contender{peer: helios, res: &ContenderResult{Name: "helios-features-off", Label: "Helios, features off"}})
	}
	if c.PolicyOffBaseline {
		cs = append(cs, &contender{peer: helios, features: c.Features, traced: c.TraceRatio > 0, noPolicy: true,
			res: &ContenderResult{Name: "helios-policy-off", Label: "Helios, policy off"}})
	}
	if c.FixedBaseline {
		cs = append(cs, &contender{peer: helios, features: c.Features, fixed: true,
			res: &ContenderResult{Name: "helios-fixed", Label: "Helios, fixed addresses"}})
	}
	if c.LocalLimitBaseline {
		cs = append(cs, &contender{peer: helios, features: c.Features, localLimit: true,
			res: &ContenderResult{Name: "helios-local-limit", Label: "Helios, local limit"}})
	}
	if c.Discovery || c.SharedLimit {
		// These cases compare Helios with itself: the peers have no
		// DNS discovery or shared limit to set beside it.
		return r.finishContenders(c, cs)
	}
	for _, name := range r.opt.Peers {
		p, _ := peerByName(name)
		cs = append(cs, &contender{peer: p, features: c.Features})
	}
	return r.finishContenders(c, cs)
}

// finishContenders names each contender that has no result yet after its
// peer, and says which cannot run the case.
func (r *runner) finishContenders(c Case, cs []*contender) []*contender {
	for _, ct := range cs {
		if ct.res == nil {
			ct.res = &ContenderResult{Name: ct.peer.Name, Label: ct.peer.Label}
		}
		ct.res.Peer = ct.peer.Name
		ct.res.Skipped = ct.peer.Unsupported(c)
	}
	return cs
}

// writePlan describes what a run would do and how long it would take.
func (r *runner) writePlan(w io.Writer) {
	fmt.Fprintf(w, "%-16s %5s %11s %5s %8s %9s\n", "scenario", "cases", "contenders", "runs", "length", "estimate")
	var total time.Duration
	var runs int
	for i := range r.sels {
		s := &r.sels[i]
		if sk := r.scenarioResult(s).Skipped; sk != "" {
			fmt.Fprintf(w, "%-16s skipped: %s\n", s.Name, sk)
			continue
		}
		sub := runner{opt: r.opt, res: r.res, sels: []Selection{*s}}
		n, est := sub.plan()
		contenders := 0
		if len(s.Run) > 0 {
			contenders = len(r.contenders(s.Run[0]))
		}
		fmt.Fprintf(w, "%-16s %5d %11d %5d %8s %9s\n", s.Name, len(s.Run), contenders, n, r.opt.scenarioDuration(s.Scenario), est.Round(time.Second))
		total += est
		runs += n
	}
	p := r.res.Profile
	where := "load generator and backends on CPUs " + p.LoadCPUs
	if p.Shared {
		where = "load generator and backends sharing them"
	}
	fmt.Fprintf(w, "total: %d runs in %d round(s), about %s; proxy on CPUs %s, %s\n",
		runs, r.opt.Rounds, total.Round(10*time.Second), p.ProxyCPUs, where)
}

// plan returns the number of runs and their estimated duration, for the
// progress line.
func (r *runner) plan() (runs int, est time.Duration) {
	for i := range r.sels {
		s := &r.sels[i]
		if r.scenarioResult(s).Skipped != "" {
			continue
		}
		d := r.opt.scenarioDuration(s.Scenario)
		for _, c := range s.Run {
			n := 0
			for _, ct := range r.contenders(c) {
				if ct.res.Skipped == "" {
					n++
				}
			}
			runs += n * r.opt.Rounds
			est += time.Duration(n*r.opt.Rounds) * (d + max(r.opt.Warmup, 0) + 700*time.Millisecond)
			est += time.Duration(r.opt.Rounds) * r.opt.Guard.Window // the guard's sample, at least
		}
	}
	return runs, est
}

// errSkipScenario carries the reason a scenario cannot go on.
type errSkipScenario struct{ reason string }

func (e errSkipScenario) Error() string { return e.reason }

// runAll runs every selected scenario.
func (r *runner) runAll(ctx context.Context) error {
	for i := range r.sels {
		s := &r.sels[i]
		sr := r.scenarioResult(s)
		if sr.Skipped != "" {
			continue
		}
		err := r.runScenario(ctx, s, sr)
		var skip errSkipScenario
		switch {
		case errors.As(err, &skip):
			sr.Skipped = skip.reason
			fmt.Fprintf(r.opt.Log, "skipping %s: %s\n", s.Name, skip.reason)
		case err != nil:
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
	}
	return nil
}

// runScenario runs the cases of s, each in interleaved rounds.
func (r *runner) runScenario(ctx context.Context, s *Selection, sr *ScenarioResult) error {
	for _, c := range s.Run {
		if need := uint64(2*c.Connections + 1024); c.Connections >= 5000 && r.noFile < need {
			sr.Notes = append(sr.Notes, fmt.Sprintf("The descriptor limit here is %d (this user cannot raise it further); a single-process proxy (Helios, HAProxy) holding %d client connections and as many backend connections needs about %d, so some errors in %s may be this machine's limit rather than the proxy's.",
				r.noFile, c.Connections, need, c.Name))
		}
		cr := &CaseResult{Case: c, LatencyKind: "closed-loop"}
		switch s.Tool {
		case ToolOpenLoop:
			cr.LatencyKind = "open-loop"
		case ToolH2load:
			cr.LatencyKind = "h2load"
		}
		cts := r.contenders(c)
		for _, ct := range cts {
			cr.Contenders = append(cr.Contenders, ct.res)
		}
		sr.Cases = append(sr.Cases, cr)
		if err := r.ensureBackends(ctx, time.Duration(c.SlowBackend)); err != nil {
			return err
		}
		if slices.Contains(s.Requires, RequireGRPC) {
			if err := r.ensureGRPCBackends(ctx); err != nil {
				return err
			}
		}
		if c.RateOfPeak > 0 {
			peak, err := r.ratePeak(ctx, sr)
			if err != nil {
				return errSkipScenario{"no peak rate to scale from: " + err.Error()}
			}
			cr.RateRPS = float64(int(c.RateOfPeak*peak + 0.5))
		}
		for round := 1; round <= r.opt.Rounds; round++ {
			if err := r.waitQuiet(ctx, s, c, round); err != nil {
				finishCase(cr)
				return nil // interrupted
			}
			order := cts
			if r.opt.Against != "" && round%2 == 0 {
				order = slices.Clone(cts)
				slices.Reverse(order)
			}
			for _, ct := range order {
				if ct.res.Skipped != "" {
					continue
				}
				r.prog.next(fmt.Sprintf("scenario %d/%d %s %s · round %d/%d · %s",
					r.scenarioIndex(s), len(r.sels), s.Name, c.Name, round, r.opt.Rounds, ct.res.Label))
				run, err := r.runOne(ctx, s, cr, ct, round)
				if err != nil || ctx.Err() != nil {
					finishCase(cr)
					return err
				}
				ct.res.Runs = append(ct.res.Runs, run)
				if run.Error != "" {
					r.res.FailedRuns++
					fmt.Fprintf(r.opt.Log, "%s %s round %d %s failed: %s\n", s.Name, c.Name, round, ct.res.Label, firstLine(run.Error))
				}
			}
		}
		finishCase(cr)
	}
	return nil
}

// waitQuiet runs the quiet-machine guard before a round and records what
// it found; it fails only when ctx ends.
func (r *runner) waitQuiet(ctx context.Context, s *Selection, c Case, round int) error {
	rec, err := r.guard.wait(ctx)
	if err != nil {
		return err
	}
	rec.Scenario, rec.Case, rec.Round = s.Name, c.Name, round
	r.res.Guard.Checks = append(r.res.Guard.Checks, rec)
	if !rec.Quiet {
		r.res.Noisy = true
		fmt.Fprintf(r.opt.Log, "quiet-machine guard: gave up after %s before %s %s round %d: %s\n",
			seconds(rec.WaitedS), s.Name, c.Name, round, strings.Join(rec.Why, "; "))
	}
	return nil
}

// finishCase summarises each contender's runs and computes the ratios.
func finishCase(cr *CaseResult) {
	for _, ct := range cr.Contenders {
		ct.summarize()
	}
	cr.ratios()
	cr.compare()
}

// scenarioIndex returns the 1-based position of s among the selected
// scenarios.
func (r *runner) scenarioIndex(s *Selection) int {
	return slices.IndexFunc(r.sels, func(x Selection) bool { return x.Name == s.Name }) + 1
}

// ratePeak returns the req/s that latency-at-rate scales from: the first
// peer's (else Helios's) median in proxy-ka c100 when this run measured
// it, else a probe of that proxy with wrk at c100.
func (r *runner) ratePeak(ctx context.Context, sr *ScenarioResult) (float64, error) {
	if r.peak > 0 {
		return r.peak, nil
	}
	ref := "helios"
	if len(r.opt.Peers) > 0 {
		ref = r.opt.Peers[0]
	}
	for _, s := range r.res.Scenarios {
		if s.Name != "proxy-ka" {
			continue
		}
		for _, c := range s.Cases {
			if c.Name != "c100" {
				continue
			}
			for _, ct := range c.Contenders {
				if st := ct.Summary[MetricRPS]; ct.Name == ref && st.N > 0 {
					r.peak = st.Median
					sr.Notes = append(sr.Notes, fmt.Sprintf("Peak: %s's median of %s req/s in proxy-ka c100 of this run (closed loop, 100 connections); the rates are fractions of it.",
						ct.Label, formatNumber(st.Median, 0)))
					return r.peak, nil
				}
			}
		}
	}
	p, _ := peerByName(ref)
	ct := &contender{peer: p, res: &ContenderResult{Name: p.Name, Label: p.Label, Peer: p.Name}}
	probe := &Selection{Scenario: Scenario{Name: "peak-probe", Tool: ToolWrk, Duration: Duration(5 * time.Second)}}
	c := &CaseResult{Case: Case{Name: "c100", Connections: 100, Path: "/", Strategy: "round_robin"}, noProbe: true}
	r.prog.note("measuring the peak rate")
	run, err := r.runOne(ctx, probe, c, ct, 0)
	if err != nil {
		return 0, err
	}
	if run.Error != "" {
		return 0, errors.New(run.Error)
	}
	r.peak = run.Metrics[MetricRPS]
	sr.Notes = append(sr.Notes, fmt.Sprintf("Peak: %s req/s, %s through the proxy route with wrk at 100 connections (closed loop, one %s run measured just before this scenario); the rates are fractions of it.",
		formatNumber(r.peak, 0), p.Label, r.opt.scenarioDuration(probe.Scenario)))
	return r.peak, nil
}
