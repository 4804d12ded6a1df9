package bench

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
)

// toolPackages maps each external tool to the Debian package that has it.
var toolPackages = map[string]string{
	"wrk":     "wrk",
	"nginx":   "nginx",
	"haproxy": "haproxy",
	"caddy":   "caddy",
	"h2load":  "nghttp2-client",
	"taskset": "util-linux",
	// The shared-limit scenario's store.
	"redis-server": "redis-server",
}

// MissingToolsError lists the tools a run needs that are not installed.
type MissingToolsError struct {
	Tools []string
}

// Error says which tools are missing and how to install them.
func (e *MissingToolsError) Error() string {
	var pkgs, names []string
	for _, t := range e.Tools {
		names = append(names, fmt.Sprintf("%s (Debian package %s)", t, toolPackages[t]))
		if !slices.Contains(pkgs, toolPackages[t]) {
			pkgs = append(pkgs, toolPackages[t])
		}
	}
	return fmt.Sprintf("missing tools: %s.\nInstall them with `make bench-deps`, or: apt-get install -y %s",
		strings.Join(names, ", "), strings.Join(pkgs, " "))
}

// lookTools finds each tool in PATH. It returns their paths, or a
// *MissingToolsError naming every one not found.
func lookTools(names []string) (map[string]string, error) {
	paths := map[string]string{}
	var missing []string
	for _, n := range names {
		if _, done := paths[n]; done || slices.Contains(missing, n) {
			continue
		}
		p, err := exec.LookPath(n)
		if err != nil {
			// nginx and haproxy live in /usr/sbin, which is not in a
			// normal user's PATH on Debian.
			for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/local/sbin"} {
				if q, err2 := exec.LookPath(dir + "/" + n); err2 == nil {
					p, err = q, nil
					break
				}
			}
		}
		if err != nil {
			missing = append(missing, n)
			continue
		}
		paths[n] = p
	}
	if len(missing) > 0 {
		return nil, &MissingToolsError{Tools: missing}
	}
	return paths, nil
}
