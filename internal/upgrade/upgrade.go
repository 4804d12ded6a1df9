// Package upgrade replaces a running process with a new copy of its
// binary without closing a listening socket (nginx's binary upgrade on
// SIGUSR2): the old process starts the new one with its sockets as
// inherited descriptors; the new one serves on them and says it is
// ready; then the old one drains and exits. When the new one exits
// first, or is not ready in time, it is killed and the old one keeps
// serving as if nothing had happened.
//
// The protocol is cloudflare/tableflip's — a readiness pipe, a pipe the
// new process watches to learn that the old one has exited, and the
// sockets named in an environment variable — written here rather than
// imported because tableflip's registry of sockets cannot forget one:
// Helios retires listeners on reload, and a retired SO_REUSEPORT socket
// kept open for a later upgrade would stay in the kernel's reuseport
// group, taking its share of new connections with nobody accepting them.
// (tableflip also allows one Upgrader per process, which rules out
// in-process tests.)
package upgrade

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// EnvFDs is the environment variable that names the descriptors a new
// process inherits, from descriptor 5 on, comma-separated.
const EnvFDs = "HELIOS_UPGRADE_FDS"

// Descriptors 3 and 4 of a new process: the pipe it writes one byte to
// when ready, and the pipe that reaches end of file when the old process
// has exited. Sockets follow.
const (
	readyFD   = 3
	parentFD  = 4
	firstFD   = 5
	readyByte = 'R'
)

// DefaultTimeout is how long an Upgrade waits for the new process to be
// ready.
const DefaultTimeout = time.Minute

// Socket is a descriptor to hand over and the key the new process finds
// it by (the same key may name several).
type Socket struct {
	Key  string
	File *os.File
}

// Env is the part of the operating system an Upgrader uses; tests
// replace it.
type Env struct {
	// Getenv and Environ read the environment (os.Getenv, os.Environ).
	Getenv  func(string) string
	Environ func() []string
	// File returns the inherited descriptor fd (os.NewFile).
	File func(fd uintptr, name string) *os.File
	// Args is the command line to start again (os.Args); Args[0] is
	// looked up in PATH when it has no slash, as a shell would.
	Args []string
	// Start starts a process with extra descriptors from 3 on.
	Start func(path string, args, env []string, extra []*os.File) (Process, error)
}

// Process is a started process.
type Process interface {
	Pid() int
	Kill() error
	Wait() error
}

// OSEnv is the process's own environment.
func OSEnv() Env {
	return Env{
		Getenv:  os.Getenv,
		Environ: os.Environ,
		File:    os.NewFile,
		Args:    os.Args,
		Start:   startProcess,
	}
}

// Upgrader hands sockets to a new process, and takes them from the old
// one when this process is the new one. It is safe for concurrent use.
type Upgrader struct {
	env     Env
	Timeout time.Duration // Upgrade's wait for readiness; 0: DefaultTimeout

	mu         sync.Mutex
	inherited  map[string][]*os.File
	ready      *os.File      // to the old process; nil once told, or without one
	parentGone chan struct{} // closed when the old process has exited
	upgrading  bool
	upgraded   bool
	keep       *os.File // the pipe the new process watches; open until exit
}

// New returns an Upgrader. When the environment says this process was
// started by an upgrade, it holds the sockets handed over (Take) and the
// old process waits for Ready.
func New(env Env) (*Upgrader, error) {
	u := &Upgrader{env: env, inherited: make(map[string][]*os.File), parentGone: make(chan struct{})}
	names := env.Getenv(EnvFDs)
	if names == "" {
		close(u.parentGone)
		return u, nil
	}
	u.ready = env.File(readyFD, "upgrade-ready")
	gone := env.File(parentFD, "upgrade-parent")
	if u.ready == nil || gone == nil {
		return nil, fmt.Errorf("%s is set but descriptors %d and %d are not open", EnvFDs, readyFD, parentFD)
	}
	syscall.CloseOnExec(readyFD)
	syscall.CloseOnExec(parentFD)
	go func() {
		io.Copy(io.Discard, gone) // end of file: the old process is gone
		gone.Close()
		close(u.parentGone)
	}()
	for i, key := range strings.Split(names, ",") {
		fd := firstFD + i
		f := env.File(uintptr(fd), key)
		if f == nil {
			return nil, fmt.Errorf("%s names %q at descriptor %d, which is not open", EnvFDs, key, fd)
		}
		syscall.CloseOnExec(fd)
		u.inherited[key] = append(u.inherited[key], f)
	}
	return u, nil
}

// HasParent reports whether this process was started by an upgrade and
// has not told the old process it is ready yet.
func (u *Upgrader) HasParent() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.ready != nil
}

// Take returns the sockets handed over under key and forgets them; the
// caller owns them. It returns nil when none were.
func (u *Upgrader) Take(key string) []*os.File {
	u.mu.Lock()
	defer u.mu.Unlock()
	fs := u.inherited[key]
	delete(u.inherited, key)
	return fs
}

// Ready tells the old process that this one serves: it will drain and
// exit. Sockets handed over but not taken are closed. Without an old
// process it only closes those.
func (u *Upgrader) Ready() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	for key, fs := range u.inherited {
		for _, f := range fs {
			f.Close()
		}
		delete(u.inherited, key)
	}
	if u.ready == nil {
		return nil
	}
	_, err := u.ready.Write([]byte{readyByte})
	u.ready.Close()
	u.ready = nil
	if err != nil {
		return fmt.Errorf("telling the old process: %w", err)
	}
	return nil
}

// ParentGone returns a channel closed once the old process has exited
// (at once when there was none).
func (u *Upgrader) ParentGone() <-chan struct{} { return u.parentGone }

// ErrInProgress is returned by Upgrade while another upgrade runs.
var ErrInProgress = errors.New("an upgrade is already in progress")

// Upgrade starts the program again with sockets handed over and waits
// until the new process is Ready, then returns its pid: this process
// should drain and exit. It fails, and the new process is killed, when
// the new process exits first, is not ready within Timeout, or ctx ends;
// this process then goes on serving. It is refused while the process
// this one replaced is still draining, and after a successful upgrade.
// The caller may close the sockets' files when it returns.
func (u *Upgrader) Upgrade(ctx context.Context, sockets []Socket) (int, error) {
	u.mu.Lock()
	switch {
	case u.upgrading:
		u.mu.Unlock()
		return 0, ErrInProgress
	case u.upgraded:
		u.mu.Unlock()
		return 0, errors.New("already upgraded; this process is draining")
	case u.ready != nil:
		u.mu.Unlock()
		return 0, errors.New("this process is not ready yet")
	}
	select {
	case <-u.parentGone:
	default:
		u.mu.Unlock()
		return 0, errors.New("the process this one replaced is still draining; try again when it has exited")
	}
	u.upgrading = true
	u.mu.Unlock()
	defer func() {
		u.mu.Lock()
		u.upgrading = false
		u.mu.Unlock()
	}()

	keys := make([]string, len(sockets))
	for i, s := range sockets {
		if s.Key == "" || strings.Contains(s.Key, ",") {
			return 0, fmt.Errorf("socket key %q: must be non-empty, without a comma", s.Key)
		}
		keys[i] = s.Key
	}
	path, err := exec.LookPath(u.env.Args[0])
	if err != nil {
		return 0, fmt.Errorf("finding the program to start: %w", err)
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer readyR.Close()
	goneR, goneW, err := os.Pipe()
	if err != nil {
		readyW.Close()
		return 0, err
	}
	extra := []*os.File{readyW, goneR}
	for _, s := range sockets {
		extra = append(extra, s.File)
	}
	env := childEnv(u.env.Environ(), EnvFDs+"="+strings.Join(keys, ","))
	p, err := u.env.Start(path, u.env.Args, env, extra)
	readyW.Close()
	goneR.Close()
	if err != nil {
		goneW.Close()
		return 0, fmt.Errorf("starting %s: %w", path, err)
	}

	readyC := make(chan bool, 1)
	go func() {
		var b [1]byte
		n, _ := readyR.Read(b[:])
		readyC <- n == 1 && b[0] == readyByte
	}()
	exited := make(chan error, 1)
	go func() { exited <- p.Wait() }()
	timeout := u.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()

	fail := func(why error) (int, error) {
		p.Kill()
		<-exited
		goneW.Close()
		return 0, fmt.Errorf("new process %d: %w", p.Pid(), why)
	}
	for ready := false; !ready; {
		select {
		case ok := <-readyC:
			if ok {
				ready = true
			}
			// Otherwise the pipe closed without a word: the process is
			// exiting, or will be killed when the timer fires.
		case err := <-exited:
			goneW.Close()
			return 0, fmt.Errorf("new process %d exited before it was ready (%s); see its log", p.Pid(), exitStatus(err))
		case <-timer.C:
			return fail(fmt.Errorf("not ready within %v; killed", timeout))
		case <-ctx.Done():
			return fail(fmt.Errorf("upgrade cancelled: %w", ctx.Err()))
		}
	}
	u.mu.Lock()
	u.upgraded = true
	// goneW stays open until this process exits: its end of file tells
	// the new process that the old one is gone.
	u.keep = goneW
	u.mu.Unlock()
	return p.Pid(), nil
}

func exitStatus(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// childEnv is env without what belongs to this process only — an
// earlier upgrade's descriptor names, systemd's socket activation
// variables (their descriptors are passed as upgrade sockets), and
// WATCHDOG_PID, which names this process and would keep the new one from
// pinging the watchdog once it is the main process — plus extra.
func childEnv(env []string, extra string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case EnvFDs, "LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES", "WATCHDOG_PID":
			continue
		}
		out = append(out, kv)
	}
	return append(out, extra)
}

// osProcess is a process started with os/exec.
type osProcess struct{ cmd *exec.Cmd }

func (p osProcess) Pid() int    { return p.cmd.Process.Pid }
func (p osProcess) Kill() error { return p.cmd.Process.Kill() }
func (p osProcess) Wait() error { return p.cmd.Wait() }

// startProcess starts path with the standard streams of this process
// (systemd's journal, or a container's log) and extra from descriptor 3.
func startProcess(path string, args, env []string, extra []*os.File) (Process, error) {
	cmd := exec.Command(path)
	cmd.Args = args
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.ExtraFiles = extra
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return osProcess{cmd}, nil
}
