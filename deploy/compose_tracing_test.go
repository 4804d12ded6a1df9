package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/helios-lb/helios/internal/config"
)

// TestComposeTracingExample checks the tracing overlay of the Compose
// example without pulling its images: Helios's config there is the
// example's with a tracing block sending to the collector service (and
// nothing else changed), it validates, and Compose accepts the two files
// together.
func TestComposeTracingExample(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "deploy/compose")
	base, err := os.ReadFile(filepath.Join(dir, "helios.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	traced, err := os.ReadFile(filepath.Join(dir, "helios-tracing.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := settings(string(traced)), settings(string(base)); !strings.HasPrefix(got, want) {
		t.Errorf("helios-tracing.yaml drifted from helios.yaml: got\n%s\nwant it to start with\n%s", got, want)
	}
	cfg, err := config.Parse(traced, "helios-tracing.yaml", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Tracing == nil || cfg.Tracing.Endpoint != "http://collector:4317" || cfg.Tracing.Protocol != "grpc" {
		t.Errorf("tracing: got %+v, want OTLP/gRPC to http://collector:4317", cfg.Tracing)
	}
	compose := findCompose(t)
	run(t, dir, nil, compose[0], append(compose[1:], "-f", "compose.yaml", "-f", "compose.tracing.yaml", "config", "-q")...)
}

// settings returns a YAML file's lines without comments and blank lines.
func settings(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}
