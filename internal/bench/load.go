package bench

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/helios-lb/helios/internal/bench/loadgen"
)

// toolRun is one load generator command and how to read what it printed.
type toolRun struct {
	argv []string
	// env is added to the benchmark's environment.
	env []string
	// parse turns the command's standard output into metrics.
	parse func(stdout []byte) (map[string]float64, error)
}

// target returns the scheme and address a case's load goes to: the
// plain listener, or the TLS one for scenarios that need TLS.
func (r *runner) target(s *Selection) string {
	if slices.Contains(s.Requires, RequireTLS) {
		return "https://" + r.addr(portTLS)
	}
	return "http://" + r.addr(0)
}

// loadCommand returns the scenario's load generator run against the proxy
// for d (rate is the open-loop target rate).
func (r *runner) loadCommand(s *Selection, c Case, d time.Duration, rate float64) toolRun {
	threads := r.res.Profile.LoadThreads
	url := r.target(s) + c.Path
	goTool := func(argv ...string) []string {
		return append([]string{r.selfBin, "bench"}, argv...)
	}
	goEnv := []string{"GOMAXPROCS=" + strconv.Itoa(threads)}
	switch s.Tool {
	case ToolH2load:
		var data string
		headers := c.Headers
		if slices.Contains(s.Requires, RequireGRPC) {
			data = filepath.Join(r.tmp, grpcRequestFile)
			headers = grpcHeaders
		}
		return toolRun{
			argv:  append([]string{r.tools["h2load"]}, h2loadArgs(threads, c.Connections, c.Streams, d, c.Requests, data, headers, url)...),
			parse: parseH2loadMetrics,
		}
	case ToolOpenLoop:
		return toolRun{
			argv:  r.loadgenArgs(url, rate, d, c.Connections, 0, c.Headers),
			env:   goEnv,
			parse: parseLoadgenMetrics,
		}
	case ToolWebSocket:
		return toolRun{
			argv: goTool("wsload", "--url", "ws://"+r.addr(0)+c.Path, "--connections", strconv.Itoa(c.Connections),
				"--duration", d.String(), "--size", strconv.Itoa(cmp.Or(c.BodyBytes, 128)), "--timeout", r.opt.ClientTimeout.String()),
			env:   goEnv,
			parse: parseWSMetrics,
		}
	case ToolTLS:
		argv := goTool("tlsload", "--url", url, "--connections", strconv.Itoa(c.Connections),
			"--duration", d.String(), "--timeout", r.opt.ClientTimeout.String())
		if c.Resume {
			argv = append(argv, "--resume")
		}
		return toolRun{argv: argv, env: goEnv, parse: parseTLSMetrics}
	case ToolIdle:
		argv := goTool("idleconns", "--url", url, "--connections", strconv.Itoa(c.Connections), "--hold", d.String())
		if c.Protocol == "h2" {
			argv = append(argv, "--h2")
		}
		return toolRun{argv: argv, env: goEnv, parse: parseIdleMetrics}
	}
	var script string
	var scriptArgs []string
	switch {
	case c.BodyBytes > 0:
		script, scriptArgs = filepath.Join(r.tmp, "upload.lua"), []string{strconv.Itoa(c.BodyBytes)}
		if c.Chunked {
			scriptArgs = append(scriptArgs, "chunked")
		}
	case c.Pipeline > 1:
		script, scriptArgs = filepath.Join(r.tmp, "pipeline.lua"), []string{strconv.Itoa(c.Pipeline)}
	case c.HashUsers > 0:
		script, scriptArgs = filepath.Join(r.tmp, "zipf.lua"), zipfArgs(c)
	}
	return toolRun{
		argv:  append([]string{r.tools["wrk"]}, wrkArgs(threads, c.Connections, d, r.opt.ClientTimeout, c.Headers, script, scriptArgs, url)...),
		parse: parseWrkMetrics,
	}
}

// warms reports whether runs of case c of s get a warm-up: not when the
// tool's run is a fixed amount of work (a 1 GiB download, connections
// held open for their memory, which a warm-up would blur).
func warms(s *Selection, c Case) bool { return s.Tool != ToolIdle && c.Requests == 0 }

// loadgenArgs is the command line of `helios bench loadgen`; maxConns 0
// keeps the pool at conns.
func (r *runner) loadgenArgs(url string, rate float64, d time.Duration, conns, maxConns int, headers map[string]string) []string {
	argv := []string{r.selfBin, "bench", "loadgen", "--url", url,
		"--rate", strconv.FormatFloat(rate, 'f', 0, 64), "--duration", d.String(),
		"--connections", strconv.Itoa(conns), "--timeout", r.opt.ClientTimeout.String()}
	if maxConns > conns {
		argv = append(argv, "--max-connections", strconv.Itoa(maxConns))
	}
	for _, k := range sortedKeys(headers) {
		argv = append(argv, "-H", k+": "+headers[k])
	}
	return argv
}

func parseWrkMetrics(b []byte) (map[string]float64, error) {
	w, err := ParseWrk(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return wrkMetrics(w), nil
}

func parseH2loadMetrics(b []byte) (map[string]float64, error) {
	h, err := ParseH2load(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	if h.Succeeded > 0 && h.Protocol != "h2" {
		return nil, fmt.Errorf("h2load spoke %q, not h2: the proxy did not negotiate HTTP/2", h.Protocol)
	}
	return h2loadMetrics(h), nil
}

func parseWSMetrics(b []byte) (map[string]float64, error) {
	var w loadgen.WSResult
	if err := loadgen.ParseJSON(bytes.NewReader(b), &w, loadgen.FormatWS); err != nil {
		return nil, err
	}
	return closedLoopMetrics(w.MessagesPerS, w.Messages, w.Latency, w.Errors), nil
}

func parseTLSMetrics(b []byte) (map[string]float64, error) {
	var h loadgen.HandshakeResult
	if err := loadgen.ParseJSON(bytes.NewReader(b), &h, loadgen.FormatHandshake); err != nil {
		return nil, err
	}
	m := closedLoopMetrics(h.PerSecond, h.Handshakes, h.Latency, h.Errors)
	if h.Handshakes > 0 {
		m[MetricResumedPct] = 100 * float64(h.Resumed) / float64(h.Handshakes)
	}
	return m, nil
}

func parseIdleMetrics(b []byte) (map[string]float64, error) {
	var h loadgen.IdleResult
	if err := loadgen.ParseJSON(bytes.NewReader(b), &h, loadgen.FormatIdle); err != nil {
		return nil, err
	}
	m := map[string]float64{MetricConnsHeld: float64(h.Opened), MetricErrConnect: float64(h.Failed)}
	addErrorTotal(m)
	return m, nil
}

func parseLoadgenMetrics(b []byte) (map[string]float64, error) {
	g, err := loadgen.Parse(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return loadgenMetrics(g), nil
}

// load runs the scenario's load generator against the proxy for d and
// returns its metrics and command line; raw, when not "", receives the
// generator's output.
func (r *runner) load(ctx context.Context, s *Selection, c Case, d time.Duration, rate float64, raw string) (map[string]float64, []string, error) {
	return r.execTool(ctx, r.loadCommand(s, c, d, rate), d, raw)
}

// execTool runs t (pinned to the load generator's CPUs), expected to take
// about d, writes its command line and output to raw when raw is not "",
// and returns its metrics and command line.
func (r *runner) execTool(ctx context.Context, t toolRun, d time.Duration, raw string) (map[string]float64, []string, error) {
	full := t.argv
	if cpus := r.loadCPUs(); cpus != "" {
		full = append([]string{"taskset", "-c", cpus}, t.argv...)
	}
	tctx, cancel := context.WithTimeout(ctx, d+r.opt.ClientTimeout+30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(tctx, full[0], full[1:]...)
	cmd.Env = append(os.Environ(), t.env...)
	cmd.SysProcAttr = childAttr()
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	if raw != "" {
		os.WriteFile(raw, append(append([]byte("$ "+strings.Join(full, " ")+"\n"), stdout.Bytes()...), stderr.Bytes()...), 0o644)
	}
	m, err := t.parse(stdout.Bytes())
	if err != nil {
		if runErr != nil {
			err = fmt.Errorf("%s: %v: %s", filepath.Base(t.argv[0]), runErr, strings.TrimSpace(stderr.String()+" "+stdout.String()))
		}
		return nil, t.argv, err
	}
	return m, t.argv, nil
}

// sortedKeys returns m's keys in order.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// zipfArgs are zipf.lua's arguments for case c: the users, the Zipf
// exponent and the header.
func zipfArgs(c Case) []string {
	return []string{strconv.Itoa(c.HashUsers), strconv.FormatFloat(c.ZipfS, 'f', -1, 64), HashHeader}
}
