package cli

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/helios-lb/helios/internal/config"
)

// defaultConfigPaths are tried in order when --config is not given.
var defaultConfigPaths = []string{"./helios.yaml", "/etc/helios/helios.yaml"}

// configPath returns the explicit path, or the first default that exists.
func configPath(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	for _, p := range defaultConfigPaths {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no config file: pass --config FILE, or create %s or %s", defaultConfigPaths[0], defaultConfigPaths[1])
}

// loadConfig loads and validates the config at path. When it is invalid,
// every problem is printed to w, one per line, and the error says how many.
func loadConfig(path string, w io.Writer) (*config.Config, error) {
	cfg, err := config.Load(path, nil)
	if err == nil {
		return cfg, nil
	}
	var ps config.Problems
	if errors.As(err, &ps) {
		for _, p := range ps {
			fmt.Fprintln(w, p.String())
		}
		return nil, fmt.Errorf("%s: %d problem(s)", path, len(ps))
	}
	return nil, err
}

// commandConfig finds and loads the config file a command's --config
// names (problems printed to w). On failure it says why on the
// command's stderr and returns exitError{1}.
func commandConfig(cmd *cobra.Command, file string, w io.Writer) (*config.Config, error) {
	path, err := configPath(file)
	if err == nil {
		var cfg *config.Config
		if cfg, err = loadConfig(path, w); err == nil {
			return cfg, nil
		}
	}
	fmt.Fprintln(cmd.ErrOrStderr(), "helios:", err)
	return nil, exitError{1}
}
