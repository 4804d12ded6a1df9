package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// helios is the binary built once for these tests.
var helios string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "helios-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	helios = filepath.Join(dir, "helios")
	build := exec.Command("go", "build", "-o", helios, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building helios:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// freePort returns a loopback address free now, with a port below the
// kernel's ephemeral range (32768 and up by default), so that the
// thousands of client connections a test makes cannot take it between
// this check and the bind.
func freePort(t *testing.T) string {
	t.Helper()
	for i := 0; i < 100; i++ {
		port := 12000 + rand.IntN(8000)
		if port == 18080 {
			continue // the Compose example's, which deploy's README test binds
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		if ln, err := net.Listen("tcp", addr); err == nil {
			ln.Close()
			return addr
		}
	}
	t.Fatal("no free port in 12000-19999")
	return ""
}

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte(`
listeners: [{name: web, address: "127.0.0.1:8080"}]
routes: [{name: app, match: {path_prefix: /}, upstream: app}]
upstreams: [{name: app, backends: [{address: "127.0.0.1:9001"}]}]
`), 0o644)
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte(`listeners:
  - name: web
    address: "127.0.0.1:80800"
    idle_timeout: 2x
routes:
  - {name: app, match: {path_prefix: /}, upstream: missing}
upstreams:
  - {name: app, strategy: fastest, backends: [{address: "127.0.0.1:9001"}]}
`), 0o644)

	tests := []struct {
		name     string
		file     string
		code     int
		contains []string
	}{
		{"valid", good, 0, []string{"memory: listener web (127.0.0.1:8080): up to ", "ok\n"}},
		{"invalid reports every problem with file and line", bad, 1, []string{
			bad + `:3: listeners[0].address:`,
			bad + `:4: listeners[0].idle_timeout: "2x" is not a duration`,
			bad + `:6: routes[0].upstream: upstream "missing" is not defined (defined: app)`,
			bad + `:8: upstreams[0].strategy: "fastest" is not a strategy (round_robin, weighted_round_robin, least_conn, consistent_hash, ip_hash, random, p2c)`,
		}},
		{"missing file", filepath.Join(dir, "nope.yaml"), 1, []string{"nope.yaml"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := exec.Command(helios, "validate", "--config", tt.file).CombinedOutput()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tt.code {
				t.Errorf("got exit code %d, want %d; output:\n%s", code, tt.code, out)
			}
			for _, want := range tt.contains {
				if !strings.Contains(string(out), want) {
					t.Errorf("output does not contain %q; output:\n%s", want, out)
				}
			}
		})
	}
}

// lockedBuffer is a bytes.Buffer safe to read while a process writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// proc is a helios process started for a test.
type proc struct {
	cmd *exec.Cmd
	out *lockedBuffer
}

func start(t *testing.T, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(helios, args...), out: &lockedBuffer{}}
	p.cmd.Stdout = p.out
	p.cmd.Stderr = p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			p.cmd.Wait()
		}
	})
	return p
}

func waitListening(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("nothing listening on %s", addr)
}

// startBackends starts n `helios backend`s named b1..bn and returns their
// addresses once each is listening.
func startBackends(t *testing.T, n int) []string {
	t.Helper()
	var addrs []string
	for i := 1; i <= n; i++ {
		a := freePort(t)
		start(t, "backend", "--listen", a, "--name", fmt.Sprintf("b%d", i))
		waitListening(t, a)
		addrs = append(addrs, a)
	}
	return addrs
}

// TestServeReloadAndDrain runs the real binary: three `helios backend`s and
// `helios serve` in front, a SIGHUP reload (a bad one refused, a good one
// applied), then SIGTERM with a request in flight, which must finish
// before helios exits 0.
func TestServeReloadAndDrain(t *testing.T) {
	addrs := startBackends(t, 3)
	front := freePort(t)
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "helios.yaml")
	writeCfg := func(body string) {
		t.Helper()
		if err := os.WriteFile(cfgFile, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := func(routeBody string) string {
		return fmt.Sprintf(`
listeners: [{name: web, address: %q}]
routes:
  - {name: ping, match: {path: /ping}, respond: {status: 200, body: %q}}
  - {name: app, match: {path_prefix: /}, upstream: app}
upstreams: [{name: app, backends: [{address: %q}, {address: %q}, {address: %q}]}]
admin: {address: "off"}
logging: {level: info, format: json}
`, front, routeBody, addrs[0], addrs[1], addrs[2])
	}
	writeCfg(cfg("v1"))
	srv := start(t, "serve", "--config", cfgFile)
	waitListening(t, front)
	base := "http://" + front

	body := func(path string) string {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	seen := map[string]bool{}
	for i := 0; i < 6; i++ {
		seen[strings.TrimSpace(body("/"))] = true
	}
	if len(seen) != 3 {
		t.Errorf("got answers from %v, want all three backends", seen)
	}
	if got := body("/ping"); got != "v1" {
		t.Fatalf("got %q, want v1", got)
	}

	// A bad config is refused and the old one keeps serving.
	writeCfg("listeners: [{name: web, address: nope}]\n")
	srv.cmd.Process.Signal(syscall.SIGHUP)
	time.Sleep(300 * time.Millisecond)
	if got := body("/ping"); got != "v1" {
		t.Errorf("after a bad reload: got %q, want v1 still served", got)
	}
	if !strings.Contains(srv.out.String(), "reload refused") {
		t.Errorf("log does not say the reload was refused:\n%s", srv.out.String())
	}
	// A good one is applied.
	writeCfg(cfg("v2"))
	srv.cmd.Process.Signal(syscall.SIGHUP)
	deadline := time.Now().Add(3 * time.Second)
	for body("/ping") != "v2" && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := body("/ping"); got != "v2" {
		t.Errorf("after a good reload: got %q, want v2", got)
	}

	// Drain: a slow request in flight finishes, then helios exits 0.
	result := make(chan string, 1)
	go func() {
		resp, err := http.Get(base + "/delay/500")
		if err != nil {
			result <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		result <- fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}()
	time.Sleep(150 * time.Millisecond)
	srv.cmd.Process.Signal(syscall.SIGTERM)
	if got := <-result; !strings.HasPrefix(got, "200 delayed 500 ms") {
		t.Errorf("in-flight request during drain: got %q, want 200", got)
	}
	done := make(chan error, 1)
	go func() { done <- srv.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("helios serve exited with %v after SIGTERM, want status 0; log:\n%s", err, srv.out.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("helios serve did not exit within 5s of SIGTERM")
	}
}

// TestShippedConfigsValidate keeps the demo config and the examples honest.
func TestShippedConfigsValidate(t *testing.T) {
	files, _ := filepath.Glob("../../configs/examples/*.yaml")
	files = append(files, "../../configs/helios.yaml")
	if len(files) < 2 {
		t.Fatalf("found %d config files, want the demo and the examples", len(files))
	}
	// The demo's TLS listener serves the certificate make run makes.
	tlsDir := t.TempDir()
	if out, err := exec.Command(helios, "cert", "selfsigned", "--out", tlsDir).CombinedOutput(); err != nil {
		t.Fatalf("cert selfsigned: %v: %s", err, out)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			abs, _ := filepath.Abs(f)
			cmd := exec.Command(helios, "validate", "--config", abs)
			cmd.Dir = "/" // static roots are relative to the config file, as under systemd
			// The examples take the admin token from the environment, as
			// a deployment would; an unset one is an error (issue 9).
			// weighted.yaml logs to $LOGS_DIRECTORY, which systemd sets.
			cmd.Env = append(os.Environ(), "HELIOS_ADMIN_TOKEN=example-token-example-token", "HELIOS_DEMO_TLS_DIR="+tlsDir, "LOGS_DIRECTORY="+t.TempDir())
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.HasSuffix(string(out), "\nok\n") || strings.Contains(string(out), "WARNING") {
				t.Errorf("got %q (%v), want ok", out, err)
			}
		})
	}
}

// TestProxyCommand runs the one-line mode: `helios proxy` in front of two
// `helios backend`s with no file, round-robin between them, a clean exit
// on SIGTERM, and exit status 2 with the problem named for bad flags.
func TestProxyCommand(t *testing.T) {
	to := startBackends(t, 2)
	front := freePort(t)
	p := start(t, "proxy", "--from", front, "--to", strings.Join(to, ","), "--health", "/healthz", "--admin", "off", "--access-log", "off")
	waitListening(t, front)
	get := func(i int) string {
		resp, err := http.Get("http://" + front + "/")
		if err != nil {
			t.Fatalf("request %d: %v\n%s", i, err, p.out)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: got %d, want 200", i, resp.StatusCode)
		}
		return resp.Header.Get("X-Backend")
	}
	// The health checks' first round may find one backend up before the
	// other: until both have answered, requests go to those that are.
	warm := map[string]bool{}
	for i := 0; len(warm) < 2; i++ {
		if i == 100 {
			t.Fatalf("100 requests reached only %v, want both backends\n%s", warm, p.out)
		}
		warm[get(i)] = true
	}
	// Round robin alternates. A health check that times out on a loaded
	// machine (the race run) takes a backend out for a while, and its
	// turns go to the other: a run of ten may then not alternate, and
	// is tried again (a picker that does not alternate fails all three,
	// as a random one would but for 1 time in 170).
	var runs [][]string
	for try := 0; try < 3; try++ {
		var run []string
		alternates := true
		for i := 0; i < 10; i++ {
			run = append(run, get(i))
			if i > 0 && run[i] == run[i-1] {
				alternates = false
			}
		}
		runs = append(runs, run)
		if alternates {
			runs = nil
			break
		}
	}
	if runs != nil {
		t.Errorf("no run of ten requests alternated between the backends (round_robin): %v", runs)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.cmd.Wait(); err != nil {
		t.Errorf("after SIGTERM: %v, want exit status 0\n%s", err, p.out)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"proxy", "--from", front}, "to"},
		{[]string{"proxy", "--from", front, "--to", to[0], "--strategy", "fastest"}, "fastest"},
		{[]string{"proxy", "--from", "nowhere", "--to", to[0]}, "nowhere"},
	} {
		out, err := exec.Command(helios, tc.args...).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), tc.want) {
			t.Errorf("helios %s: got %v\n%s\nwant exit status 2 and a message naming %q", strings.Join(tc.args, " "), err, out, tc.want)
		}
	}
}
