package deploy

import (
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// demoOutput is where the demo writes: a file, which takes its writes
// safely while the test reads it.
type demoOutput struct{ f *os.File }

func (o demoOutput) String() string {
	b, _ := os.ReadFile(o.f.Name())
	return string(b)
}

// startDemo runs scripts/demo.sh with bin from the repository's top, in a
// process group of its own as a terminal would run it, with its
// certificate in a temporary directory.
func startDemo(t *testing.T, bin string) (*exec.Cmd, demoOutput) {
	t.Helper()
	cmd := exec.Command("scripts/demo.sh", bin, "configs/helios.yaml")
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), "HELIOS_DEMO_TLS_DIR="+t.TempDir())
	f, err := os.Create(filepath.Join(t.TempDir(), "demo.out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	out := demoOutput{f}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			cmd.Wait()
		}
	})
	return cmd, out
}

// waitExit waits up to d for cmd to exit and returns its wait error.
func waitExit(t *testing.T, cmd *exec.Cmd, d time.Duration, out demoOutput) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("the demo did not exit within %s; output:\n%s", d, out)
		return nil
	}
}

// TestDemoOutlivesABackend guards issue 18 item 3: scripts/demo.sh
// waited on every process, so killing one backend (the README's "When a
// backend dies") stopped Helios and the demo; and Ctrl-C reached Helios
// twice (from the terminal and from the script), which cut its drain
// short ("second signal; exiting now") and made make report Error 130.
// Now a killed backend leaves the demo serving, and one Ctrl-C gives one
// drain and exit status 0; the backends stop too.
func TestDemoOutlivesABackend(t *testing.T) {
	holdDemoPorts(t)
	bin := buildHelios(t, t.TempDir())
	cmd, out := startDemo(t, bin)
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), "Helios is running") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(out.String(), "Helios is running") {
		t.Fatalf("the demo never said it was running; output:\n%s", out)
	}
	get := func() (int, string) {
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := c.Get("http://127.0.0.1:8080/")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, resp.Header.Get("X-Backend")
	}
	seen := map[string]bool{}
	for range 3 {
		code, b := get()
		if code != 200 {
			t.Fatalf("before the kill: got %d %s, want 200", code, b)
		}
		seen[b] = true
	}
	if len(seen) != 3 {
		t.Errorf("before the kill: got backends %v, want all three (round robin)", seen)
	}
	pid := processWith(t, bin+"\x00backend\x00--listen\x00127.0.0.1:9002\x00")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("killing backend-2 (pid %d): %v", pid, err)
	}
	for i := range 30 {
		if code, b := get(); code != 200 || b == "backend-2" {
			t.Fatalf("request %d after backend-2 died: got %d from %q, want 200 from another backend\n%s", i, code, b, out)
		}
	}
	time.Sleep(500 * time.Millisecond)
	if cmd.ProcessState != nil {
		t.Fatalf("the demo stopped when a backend died; output:\n%s", out)
	}

	// Ctrl-C: SIGINT to the terminal's foreground process group.
	syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
	if err := waitExit(t, cmd, 40*time.Second, out); err != nil {
		t.Errorf("after Ctrl-C: %v, want exit status 0; output:\n%s", err, out)
	}
	log := out.String()
	if n := strings.Count(log, "draining"); n != 1 || strings.Contains(log, "second signal") {
		t.Errorf("after one Ctrl-C: %d drains, second signal %v; want one drain and no second signal; output:\n%s", n, strings.Contains(log, "second signal"), log)
	}
	for _, p := range []int{8080, 9001, 9003} {
		if !waitFreed(p, 5*time.Second) {
			t.Errorf("port %d still answers after the demo stopped", p)
		}
	}
}

// processWith returns the pid of the process whose command line (its
// arguments joined by NULs) starts with prefix.
func processWith(t *testing.T, prefix string) int {
	t.Helper()
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile("/proc/" + d.Name() + "/cmdline"); err == nil && strings.HasPrefix(string(b), prefix) {
			return pid
		}
	}
	t.Fatalf("no process runs %q", strings.ReplaceAll(prefix, "\x00", " "))
	return 0
}

// TestDemoStopsWhenHeliosExits: when Helios exits by itself (here it
// cannot bind :8080), the demo says so, stops the backends and exits with
// Helios's status.
func TestDemoStopsWhenHeliosExits(t *testing.T) {
	holdDemoPorts(t)
	bin := buildHelios(t, t.TempDir())
	ln, err := net.Listen("tcp", "127.0.0.1:8080")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cmd, out := startDemo(t, bin)
	err = waitExit(t, cmd, 30*time.Second, out)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Errorf("got %v, want exit status 1 (Helios's); output:\n%s", err, out)
	}
	if !strings.Contains(out.String(), "demo: helios exited with status 1") {
		t.Errorf("the demo did not say Helios exited; output:\n%s", out)
	}
	for _, p := range []int{9001, 9002, 9003} {
		if !waitFreed(p, 5*time.Second) {
			t.Errorf("backend port %d still answers after the demo stopped", p)
		}
	}
}
