package deploy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// compose runs docker-compose (or docker compose) on the example's file
// with a project of its own.
type compose struct {
	t       *testing.T
	cmd     []string
	file    string // relative to the repository; "" is the Compose example
	project string
	env     []string
}

func (c *compose) run(args ...string) string {
	c.t.Helper()
	file := c.file
	if file == "" {
		file = "deploy/compose/compose.yaml"
	}
	full := append(append(append([]string{}, c.cmd[1:]...), "-f", filepath.Join(repoRoot(c.t), file), "-p", c.project), args...)
	return run(c.t, repoRoot(c.t), c.env, c.cmd[0], full...)
}

func (c *compose) container(service string) string {
	c.t.Helper()
	return strings.TrimSpace(c.run("ps", "-q", service))
}

// findCompose returns the Compose command: docker-compose, or the docker
// compose plugin.
func findCompose(t *testing.T) []string {
	t.Helper()
	if p, err := exec.LookPath("docker-compose"); err == nil {
		return []string{p}
	}
	if exec.Command("docker", "compose", "version").Run() == nil {
		return []string{"docker", "compose"}
	}
	needTool(t, "docker-compose", "docker-compose")
	return nil
}

// TestDockerComposeExample is issue 12's end-to-end test on the real
// Docker engine: build the image from a host binary (no registry), start
// the Compose example, see round-robin across both backend containers,
// kill one and lose no request once the health check has marked it down,
// then docker stop Helios during a request: the request finishes and the
// exit status is 0.
func TestDockerComposeExample(t *testing.T) {
	needDocker(t)
	if testing.Short() {
		t.Skip("the Docker end-to-end test takes about half a minute")
	}
	cmd := findCompose(t)

	tag := buildHeliosImage(t)
	inspect := run(t, "", nil, "docker", "image", "inspect", tag, "--format",
		`{{.Config.User}} {{index .Config.Labels "org.opencontainers.image.title"}} {{index .Config.Healthcheck.Test 1}}`)
	if got := strings.TrimSpace(inspect); got != "65532:65532 helios /helios" {
		t.Errorf("image user, title label and health check: got %q, want %q", got, "65532:65532 helios /helios")
	}

	port := freePort(t)
	c := &compose{t: t, cmd: cmd, project: fmt.Sprintf("heliose2e%d", rand.Uint32()),
		env: []string{"HELIOS_IMAGE=" + tag, "HELIOS_PORT=" + port}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("helios logs:\n%s", lastLines(c.run("logs", "--no-color", "helios"), 30))
		}
		c.run("down", "-v", "--timeout", "5")
	})
	c.run("up", "-d")
	base := "http://127.0.0.1:" + port

	// Round-robin across both containers once both are up.
	waitFor(t, 30*time.Second, "both backends answering", func() bool {
		seen := map[string]bool{}
		for i := 0; i < 4; i++ {
			if code, _, b := get(base + "/"); code == 200 {
				seen[b] = true
			}
		}
		return seen["backend-1"] && seen["backend-2"]
	})
	var order []string
	for i := 0; i < 10; i++ {
		code, _, b := get(base + "/")
		if code != 200 {
			t.Fatalf("request %d: got %d, want 200", i, code)
		}
		order = append(order, b)
	}
	for i := 1; i < len(order); i++ {
		if order[i] == order[i-1] {
			t.Errorf("round robin: got %v, want the backends to alternate", order)
			break
		}
	}

	// Kill one backend: once the health check says it is down, no
	// request fails.
	c.run("kill", "backend-1")
	waitFor(t, 20*time.Second, "the health check marking backend-1 down", func() bool {
		return strings.Contains(c.run("logs", "--no-color", "helios"), `"msg":"backend down: health checks failing","upstream":"app","backend":"backend-1:8080"`)
	})
	for i := 0; i < 50; i++ {
		if code, _, b := get(base + "/"); code != 200 || b != "backend-2" {
			t.Fatalf("request %d after backend-1 was marked down: got %d from %q, want 200 from backend-2", i, code, b)
		}
	}

	// docker stop during a request: it finishes, and Helios exits 0.
	result := make(chan string, 1)
	go func() {
		code, body, _ := get(base + "/delay/2000")
		result <- fmt.Sprintf("%d %s", code, strings.TrimSpace(body))
	}()
	time.Sleep(500 * time.Millisecond)
	id := c.container("helios")
	run(t, "", nil, "docker", "stop", "--time", "40", id) // more than the drain, as the README says
	if got := <-result; got != "200 delayed 2000 ms by backend-2" {
		t.Errorf("request in flight during docker stop: got %q, want 200 from backend-2", got)
	}
	if got := strings.TrimSpace(run(t, "", nil, "docker", "inspect", id, "--format", "{{.State.ExitCode}}")); got != "0" {
		t.Errorf("exit status after docker stop: got %s, want 0", got)
	}
}

// needDocker skips the test, saying why, when there is no Docker engine.
func needDocker(t *testing.T) {
	t.Helper()
	if out, err := exec.Command("docker", "info").CombinedOutput(); err != nil {
		t.Skipf("docker info failed, so there is no Docker engine to test on: %v\n%s", err, firstLine(out))
	}
}

// buildHeliosImage builds the image of deploy/docker/Dockerfile from a
// binary built here (no registry), under a tag of its own that the test
// removes when it ends.
func buildHeliosImage(t *testing.T) string {
	t.Helper()
	// The build context is what .dockerignore lets through: the binary
	// and the built-in config.
	ctxDir := t.TempDir()
	os.MkdirAll(filepath.Join(ctxDir, "bin"), 0o755)
	os.MkdirAll(filepath.Join(ctxDir, "deploy/docker"), 0o755)
	buildHelios(t, filepath.Join(ctxDir, "bin"))
	for _, f := range []string{"deploy/docker/Dockerfile", "deploy/docker/helios.yaml", ".dockerignore"} {
		b, err := os.ReadFile(filepath.Join(repoRoot(t), f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(ctxDir, f), b, 0o644)
	}
	tag := fmt.Sprintf("helios-e2e:%d", rand.Uint32())
	run(t, ctxDir, nil, "docker", "build", "-q", "-f", "deploy/docker/Dockerfile", "-t", tag, ".")
	t.Cleanup(func() { exec.Command("docker", "rmi", "-f", tag).Run() })
	return tag
}

func get(url string) (code int, body, backend string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		return 0, err.Error(), ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get("X-Backend")
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", d, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// freePort returns a port free on the host now, below the ephemeral range.
func freePort(t *testing.T) string {
	t.Helper()
	for i := 0; i < 100; i++ {
		p := fmt.Sprint(20000 + rand.IntN(8000))
		if ln, err := net.Listen("tcp", ":"+p); err == nil {
			ln.Close()
			return p
		}
	}
	t.Fatal("no free port")
	return ""
}

func firstLine(b []byte) string {
	line, _, _ := bytes.Cut(bytes.TrimSpace(b), []byte("\n"))
	return string(line)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestComposeBackendPorts guards issue 18 item 11: docker-compose ps
// showed the backends as 8080/tcp, the port the image EXPOSEs, while they
// listened on :9000. The backends listen on the exposed port, and Helios's
// config sends to it.
func TestComposeBackendPorts(t *testing.T) {
	read := func(f string) string {
		b, err := os.ReadFile(filepath.Join(repoRoot(t), f))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	m := regexp.MustCompile(`(?m)^EXPOSE (\d+)$`).FindStringSubmatch(read("deploy/docker/Dockerfile"))
	if m == nil {
		t.Fatal("the Dockerfile EXPOSEs no port")
	}
	exposed := m[1]
	listens := regexp.MustCompile(`"backend", "--listen", ":(\d+)"`).FindAllStringSubmatch(read("deploy/compose/compose.yaml"), -1)
	sends := regexp.MustCompile(`address: "backend-\d:(\d+)"`).FindAllStringSubmatch(read("deploy/compose/helios.yaml"), -1)
	if len(listens) != 2 || len(sends) != 2 {
		t.Fatalf("found %d backend services and %d backend addresses, want 2 and 2", len(listens), len(sends))
	}
	for _, p := range append(listens, sends...) {
		if p[1] != exposed {
			t.Errorf("%s: port %s, want the port the image EXPOSEs, %s", p[0], p[1], exposed)
		}
	}
}
