package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newValidateCmd() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "validate",
		Short: "Check a config file and print every problem in it",
		Long: `Validate reads the config file, checks every key and prints "ok", or one line per
problem in the form FILE:LINE: key.path: what is wrong (what is allowed).
Certificate and key files are read and checked. Warnings (a certificate
that expires within 14 days, backends whose certificates go unverified, a
backends file that cannot be read or has a problem) are printed as
FILE:LINE: key.path: WARNING: ... before "ok".
The exit status is 0 when the file is valid (warnings or not) and 1
otherwise.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := commandConfig(cmd, file, cmd.OutOrStdout())
			if err != nil {
				return err
			}
			for _, w := range cfg.Warnings {
				fmt.Fprintln(cmd.OutOrStdout(), w.String())
			}
			fmt.Fprintln(cmd.OutOrStdout(), "ok")
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "config", "c", "", "config file (default ./helios.yaml, then /etc/helios/helios.yaml)")
	return cmd
}
