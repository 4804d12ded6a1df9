package deploy

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// demoPorts are the fixed ports the demo (configs/helios.yaml) and the
// README's recipes use: Helios's listeners and admin, the demo's backends,
// the Compose example's published port.
var demoPorts = []int{8080, 8081, 8443, 9001, 9002, 9003, 9901, 18080}

// holdDemoPorts makes the test the only one on this machine using
// demoPorts (a lock file in the temporary directory, held until the test
// ends; the wait is bounded), then checks that no other program holds
// one. A port in use skips the test, saying which, and fails it under CI.
func holdDemoPorts(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "helios-demo-ports.lock"), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		if time.Now().After(deadline) {
			f.Close()
			skipOrFail(t, "another test has held the demo's ports for 5 minutes")
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Cleanup(func() { f.Close() }) // closing releases the lock
	for _, p := range demoPorts {
		ln, err := net.Listen("tcp", fmt.Sprintf(":%d", p))
		if err != nil {
			skipOrFail(t, fmt.Sprintf("port %d is in use, and the demo and the README's recipes need it: %v", p, err))
		}
		ln.Close()
	}
}

// skipOrFail skips the test with msg, or fails it under CI, where what
// it needs is there by construction.
func skipOrFail(t *testing.T, msg string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// waitFreed waits until nothing listens on 127.0.0.1:port, up to d, and
// reports whether it came to that.
func waitFreed(port int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err != nil {
			return true
		}
		c.Close()
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}
