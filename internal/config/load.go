package config

import (
	"fmt"
	"os"
	"path/filepath"
)

// Parse decodes, expands, defaults and validates a config held in memory.
// file names it in problems ("" leaves file names out) and becomes
// Config.File; relative paths in the config (static roots, an access log
// file) are taken relative to file's directory. lookupEnv supplies the values of ${NAME} references; nil means
// os.LookupEnv. See the package documentation for the steps.
//
// A config with problems yields a nil Config and an error of type Problems
// holding all of them, sorted by line. A valid config may carry warnings in
// Config.Warnings.
func Parse(data []byte, file string, lookupEnv func(string) (string, bool)) (*Config, error) {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	expanded, refs, problems := expandEnv(data, file, lookupEnv)
	cfg, decodeProblems := decode(expanded, file)
	problems = append(problems, decodeProblems...)
	var warnings Problems
	if cfg != nil {
		cfg.meta.env = refs
		cfg.meta.lookupEnv = lookupEnv
		SetDefaults(cfg)
		if file != "" {
			cfg.resolvePaths(filepath.Dir(file))
		}
		var invalid Problems
		invalid, warnings = cfg.validate()
		problems = append(problems, invalid...)
		cfg.meta.noteEnv(problems)
		cfg.meta.noteEnv(warnings)
		warnings.sort()
		cfg.Warnings = warnings
	}
	if len(problems) > 0 {
		// Warnings go with the errors: a certificate about to expire is
		// worth knowing about while fixing the rest (issue 18 item 4).
		return nil, append(problems, warnings...).err()
	}
	return cfg, nil
}

// Load reads the file at path and calls Parse with it. lookupEnv nil means
// os.LookupEnv. A file that cannot be read is an error wrapping the
// os.ReadFile error (test it with errors.Is(err, fs.ErrNotExist)); a config
// with problems is an error of type Problems.
func Load(path string, lookupEnv func(string) (string, bool)) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	return Parse(data, path, lookupEnv)
}
