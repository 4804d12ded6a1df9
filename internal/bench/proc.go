package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is a child process the benchmark started, in a process group of its
// own so that it and its children (nginx workers) are stopped together,
// and so that a Ctrl-C on the terminal reaches only the benchmark, which
// then stops them in order.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error // set before done is closed
}

// procs tracks the processes still running, so that every exit path can
// stop them.
type procs struct {
	mu  sync.Mutex
	set map[*proc]bool
}

// start runs argv (pinned to cpus with taskset when cpus is not "") with
// env added to the environment, its output written to logPath.
func (ps *procs) start(name string, argv, env []string, cpus, logPath string) (*proc, error) {
	if cpus != "" {
		argv = append([]string{"taskset", "-c", cpus}, argv...)
	}
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	defer lf.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	ps.mu.Lock()
	if ps.set == nil {
		ps.set = map[*proc]bool{}
	}
	ps.set[p] = true
	ps.mu.Unlock()
	go func() {
		p.err = cmd.Wait()
		ps.mu.Lock()
		delete(ps.set, p)
		ps.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// pid returns the process id (that of the proxy itself: taskset execs it).
func (p *proc) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the process group.
func (p *proc) signal(sig syscall.Signal) {
	if !p.exited() {
		syscall.Kill(-p.pid(), sig)
	}
}

// stop sends SIGTERM to the process group, waits up to grace, then sends
// SIGKILL and waits for the exit.
func (p *proc) stop(grace time.Duration) {
	p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.signal(syscall.SIGKILL)
		<-p.done
	}
}

// kill sends SIGKILL to the process group and waits.
func (p *proc) kill() {
	p.signal(syscall.SIGKILL)
	<-p.done
}

// logTail returns the last lines of the process's output, for errors.
func (p *proc) logTail() string { return tail(p.log, 15) }

// stopAll stops every process still running.
func (ps *procs) stopAll() {
	ps.mu.Lock()
	list := make([]*proc, 0, len(ps.set))
	for p := range ps.set {
		list = append(list, p)
	}
	ps.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range list {
		wg.Go(func() { p.stop(3 * time.Second) })
	}
	wg.Wait()
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// procStat is what /proc/PID/stat says of a process.
type procStat struct {
	ppid  int
	ticks uint64 // utime + stime, in clock ticks
}

// clockTicks is USER_HZ, the unit of /proc CPU times: 100 on every Linux
// architecture Go supports.
const clockTicks = 100

// readStat reads /proc/PID/stat under root (normally "/proc").
func readStat(root string, pid int) (procStat, error) {
	b, err := os.ReadFile(filepath.Join(root, strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, err
	}
	return parseStat(b)
}

// parseStat parses the text of /proc/PID/stat. The command name may hold
// spaces and parentheses, so fields are counted from the last ')'.
func parseStat(b []byte) (procStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, errors.New("stat: no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); ppid is field 4, utime 14, stime 15.
	if len(f) < 13 {
		return procStat{}, errors.New("stat: short")
	}
	ppid, err1 := strconv.Atoi(f[1])
	ut, err2 := strconv.ParseUint(f[11], 10, 64)
	st, err3 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return procStat{}, fmt.Errorf("stat: %w", err)
	}
	return procStat{ppid: ppid, ticks: ut + st}, nil
}

// procTree returns root and every descendant of it, found by scanning
// procRoot for parent ids.
func procTree(procRoot string, root int) []int {
	ents, err := os.ReadDir(procRoot)
	if err != nil {
		return []int{root}
	}
	children := map[int][]int{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readStat(procRoot, pid); err == nil {
			children[st.ppid] = append(children[st.ppid], pid)
		}
	}
	tree := []int{root}
	for i := 0; i < len(tree); i++ {
		tree = append(tree, children[tree[i]]...)
	}
	return tree
}

// cpuTicks returns the CPU time (user + system) of the processes, in clock
// ticks. Processes that are gone count 0.
func cpuTicks(procRoot string, pids []int) uint64 {
	var t uint64
	for _, pid := range pids {
		if st, err := readStat(procRoot, pid); err == nil {
			t += st.ticks
		}
	}
	return t
}

// rssKiB returns the sum of VmRSS over the processes, in KiB. Shared pages
// (nginx's workers share the binary and the master's memory) count once
// per process, as top and ps count them.
func rssKiB(procRoot string, pids []int) uint64 {
	var sum uint64
	for _, pid := range pids {
		b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "status"))
		if err != nil {
			continue
		}
		sum += parseVmRSS(b)
	}
	return sum
}

// parseVmRSS returns the VmRSS line of /proc/PID/status in KiB, 0 if absent.
func parseVmRSS(b []byte) uint64 {
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
			f := strings.Fields(string(v))
			if len(f) >= 1 {
				n, _ := strconv.ParseUint(f[0], 10, 64)
				return n
			}
		}
	}
	return 0
}
