package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newConfigCmd() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "config [FILE]",
		Short: "Print the effective config: every default filled in, the environment expanded",
		Long: `Config reads and checks the config file as serve would, then prints the
configuration serve would run, as YAML that Helios reads back: every key
the file sets and every key whose default is not zero or off, ${VAR}
references expanded, relative paths made absolute (nginx -T and caddy
adapt do the same for theirs). The admin token is shown as the ${VAR} it
came from, or as <redacted> when the file holds it itself.

On a config with problems it prints them, as validate does, on stderr and
exits 1.`,
		Args: configArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			// Paths in the output are absolute, so that it means the
			// same wherever it is saved.
			cfg, err := commandConfig(cmd, file, args, cmd.ErrOrStderr(), true)
			if err != nil {
				return err
			}
			out, err := cfg.YAML()
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "# %s as helios serve runs it: defaults filled in, the environment expanded.\n", cfg.File)
			_, err = w.Write(out)
			return err
		},
	}
	cmd.Flags().StringVarP(&file, "config", "c", "", "config file (default ./helios.yaml, then /etc/helios/helios.yaml)")
	return cmd
}
