package systemd

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/systemd/systemdtest"
)

func TestNotifierSendsExactMessages(t *testing.T) {
	m := systemdtest.NewManager(t)
	n, err := NewNotifier(m.Path)
	if err != nil {
		t.Fatal(err)
	}
	n.monotonic = func() time.Duration { return 1234567 * time.Microsecond }
	tests := []struct {
		name string
		send func() error
		want string
	}{
		{"ready", func() error { return n.Ready("") }, "READY=1"},
		{"ready with status", func() error { return n.Ready("serving 2 listeners") }, "READY=1\nSTATUS=serving 2 listeners"},
		{"reloading", n.Reloading, "RELOADING=1\nMONOTONIC_USEC=1234567"},
		{"stopping", n.Stopping, "STOPPING=1"},
		{"watchdog", n.Watchdog, "WATCHDOG=1"},
		{"main pid", func() error { return n.MainPID(4242, "upgraded") }, "MAINPID=4242\nSTATUS=upgraded"},
		{"status stays one assignment", func() error { return n.Status("reload refused:\nbad line") }, "STATUS=reload refused: bad line"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.send(); err != nil {
				t.Fatal(err)
			}
			if got, _ := m.Read(time.Second); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestNotifierAbstractSocket(t *testing.T) {
	name := "@helios-test-" + strings.ReplaceAll(t.Name(), "/", "-") + time.Now().Format("150405.000000000")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	n, err := NewNotifier(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Ready(""); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	c.SetReadDeadline(time.Now().Add(time.Second))
	k, _ := c.Read(buf)
	if got := string(buf[:k]); got != "READY=1" {
		t.Errorf("got %q, want %q", got, "READY=1")
	}
}

func TestNotifierWithoutSocketSendsNothing(t *testing.T) {
	for _, n := range []*Notifier{nil, {}} {
		if n.Enabled() {
			t.Errorf("got enabled, want disabled")
		}
		if err := n.Ready(""); err != nil {
			t.Errorf("got %v, want nil", err)
		}
	}
	if _, err := NewNotifier("vsock:2:1234"); err == nil {
		t.Errorf("vsock socket: got no error, want one")
	}
}

func TestNotifierReportsAMissingManager(t *testing.T) {
	n, err := NewNotifier(filepath.Join(t.TempDir(), "gone"))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Ready(""); err == nil {
		t.Errorf("got nil, want an error for a socket nobody listens on")
	}
}

func TestWatchdogInterval(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    time.Duration
		wantOn  bool
		wantErr bool
	}{
		{"unset", nil, 0, false, false},
		{"half of WATCHDOG_USEC", map[string]string{"WATCHDOG_USEC": "20000000"}, 10 * time.Second, true, false},
		{"for this pid", map[string]string{"WATCHDOG_USEC": "2000000", "WATCHDOG_PID": "77"}, time.Second, true, false},
		{"for another pid", map[string]string{"WATCHDOG_USEC": "2000000", "WATCHDOG_PID": "78"}, 0, false, false},
		{"zero", map[string]string{"WATCHDOG_USEC": "0"}, 0, false, false},
		{"garbage", map[string]string{"WATCHDOG_USEC": "20s"}, 0, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, on, err := WatchdogInterval(func(k string) string { return tt.env[k] }, 77)
			if got != tt.want || on != tt.wantOn || (err != nil) != tt.wantErr {
				t.Errorf("got %v, %v, %v; want %v, %v, error %v", got, on, err, tt.want, tt.wantOn, tt.wantErr)
			}
		})
	}
}

func TestWatchdogPingsOnlyWhileHealthy(t *testing.T) {
	m := systemdtest.NewManager(t)
	n, _ := NewNotifier(m.Path)
	answers := []bool{true, false, false, true}
	ctx, cancel := context.WithCancel(t.Context())
	skipped := 0
	w := &Watchdog{
		Notifier: n,
		Interval: time.Millisecond,
		Healthy: func() bool {
			if len(answers) == 0 {
				cancel() // the last round: unhealthy, and the watchdog stops
				return false
			}
			h := answers[0]
			answers = answers[1:]
			return h
		},
		OnSkip: func() { skipped++ },
	}
	w.Run(ctx)
	for i := 0; i < 2; i++ {
		if got, _ := m.Read(time.Second); got != "WATCHDOG=1" {
			t.Errorf("ping %d: got %q, want WATCHDOG=1", i, got)
		}
	}
	if skipped != 3 {
		t.Errorf("skipped pings: got %v, want %v", skipped, 3)
	}
	if msg, ok := m.Read(50 * time.Millisecond); ok {
		t.Errorf("got a third message %q, want only two pings", msg)
	}
}
