package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	benchfiles "github.com/helios-lb/helios/bench"
	"github.com/helios-lb/helios/internal/tracing/collector"
)

// Before the runs: the output directory, the trace sink, the peers'
// configurations checked, the tools found, the ports free, the backends up.

// prepare checks what the run needs before it starts anything: Helios's
// acceptance of every config, the tools, free ports; then writes the
// shared files and starts the backends.
func (r *runner) prepare(ctx context.Context) error {
	if err := r.writeFiles(); err != nil {
		return err
	}
	r.validateHelios(ctx)
	if err := r.findTools(); err != nil {
		return err
	}
	r.versions()
	if r.opt.Plan != nil {
		return nil
	}
	if err := r.checkPorts(); err != nil {
		return err
	}
	if err := r.startSink(); err != nil {
		return err
	}
	if err := r.startFleetServers(ctx); err != nil {
		return err
	}
	return r.ensureBackends(ctx, 0)
}

// startSink starts the collector traced cases send spans to, when a
// selected case traces: an OTLP/gRPC receiver in this process that counts
// the spans and keeps none.
func (r *runner) startSink() error {
	for _, s := range r.sels {
		for _, c := range s.Run {
			if c.TraceRatio > 0 && r.sink == nil {
				sink, err := collector.Start(false)
				if err != nil {
					return fmt.Errorf("starting the tracing sink: %w", err)
				}
				r.sink = sink
			}
		}
	}
	return nil
}

// sinkEndpoint is the URL traced Helios sends spans to: the sink's, or,
// before it runs (validation, a plan), where it would be.
func (r *runner) sinkEndpoint() string {
	if r.sink != nil {
		return r.sink.Endpoint()
	}
	return "http://127.0.0.1:4317"
}

// writeFiles writes the static file, the pipelining script and (when a
// scenario needs TLS) a certificate into the temporary directory.
func (r *runner) writeFiles() error {
	static := filepath.Join(r.tmp, "static")
	if err := os.MkdirAll(static, 0o755); err != nil {
		return err
	}
	page := bytes.Repeat([]byte("Helios static benchmark file: 4096 bytes of text.\n"), 82)[:4095]
	if err := os.WriteFile(filepath.Join(static, "index.html"), append(page, '\n'), 0o644); err != nil {
		return err
	}
	for _, script := range []string{"pipeline.lua", "upload.lua", "zipf.lua"} {
		lua, err := fs.ReadFile(benchfiles.Files, "scripts/"+script)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(r.tmp, script), lua, 0o644); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(r.tmp, grpcRequestFile), grpcRequest(), 0o644); err != nil {
		return err
	}
	for _, s := range r.sels {
		if slices.Contains(s.Requires, RequireTLS) {
			var err error
			r.cert, err = writeSelfSigned(r.tmp)
			return err
		}
	}
	return nil
}

// validateHelios renders Helios's config for every selected case and runs
// `helios validate` on it; a scenario whose config is rejected is marked
// skipped with Helios's own words.
func (r *runner) validateHelios(ctx context.Context) {
	helios, _ := peerByName("helios")
	seen := map[string]string{} // config text -> problem
	for i := range r.sels {
		s := &r.sels[i]
		sr := r.scenarioResult(s)
		for _, c := range s.Run {
			for _, v := range []struct{ features, traced bool }{{c.Features, c.TraceRatio > 0}, {c.Features, false}, {false, false}} {
				d := r.peerData(helios, s.Scenario, c, v.features, v.traced)
				// Validation checks that the access log's directory
				// exists, as the run will have it.
				if err := os.MkdirAll(d.Dir, 0o755); err != nil {
					sr.Skipped = err.Error()
					break
				}
				text, err := helios.Render(d)
				if err != nil {
					sr.Skipped = err.Error()
					break
				}
				for _, b := range r.heliosBuilds() {
					problem, done := seen[b.bin+"\x00"+text]
					if !done {
						problem = r.heliosValidate(ctx, b.bin, text)
						seen[b.bin+"\x00"+text] = problem
					}
					if problem != "" && sr.Skipped == "" {
						sr.Skipped = b.who + " rejects the config this scenario needs: " + problem
						fmt.Fprintf(r.opt.Log, "skipping %s: %s\n", s.Name, sr.Skipped)
					}
				}
			}
		}
	}
}

// heliosBuild is a Helios binary the run uses and how reports name it.
type heliosBuild struct{ bin, who string }

// heliosBuilds returns the Helios builds under test: one, or two with
// --against.
func (r *runner) heliosBuilds() []heliosBuild {
	if r.opt.Against == "" {
		return []heliosBuild{{r.heliosBin, "Helios"}}
	}
	return []heliosBuild{{r.heliosBin, "Helios (new)"}, {r.opt.Against, "Helios (old, --against)"}}
}

// heliosValidate runs `bin validate` on text and returns its complaint, or
// "" when the config is valid.
func (r *runner) heliosValidate(ctx context.Context, bin, text string) string {
	f := filepath.Join(r.tmp, "validate.yaml")
	if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
		return err.Error()
	}
	out, err := exec.CommandContext(ctx, bin, "validate", "-c", f).CombinedOutput()
	if err == nil {
		return ""
	}
	// Problems read FILE:LINE: key: what is wrong; the file is ours.
	var problems []string
	for line := range strings.SplitSeq(string(out), "\n") {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), f+":"); ok {
			problems = append(problems, "line "+p)
		}
	}
	if len(problems) == 0 {
		return strings.Join(strings.Fields(string(out)), " ")
	}
	return strings.Join(problems, "; ")
}

// scenarioResult returns the result entry of s, creating it.
func (r *runner) scenarioResult(s *Selection) *ScenarioResult {
	for _, sr := range r.res.Scenarios {
		if sr.Name == s.Name {
			return sr
		}
	}
	sr := &ScenarioResult{Name: s.Name, Seed: s.Seed, What: s.What, Tool: s.Tool,
		DurationS: r.opt.scenarioDuration(s.Scenario).Seconds()}
	r.res.Scenarios = append(r.res.Scenarios, sr)
	return sr
}

// findTools looks up every tool the runnable scenarios need.
func (r *runner) findTools() error {
	need := []string{"taskset"}
	for _, p := range r.opt.Peers {
		pe, _ := peerByName(p)
		need = append(need, pe.Tool)
	}
	for i := range r.sels {
		s := &r.sels[i]
		if r.scenarioResult(s).Skipped != "" {
			continue
		}
		switch s.Tool {
		case ToolWrk:
			need = append(need, "wrk")
		case ToolH2load:
			need = append(need, "h2load")
		case ToolOpenLoop:
			need = append(need, "wrk") // the peak probe
		}
		for _, c := range s.Run {
			if c.SharedLimit {
				need = append(need, "redis-server")
			}
		}
	}
	var err error
	r.tools, err = lookTools(need)
	return err
}

// versions records every tool's version.
func (r *runner) versions() {
	v := r.res.Versions
	v["helios"] = toolVersion(r.heliosBin, "version")
	if r.opt.Against != "" {
		v["helios (against)"] = toolVersion(r.opt.Against, "version")
	}
	v["go (helios bench)"] = runtime.Version()
	for name, args := range map[string][]string{
		"nginx": {"-v"}, "haproxy": {"-v"}, "caddy": {"version"}, "wrk": {"-v"}, "h2load": {"--version"},
	} {
		if p, ok := r.tools[name]; ok {
			v[name] = toolVersion(append([]string{p}, args...)...)
		}
	}
}

// Ports, relative to BasePort.
const (
	portBackend1 = 1
	portTLS      = 4
	portGRPC1    = 5 // the three h2c gRPC backends: 5, 6, 7
	portDNS      = 8 // the discovery scenario's DNS server (UDP and TCP)
	portRedis    = 9 // the shared-limit scenario's redis-server
	portAdmin    = 10
)

func (r *runner) addr(offset int) string {
	return "127.0.0.1:" + strconv.Itoa(r.opt.BasePort+offset)
}

// checkPorts makes sure nothing else listens on the ports the run uses.
func (r *runner) checkPorts() error {
	for _, off := range []int{0, portBackend1, portBackend1 + 1, portBackend1 + 2, portTLS, portGRPC1, portGRPC1 + 1, portGRPC1 + 2, portAdmin} {
		ln, err := net.Listen("tcp", r.addr(off))
		if err != nil {
			return fmt.Errorf("port %s is in use (another benchmark or service?); choose other ports with --base-port: %w", r.addr(off), err)
		}
		ln.Close()
	}
	return nil
}

// loadCPUs is the taskset list for the load generator and the backends:
// none (every CPU) when they share the proxy's.
func (r *runner) loadCPUs() string {
	if r.res.Profile.Shared {
		return ""
	}
	return r.res.Profile.LoadCPUs
}

// ensureBackends starts the backends that are not running; the third one
// answers slow late, and is restarted when that changes.
func (r *runner) ensureBackends(ctx context.Context, slow time.Duration) error {
	if b := r.backends[2]; b != nil && !b.exited() && r.slow != slow {
		b.stop(5 * time.Second)
	}
	for i := range r.backends {
		if b := r.backends[i]; b != nil && !b.exited() {
			continue
		}
		name := fmt.Sprintf("backend-%d", i+1)
		addr := r.addr(portBackend1 + i)
		argv := []string{r.selfBin, "backend", "--listen", addr, "--name", name}
		if i == 2 && slow > 0 {
			argv = []string{r.selfBin, "bench", "origin", "--listen", addr, "--name", name, "--delay", slow.String()}
		}
		p, err := r.ps.start(name, argv, nil, r.loadCPUs(), filepath.Join(r.tmp, name+".log"))
		if err != nil {
			return err
		}
		if err := r.waitHTTP(ctx, "http://"+addr+"/healthz", p, 10*time.Second); err != nil {
			return fmt.Errorf("%s did not start: %w", name, err)
		}
		r.backends[i] = p
		if i == 2 {
			r.slow = slow
		}
	}
	return nil
}

// ensureGRPCBackends starts the three h2c gRPC backends that are not
// running.
func (r *runner) ensureGRPCBackends(ctx context.Context) error {
	for i := range r.grpc {
		if g := r.grpc[i]; g != nil && !g.exited() {
			continue
		}
		name := fmt.Sprintf("grpc-%d", i+1)
		addr := r.addr(portGRPC1 + i)
		argv := []string{r.selfBin, "bench", "origin", "--h2c", "--listen", addr, "--name", name}
		p, err := r.ps.start(name, argv, nil, r.loadCPUs(), filepath.Join(r.tmp, name+".log"))
		if err != nil {
			return err
		}
		if err := r.waitHTTP(ctx, "http://"+addr+"/healthz", p, 10*time.Second); err != nil {
			return fmt.Errorf("%s did not start: %w", name, err)
		}
		r.grpc[i] = p
	}
	return nil
}

// waitHTTP polls url until it answers 200, p exits, or timeout passes.
func (r *runner) waitHTTP(ctx context.Context, url string, p *proc, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		if p != nil && p.exited() {
			return fmt.Errorf("exited: %v\n%s", p.err, p.logTail())
		}
		resp, err := r.client.Get(url)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
			err = fmt.Errorf("GET %s: status %d", url, resp.StatusCode)
		}
		last = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("not ready after %s: %v", timeout, last)
}

// waitPortFree waits until nothing accepts connections on addr.
func waitPortFree(addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return nil
		}
		c.Close()
		if time.Now().After(deadline) {
			return fmt.Errorf("something still listens on %s", addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
