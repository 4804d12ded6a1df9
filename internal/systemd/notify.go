// Package systemd speaks the service manager's side protocols: sd_notify
// (readiness, reload and stop notices, status, main PID, watchdog pings)
// and socket activation (LISTEN_FDS). Each is a few lines of datagram or
// environment handling; they are written here rather than taken from
// coreos/go-systemd so that the whole protocol Helios relies on sits in
// one small, tested file each (go-systemd's daemon package has the same
// shape but no way to inject the clock or the environment for tests).
//
// Nothing here needs systemd: with NOTIFY_SOCKET unset a Notifier sends
// nothing, and without LISTEN_FDS there are no activated sockets.
package systemd

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Notifier sends sd_notify(3) messages to the service manager. The zero
// Notifier and a nil *Notifier send nothing. It is safe for concurrent
// use: each message is one datagram on a socket of its own, as
// sd_notify does.
type Notifier struct {
	addr *net.UnixAddr
	// monotonic returns CLOCK_MONOTONIC; nil: the system's.
	monotonic func() time.Duration
}

// NewNotifier returns a Notifier for the socket named by socket, the
// value of NOTIFY_SOCKET: a path, or an abstract socket written with a
// leading "@". An empty socket gives a Notifier that sends nothing.
// Other forms (vsock:) are an error.
func NewNotifier(socket string) (*Notifier, error) {
	if socket == "" {
		return &Notifier{}, nil
	}
	if !strings.HasPrefix(socket, "/") && !strings.HasPrefix(socket, "@") {
		return nil, fmt.Errorf("NOTIFY_SOCKET=%q: only a path or an @abstract socket is supported", socket)
	}
	// Go maps a leading "@" to the abstract namespace.
	return &Notifier{addr: &net.UnixAddr{Name: socket, Net: "unixgram"}}, nil
}

// Enabled reports whether messages go anywhere (NOTIFY_SOCKET was set).
func (n *Notifier) Enabled() bool { return n != nil && n.addr != nil }

// Notify sends one message: newline-separated VAR=value assignments, as
// sd_notify(3) describes. It does nothing when the Notifier is not
// enabled.
func (n *Notifier) Notify(state string) error {
	if !n.Enabled() {
		return nil
	}
	c, err := net.DialUnix("unixgram", nil, n.addr)
	if err != nil {
		return fmt.Errorf("sd_notify: %w", err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(state)); err != nil {
		return fmt.Errorf("sd_notify: %w", err)
	}
	return nil
}

// Ready says the service is up: every listener bound and ready to serve.
// status, when not empty, is shown by systemctl status.
func (n *Notifier) Ready(status string) error {
	return n.Notify(withStatus("READY=1", status))
}

// Reloading says a reload has begun. MONOTONIC_USEC tells systemd (253
// and later, Type=notify-reload) which reload this is; older versions
// ignore it. Send Ready when the reload is done, whether it worked or not.
func (n *Notifier) Reloading() error {
	return n.Notify("RELOADING=1\nMONOTONIC_USEC=" + strconv.FormatInt(n.now().Microseconds(), 10))
}

// Stopping says the service is draining and will exit.
func (n *Notifier) Stopping() error { return n.Notify("STOPPING=1") }

// Watchdog pings the watchdog (WatchdogSec=).
func (n *Notifier) Watchdog() error { return n.Notify("WATCHDOG=1") }

// MainPID tells the service manager that pid is now the service's main
// process (after a binary upgrade). systemd accepts it from the main
// process, or from any process of the service with NotifyAccess=all.
func (n *Notifier) MainPID(pid int, status string) error {
	return n.Notify(withStatus("MAINPID="+strconv.Itoa(pid), status))
}

// Status sets the one-line status systemctl status shows.
func (n *Notifier) Status(status string) error { return n.Notify("STATUS=" + oneLine(status)) }

func (n *Notifier) now() time.Duration {
	if n.monotonic != nil {
		return n.monotonic()
	}
	return monotonic()
}

// monotonic reads CLOCK_MONOTONIC, the clock systemd's MONOTONIC_USEC is
// compared with (Go's time package hides its monotonic reading).
func monotonic() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

func withStatus(msg, status string) string {
	if status == "" {
		return msg
	}
	return msg + "\nSTATUS=" + oneLine(status)
}

// oneLine keeps a status from breaking the message into more
// assignments.
func oneLine(s string) string { return strings.NewReplacer("\n", " ", "\r", " ").Replace(s) }

// WatchdogInterval returns how often the watchdog must be pinged — half
// of WATCHDOG_USEC, as sd_watchdog_enabled(3) advises — and false when
// no watchdog is set for this process: WATCHDOG_USEC unset or zero, or
// WATCHDOG_PID naming another process. getenv reads the environment
// (os.Getenv); pid is this process's id.
func WatchdogInterval(getenv func(string) string, pid int) (time.Duration, bool, error) {
	v := getenv("WATCHDOG_USEC")
	if v == "" {
		return 0, false, nil
	}
	usec, err := strconv.ParseUint(v, 10, 63)
	if err != nil {
		return 0, false, fmt.Errorf("WATCHDOG_USEC=%q: not a number of microseconds", v)
	}
	if usec == 0 {
		return 0, false, nil
	}
	if p := getenv("WATCHDOG_PID"); p != "" {
		wp, err := strconv.Atoi(p)
		if err != nil {
			return 0, false, fmt.Errorf("WATCHDOG_PID=%q: not a process id", p)
		}
		if wp != pid {
			return 0, false, nil
		}
	}
	return time.Duration(usec) * time.Microsecond / 2, true, nil
}
