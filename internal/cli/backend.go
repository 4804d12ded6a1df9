package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/helios-lb/helios/internal/backend"
)

func newBackendCmd() *cobra.Command {
	var listen, name string
	cmd := &cobra.Command{
		Use:   "backend",
		Short: "Run the built-in origin server (for demos, tests and benchmarks)",
		Long: `Backend runs a small HTTP origin server:

  GET /             200, header X-Backend: NAME, a short body naming it
  GET /healthz      200
  GET /status/CODE  that status
  GET /delay/MS     200 after MS milliseconds
  ANY /echo         the request line, headers and body back
  GET /bytes/N      N bytes, streamed
  GET /json/N       N bytes of API-like JSON (16 to 16777216)
  GET /ws           WebSocket echo
  GET /stats        connections and requests served, as JSON

SIGTERM or SIGINT stops it after in-flight requests finish.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if name == "" {
				name = listen
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("backend %s: %w", name, err)
			}
			b := backend.New(name)
			fmt.Fprintf(cmd.OutOrStdout(), "backend %s listening on %s\n", name, ln.Addr())
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			errc := make(chan error, 1)
			go func() { errc <- b.Serve(ln) }()
			select {
			case err := <-errc:
				return fmt.Errorf("backend %s: %w", name, err)
			case <-ctx.Done():
			}
			ln.Close()
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := b.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:9001", "address to listen on")
	cmd.Flags().StringVar(&name, "name", "", "name reported in X-Backend (default: the listen address)")
	return cmd
}
