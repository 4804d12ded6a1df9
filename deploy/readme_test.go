package deploy

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The README's command blocks are run as a reader would type them: each
// line as written, in one shell per session, from a clean copy of the
// repository. What a reader does besides typing (waiting for a server to
// come up, pressing Ctrl-C, trying a probe again a moment later, cleaning
// up what a recipe left running) is the harness's part, written around
// the lines, never into them.

// readmeSections are the sections whose sh blocks run. The Quick start is
// one session (make run stays up while the blocks after it are tried);
// each block of Run it is a session of its own.
var readmeSections = []string{"Quick start", "Run it"}

// readmeSkipLines are lines that do not run, and why.
var readmeSkipLines = map[string]string{
	"make test": "it runs the test suite this test is part of",
}

// readmeExpect is what a probe's output must contain, by command (the line
// without its comment). Every probe in the blocks that run needs an entry:
// a new one fails the test until it says what it should print.
var readmeExpect = map[string][]string{
	"curl -i http://127.0.0.1:8080/":                                              {"HTTP/1.1 200", "X-Backend: backend-"},
	"curl -i http://127.0.0.1:8080/ping":                                          {"HTTP/1.1 200", `{"ok":true}`},
	"curl -i http://127.0.0.1:8080/static/":                                       {"HTTP/1.1 200"},
	"curl http://127.0.0.1:8080/echo -d hi":                                       {"POST /echo", "hi"},
	"curl --cacert .cache/demo-tls/helios.pem https://localhost:8443/ping":        {`{"ok":true}`},
	"curl --cacert .cache/demo-tls/helios.pem -i https://localhost:8443/":         {" 200", "ackend: backend-"},
	"curl --cacert .cache/demo-tls/helios.pem --http2 -i https://localhost:8443/": {"HTTP/2 200", "x-backend: backend-"},
	"curl --http2-prior-knowledge -i http://127.0.0.1:8081/":                      {"HTTP/2 200", "x-backend: backend-"},
	"h2load -n 10000 -c 10 -m 10 https://127.0.0.1:8443/ping":                     {"10000 succeeded, 0 failed"},
	"curl -i localhost:8080/":                                                     {"HTTP/1.1 200", "X-Backend: app"},
	"docker exec helios /helios healthcheck && echo ready":                        {"ready\nready"},
	"curl -i localhost:18080/":                                                    {"HTTP/1.1 200", "X-Backend: backend-"},
	"bin/helios upgrade --pid-file /tmp/helios.pid":                               {"upgraded: pid"},
}

// readmeServers are the commands that run in the foreground until Ctrl-C,
// and what their log must show once stopped by one: the start line, one
// drain, no second signal.
var readmeServers = map[string][]string{
	"make run": {"Helios is running", "Helios serving http://127.0.0.1:8080, https://127.0.0.1:8443, http://127.0.0.1:8081 (and h2c)"},
	"bin/helios proxy --from 127.0.0.1:8080 --to 127.0.0.1:9001,127.0.0.1:9002 --health /healthz": {
		"Helios proxying http://127.0.0.1:8080 -> 127.0.0.1:9001,127.0.0.1:9002"},
}

// readmeBlock is one sh block of the README.
type readmeBlock struct {
	section, label string
	lines          []string // continuation lines joined
}

// readmeBlocks returns the sh blocks of readmeSections, in order.
func readmeBlocks(t *testing.T, readme string) []readmeBlock {
	t.Helper()
	var blocks []readmeBlock
	section, label := "", ""
	var cur *readmeBlock
	for _, line := range strings.Split(readme, "\n") {
		switch {
		case cur != nil && strings.HasPrefix(line, "```"):
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			if n := len(cur.lines); n > 0 && strings.HasSuffix(cur.lines[n-1], "\\") {
				cur.lines[n-1] = strings.TrimSuffix(cur.lines[n-1], "\\") + " " + strings.TrimSpace(line)
			} else if strings.TrimSpace(line) != "" {
				cur.lines = append(cur.lines, line)
			}
		case strings.HasPrefix(line, "## "):
			section, label = "", ""
			for _, s := range readmeSections {
				if line == "## "+s {
					section, label = s, s
				}
			}
		case section == "":
		case strings.HasPrefix(line, "### "):
			label = strings.TrimPrefix(line, "### ")
		case strings.HasPrefix(line, "**"):
			if end := strings.Index(line[2:], "**"); end > 0 {
				label = line[2 : 2+end]
			}
		case line == "```sh":
			cur = &readmeBlock{section: section, label: label}
		}
	}
	if len(blocks) < 6 {
		t.Fatalf("found %d sh blocks under %v in README.md, want the Quick start's and Run it's", len(blocks), readmeSections)
	}
	return blocks
}

// command returns line without its comment and with single spaces.
func command(line string) string {
	if i := strings.Index(line, " #"); i >= 0 {
		line = line[:i]
	}
	return strings.Join(strings.Fields(line), " ")
}

// isProbe reports whether a command asks something of a server that may
// still be starting, so that a reader would try it again a moment later.
func isProbe(cmd string) bool {
	return strings.HasPrefix(cmd, "curl ") || strings.HasPrefix(cmd, "h2load ") || strings.Contains(cmd, " healthcheck")
}

// TestReadmeRecipes is issue 18's "done when": the README's Quick start
// and Run it blocks that need neither root nor a cluster run as written,
// from a clean copy of the repository (the tracked files only: no bin/,
// no .cache/), so that a recipe cannot rot unnoticed. The systemd block
// needs root and systemd (scripts/systemd-sandbox.sh runs it in a
// container) and the Kubernetes one a cluster (deploy/kubernetes_test.go
// checks its files); Docker and Compose blocks run where Docker does.
func TestReadmeRecipes(t *testing.T) {
	if testing.Short() {
		t.Skip("the README's recipes take about a minute")
	}
	needTool(t, "make", "make")
	readme, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := readmeBlocks(t, string(readme))
	var sessions [][]readmeBlock
	for _, b := range blocks {
		if b.section == "Quick start" && len(sessions) > 0 && sessions[len(sessions)-1][0].section == b.section {
			sessions[len(sessions)-1] = append(sessions[len(sessions)-1], b)
			continue
		}
		sessions = append(sessions, []readmeBlock{b})
	}
	holdDemoPorts(t)
	root := cleanCopy(t)
	for _, s := range sessions {
		t.Run(s[0].label, func(t *testing.T) { runReadmeSession(t, root, s) })
	}
}

// cleanCopy copies the files git tracks (or would, untracked but not
// ignored) to a new directory: the repository as a fresh clone has it,
// with this worktree's changes.
func cleanCopy(t *testing.T) string {
	t.Helper()
	git := needTool(t, "git", "git")
	out, err := exec.Command(git, "-C", repoRoot(t), "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Skipf("not a git checkout, so there is no clean copy to make: %v", err)
	}
	dst := t.TempDir()
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join(repoRoot(t), name)
		fi, err := os.Lstat(src)
		if err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the worktree, or a symlink
		}
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, name), b, fi.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { killUnder(dst) })
	return dst
}

// killUnder kills every process whose working directory is under dir:
// what a failed or timed-out session left running (the demo's backends
// run in process groups of their own).
func killUnder(dir string) {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if cwd, err := os.Readlink("/proc/" + e.Name() + "/cwd"); err == nil && (cwd == dir || strings.HasPrefix(cwd, dir+"/")) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// readmeLine is one line of a session and what the harness does with it.
type readmeLine struct {
	text, cmd string
	server    bool
}

// runReadmeSession runs the blocks of one session in one shell.
func runReadmeSession(t *testing.T, root string, blocks []readmeBlock) {
	var lines []readmeLine
	for _, b := range blocks {
		for _, l := range b.lines {
			lines = append(lines, readmeLine{text: l, cmd: command(l)})
		}
	}
	for _, l := range lines {
		switch {
		case strings.Contains(l.cmd, "systemctl") || strings.HasPrefix(l.cmd, "install "):
			t.Skip("needs root and systemd as PID 1 (scripts/systemd-sandbox.sh runs this recipe in a container)")
		case strings.HasPrefix(l.cmd, "kubectl "):
			t.Skip("needs a Kubernetes cluster (deploy/kubernetes_test.go checks the manifests)")
		case strings.HasPrefix(l.cmd, "docker"):
			if out, err := exec.Command("docker", "info").CombinedOutput(); err != nil {
				t.Skipf("docker info failed, so there is no Docker engine for this recipe: %v\n%s", err, firstLine(out))
			}
			if strings.HasPrefix(l.cmd, "docker-compose ") {
				needTool(t, "docker-compose", "docker-compose")
			}
		case strings.HasPrefix(l.cmd, "curl "):
			if _, err := exec.LookPath("curl"); err != nil {
				t.Skip("curl not found, and this recipe is mostly curl (Debian package curl)")
			}
		}
	}
	for _, l := range lines {
		if isProbe(l.cmd) && !strings.HasPrefix(l.cmd, "docker-compose") && readmeExpect[l.cmd] == nil {
			t.Errorf("README line %q: the test does not know what it should print; add it to readmeExpect", l.cmd)
		}
	}
	for i := range lines {
		if _, ok := readmeServers[lines[i].cmd]; ok {
			lines[i].server = true
		}
	}
	// What a recipe leaves behind on failure, besides processes.
	t.Cleanup(func() {
		for _, l := range lines {
			if m := regexp.MustCompile(`^docker run .*--name (\S+)`).FindStringSubmatch(l.cmd); m != nil {
				exec.Command("docker", "rm", "-f", m[1]).Run()
			}
			if strings.HasPrefix(l.cmd, "docker-compose ") && strings.HasSuffix(l.cmd, " up -d") {
				c := exec.Command("docker-compose", strings.Fields(strings.TrimSuffix(strings.TrimPrefix(l.cmd, "docker-compose "), " up -d")+" down")...)
				c.Dir = root
				c.Run()
			}
		}
	})
	for _, l := range lines {
		if m := regexp.MustCompile(`^docker run .*--name (\S+)`).FindStringSubmatch(l.cmd); m != nil {
			if out, _ := exec.Command("docker", "ps", "-aq", "--filter", "name=^"+m[1]+"$").Output(); len(strings.TrimSpace(string(out))) > 0 {
				skipOrFail(t, "a Docker container named "+m[1]+" exists already, and the recipe names its own so")
			}
		}
		if m := regexp.MustCompile(`--pid-file (\S+)`).FindStringSubmatch(l.cmd); m != nil && !strings.HasPrefix(m[1], root) {
			os.Remove(m[1]) // a stale one from an earlier run; the ports lock is ours
		}
	}

	script, logs := readmeScript(lines)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir = root
	// A new user's shell: no HELIOS_ variables, and not inside the make
	// that may be running these tests (its MAKEFLAGS would reach make
	// run).
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "HELIOS_") && !slices.Contains([]string{"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES"}, name) {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	outBytes, err := cmd.CombinedOutput()
	out := string(outBytes)
	killUnder(root)
	if ctx.Err() != nil {
		t.Fatalf("the session did not finish within 6 minutes; output:\n%s", out)
	}
	if err != nil {
		t.Errorf("the session's shell: %v", err)
	}
	results := parseReadmeOutput(out)
	for i, l := range lines {
		r, ran := results[i]
		switch {
		case readmeSkipLines[l.cmd] != "":
			t.Logf("skipped %q: %s", l.cmd, readmeSkipLines[l.cmd])
			continue
		case !ran:
			t.Errorf("line %q did not run; the session's output:\n%s", l.text, out)
			continue
		case r.skipped != "":
			t.Logf("skipped %q: %s", l.cmd, r.skipped)
			continue
		}
		if r.status != 0 {
			t.Errorf("%q: exit status %d, want 0; output:\n%s", l.text, r.status, r.out)
		}
		for _, want := range readmeExpect[l.cmd] {
			if !strings.Contains(r.out, want) {
				t.Errorf("%q: output lacks %q; output:\n%s", l.text, want, r.out)
			}
		}
		if !l.server {
			continue
		}
		// Ctrl-C: one drain and a clean exit (issue 18 item 3). make
		// kills itself with the SIGINT it got, which is no error.
		if r.stopped != 0 && r.stopped != 128+int(syscall.SIGINT) {
			t.Errorf("%q after Ctrl-C: exit status %d, want 0 (or make's own SIGINT, 130)", l.cmd, r.stopped)
		}
		b, _ := os.ReadFile(filepath.Join(root, logs[i]))
		log := string(b)
		for _, want := range readmeServers[l.cmd] {
			if !strings.Contains(log, want) {
				t.Errorf("%q: its output lacks %q; output:\n%s", l.cmd, want, log)
			}
		}
		if n := strings.Count(log, "draining"); n != 1 || strings.Contains(log, "second signal") || strings.Contains(log, "make: ***") {
			t.Errorf("%q after one Ctrl-C: %d drains; want one, no second signal and no make error; output:\n%s", l.cmd, n, log)
		}
	}
	for _, p := range demoPorts {
		if !waitFreed(p, 45*time.Second) {
			t.Errorf("port %d still answers after the session", p)
		}
	}
}

// readmeScript returns the shell script that runs lines, and the log file
// (relative to the copy's top) of each server line. Markers on their own
// lines (a newline first: an answer need not end with one) delimit each
// line's output: @@begin N, @@retry (a probe tried
// again), @@end N STATUS, @@skip N WHY, @@stopped N STATUS.
func readmeScript(lines []readmeLine) (string, map[int]string) {
	var b strings.Builder
	b.WriteString(`exec 2>&1 </dev/null
mkdir -p .readme-test
# __ready PID: until bin/helios healthcheck says ready, while PID lives.
__ready() {
	for __i in $(seq 1800); do
		[ -x bin/helios ] && bin/helios healthcheck >/dev/null 2>&1 && return 0
		kill -0 "$1" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}
# __listening HOST PORT: until something accepts there.
__listening() {
	for __i in $(seq 300); do
		(exec 3<>"/dev/tcp/$1/$2") 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}
# __file FILE: until FILE is there and not empty.
__file() {
	for __i in $(seq 300); do
		[ -s "$1" ] && return 0
		sleep 0.1
	done
	return 1
}
`)
	logs := map[int]string{}
	var servers []int
	var pidFiles []string
	for i, l := range lines {
		fmt.Fprintf(&b, "echo '@@begin %d'\n", i)
		switch {
		case readmeSkipLines[l.cmd] != "":
			fmt.Fprintf(&b, "echo '@@skip %d'\n", i)
			continue
		case strings.HasPrefix(l.cmd, "h2load "):
			fmt.Fprintf(&b, "if ! command -v h2load >/dev/null; then echo '@@skip %d h2load not found (make bench-deps installs it; CI installs it only after the tests)'; else\n", i)
		}
		switch {
		case l.server:
			// Run as a terminal would: in a process group of its own,
			// so that Ctrl-C (SIGINT to the group) reaches it alone.
			logs[i] = fmt.Sprintf(".readme-test/server-%d.log", i)
			servers = append(servers, i)
			fmt.Fprintf(&b, "set -m\n{\n%s\n} >%s 2>&1 &\n__srv%d=$!\nset +m\n__ready $__srv%d; echo \"@@end %d $?\"\n", l.text, logs[i], i, i, i)
		case isProbe(l.cmd):
			fmt.Fprintf(&b, "for __try in $(seq 30); do\n%s\n__rc=$?; [ $__rc = 0 ] && break; printf '\\n@@retry\\n'; sleep 0.5\ndone\nprintf '\\n@@end %d %%s\\n' $__rc\n", l.text, i)
		default:
			fmt.Fprintf(&b, "%s\nprintf '\\n@@end %d %%s\\n' $?\n", l.text, i)
			// A server started in the background: wait as a reader
			// would until it is up.
			m := regexp.MustCompile(`--pid-file (\S+)`).FindStringSubmatch(l.cmd)
			switch {
			case strings.HasSuffix(l.cmd, "&") && m != nil:
				fmt.Fprintf(&b, "__file %s\n", m[1])
			case strings.HasSuffix(l.cmd, "&") && strings.Contains(l.cmd, " --listen "):
				addr := regexp.MustCompile(`--listen (\S+):(\d+)`).FindStringSubmatch(l.cmd)
				if addr != nil {
					fmt.Fprintf(&b, "__listening %s %s\n", addr[1], addr[2])
				}
			}
			if m != nil {
				pidFiles = append(pidFiles, m[1])
			}
		}
		if strings.HasPrefix(l.cmd, "h2load ") {
			b.WriteString("fi\n")
		}
	}
	// Ctrl-C for what runs in the foreground, then what the recipe
	// leaves running (the README: kill %1 %2).
	for _, i := range servers {
		fmt.Fprintf(&b, "kill -INT -- -$__srv%d 2>/dev/null; wait $__srv%d; echo \"@@stopped %d $?\"\n", i, i, i)
	}
	for _, f := range pidFiles {
		fmt.Fprintf(&b, "[ -s %s ] && kill \"$(cat %s)\" 2>/dev/null\n", f, f)
	}
	b.WriteString("__jobs=$(jobs -p); [ -z \"$__jobs\" ] || kill $__jobs 2>/dev/null\nwait\necho '@@done'\n")
	return b.String(), logs
}

// readmeResult is what one line did.
type readmeResult struct {
	out             string
	status, stopped int
	skipped         string
}

// parseReadmeOutput splits the session's output at the markers.
func parseReadmeOutput(out string) map[int]*readmeResult {
	results := map[int]*readmeResult{}
	var cur *readmeResult
	var buf strings.Builder
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		switch {
		case len(f) >= 2 && f[0] == "@@begin":
			n, _ := strconv.Atoi(f[1])
			cur = &readmeResult{}
			results[n] = cur
			buf.Reset()
		case len(f) >= 3 && f[0] == "@@end" && cur != nil:
			cur.status, _ = strconv.Atoi(f[2])
			cur.out = buf.String()
		case len(f) >= 2 && f[0] == "@@skip" && cur != nil:
			cur.skipped = strings.Join(f[2:], " ")
			if cur.skipped == "" {
				cur.skipped = "listed in readmeSkipLines"
			}
		case len(f) >= 3 && f[0] == "@@stopped":
			n, _ := strconv.Atoi(f[1])
			if r := results[n]; r != nil {
				r.stopped, _ = strconv.Atoi(f[2])
			}
		case line == "@@retry":
			buf.Reset()
		default:
			buf.WriteString(line + "\n")
		}
	}
	return results
}
