package upgrade

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// FailedSuffix is appended to a PID file's name for the file a process
// writes when an upgrade it started failed: the reason, for Trigger.
const FailedSuffix = ".upgrade-failed"

// Trigger asks the Helios process named in pidFile to upgrade (SIGUSR2)
// and waits until the PID file names a new process: the new binary is
// ready and the old process is draining. It fails with the reason when
// the old process reports the upgrade failed (pidFile+FailedSuffix), when
// the old process exits with the PID file unchanged, or when ctx ends.
// readPID reads the PID file.
func Trigger(ctx context.Context, pidFile string, readPID func(string) (int, error)) (oldPID, newPID int, err error) {
	oldPID, err = readPID(pidFile)
	if err != nil {
		return 0, 0, err
	}
	failed := pidFile + FailedSuffix
	if err := os.Remove(failed); err != nil && !os.IsNotExist(err) {
		return oldPID, 0, err
	}
	if err := syscall.Kill(oldPID, syscall.SIGUSR2); err != nil {
		return oldPID, 0, fmt.Errorf("signalling pid %d: %w", oldPID, err)
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if pid, err := readPID(pidFile); err == nil && pid != oldPID && alive(pid) {
			return oldPID, pid, nil
		}
		if why, err := os.ReadFile(failed); err == nil {
			return oldPID, 0, fmt.Errorf("%s; pid %d keeps serving", strings.TrimSpace(string(why)), oldPID)
		}
		if !alive(oldPID) {
			return oldPID, 0, fmt.Errorf("pid %d exited and %s names no new process: see its log", oldPID, pidFile)
		}
		select {
		case <-ctx.Done():
			return oldPID, 0, fmt.Errorf("no new process in %s yet (%w); pid %d keeps serving unless it reports otherwise: see its log", pidFile, ctx.Err(), oldPID)
		case <-tick.C:
		}
	}
}

// alive reports whether pid names a running process (not a zombie).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, state, ok := statFields(string(b))
	return ok && state != "Z" && state != "X"
}

// statFields returns the parent pid and state from /proc/PID/stat:
// "pid (comm) state ppid ...", where comm may hold spaces and brackets.
func statFields(stat string) (ppid int, state string, ok bool) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, "", false
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 2 {
		return 0, "", false
	}
	ppid, err := strconv.Atoi(f[1])
	return ppid, f[0], err == nil
}
