// Package systemdtest provides a stand-in for systemd's notification
// socket, for tests of code that speaks sd_notify.
package systemdtest

import (
	"net"
	"path/filepath"
	"testing"
	"time"
)

// Manager is a datagram socket that collects sd_notify messages, as
// systemd's NOTIFY_SOCKET does. It is closed when the test ends.
type Manager struct {
	// Path is the socket's path: the value for NOTIFY_SOCKET.
	Path string
	conn *net.UnixConn
}

// NewManager listens on a socket in a temporary directory of t.
func NewManager(t testing.TB) *Manager {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &Manager{Path: path, conn: c}
}

// Read returns the next message, or ok false when none comes within
// wait.
func (m *Manager) Read(wait time.Duration) (msg string, ok bool) {
	buf := make([]byte, 4096)
	m.conn.SetReadDeadline(time.Now().Add(wait))
	n, err := m.conn.Read(buf)
	if err != nil {
		return "", false
	}
	return string(buf[:n]), true
}

// Next returns the next message that is not a watchdog ping, failing
// the test when none comes within wait.
func (m *Manager) Next(t testing.TB, wait time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		msg, ok := m.Read(time.Until(deadline))
		if !ok {
			t.Fatalf("no sd_notify message within %v", wait)
		}
		if msg != "WATCHDOG=1" {
			return msg
		}
	}
}
