package cli

import (
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/helios-lb/helios/internal/daemon"
)

func newServeCmd() *cobra.Command {
	var (
		file string
		o    daemon.Options
	)
	cmd := &cobra.Command{
		Use:   "serve [FILE]",
		Short: "Run the proxy",
		Long: `Serve runs Helios with the given config file.

Signals:
  SIGHUP          reload the config (a bad config is refused and the old one
                  keeps serving)
  SIGUSR1         reopen the access log file (after logrotate moved it)
  SIGUSR2         binary upgrade: start the binary at the path it was started
                  from, hand it the listening sockets, and drain once it is
                  ready; if it fails, keep serving (see helios upgrade)
  SIGTERM/SIGINT  drain: /readyz says 503 for --shutdown-delay while the
                  listeners still accept, then stop accepting and let requests
                  in flight finish within --shutdown-timeout; exit 0. A second
                  SIGTERM or SIGINT exits at once. WebSockets still open at
                  the timeout get a close frame, 1001 going away, each side.

Under systemd (Type=notify) it reports READY=1 once every listener is bound
and the first round of health checks is done, RELOADING=1/READY=1 around a
reload and STOPPING=1 on a drain, pings the watchdog (WatchdogSec=) while
its event loops make progress, and takes sockets passed by socket activation
(a .socket unit's FileDescriptorName= names the listener, or admin).`,
		Args: configArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := configPath(file, args)
			if err != nil {
				return err
			}
			cfg, err := loadConfig(path, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			o.ConfigPath, o.Config = path, cfg
			return runDaemon(cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&file, "config", "c", "", "config file (default ./helios.yaml, then /etc/helios/helios.yaml)")
	lifecycleFlags(f, &o)
	return cmd
}

// lifecycleFlags are the process flags helios serve and helios proxy share.
func lifecycleFlags(f *pflag.FlagSet, o *daemon.Options) {
	f.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "how long a drain may take before open connections are closed")
	f.DurationVar(&o.ShutdownDelay, "shutdown-delay", 0, "on SIGTERM, how long /readyz answers 503 while the listeners still accept, before the drain (Kubernetes: about 5s)")
	f.StringVar(&o.PIDFile, "pid-file", "", "write the pid here once ready (for helios upgrade and scripts)")
	f.DurationVar(&o.UpgradeTimeout, "upgrade-timeout", time.Minute, "how long a new binary started by SIGUSR2 may take to become ready before it is killed")
}

// runDaemon runs o with the build's labels and the command's streams.
func runDaemon(cmd *cobra.Command, o daemon.Options) error {
	o.Build = daemon.BuildInfo(Version, revision())
	o.Stdout, o.Stderr = cmd.OutOrStdout(), cmd.ErrOrStderr()
	return daemon.Run(cmd.Context(), o)
}
