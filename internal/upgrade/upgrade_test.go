package upgrade

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// The tests start this test binary again as the new process; what it
// does is chosen by HELIOS_TEST_UPGRADE_CHILD.
func TestMain(m *testing.M) {
	if mode := os.Getenv("HELIOS_TEST_UPGRADE_CHILD"); mode != "" {
		os.Exit(child(mode))
	}
	os.Exit(m.Run())
}

// child is the new process: "ready" takes the socket under key "web",
// prints its address and the environment it saw, says ready and waits
// for the old process to go; "fail" exits 1; "hang" never says ready.
func child(mode string) int {
	u, err := New(OSEnv())
	if err != nil {
		fmt.Println("New:", err)
		return 2
	}
	switch mode {
	case "fail":
		fmt.Println("bad config")
		return 1
	case "hang":
		time.Sleep(time.Minute)
		return 0
	}
	fs := u.Take("web")
	if len(fs) != 2 {
		fmt.Println("got", len(fs), "sockets under web, want 2")
		return 2
	}
	ln, err := net.FileListener(fs[0])
	if err != nil {
		fmt.Println("FileListener:", err)
		return 2
	}
	fmt.Println("addr", ln.Addr())
	for _, k := range []string{"WATCHDOG_PID", "LISTEN_FDS", EnvFDs} {
		fmt.Printf("env %s=%q\n", k, os.Getenv(k))
	}
	fmt.Println("has parent", u.HasParent())
	if err := u.Ready(); err != nil {
		fmt.Println("Ready:", err)
		return 2
	}
	select {
	case <-u.ParentGone():
		fmt.Println("parent gone")
	case <-time.After(10 * time.Second):
		fmt.Println("parent still there after 10s")
		return 2
	}
	// The listening socket still works once the old process is gone.
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Write([]byte("served by the new process"))
			c.Close()
		}
	}()
	time.Sleep(2 * time.Second)
	return 0
}

// testEnv starts this binary in the given child mode, with its output
// collected in out.
func testEnv(mode string, out *syncBuffer) Env {
	env := OSEnv()
	env.Args = []string{os.Args[0]}
	env.Environ = func() []string {
		return append(os.Environ(), "HELIOS_TEST_UPGRADE_CHILD="+mode, "WATCHDOG_PID=1", "LISTEN_FDS=3", EnvFDs+"=stale")
	}
	env.Start = func(path string, args, envv []string, extra []*os.File) (Process, error) {
		cmd := exec.Command(path)
		cmd.Args, cmd.Env, cmd.ExtraFiles = args, envv, extra
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		return osProcess{cmd}, nil
	}
	return env
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func listenerSockets(t *testing.T) (string, []Socket) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var socks []Socket
	for i := 0; i < 2; i++ {
		f, err := ln.(*net.TCPListener).File()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		socks = append(socks, Socket{Key: "web", File: f})
	}
	return ln.Addr().String(), socks
}

func TestUpgradeHandsSocketsToANewProcess(t *testing.T) {
	addr, socks := listenerSockets(t)
	var out syncBuffer
	u, err := New(testEnv("ready", &out))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := u.Upgrade(t.Context(), socks)
	if err != nil {
		t.Fatalf("Upgrade: %v\nchild output:\n%s", err, out.String())
	}
	if pid <= 0 || pid == os.Getpid() {
		t.Errorf("pid: got %v, want the new process's", pid)
	}
	if _, err := u.Upgrade(t.Context(), socks); err == nil {
		t.Errorf("a second upgrade: got nil, want a refusal")
	}
	// This process "exits": the new process must learn it, and serve.
	u.mu.Lock()
	u.keep.Close()
	u.mu.Unlock()
	for _, s := range socks {
		s.File.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), "parent gone") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	buf := make([]byte, 64)
	n, _ := c.Read(buf)
	want := []string{
		"addr " + addr,
		`env WATCHDOG_PID=""`,
		`env LISTEN_FDS=""`,
		`env ` + EnvFDs + `="web,web"`,
		"has parent true",
		"parent gone",
	}
	got := out.String()
	for _, w := range want {
		if !strings.Contains(got, w+"\n") {
			t.Errorf("child output lacks %q; got:\n%s", w, got)
		}
	}
	// This process never accepts on its copy of the socket: the answer
	// can only come from the new process.
	if s := string(buf[:n]); s != "served by the new process" {
		t.Errorf("got %q, want the new process's answer", s)
	}
}

func TestUpgradeFailsWhenTheNewProcessFails(t *testing.T) {
	tests := []struct {
		mode    string
		timeout time.Duration
		want    string
	}{
		{"fail", time.Minute, "exited before it was ready (exit status 1)"},
		{"hang", 300 * time.Millisecond, "not ready within 300ms; killed"},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			_, socks := listenerSockets(t)
			var out syncBuffer
			u, err := New(testEnv(tt.mode, &out))
			if err != nil {
				t.Fatal(err)
			}
			u.Timeout = tt.timeout
			_, err = u.Upgrade(context.Background(), socks)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
			// A failed upgrade may be tried again.
			u.Timeout = 300 * time.Millisecond
			if _, err := u.Upgrade(context.Background(), socks); err == nil {
				t.Errorf("second try: got nil, want the same failure")
			}
		})
	}
}

func TestUpgradeRefusesBadKeys(t *testing.T) {
	u, _ := New(testEnv("ready", &syncBuffer{}))
	_, err := u.Upgrade(t.Context(), []Socket{{Key: "a,b"}})
	if err == nil || !strings.Contains(err.Error(), `socket key "a,b"`) {
		t.Errorf("got %v, want a key error", err)
	}
}
