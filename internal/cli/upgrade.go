package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/helios-lb/helios/internal/daemon"
	"github.com/helios-lb/helios/internal/upgrade"
)

func newUpgradeCmd() *cobra.Command {
	var (
		pidFile string
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "upgrade",
		Short: "Replace a running helios serve with the binary now at its path, without dropping a connection",
		Long: `Upgrade sends SIGUSR2 to the helios serve whose pid is in --pid-file (start it
with the same --pid-file). That process starts the binary found at the path it
was started from, with its listening sockets; the new process takes them,
becomes ready (listeners bound, first health checks done) and writes its pid
to the file; the old one then drains and exits. If the new process fails or is
not ready in time, it is killed and the old one keeps serving.

Upgrade waits until the file names the new process and exits 0, or exits 1
saying what went wrong. Replace the binary first (install(1) or mv, so the
running one's file is not overwritten in place).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if pidFile == "" {
				fmt.Fprintln(cmd.ErrOrStderr(), "helios upgrade: --pid-file is required (the file helios serve --pid-file writes)")
				return exitError{2}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			oldPID, newPID, err := upgrade.Trigger(ctx, pidFile, daemon.ReadPIDFile)
			if err != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), "helios upgrade:", err)
				return exitError{1}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "upgraded: pid %d serves; pid %d is draining\n", newPID, oldPID)
			return nil
		},
	}
	cmd.Flags().StringVar(&pidFile, "pid-file", "", "PID file of the running helios serve (its --pid-file)")
	cmd.Flags().DurationVar(&timeout, "timeout", 90*time.Second, "how long to wait for the new process")
	return cmd
}
