package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// One measured run of one contender in one case, and what it reads from
// the proxy and the backends around it.

// runOne starts ct's proxy for case cr, warms it up, measures one run (with
// the latency probe beside the load when the scenario has one) and stops
// it. The first warm-up of a case sets the probe's rate for all its runs.
// Failures of the run are reported in the RunResult; the error is for what
// ends the scenario (errSkipScenario) or the benchmark.
func (r *runner) runOne(ctx context.Context, s *Selection, cr *CaseResult, ct *contender, round int) (*RunResult, error) {
	c, rate := cr.Case, cr.RateRPS
	run := &RunResult{Round: round}
	if r.guard != nil {
		defer r.guard.loadEnded()
	}
	fail := func(format string, args ...any) (*RunResult, error) {
		run.Error = fmt.Sprintf(format, args...)
		return run, nil
	}
	d := r.opt.scenarioDuration(s.Scenario)
	data := r.peerData(ct.peer, s.Scenario, c, ct.features, ct.traced)
	data.Policy = data.Policy && !ct.noPolicy
	if ct.fixed {
		data.Resolver, data.SRV = "", ""
	}
	if ct.localLimit {
		data.RateLimitStore = ""
	}
	if err := os.MkdirAll(data.Dir, 0o755); err != nil {
		return nil, err
	}
	text, err := ct.peer.Render(data)
	if err != nil {
		return nil, err
	}
	name := variant(ct.peer.Name, data)
	r.res.Configs[name] = text
	ct.res.Config = name
	if err := os.WriteFile(filepath.Join(r.out, "configs", name+"."+configExt(ct.peer)), []byte(text), 0o644); err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(data.Dir, ct.peer.ConfigFile)
	if err := os.WriteFile(cfgPath, []byte(text), 0o644); err != nil {
		return nil, err
	}
	os.Remove(data.AccessLog)
	if err := waitPortFree(data.Listen, 5*time.Second); err != nil {
		return nil, err
	}

	bin := r.heliosBin
	switch {
	case ct.bin != "":
		bin = ct.bin
	case ct.peer.Tool != "":
		bin = r.tools[ct.peer.Tool]
	}
	p, err := r.ps.start(ct.peer.Name, ct.peer.Command(bin, data.Dir, cfgPath), ct.peer.Env(data.Dir, data.CPUs), r.res.Profile.ProxyCPUs,
		filepath.Join(data.Dir, "output.log"))
	if err != nil {
		return nil, err
	}
	defer p.stop(10 * time.Second)
	base := "http://" + data.Listen
	if err := r.waitHTTP(ctx, base+readyPath(s, c), p, 15*time.Second); err != nil {
		return fail("%s did not start: %v", ct.res.Label, err)
	}
	if c.Compress != "" {
		if err := checkCompressed(ctx, r.client, base+c.Path, c.Compress); err != nil {
			return fail("%s does not compress: %v", ct.res.Label, err)
		}
	}
	if ct.peer.Name == "helios" && ct.features && !r.featuresFound {
		if err := r.probeFeatures(ctx, data); err != nil {
			return nil, err
		}
	}
	tree := procTree("/proc", p.pid())
	idle := rssKiB("/proc", tree)

	var warmRPS float64
	if r.opt.Warmup > 0 && warms(s, c) {
		m, _, err := r.load(ctx, s, c, r.opt.Warmup, rate, "")
		if err != nil && ctx.Err() == nil {
			return fail("warm-up: %v", err)
		}
		warmRPS = m[MetricRPS]
	}
	if probes(s, c) && !cr.noProbe && cr.ProbeRateRPS == 0 {
		cr.ProbeRateRPS = probeRate(warmRPS)
	}
	if ct.peer.Name == "helios" && ct.features && !r.featuresFound {
		if st, err := os.Stat(data.AccessLog); err != nil || st.Size() == 0 {
			return nil, errSkipScenario{fmt.Sprintf("Helios wrote no access log to %s during the warm-up", data.AccessLog)}
		}
		r.featuresFound = true
	}

	tree = procTree("/proc", p.pid())
	ticks0 := cpuTicks("/proc", tree)
	var (
		peak   = rssKiB("/proc", tree)
		peakMu sync.Mutex
		stop   = make(chan struct{})
		wg     sync.WaitGroup
	)
	wg.Go(func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				v := rssKiB("/proc", tree)
				peakMu.Lock()
				peak = max(peak, v)
				peakMu.Unlock()
			}
		}
	})
	if ct.features {
		wg.Go(func() { r.scrape(stop, "http://"+data.AdminListen+"/metrics") })
	}
	var killed bool
	if c.KillBackendAt > 0 {
		victim := r.backends[2]
		wg.Go(func() {
			select {
			case <-stop:
			case <-time.After(time.Duration(c.KillBackendAt * float64(d))):
				victim.kill()
				killed = true
			}
		})
	}

	raw := fmt.Sprintf("raw/%s-%s-%s-r%d.txt", s.Name, c.Name, ct.res.Name, round)
	var (
		probeM   map[string]float64
		probeErr error
	)
	if cr.ProbeRateRPS > 0 {
		run.ProbeRaw = strings.TrimSuffix(raw, ".txt") + "-probe.txt"
		wg.Go(func() {
			probeM, run.ProbeCommand, probeErr = r.execTool(ctx, r.probeCommand(s, c, d, cr.ProbeRateRPS), d, filepath.Join(r.out, run.ProbeRaw))
		})
	}
	metrics, argv, err := r.load(ctx, s, c, d, rate, filepath.Join(r.out, raw))
	tree = append(tree, procTree("/proc", p.pid())...)
	slices.Sort(tree)
	tree = slices.Compact(tree)
	ticks1 := cpuTicks("/proc", tree)
	close(stop)
	wg.Wait()
	run.Command, run.Raw = argv, raw
	if c.KillBackendAt > 0 && !killed && err == nil {
		err = errors.New("the backend was not killed during the run")
	}
	if c.KillBackendAt > 0 {
		if err := r.ensureBackends(ctx, time.Duration(c.SlowBackend)); err != nil {
			return nil, err
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return run, nil
		}
		return fail("%v", err)
	}
	if p.exited() {
		return fail("%s exited during the run: %v\n%s", ct.res.Label, p.err, p.logTail())
	}
	if ct.peer.Name == "helios" && ct.features {
		// Helios's access log drops lines rather than hold up a loop when
		// its writer falls behind; nginx's workers block and log every
		// request. A run that dropped any is not a fair comparison.
		n, err := r.accessLogDropped(ctx, "http://"+data.AdminListen+"/metrics")
		switch {
		case err != nil:
			return fail("reading helios_access_log_dropped_total: %v", err)
		case n > 0:
			return fail("the access log dropped %v lines (helios_access_log_dropped_total): not comparable with a peer that logs every request", n)
		}
	}
	switch {
	case probeErr != nil:
		run.ProbeError = probeErr.Error()
	case probeM != nil:
		mergeProbe(metrics, probeM)
	}
	cpuSec := float64(ticks1-ticks0) / clockTicks
	metrics[MetricCPUSeconds] = cpuSec
	if n := metrics[MetricRequests] + metrics[MetricProbeRequests]; n > 0 {
		metrics[MetricCPUPerReq] = cpuSec * 1e6 / n
	}
	metrics[MetricPeakRSS] = float64(peak) / 1024
	if c.Compress == "" {
		// Only the compress cases compare answers' sizes.
		delete(metrics, MetricBytesPerAnswer)
	}
	if c.BodyBytes > 0 && s.Tool == ToolWrk {
		metrics[MetricMiBps] = metrics[MetricRPS] * float64(c.BodyBytes) / (1 << 20)
	}
	if c.Connections >= 5000 || s.Tool == ToolIdle {
		metrics[MetricIdleRSS] = float64(idle) / 1024
		metrics[MetricRSSPerConn] = float64(peak-min(idle, peak)) / float64(c.Connections)
	}
	run.Metrics = metrics
	return run, nil
}

// readyPath is the path a proxy must answer with 200 over plain HTTP/1.1
// before a run of case c: the case's own, when it is a plain GET; the
// proxied root for WebSocket, h2load (a gRPC method, a 1 GiB download) and
// upload cases.
func readyPath(s *Selection, c Case) string {
	if s.Tool == ToolWebSocket || s.Tool == ToolH2load || c.BodyBytes > 0 {
		return "/"
	}
	return c.Path
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// configExt is the file extension of a peer's config: "conf", "yaml", or
// the file name itself when it has none ("Caddyfile").
func configExt(p Peer) string {
	if ext := filepath.Ext(p.ConfigFile); ext != "" {
		return ext[1:]
	}
	return p.ConfigFile
}

// probeFeatures checks that Helios with features on really serves metrics
// and sends health checks; what it lacks ends the scenario as skipped.
func (r *runner) probeFeatures(ctx context.Context, d PeerData) error {
	var missing []string
	url := "http://" + d.AdminListen + "/metrics"
	resp, err := r.client.Get(url)
	switch {
	case err != nil:
		missing = append(missing, fmt.Sprintf("no metrics (GET %s: %v)", url, err))
	default:
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Contains(b, []byte("helios_")) {
			missing = append(missing, fmt.Sprintf("no metrics (GET %s: status %d, %d bytes without helios_ series)", url, resp.StatusCode, len(b)))
		}
	}
	before, err1 := r.backendRequests()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(2500 * time.Millisecond):
	}
	after, err2 := r.backendRequests()
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	for i := range before {
		// Each /stats read counts itself once.
		if after[i]-before[i] < 2 {
			missing = append(missing, "no active health checks (the backends saw no request in 2.5 s with a 1 s interval)")
			break
		}
	}
	if len(missing) > 0 {
		return errSkipScenario{"Helios accepts the config but has " + strings.Join(missing, " and ")}
	}
	return nil
}

// backendRequests returns each backend's request count from /stats.
func (r *runner) backendRequests() ([]int64, error) {
	var counts []int64
	for i := range r.backends {
		resp, err := r.client.Get("http://" + r.addr(portBackend1+i) + "/stats")
		if err != nil {
			return nil, err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		_, after, ok := bytes.Cut(b, []byte(`"requests":`))
		if !ok {
			return nil, fmt.Errorf("backend /stats: %q", b)
		}
		end := bytes.IndexAny(after, ",}")
		if end < 0 {
			return nil, fmt.Errorf("backend /stats: %q", b)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(after[:end])), 10, 64)
		if err != nil {
			return nil, err
		}
		counts = append(counts, n)
	}
	return counts, nil
}

// scrape fetches url every second until stop is closed, as a monitoring
// system would.
// accessLogDropped reads helios_access_log_dropped_total from a Helios
// metrics endpoint.
func (r *runner) accessLogDropped(ctx context.Context, url string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	return metricValue(string(b), "helios_access_log_dropped_total")
}

// metricValue returns the value of the unlabelled series name in a
// Prometheus text exposition.
func metricValue(text, name string) (float64, error) {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("%s not found", name)
}

func (r *runner) scrape(stop <-chan struct{}, url string) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if resp, err := r.client.Get(url); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
	}
}
