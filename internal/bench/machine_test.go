package bench

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestCPUList(t *testing.T) {
	tests := []struct {
		in   string
		want []int
		out  string
	}{
		{"0-1", []int{0, 1}, "0-1"},
		{"0", []int{0}, "0"},
		{"0-3,8,10-11", []int{0, 1, 2, 3, 8, 10, 11}, "0-3,8,10-11"},
		{"3,1,2", []int{1, 2, 3}, "1-3"},
	}
	for _, tt := range tests {
		got, err := ParseCPUList(tt.in)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("ParseCPUList(%q): got %v, %v, want %v", tt.in, got, err, tt.want)
		}
		if s := FormatCPUList(got); s != tt.out {
			t.Errorf("FormatCPUList(%v): got %q, want %q", got, s, tt.out)
		}
	}
	for _, bad := range []string{"a", "3-1", "1-x"} {
		if _, err := ParseCPUList(bad); err == nil {
			t.Errorf("ParseCPUList(%q): got no error", bad)
		}
	}
}

func TestPlanCPUs(t *testing.T) {
	tests := []struct {
		name          string
		allowed       []int
		n             int
		proxy, load   string
		shared        bool
		threads, cpus int
		noteHas       string
	}{
		{"two CPUs: shared", []int{0, 1}, 2, "0-1", "0-1", true, 2, 2, "share"},
		{"eight CPUs: apart", []int{0, 1, 2, 3, 4, 5, 6, 7}, 2, "0-1", "2-7", false, 6, 2, "apart"},
		{"more than there are", []int{0, 1}, 4, "0-1", "0-1", true, 2, 2, "--cpus 4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := planCPUs(tt.allowed, tt.n)
			if p.ProxyCPUs != tt.proxy || p.LoadCPUs != tt.load || p.Shared != tt.shared || p.LoadThreads != tt.threads || p.CPUs != tt.cpus {
				t.Errorf("got %+v", p)
			}
			if !strings.Contains(p.Note, tt.noteHas) {
				t.Errorf("note %q lacks %q", p.Note, tt.noteHas)
			}
		})
	}
}

func TestParseStat(t *testing.T) {
	// A command name with spaces and parentheses, as a process may choose.
	line := "4242 (nginx: worker (x) 1) S 4241 4241 4241 0 -1 4194624 1303 0 0 0 157 43 0 0 20 0 1 0 1234 123456 789 18446744073709551615\n"
	st, err := parseStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if st.ppid != 4241 || st.ticks != 200 {
		t.Errorf("got ppid %d ticks %d, want 4241 200", st.ppid, st.ticks)
	}
	if _, err := parseStat([]byte("12 no-parens S 1")); err == nil {
		t.Errorf("parseStat without a command name: got no error")
	}
}

// fakeProc writes a /proc-like tree: pid -> (ppid, ticks, rss KiB).
func fakeProc(t *testing.T, procs map[int][3]int) string {
	root := t.TempDir()
	for pid, p := range procs {
		dir := filepath.Join(root, strconv.Itoa(pid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		stat := strconv.Itoa(pid) + " (x) S " + strconv.Itoa(p[0]) + " 0 0 0 0 0 0 0 0 0 " + strconv.Itoa(p[1]) + " 0 0 0\n"
		status := "Name:\tx\nVmPeak:\t999 kB\nVmRSS:\t" + strconv.Itoa(p[2]) + " kB\nThreads:\t1\n"
		os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644)
		os.WriteFile(filepath.Join(dir, "status"), []byte(status), 0o644)
	}
	os.MkdirAll(filepath.Join(root, "self"), 0o755) // not a pid
	return root
}

// nginx is a master and workers: CPU and RSS are summed over all of them,
// and nothing else.
func TestProcTreeSums(t *testing.T) {
	root := fakeProc(t, map[int][3]int{
		1:   {0, 5, 100},
		100: {1, 10, 3000},   // nginx master
		101: {100, 40, 5000}, // worker
		102: {100, 50, 6000}, // worker
		200: {1, 999, 99999}, // unrelated
	})
	tree := procTree(root, 100)
	slices.Sort(tree)
	if !slices.Equal(tree, []int{100, 101, 102}) {
		t.Fatalf("tree: got %v, want [100 101 102]", tree)
	}
	if got := cpuTicks(root, tree); got != 100 {
		t.Errorf("ticks: got %d, want 100", got)
	}
	if got := rssKiB(root, tree); got != 14000 {
		t.Errorf("rss: got %d, want 14000", got)
	}
	if got := cpuTicks(root, []int{100, 7777}); got != 10 {
		t.Errorf("a vanished process counts 0: got %d, want 10", got)
	}
}

func TestMissingToolsError(t *testing.T) {
	_, err := lookTools([]string{"sh", "no-such-tool-h2load", "h2load-really-missing"})
	if err == nil {
		t.Fatal("got no error for missing tools")
	}
	e := &MissingToolsError{Tools: []string{"wrk", "h2load"}}
	msg := e.Error()
	for _, want := range []string{"wrk", "h2load (Debian package nghttp2-client)", "make bench-deps", "apt-get install -y wrk nghttp2-client"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
}
