package deploy

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestMakefilePrerequisites guards issue 18 item 6: make test needs a C
// compiler (the race detector needs cgo) while the README said "Go and
// make", and scripts/systemd-sandbox.sh needs debootstrap, named only in
// its own header. make test now says what is missing and how to get it
// before it runs anything, make test-deps installs the compiler, and make
// deploy-deps installs debootstrap.
func TestMakefilePrerequisites(t *testing.T) {
	mk := needTool(t, "make", "make")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, mk, "test")
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), "CC=/nonexistent/cc")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "run make test-deps") || strings.Contains(string(out), "go vet") {
		t.Errorf("make test without a C compiler: got %v\n%s\nwant a failure before go vet that says to run make test-deps", err, out)
	}
	for target, pkgs := range map[string][]string{"test-deps": {"gcc", "libc6-dev"}, "deploy-deps": {"debootstrap", "docker-compose", "logrotate"}} {
		out, err := exec.Command(mk, "-n", "-C", repoRoot(t), target).CombinedOutput()
		for _, p := range pkgs {
			if err != nil || !strings.Contains(string(out), " "+p) {
				t.Errorf("make -n %s: %v\n%s\nwant it to install %s", target, err, out, p)
			}
		}
	}
}
