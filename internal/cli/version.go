package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Version is the release version, set at build time with
// -ldflags "-X github.com/helios-lb/helios/internal/cli.Version=v1.2.3".
var Version = "dev"

// Revision is the VCS revision, set at build time like Version (make
// build does); empty means the one Go recorded in the binary, if any.
var Revision = ""

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of helios",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), versionLine())
			return nil
		},
	}
}

// versionLine is what helios version and helios --version print.
func versionLine() string {
	rev := revision()
	if rev != "" {
		rev = " " + rev
	}
	return fmt.Sprintf("helios %s%s %s %s/%s", Version, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// revision returns the first 12 digits of the VCS revision the binary was
// built from, or "".
func revision() string {
	if len(Revision) >= 12 {
		return Revision[:12]
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return s.Value[:12]
			}
		}
	}
	return ""
}
