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
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Benchmark Helios against nginx (and HAProxy) on this machine, fairly",
		Long: `Bench compares Helios with nginx (and optionally HAProxy) on this machine.

Every proxy gets the same three built-in backends, the same port, timeouts
and retries, and N CPUs pinned with taskset (Helios GOMAXPROCS=N, nginx
worker_processes N); nginx is tuned (upstream keepalive, reuseport, backlog
4096, no access log). Runs interleave the proxies over several rounds after
a warm-up, and the report gives medians with their min-max range.

Scenarios (bench/scenarios.yaml): proxy-ka, proxy-close, respond, static,
h2, pipeline, c10k, slow-backend, backend-down, features-on, latency-at-rate.
--scenarios takes names, or name/case (proxy-ka/c100).

It writes report.md, results.json and throughput.svg / latency.svg to --out.
It needs wrk, nginx, taskset (and haproxy, h2load for those parts): run
` + "`make bench-deps`" + ` to install them on Debian. The full suite takes about
21 minutes on 2 CPUs (--plan prints the estimate); --quick (proxy-ka at c100
and c1000, one 5s round) under one.
The exit status is 1 when a tool is missing or a run failed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if scenarios != "" {
				o.Scenarios = strings.Split(scenarios, ",")
			}
			o.Peers = []string{}
			for p := range strings.SplitSeq(peers, ",") {
				if p = strings.TrimSpace(p); p != "" && p != "none" {
					o.Peers = append(o.Peers, p)
				}
			}
			out := cmd.OutOrStdout()
			if isTerminal(out) {
				o.Progress = out
			}
			if o.Warmup == 0 {
				o.Warmup = -1 // Options reads zero as the default
			}
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
			fmt.Fprintf(out, "report: %s\nresults: %s\ncharts: %s, %s\n",
				filepath.Join(dir, "report.md"), filepath.Join(dir, "results.json"),
				filepath.Join(dir, "throughput.svg"), filepath.Join(dir, "latency.svg"))
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
	f.DurationVar(&o.Duration, "duration", 0, "measured length of each run (default 8s, 5s with --quick; c10k keeps its 30s unless this is set)")
	f.IntVar(&o.Rounds, "rounds", 0, "interleaved rounds per case (default 3, 1 with --quick)")
	f.DurationVar(&o.Warmup, "warmup", time.Second, "unmeasured load before each run (0 for none)")
	f.StringVar(&peers, "peers", "nginx", "proxies to compare with Helios: nginx, haproxy, or none")
	f.StringVar(&o.Out, "out", "", "output directory (default bench/results/DATE-HOST)")
	f.BoolVar(&o.Quick, "quick", false, "the quick suite: proxy-ka at c100 and c1000, one round, 5s each")
	f.StringVar(&o.HeliosBin, "helios", "", "helios binary under test (default: this one)")
	f.BoolVar(&plan, "plan", false, "print the scenarios, runs and estimated time, and exit")
	f.IntVar(&o.BasePort, "base-port", 28080, "proxy port; backends use the next three, TLS +4, admin +10")
	cmd.AddCommand(newBenchLoadgenCmd(), newBenchOriginCmd())
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
		Long: `Loadgen sends GET requests at a fixed rate over a fixed number of
connections and measures each request's latency from the time it was meant
to be sent, so a stalling server cannot hide its queue (no coordinated
omission). It prints one line of JSON (format helios-loadgen/1).`,
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
	f.StringVar(&cfg.URL, "url", "", "http:// URL to request")
	f.Float64Var(&cfg.Rate, "rate", 0, "requests per second, across all connections")
	f.DurationVar(&cfg.Duration, "duration", 10*time.Second, "how long requests are scheduled for")
	f.IntVar(&cfg.Connections, "connections", 100, "connections the rate is spread over")
	f.DurationVar(&cfg.Timeout, "timeout", 5*time.Second, "connect and request timeout")
	f.StringArrayVarP(&headers, "header", "H", nil, "request header (Name: value), repeatable")
	return cmd
}

func newBenchOriginCmd() *cobra.Command {
	var (
		listen, name string
		delay        time.Duration
	)
	cmd := &cobra.Command{
		Use:   "origin",
		Short: "The built-in backend with every answer delayed (the slow backend of slow-backend)",
		Long: `Origin runs the same server as ` + "`helios backend`" + `, with each request held back
by --delay before it is answered.`,
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
			b := backend.New(name)
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			errc := make(chan error, 1)
			go func() { errc <- b.Serve(bench.DelayListener{Listener: ln, Delay: delay}) }()
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
	return cmd
}
