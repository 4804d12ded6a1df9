package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/helios-lb/helios/internal/listener"
)

// Machine describes the host a report was measured on.
type Machine struct {
	Hostname string `json:"hostname"`
	CPUModel string `json:"cpu_model"`
	// CPUs is the number of CPUs this process may run on; OnlineCPUs the
	// number the kernel has.
	CPUs       int    `json:"cpus"`
	OnlineCPUs int    `json:"online_cpus"`
	Kernel     string `json:"kernel"`
	MemoryMiB  int    `json:"memory_mib"`
	// LoadAvgStart and LoadAvgEnd are /proc/loadavg's first three fields
	// before and after the run: other work on the machine shows there.
	LoadAvgStart string `json:"loadavg_start"`
	LoadAvgEnd   string `json:"loadavg_end"`
	// NoFile is the descriptor limit the proxies and tools ran with.
	NoFile uint64 `json:"nofile"`
	// Somaxconn and PortRange are net.core.somaxconn and
	// net.ipv4.ip_local_port_range.
	Somaxconn string `json:"somaxconn"`
	PortRange string `json:"port_range"`
}

// readMachine describes this host.
func readMachine() Machine {
	m := Machine{OnlineCPUs: runtime.NumCPU()}
	m.Hostname, _ = os.Hostname()
	m.CPUModel = cpuModel()
	m.CPUs = len(allowedCPUs())
	m.Kernel = readTrim("/proc/sys/kernel/osrelease")
	m.MemoryMiB = memTotalMiB()
	m.LoadAvgStart = loadAvg()
	m.Somaxconn = readTrim("/proc/sys/net/core/somaxconn")
	m.PortRange = strings.Join(strings.Fields(readTrim("/proc/sys/net/ipv4/ip_local_port_range")), "-")
	return m
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

func memTotalMiB() int {
	b, _ := os.ReadFile("/proc/meminfo")
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				kb, _ := strconv.Atoi(f[0])
				return kb / 1024
			}
		}
	}
	return 0
}

func loadAvg() string {
	f := strings.Fields(readTrim("/proc/loadavg"))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// allowedCPUs returns the CPUs this process may run on, from
// Cpus_allowed_list in /proc/self/status, or 0..NumCPU-1.
func allowedCPUs() []int {
	b, _ := os.ReadFile("/proc/self/status")
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("Cpus_allowed_list:")); ok {
			if cpus, err := ParseCPUList(strings.TrimSpace(string(v))); err == nil && len(cpus) > 0 {
				return cpus
			}
		}
	}
	cpus := make([]int, runtime.NumCPU())
	for i := range cpus {
		cpus[i] = i
	}
	return cpus
}

// ParseCPUList parses a kernel CPU list such as "0-3,8,10-11".
func ParseCPUList(s string) ([]int, error) {
	var cpus []int
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("cpu list %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("cpu list %q: bad range %q", s, part)
			}
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	slices.Sort(cpus)
	return slices.Compact(cpus), nil
}

// FormatCPUList writes sorted CPUs in the kernel's list syntax.
func FormatCPUList(cpus []int) string {
	var parts []string
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(cpus[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", cpus[i], cpus[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// Profile is how the CPUs are shared between the proxy under test and
// everything else.
type Profile struct {
	// CPUs is N: the proxy's CPU count, GOMAXPROCS, nginx
	// worker_processes, haproxy nbthread.
	CPUs int `json:"cpus"`
	// ProxyCPUs is the taskset list the proxy is pinned to.
	ProxyCPUs string `json:"proxy_cpus"`
	// LoadCPUs is the list the load generator and the backends run on.
	LoadCPUs string `json:"load_cpus"`
	// Shared is true when the machine has no CPU left over for the load
	// generator and backends, so they share the proxy's.
	Shared bool `json:"shared"`
	// LoadThreads is the load generator's thread count (wrk -t).
	LoadThreads int `json:"load_threads"`
	// Note explains the profile in a sentence, for the report.
	Note string `json:"note"`
}

// planCPUs pins the proxy to the first n allowed CPUs and gives the rest to
// the load generator and backends; with nothing left, they share.
func planCPUs(allowed []int, n int) Profile {
	requested := n
	n = min(max(n, 1), len(allowed))
	p := Profile{CPUs: n, ProxyCPUs: FormatCPUList(allowed[:n])}
	rest := allowed[n:]
	if len(rest) == 0 {
		p.Shared = true
		p.LoadCPUs = FormatCPUList(allowed)
		p.LoadThreads = min(len(allowed), 8)
		p.Note = fmt.Sprintf("This machine has %d CPU(s), all given to the proxy, so the load generator (%d threads) and the three backends share them with it: absolute numbers are lower than on a machine with spare CPUs, and every proxy pays the same tax.",
			len(allowed), p.LoadThreads)
	} else {
		p.LoadCPUs = FormatCPUList(rest)
		p.LoadThreads = min(len(rest), 8)
		p.Note = fmt.Sprintf("The load generator (%d threads) and the three backends run on CPUs %s, apart from the proxy.", p.LoadThreads, p.LoadCPUs)
	}
	if requested > n {
		p.Note += fmt.Sprintf(" --cpus %d was asked for, but only %d CPU(s) are available.", requested, n)
	}
	return p
}

// raiseNoFile raises the descriptor limit's soft value to the hard one (and
// as root the hard one to fs.nr_open, at most 1,048,576), so that c10k's
// 10,000 client connections and as many backend connections fit. Children
// inherit it. It returns the limit in effect.
func raiseNoFile() uint64 {
	soft, hard, err := listener.SystemRlimit().Get()
	if err != nil {
		return 0
	}
	if os.Geteuid() == 0 {
		ceiling := uint64(1 << 20)
		if n, err := strconv.ParseUint(readTrim("/proc/sys/fs/nr_open"), 10, 64); err == nil {
			ceiling = min(ceiling, n)
		}
		hard = max(hard, ceiling)
	}
	if err := listener.SystemRlimit().Set(hard, hard); err != nil {
		return soft
	}
	return hard
}

// toolVersion runs argv and returns the first line that looks like a
// version, whatever the exit status (wrk -v exits 1).
func toolVersion(argv ...string) string {
	out, _ := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	for line := range strings.SplitSeq(string(out), "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "Usage") {
			return line
		}
	}
	return ""
}
