package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/helios-lb/helios/internal/config"
	"github.com/helios-lb/helios/internal/daemon"
)

func newProxyCmd() *cobra.Command {
	var (
		q   config.Quick
		to  string
		o   daemon.Options
		log string
	)
	cmd := &cobra.Command{
		Use:   "proxy --from ADDR --to BACKEND[,BACKEND...]",
		Short: "Run a reverse proxy from flags alone, no config file",
		Long: `Proxy runs Helios in front of the backends given, with every setting at its
default (README, Configuration): one listener, one upstream, retries on
connection errors, and with --health active checks and passive ejection.
Signals are those of helios serve; there is no file to reload.

  helios proxy --from :8080 --to 127.0.0.1:9001,127.0.0.1:9002
  helios proxy --from :8080 --to 10.0.0.5:80,10.0.0.6:80 --strategy least_conn --health /healthz`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, t := range strings.Split(to, ",") {
				if t = strings.TrimSpace(t); t != "" {
					q.To = append(q.To, t)
				}
			}
			q.AccessLog = log
			cfg, err := q.Config()
			var ps config.Problems
			if errors.As(err, &ps) {
				for _, p := range ps {
					fmt.Fprintln(cmd.ErrOrStderr(), "helios proxy:", p.String())
				}
				return exitError{2}
			}
			if err != nil {
				return err
			}
			o.Config = cfg
			return runDaemon(cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&q.From, "from", ":8080", "address to listen on")
	f.StringVar(&to, "to", "", "backend addresses, comma-separated (required)")
	f.StringVar(&q.Strategy, "strategy", "round_robin", "round_robin, weighted_round_robin, least_conn, consistent_hash (on the client address), ip_hash, random or p2c")
	f.StringVar(&q.HealthPath, "health", "", "check this path on every backend (and eject failing ones); empty: no checks")
	f.StringVar(&q.Admin, "admin", "127.0.0.1:9901", `admin listener (metrics, /readyz), or "off"`)
	f.StringVar(&log, "access-log", "stdout", "access log: stdout, stderr, off or a file")
	lifecycleFlags(f, &o)
	return cmd
}
