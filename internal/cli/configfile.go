package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/helios-lb/helios/internal/config"
)

// defaultConfigPaths are tried in order when --config is not given.
var defaultConfigPaths = []string{"./helios.yaml", "/etc/helios/helios.yaml"}

// configArgs are the arguments of a command that takes the config file
// as --config FILE or as its one argument (helios validate FILE, as
// nginx -t and caddy users type it).
var configArgs = cobra.MaximumNArgs(1)

// configPath returns the config file named by --config (flag) or by the
// command's argument, or else the first default that exists.
func configPath(flag string, args []string) (string, error) {
	if len(args) > 0 {
		if flag != "" && flag != args[0] {
			return "", fmt.Errorf("two config files: --config %s and %s (give one)", flag, args[0])
		}
		return args[0], nil
	}
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

// commandConfig finds and loads the config file a command names, by
// --config (file) or as its argument (args; nil for commands that take
// none), with problems printed to w. On failure it says why on the
// command's stderr and returns an error that is exitError{1} to Main and,
// to errors.As, the reason (an invalidError for a config with problems).
// absolute loads the file by its absolute path, so that the paths in the
// config come out absolute.
func commandConfig(cmd *cobra.Command, file string, args []string, w io.Writer, absolute bool) (*config.Config, error) {
	path, err := configPath(file, args)
	if err == nil && absolute {
		path, err = filepath.Abs(path)
	}
	if err == nil {
		var cfg *config.Config
		if cfg, err = loadConfig(path, w); err == nil {
			return cfg, nil
		}
	}
	fmt.Fprintln(cmd.ErrOrStderr(), "helios:", err)
	return nil, errors.Join(exitError{1}, err)
}

// loadConfig loads and validates the config at path. When it is invalid,
// every problem and warning is printed to w, one per line, and the error
// says how many problems there are.
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
		return nil, invalidError{path, ps.Errors()}
	}
	return nil, err
}

// invalidError is loadConfig's error for a config with problems, which it
// has printed.
type invalidError struct {
	path     string
	problems config.Problems // the errors, warnings left out
}

func (e invalidError) Error() string {
	return fmt.Sprintf("%s: %d problem(s)", e.path, len(e.problems))
}
