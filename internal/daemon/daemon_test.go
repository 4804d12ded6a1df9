package daemon

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/backend"
	"github.com/helios-lb/helios/internal/config"
	"github.com/helios-lb/helios/internal/server"
	"github.com/helios-lb/helios/internal/systemd"
	"github.com/helios-lb/helios/internal/systemd/systemdtest"
	"github.com/helios-lb/helios/internal/upgrade"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startBackend runs a built-in backend on loopback.
func startBackend(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := backend.New("b1")
	go b.Serve(ln)
	t.Cleanup(func() {
		ln.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		b.Shutdown(ctx)
	})
	return ln.Addr().String()
}

// instance is a daemon running in this test process.
type instance struct {
	dir, config  string
	web, admin   string
	signals      chan os.Signal
	done         chan struct{} // closed when Run returns
	err          error         // what it returned
	ready        chan *server.Server
	manager      *systemdtest.Manager
	configFormat string
}

const baseConfig = `listeners: [{name: web, address: "WEB"}]
routes:
  - {name: app, match: {path_prefix: /}, upstream: app}
upstreams:
  - name: app
    backends: [{address: "BACKEND"}]
    # The check takes 700ms: ready must wait for it.
    health_check: {path: /delay/700, interval: 10s, timeout: 2s}
admin: {address: "ADMIN"}
`

func (in *instance) writeConfig(t *testing.T, tail string) {
	t.Helper()
	if err := os.WriteFile(in.config, []byte(in.configFormat+tail), 0o644); err != nil {
		t.Fatal(err)
	}
}

// start runs Run with the config in in.config and the options o adds.
func start(t *testing.T, tail string, o Options) *instance {
	t.Helper()
	in := &instance{dir: t.TempDir(), web: freeAddr(t), admin: freeAddr(t),
		signals: make(chan os.Signal, 4), done: make(chan struct{}), ready: make(chan *server.Server, 1),
		manager: systemdtest.NewManager(t)}
	in.config = filepath.Join(in.dir, "helios.yaml")
	r := strings.NewReplacer("WEB", in.web, "ADMIN", in.admin, "BACKEND", startBackend(t))
	in.configFormat = r.Replace(baseConfig)
	in.writeConfig(t, tail)
	cfg, err := config.Load(in.config, nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := systemd.NewNotifier(in.manager.Path)
	if err != nil {
		t.Fatal(err)
	}
	upg, err := upgrade.New(upgrade.Env{Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	o.ConfigPath, o.Config = in.config, cfg
	o.Signals, o.Notifier, o.Upgrader, o.Activated = in.signals, n, upg, systemd.Activated{}
	if o.Getenv == nil {
		o.Getenv = func(string) string { return "" }
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	o.OnReady = func(s *server.Server) { in.ready <- s }
	go func() {
		in.err = Run(context.Background(), o)
		close(in.done)
	}()
	t.Cleanup(func() {
		select {
		case <-in.done:
		case in.signals <- syscall.SIGTERM:
			<-in.done
		}
	})
	return in
}

func (in *instance) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-in.done:
		return in.err
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return within 15s")
		return nil
	}
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestNotifyProtocol checks the exact sd_notify messages and their order
// over a start, a reload, a refused reload and a drain (issue 12), and
// that READY=1 waited for the first round of health checks.
func TestNotifyProtocol(t *testing.T) {
	in := start(t, "", Options{})
	var ready string
	select {
	case <-in.done:
		t.Fatalf("Run returned %v before ready", in.err)
	case s := <-in.ready:
		_ = s
	}
	ready = in.manager.Next(t, 10*time.Second)
	// At READY=1 the backend must have been checked: /readyz is true.
	_, body := httpGet(t, "http://"+in.admin+"/api/v1/upstreams")
	var v struct {
		Upstreams []struct {
			Backends []struct {
				LastCheck *time.Time `json:"last_check"`
			}
		}
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Upstreams) != 1 || v.Upstreams[0].Backends[0].LastCheck == nil {
		t.Errorf("READY=1 came before the first health check finished: %s", body)
	}
	steps := []struct {
		name string
		do   func()
		want []string // regular expressions, one per message, in order
	}{
		{"start", func() {}, []string{`READY=1\nSTATUS=serving on ` + regexp.QuoteMeta(in.web)}},
		{"reload", func() {
			in.writeConfig(t, "logging: {level: debug}\n")
			in.signals <- syscall.SIGHUP
		}, []string{`RELOADING=1\nMONOTONIC_USEC=[1-9][0-9]*`, `READY=1\nSTATUS=serving on ` + regexp.QuoteMeta(in.web)}},
		{"refused reload", func() {
			in.writeConfig(t, "logging: {level: loud}\n")
			in.signals <- syscall.SIGHUP
		}, []string{`RELOADING=1\nMONOTONIC_USEC=[1-9][0-9]*`,
			`READY=1\nSTATUS=reload refused, previous configuration serving: .*helios.yaml: 1 problem\(s\): .*logging.level: "loud" is not a level.*`}},
		{"stop", func() { in.signals <- syscall.SIGTERM }, []string{`STOPPING=1`}},
	}
	got := []string{ready}
	for i, st := range steps {
		st.do()
		for j, w := range st.want {
			if i > 0 || j > 0 {
				got = append(got, in.manager.Next(t, 10*time.Second))
			}
			if msg := got[len(got)-1]; !regexp.MustCompile(`^` + w + `$`).MatchString(msg) {
				t.Errorf("%s: message %d: got %q, want %q", st.name, j, msg, w)
			}
		}
		if st.name == "refused reload" {
			_, m := httpGet(t, "http://"+in.admin+"/metrics")
			for _, w := range []string{`helios_config_reloads_total{result="success"} 1`, `helios_config_reloads_total{result="failure"} 1`, `helios_build_info{`} {
				if !strings.Contains(m, w) {
					t.Errorf("metrics lack %s", w)
				}
			}
		}
	}
	if err := in.wait(t); err != nil {
		t.Errorf("Run: got %v, want nil after a drain", err)
	}
}

// TestShutdownDelayKeepsAccepting: during the delay /readyz answers 503
// and requests are still served; then the listener closes.
func TestShutdownDelayKeepsAccepting(t *testing.T) {
	in := start(t, "", Options{ShutdownDelay: 800 * time.Millisecond})
	<-in.ready
	in.signals <- syscall.SIGTERM
	if got := in.manager.Next(t, 10*time.Second); got != "READY=1\nSTATUS=serving on "+in.web {
		t.Fatalf("got %q, want READY=1 first", got)
	}
	if got := in.manager.Next(t, 10*time.Second); got != "STOPPING=1" {
		t.Fatalf("got %q, want STOPPING=1", got)
	}
	if code, body := httpGet(t, "http://"+in.admin+"/readyz"); code != 503 || body != "not ready: draining\n" {
		t.Errorf("/readyz during the delay: got %d %q, want 503 draining", code, body)
	}
	if code, _ := httpGet(t, "http://"+in.web+"/"); code != 200 {
		t.Errorf("request during the delay: got %d, want 200", code)
	}
	if err := in.wait(t); err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", in.web, time.Second); err == nil {
		c.Close()
		t.Errorf("listener still accepts after the drain")
	}
}

// TestReloadAppliesAccessLogSettings guards issue 12: logging changes in a
// reloaded config were ignored. Also SIGUSR1 reopens the file.
func TestReloadAppliesAccessLogSettings(t *testing.T) {
	in := start(t, "logging: {access_log: access.log}\n", Options{})
	<-in.ready
	path := filepath.Join(in.dir, "access.log") // relative to the config file
	httpGet(t, "http://"+in.web+"/first")
	in.writeConfig(t, "logging: {access_log: access.log, access_format: combined}\n")
	in.signals <- syscall.SIGHUP
	in.manager.Next(t, 10*time.Second) // READY
	in.manager.Next(t, 10*time.Second) // RELOADING
	in.manager.Next(t, 10*time.Second) // READY
	httpGet(t, "http://"+in.web+"/second")
	time.Sleep(1500 * time.Millisecond) // the old logger closes after a second
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	in.signals <- syscall.SIGUSR1
	// SIGUSR1 is handled in turn with other signals; a request after a
	// HUP that is itself answered orders the two.
	in.signals <- syscall.SIGHUP
	in.manager.Next(t, 10*time.Second)
	in.manager.Next(t, 10*time.Second)
	httpGet(t, "http://"+in.web+"/third")
	in.signals <- syscall.SIGTERM
	if err := in.wait(t); err != nil {
		t.Fatal(err)
	}
	rotated, _ := os.ReadFile(path + ".1")
	current, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(rotated)), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"path":"/first"`) || !strings.Contains(lines[1], `"GET /second`) {
		t.Errorf("rotated file: got\n%s\nwant a JSON line for /first and a combined one for /second", rotated)
	}
	if !strings.Contains(string(current), `"GET /third`) || strings.Count(string(current), "\n") != 1 {
		t.Errorf("reopened file: got\n%s\nwant the combined line for /third", current)
	}
}

// TestWatchdogPingsWhileServing: with WATCHDOG_USEC set, pings come at
// about half of it.
func TestWatchdogPingsWhileServing(t *testing.T) {
	env := map[string]string{"WATCHDOG_USEC": "200000"}
	in := start(t, "", Options{Getenv: func(k string) string { return env[k] }})
	<-in.ready
	pings := 0
	deadline := time.Now().Add(2 * time.Second)
	for pings < 3 {
		msg, ok := in.manager.Read(time.Until(deadline))
		if !ok {
			break
		}
		if msg == "WATCHDOG=1" {
			pings++
		}
	}
	if pings < 3 {
		t.Errorf("got %d watchdog pings in 2s with WATCHDOG_USEC=200ms, want at least 3", pings)
	}
}

// TestStartLine guards issue 18 item 7: the log opened with a descriptor
// warning and one "memory per client connection" line per listener, and
// said what was served where only in a field. Now the first line says it,
// as Caddy's "Caddy proxying http://:8080 -> 127.0.0.1:9001" does.
func TestStartLine(t *testing.T) {
	// A file takes the daemon's writes safely while the test reads it.
	logs, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	in := start(t, "", Options{Stderr: logs})
	<-in.ready
	var first struct {
		Level, Msg string
		PID        int `json:"pid"`
	}
	b, _ := os.ReadFile(logs.Name())
	line, _, _ := strings.Cut(string(b), "\n")
	if err := json.Unmarshal([]byte(line), &first); err != nil {
		t.Fatalf("first log line %q: %v", line, err)
	}
	backend := in.configFormat[strings.Index(in.configFormat, `backends: [{address: "`)+len(`backends: [{address: "`):]
	backend = backend[:strings.IndexByte(backend, '"')]
	want := "Helios proxying http://" + in.web + " -> " + backend + "; admin on http://" + in.admin
	if first.Level != "info" || first.Msg != want || first.PID != os.Getpid() {
		t.Errorf("first log line: got %s, want level info, msg %q and the pid", line, want)
	}
}
