package cli

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/helios-lb/helios/internal/server"
	"github.com/helios-lb/helios/internal/systemd"
)

func newValidateCmd() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "validate [FILE]",
		Short: "Check a config file and print every problem in it",
		Long: `Validate reads the config file, checks every key and prints "ok", or one line per
problem in the form FILE:LINE: key.path: what is wrong (what is allowed).
What serve would refuse at start, validate refuses: certificate and key
files are read and checked, the access log's directory must exist and be
writable. Warnings (a certificate that expires within 14 days, backends
whose certificates go unverified, a backends file that cannot be read or
has a problem) are printed as FILE:LINE: key.path: WARNING: ..., beside
the problems or before "ok". A valid file also gets one "memory:" line per
listener: what its client connections may hold in memory, per connection
and at max_connections (README, "Memory per connection").
The exit status is 0 when the file is valid (warnings or not) and 1
otherwise.

Run by systemd (NOTIFY_SOCKET set: the shipped unit's ExecReload= and
ExecStartPre=, with NotifyAccess=all), a refusal also sets the service's
status line to the first problem, so that systemctl status shows why
systemctl reload failed while the running configuration keeps serving.`,
		Args: configArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := commandConfig(cmd, file, args, cmd.OutOrStdout(), false)
			if err != nil {
				notifyRefused(err)
				return err
			}
			out := cmd.OutOrStdout()
			for _, w := range cfg.Warnings {
				fmt.Fprintln(out, w.String())
			}
			// What max_connections commits the machine to (issue 18
			// item 7: serve logged it at every start, where it read
			// like an alarm).
			for _, lc := range cfg.Listeners {
				m := server.ListenerMemory(lc, lc.MaxConnections)
				fmt.Fprintf(out, "memory: listener %s (%s): up to %d KiB per client connection, %d KiB streaming to a slow reader; %d MiB and %d MiB at max_connections %d\n",
					lc.Name, lc.Address, m.WorstKiB, m.SlowReaderKiB, m.WorstTotalMiB, m.SlowReadersTotalMiB, m.Connections)
			}
			fmt.Fprintln(out, "ok")
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "config", "c", "", "config file (default ./helios.yaml, then /etc/helios/helios.yaml)")
	return cmd
}

// notifyRefused tells systemd, when validate runs as one of a unit's
// commands, why the config was refused: STATUS= with the first problem,
// which systemctl status shows (issue 18 item 10: systemctl reload said
// only "Job for helios.service failed", the FILE:LINE was in the journal).
// Outside systemd it does nothing.
func notifyRefused(err error) {
	n, nerr := systemd.NewNotifier(os.Getenv("NOTIFY_SOCKET"))
	if nerr != nil || !n.Enabled() {
		return
	}
	why := err.Error()
	var ie invalidError
	if errors.As(err, &ie) && len(ie.problems) > 0 {
		why = ie.problems[0].String()
		if more := len(ie.problems) - 1; more > 0 {
			why += fmt.Sprintf(" (and %d more: helios validate lists them)", more)
		}
	}
	n.Status("configuration refused by helios validate; a running Helios keeps its configuration: " + why)
}
