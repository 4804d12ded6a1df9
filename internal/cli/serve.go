package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/helios-lb/helios/internal/accesslog"
	"github.com/helios-lb/helios/internal/logging"
	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/server"
)

func newServeCmd() *cobra.Command {
	var (
		file  string
		grace time.Duration
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the proxy",
		Long: `Serve runs Helios with the given config file.

Signals: SIGHUP reloads the config (a bad config is refused and the old one
keeps serving); SIGTERM or SIGINT drains: stop accepting, let requests in
flight finish within --shutdown-timeout, then exit 0. A second SIGTERM or
SIGINT exits at once.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, err := configPath(file)
			if err != nil {
				return err
			}
			cfg, err := loadConfig(path, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			log, err := logging.New(cfg.Logging, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer log.Sync()
			var rec proxy.Recorder
			access, err := logging.OpenAccess(cfg.Logging, cmd.OutOrStdout(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if access != nil {
				format := accesslog.JSON
				if access.Format == "console" {
					format = accesslog.Console
				}
				al := accesslog.New(access.W, format)
				defer func() {
					al.Close()
					access.Close()
				}()
				rec = al
			}
			srv, err := server.New(cfg, server.Options{Logger: log, Recorder: rec, ConfigPath: path})
			if err != nil {
				return err
			}
			sigs := make(chan os.Signal, 4)
			signal.Notify(sigs, syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM)
			defer signal.Stop(sigs)
			srv.Start()
			log.Info("helios started", zap.String("config", path), zap.String("version", Version), zap.Int("pid", os.Getpid()))

			for sig := range sigs {
				if sig == syscall.SIGHUP {
					log.Info("reloading", zap.String("config", path))
					srv.ReloadFile() // logs a refusal itself
					continue
				}
				log.Info("draining", zap.String("signal", sig.String()), zap.Duration("timeout", grace))
				ctx, cancel := context.WithTimeout(context.Background(), grace)
				done := make(chan error, 1)
				go func() { done <- srv.Shutdown(ctx) }()
				select {
				case err := <-done:
					cancel()
					if err != nil {
						log.Warn("drain cut short; remaining connections closed", zap.Error(err))
					}
					log.Info("stopped")
					return nil
				case sig := <-sigs:
					cancel()
					log.Warn("second signal; exiting now", zap.String("signal", sig.String()))
					return nil
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "config", "c", "", "config file (default ./helios.yaml, then /etc/helios/helios.yaml)")
	cmd.Flags().DurationVar(&grace, "shutdown-timeout", 30*time.Second, "how long a drain may take before open connections are closed")
	return cmd
}
