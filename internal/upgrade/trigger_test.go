package upgrade

import (
	"os"
	"os/exec"
	"testing"
)

func TestStatFields(t *testing.T) {
	tests := []struct {
		stat      string
		ppid      int
		state     string
		wantParse bool
	}{
		{"123 (helios) S 1 123 123 0 -1", 1, "S", true},
		{"124 (a (b) c) Z 77 124", 77, "Z", true},
		{"garbage", 0, "", false},
	}
	for _, tt := range tests {
		ppid, state, ok := statFields(tt.stat)
		if ppid != tt.ppid || state != tt.state || ok != tt.wantParse {
			t.Errorf("%q: got %v %q %v, want %v %q %v", tt.stat, ppid, state, ok, tt.ppid, tt.state, tt.wantParse)
		}
	}
}

func TestAlive(t *testing.T) {
	if !alive(os.Getpid()) {
		t.Errorf("this process: got not alive, want alive")
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if alive(cmd.Process.Pid) {
		t.Errorf("an exited process: got alive, want not")
	}
}
