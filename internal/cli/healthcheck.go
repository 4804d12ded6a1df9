package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/helios-lb/helios/internal/admin"
)

func newHealthcheckCmd() *cobra.Command {
	var (
		address, path string
		timeout       time.Duration
		live          bool
	)
	cmd := &cobra.Command{
		Use:   "healthcheck",
		Short: "Ask a running Helios whether it is ready (for container health checks and exec probes)",
		Long: `Healthcheck asks the admin listener's /readyz (or /healthz with --live) and
exits 0 when the answer is 200, printing it ("ready", "ok"), and 1
otherwise, printing what it got on stderr. It is for
images without curl: Docker's HEALTHCHECK and Kubernetes exec probes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if live {
				path = "/healthz"
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			answer, err := admin.Check(ctx, address, path)
			if err != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), "helios healthcheck:", err)
				return exitError{1}
			}
			fmt.Fprintln(cmd.OutOrStdout(), answer)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&address, "address", "127.0.0.1:9901", "the admin listener (admin.address; an empty host means loopback)")
	f.StringVar(&path, "path", "/readyz", "the path to ask")
	f.BoolVar(&live, "live", false, "ask /healthz (the process runs) instead of /readyz (it should get traffic)")
	f.DurationVar(&timeout, "timeout", 3*time.Second, "how long to wait for the answer")
	return cmd
}
