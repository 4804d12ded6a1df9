package systemd

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// listenFdsStart is the first descriptor systemd passes (SD_LISTEN_FDS_START).
const listenFdsStart = 3

// Activated is the set of sockets systemd passed to this process (socket
// activation, sd_listen_fds_with_names(3)), by name: the
// FileDescriptorName= of the .socket unit, or "unknown" when it set none.
// A name may have several sockets.
type Activated map[string][]*os.File

// Env is the environment as the activation code reads and clears it.
type Env struct {
	Getenv   func(string) string
	Unsetenv func(string) error
	// Pid is this process's id; LISTEN_PID must name it.
	Pid int
}

// OSEnv returns the process's own environment.
func OSEnv() Env { return Env{Getenv: os.Getenv, Unsetenv: os.Unsetenv, Pid: os.Getpid()} }

// ListenFDs returns the sockets passed by systemd, and clears LISTEN_PID,
// LISTEN_FDS and LISTEN_FDNAMES so that no process started later (a
// binary upgrade) takes them for its own. Without LISTEN_FDS, or with
// LISTEN_PID unset or naming another process, it returns none. The descriptors are
// marked close-on-exec.
func ListenFDs(env Env) (Activated, error) {
	pid, fds, names := env.Getenv("LISTEN_PID"), env.Getenv("LISTEN_FDS"), env.Getenv("LISTEN_FDNAMES")
	if fds == "" {
		return nil, nil
	}
	for _, k := range []string{"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"} {
		env.Unsetenv(k)
	}
	// As sd_listen_fds(3): without LISTEN_PID, or with another process's,
	// the sockets are not ours.
	p, err := strconv.Atoi(pid)
	if err != nil || p != env.Pid {
		return nil, nil
	}
	n, err := strconv.Atoi(fds)
	if err != nil || n < 0 {
		return nil, fmt.Errorf("LISTEN_FDS=%q: not a number of descriptors", fds)
	}
	var nameList []string
	if names != "" {
		nameList = strings.Split(names, ":")
		if len(nameList) != n {
			return nil, fmt.Errorf("LISTEN_FDNAMES has %d names for LISTEN_FDS=%d descriptors", len(nameList), n)
		}
	}
	out := make(Activated)
	for i := 0; i < n; i++ {
		fd := listenFdsStart + i
		syscall.CloseOnExec(fd)
		name := "unknown"
		if nameList != nil && nameList[i] != "" {
			name = nameList[i]
		}
		out[name] = append(out[name], os.NewFile(uintptr(fd), "systemd:"+name))
	}
	return out, nil
}

// Take returns the sockets named name and forgets them.
func (a Activated) Take(name string) []*os.File {
	fs := a[name]
	delete(a, name)
	return fs
}

// Names returns the names of the sockets not taken yet.
func (a Activated) Names() []string {
	var out []string
	for name := range a {
		out = append(out, name)
	}
	return out
}

// Close closes the sockets not taken.
func (a Activated) Close() {
	for name, fs := range a {
		for _, f := range fs {
			f.Close()
		}
		delete(a, name)
	}
}
