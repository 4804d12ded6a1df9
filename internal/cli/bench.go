package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/helios-lb/helios/internal/backend"
	"github.com/helios-lb/helios/internal/bench"
	"github.com/helios-lb/helios/internal/bench/loadgen"
)

func newBenchCmd() *cobra.Command {
	var (
		o         bench.Options
		scenarios string
		peers     string
		plan      bool
		quietCPU  float64
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Benchmark Helios against nginx, HAProxy and Caddy on this machine, fairly",
		Long: `Bench compares Helios with nginx, HAProxy and Caddy (every one installed;
--peers narrows) on this machine, or with another Helios build (--against).

Every proxy gets the same three built-in backends, the same port, timeouts
and retries, and N CPUs pinned with taskset (Helios and Caddy GOMAXPROCS=N,
nginx worker_processes N, HAProxy nbthread N), each tuned as its own
documentation recommends. Runs interleave the proxies over several rounds
after a warm-up, each round after a quiet-machine check; a latency probe
(open loop, ~1% of the load) runs beside every saturating load; the report
gives medians with their min-max range.

Scenarios (bench/scenarios.yaml): proxy-ka, proxy-close, respond, static,
https-ka, tls-handshake, h2, h2-bulk, grpc, idle-conns, pipeline, upload,
websocket, c10k, slow-backend, backend-down, features-on, latency-at-rate.
--scenarios takes names, or name/case (proxy-ka/c100).

It writes report.md, results.json and three SVG charts to --out. It needs
wrk, taskset and the peers (h2load for HTTP/2): run ` + "`make bench-deps`" + ` to
install them on Debian. --plan prints what would run and how long it would
take; --quick (proxy-ka at c100 and c1000, one 5s round) takes about a
minute. The exit status is 1 when a tool is missing or a run failed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if scenarios != "" {
				o.Scenarios = strings.Split(scenarios, ",")
			}
			if peers != "" {
				o.Peers = []string{}
				for p := range strings.SplitSeq(peers, ",") {
					if p = strings.TrimSpace(p); p != "" && p != "none" {
						o.Peers = append(o.Peers, p)
					}
				}
			}
			out := cmd.OutOrStdout()
			o.Progress, o.ProgressTerminal = out, isTerminal(out)
			if o.Warmup == 0 {
				o.Warmup = -1 // Options reads zero as the default
			}
			if o.Guard.Wait == 0 {
				o.Guard.Wait = -1 // likewise
			}
			o.Guard.MaxProcCPU = quietCPU / 100
			o.Log = cmd.ErrOrStderr()
			o.Args = os.Args
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			if plan {
				o.Plan = out
			}
			res, err := bench.Run(ctx, o)
			var missing *bench.MissingToolsError
			if errors.As(err, &missing) {
				fmt.Fprintln(cmd.ErrOrStderr(), "helios bench:", err)
				return exitError{1}
			}
			if res == nil {
				return err // nil after --plan
			}
			dir := res.OutputDir()
			fmt.Fprintf(out, "report: %s\nresults: %s\ncharts: %s, %s, %s\n",
				filepath.Join(dir, "report.md"), filepath.Join(dir, "results.json"),
				filepath.Join(dir, "throughput.svg"), filepath.Join(dir, "latency.svg"), filepath.Join(dir, "latency-rate.svg"))
			if res.Noisy {
				fmt.Fprintln(cmd.ErrOrStderr(), "helios bench: the machine was not quiet before some rounds; the report is marked noisy")
			}
			switch {
			case errors.Is(err, context.Canceled):
				fmt.Fprintln(cmd.ErrOrStderr(), "helios bench: interrupted; the report has the runs that finished")
				return exitError{130}
			case err != nil:
				fmt.Fprintln(cmd.ErrOrStderr(), "helios bench:", err)
				return exitError{1}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&scenarios, "scenarios", "", "comma-separated scenarios or scenario/case to run (default: all, or the quick set)")
	f.IntVar(&o.CPUs, "cpus", 2, "CPUs the proxy under test is pinned to")
	f.DurationVar(&o.Duration, "duration", 0, "measured length of each run (default 6s, 5s with --quick; scenarios with their own (c10k 30s, upload 5s...) keep it unless this is set)")
	f.IntVar(&o.Rounds, "rounds", 0, "interleaved rounds per case (default 3, 1 with --quick)")
	f.DurationVar(&o.Warmup, "warmup", time.Second, "unmeasured load before each run (0 for none)")
	f.StringVar(&peers, "peers", "", "proxies to compare with Helios: nginx, haproxy, caddy (comma-separated), or none (default: every one installed)")
	f.StringVar(&o.Out, "out", "", "output directory (default bench/results/DATE-HOST)")
	f.BoolVar(&o.Quick, "quick", false, "the quick suite: proxy-ka at c100 and c1000, one round, 5s each")
	f.StringVar(&o.HeliosBin, "helios", "", "helios binary under test (default: this one)")
	f.StringVar(&o.Against, "against", "", "A/B: another helios binary to compare the one under test with (no peers; 6 rounds, order alternating; Mann-Whitney U test per metric)")
	f.BoolVar(&plan, "plan", false, "print the scenarios, runs and estimated time, and exit")
	f.IntVar(&o.BasePort, "base-port", 28080, "proxy port; backends use the next three, TLS +4, admin +10")
	f.Float64Var(&o.Guard.MaxLoadPerCPU, "quiet-load", 0.5, "quiet-machine guard: highest 1-minute load average per CPU before a round")
	f.Float64Var(&quietCPU, "quiet-cpu", 5, "quiet-machine guard: highest % of a CPU any other process may use")
	f.DurationVar(&o.Guard.Wait, "quiet-wait", 30*time.Second, "quiet-machine guard: longest wait before one round (0: sample and record, never wait)")
	f.DurationVar(&o.Guard.Budget, "quiet-budget", 0, "quiet-machine guard: longest wait over the whole run (default 5m, 1m with --quick)")
	cmd.AddCommand(newBenchLoadgenCmd(), newBenchOriginCmd(), newBenchWSLoadCmd(), newBenchTLSLoadCmd(), newBenchIdleCmd(), newBenchRenderCmd())
	return cmd
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func newBenchLoadgenCmd() *cobra.Command {
	var (
		cfg     loadgen.Config
		headers []string
	)
	cmd := &cobra.Command{
		Use:   "loadgen",
		Short: "Open-loop load generator: fixed rate, latency from the intended send time",
		Long: `Loadgen sends GET requests at a fixed rate over a pool of connections
(the next request due goes to whichever connection is free; with
--max-connections the pool grows while requests find it busy) and measures
each request's latency from the time it was meant to be sent, so a stalling
server cannot hide its queue (no coordinated omission). http:// and https://
URLs. It prints one line of JSON (format helios-loadgen/1).`,
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Headers = map[string]string{}
			for _, h := range headers {
				k, v, ok := strings.Cut(h, ":")
				if !ok {
					return fmt.Errorf("header %q: want Name: value", h)
				}
				cfg.Headers[strings.TrimSpace(k)] = strings.TrimSpace(v)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			res, err := loadgen.Run(ctx, cfg)
			if err != nil {
				return err
			}
			return res.Write(cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.URL, "url", "", "http:// or https:// URL to request")
	f.Float64Var(&cfg.Rate, "rate", 0, "requests per second, across all connections")
	f.DurationVar(&cfg.Duration, "duration", 10*time.Second, "how long requests are scheduled for")
	f.IntVar(&cfg.Connections, "connections", 100, "connections the rate is spread over")
	f.IntVar(&cfg.MaxConnections, "max-connections", 0, "let the pool grow to this many connections while requests find it busy (0: fixed)")
	f.DurationVar(&cfg.Timeout, "timeout", 5*time.Second, "connect and request timeout")
	f.StringArrayVarP(&headers, "header", "H", nil, "request header (Name: value), repeatable")
	return cmd
}

func newBenchOriginCmd() *cobra.Command {
	var (
		listen, name string
		delay        time.Duration
		h2c          bool
	)
	cmd := &cobra.Command{
		Use:   "origin",
		Short: "The built-in backend with every answer delayed (the slow backend of slow-backend)",
		Long: `Origin runs the same server as ` + "`helios backend`" + `, with each request held back
by --delay before it is answered; with --h2c it is instead a gRPC echo over
HTTP/2 without TLS (the backends of the grpc scenario).`,
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if name == "" {
				name = listen
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("origin %s: %w", name, err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			if h2c {
				errc := make(chan error, 1)
				go func() { errc <- bench.ServeH2C(ln, bench.GRPCEcho(name)) }()
				select {
				case err := <-errc:
					return fmt.Errorf("origin %s: %w", name, err)
				case <-ctx.Done():
					return ln.Close()
				}
			}
			b := backend.NewWith(name, backend.Options{Delay: delay})
			errc := make(chan error, 1)
			go func() { errc <- b.Serve(ln) }()
			select {
			case err := <-errc:
				return fmt.Errorf("origin %s: %w", name, err)
			case <-ctx.Done():
			}
			ln.Close()
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			b.Shutdown(sctx)
			return nil
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:9001", "address to listen on")
	cmd.Flags().StringVar(&name, "name", "", "name reported in X-Backend (default: the listen address)")
	cmd.Flags().DurationVar(&delay, "delay", 50*time.Millisecond, "delay added to every request")
	cmd.Flags().BoolVar(&h2c, "h2c", false, "serve gRPC unary echo calls over h2c instead")
	return cmd
}

// runTool runs a load tool with Ctrl-C wired to its context and prints
// its result as one line of JSON.
func runTool[T any](cmd *cobra.Command, run func(context.Context) (*T, error)) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	res, err := run(ctx)
	if err != nil {
		return err
	}
	return loadgen.WriteJSON(cmd.OutOrStdout(), res)
}

func newBenchWSLoadCmd() *cobra.Command {
	var cfg loadgen.WSConfig
	cmd := &cobra.Command{
		Use:   "wsload",
		Short: "WebSocket echo load: messages per second over N connections",
		Long: `Wsload opens --connections WebSocket connections to a ws:// echo endpoint and
on each sends a binary message, waits for its echo and sends the next, for
--duration. It prints one line of JSON (format helios-wsload/1).`,
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runTool(cmd, func(ctx context.Context) (*loadgen.WSResult, error) { return loadgen.RunWS(ctx, cfg) })
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.URL, "url", "", "ws:// URL of an echo endpoint")
	f.IntVar(&cfg.Connections, "connections", 100, "WebSocket connections")
	f.DurationVar(&cfg.Duration, "duration", 10*time.Second, "how long to send")
	f.IntVar(&cfg.MessageBytes, "size", 128, "message size in bytes")
	f.DurationVar(&cfg.Timeout, "timeout", 5*time.Second, "handshake and echo timeout")
	return cmd
}

func newBenchTLSLoadCmd() *cobra.Command {
	var cfg loadgen.HandshakeConfig
	cmd := &cobra.Command{
		Use:   "tlsload",
		Short: "TLS handshakes per second: a new connection per request",
		Long: `Tlsload runs --connections clients that each connect, complete a TLS 1.3
handshake (X25519), send one GET with Connection: close, read the answer and
close, for --duration; with --resume they share a session cache so that
handshakes resume sessions. It prints one line of JSON (format
helios-tlsload/1).`,
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runTool(cmd, func(ctx context.Context) (*loadgen.HandshakeResult, error) { return loadgen.RunHandshakes(ctx, cfg) })
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.URL, "url", "", "https:// URL to request")
	f.IntVar(&cfg.Connections, "connections", 100, "concurrent clients")
	f.DurationVar(&cfg.Duration, "duration", 10*time.Second, "how long to run")
	f.BoolVar(&cfg.Resume, "resume", false, "resume TLS sessions (session tickets)")
	f.DurationVar(&cfg.Timeout, "timeout", 5*time.Second, "timeout of each connection")
	return cmd
}

func newBenchIdleCmd() *cobra.Command {
	var cfg loadgen.IdleConfig
	cmd := &cobra.Command{
		Use:   "idleconns",
		Short: "Hold N idle TLS (or HTTP/2) connections, for measuring memory per connection",
		Long: `Idleconns opens --connections TLS connections to an https:// URL, makes one
request on each (HTTP/1.1, or HTTP/2 with --h2), holds them idle for --hold
and closes them. It prints one line of JSON (format helios-idle/1).`,
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runTool(cmd, func(ctx context.Context) (*loadgen.IdleResult, error) { return loadgen.RunIdle(ctx, cfg) })
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.URL, "url", "", "https:// URL requested once per connection")
	f.IntVar(&cfg.Connections, "connections", 1000, "connections to open")
	f.BoolVar(&cfg.H2, "h2", false, "speak HTTP/2 (ALPN h2)")
	f.DurationVar(&cfg.Hold, "hold", 10*time.Second, "how long to hold them once open")
	f.DurationVar(&cfg.Timeout, "timeout", 10*time.Second, "timeout of opening each connection")
	return cmd
}

func newBenchRenderCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "render DIR...",
		Short: "Rewrite report.md and the charts of a report directory from its results.json",
		Long: `Render rewrites report.md and the SVG charts of each report directory from
its results.json, as this version of helios draws them; the measurements
(results.json, raw/, configs/) are left as they are.`,
		Hidden: true,
		Args:   cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, dirs []string) error {
			for _, d := range dirs {
				if err := bench.Render(d); err != nil {
					return err
				}
			}
			return nil
		},
	}
}
