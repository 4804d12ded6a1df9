// Package bench holds the data `helios bench` runs on, embedded into the
// helios binary: the scenario definitions (scenarios.yaml), the peer config
// templates (peers/*.tmpl) and the wrk scripts (scripts/*.lua). The code
// that runs them is internal/bench; reports are written under results/,
// which is not embedded.
package bench

import "embed"

// Files is the embedded data: scenarios.yaml, peers/*.tmpl and
// scripts/*.lua, at those paths.
//
//go:embed scenarios.yaml peers/*.tmpl scripts/*.lua
var Files embed.FS
