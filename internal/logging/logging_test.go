package logging

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.uber.org/zap"

	"github.com/helios-lb/helios/internal/config"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestProcessLogAppliesAReload guards issue 12: logging changes in a
// reloaded config were ignored. A logger made before the change (With)
// follows it.
func TestProcessLogAppliesAReload(t *testing.T) {
	var out lockedBuffer
	p, err := NewProcess(config.Logging{Level: "info", Format: "json"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	child := p.With(zap.String("upstream", "app"))
	child.Debug("hidden at info")
	child.Info("as json")
	if err := p.Apply(config.Logging{Level: "debug", Format: "console"}); err != nil {
		t.Fatal(err)
	}
	child.Debug("shown at debug")
	if err := p.Apply(config.Logging{Level: "loud", Format: "console"}); err == nil {
		t.Errorf("a bad level: got nil, want an error")
	}
	child.Debug("still at debug")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("got %d lines, want 3:\n%s", len(lines), out.String())
	}
	if !strings.HasPrefix(lines[0], "{") || !strings.Contains(lines[0], `"upstream":"app"`) {
		t.Errorf("line 1: got %s, want JSON with the upstream field", lines[0])
	}
	for _, l := range lines[1:] {
		if strings.HasPrefix(l, "{") || !strings.Contains(l, "DEBUG") || !strings.Contains(l, `"upstream": "app"`) {
			t.Errorf("got %s, want a console DEBUG line with the upstream field", l)
		}
	}
}

// TestAccessFileReopens: after logrotate moves the file, Reopen makes
// lines go to a new file of the old name.
func TestAccessFileReopens(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "access.log")
	sink, err := OpenAccess(config.Logging{Format: "json", AccessLog: path, AccessFormat: "combined"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	if sink.Format != "combined" {
		t.Errorf("format: got %v, want combined", sink.Format)
	}
	sink.W.Write([]byte("one\n"))
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	sink.W.Write([]byte("two\n"))
	if err := sink.Reopen(); err != nil {
		t.Fatal(err)
	}
	sink.W.Write([]byte("three\n"))
	for file, want := range map[string]string{path + ".1": "one\ntwo\n", path: "three\n"} {
		got, _ := os.ReadFile(file)
		if string(got) != want {
			t.Errorf("%s: got %q, want %q", filepath.Base(file), got, want)
		}
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o640 {
		t.Errorf("mode: got %v, want 0640", st.Mode().Perm())
	}
}
