package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReloadFileErrorsFirst: a refused reload lists the errors before the
// warnings, which now come with them (issue 18 item 4), so that the first
// line, which systemd's STATUS= shows (item 10), says why it was refused.
func TestReloadFileErrorsFirst(t *testing.T) {
	file := filepath.Join(t.TempDir(), "helios.yaml")
	good := "listeners: [{name: web, address: \"127.0.0.1:1\"}]\nroutes: [{name: r, respond: {}}]\n"
	s, _ := startServer(t, yamlConfig(t, good, nil), Options{ConfigPath: file})
	os.WriteFile(file, []byte(`listeners: [{name: web, address: "127.0.0.1:1"}]
upstreams:
  - name: app
    backends: [{address: "127.0.0.1:9"}]
    transport: {tls: {insecure_skip_verify: true}}
routes: [{name: r, respond: {status: 999}}]
`), 0o644)
	problems, err := s.ReloadFile()
	if err == nil || len(problems) != 2 || !strings.Contains(problems[0], "respond.status: 999 is out of range") || !strings.Contains(problems[1], "WARNING") {
		t.Errorf("got %v and %q, want the error first, then the warning", err, problems)
	}
	if err != nil && !strings.HasSuffix(err.Error(), ": 1 problem(s)") {
		t.Errorf("got %v, want 1 problem (the warning is not one)", err)
	}
}
