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

// loadNamed loads the config named by --config (flag) or the command's
// argument, as validate and config do: problems go to w, and what went
// wrong to stderr; the error is for the caller to act on (exit status 1).
// absolute loads the file by its absolute path, so that the paths in the
// config come out absolute.
func loadNamed(cmd *cobra.Command, flag string, args []string, w io.Writer, absolute bool) (*config.Config, error) {
	path, err := configPath(flag, args)
	if err == nil && absolute {
		path, err = filepath.Abs(path)
	}
	var cfg *config.Config
	if err == nil {
		cfg, err = loadConfig(path, w)
	}
	if err != nil {
		fmt.Fprintln(cmd.ErrOrStderr(), "helios:", err)
		return nil, err
	}
	return cfg, nil
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
