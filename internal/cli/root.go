// Package cli holds Helios's cobra commands: flags and wiring only. The work
// is done by the packages the commands call.
package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// exitError carries a process exit code out of a command. A command returns
// it when it has already printed what went wrong.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// Main runs the helios command line with args (without the program name)
// and returns the process exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := NewRoot()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	fmt.Fprintln(stderr, "helios:", err)
	return 1
}

// NewRoot builds the root command with every subcommand attached.
func NewRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "helios",
		Short:         "Helios is a reverse proxy and load balancer",
		SilenceUsage:  true,
		SilenceErrors: true,
		// --version, as nginx -v and caddy version users type it.
		Version: versionLine(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.AddCommand(
		newServeCmd(),
		newProxyCmd(),
		newValidateCmd(),
		newHealthcheckCmd(),
		newUpgradeCmd(),
		newBackendCmd(),
		newVersionCmd(),
		newBenchCmd(),
		newCertCmd(),
		newConfigCmd(),
	)
	return root
}
