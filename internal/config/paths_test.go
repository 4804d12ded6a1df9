package config

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestPathsResolveAgainstTheConfigFile guards issue 12: a relative
// static root was looked up from the working directory, so the shipped
// systemd unit (working directory /) and the container image refused the
// demo config.
func TestPathsResolveAgainstTheConfigFile(t *testing.T) {
	dir := t.TempDir()
	for _, sub := range []string{"public", "logs"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	abs := t.TempDir()
	tests := []struct {
		name       string
		root       string
		accessLog  string
		wantRoot   string
		wantAccess string
	}{
		{"relative with ./", "./public", "logs/access.log", filepath.Join(dir, "public"), filepath.Join(dir, "logs", "access.log")},
		{"relative bare", "public", "access.log", filepath.Join(dir, "public"), filepath.Join(dir, "access.log")},
		{"absolute kept", abs, abs + "/access.log", abs, abs + "/access.log"},
		{"stdout kept", "public", "stdout", filepath.Join(dir, "public"), "stdout"},
		{"off kept", "public", "off", filepath.Join(dir, "public"), "off"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(dir, "helios.yaml")
			src := "listeners: [{name: web, address: \":80\"}]\n" +
				"routes: [{name: files, static: {root: \"" + tt.root + "\"}}]\n" +
				"logging: {access_log: \"" + tt.accessLog + "\"}\n"
			if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			// The working directory must not matter.
			t.Chdir(t.TempDir())
			cfg, err := Load(file, envFrom(nil))
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if got := cfg.Routes[0].Static.Root; got != tt.wantRoot {
				t.Errorf("static.root: got %v, want %v", got, tt.wantRoot)
			}
			if got := cfg.Logging.AccessLog; got != tt.wantAccess {
				t.Errorf("access_log: got %v, want %v", got, tt.wantAccess)
			}
		})
	}
}

// TestTLSPathsResolveAgainstTheConfigFile: certificates, keys and CA
// files named relative to the config file load wherever the process
// starts, like static roots.
func TestTLSPathsResolveAgainstTheConfigFile(t *testing.T) {
	dir := writeTestTLS(t)
	file := filepath.Join(dir, "helios.yaml")
	src := `listeners:
  - name: web
    address: ":443"
    tls:
      cert_file: a.pem
      key_file: a.key
      client_ca_file: ca.pem
  - name: other
    address: ":8443"
    tls: {certificates: [{cert_file: ./b.pem, key_file: ./b.key}]}
routes: [{name: app, upstream: app}]
upstreams:
  - name: app
    backends: [{address: "127.0.0.1:9001"}]
    transport: {tls: {ca_file: ca.pem, cert_file: client.pem, key_file: client.key}}
`
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	cfg, err := Load(file, envFrom(nil))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	lt, ot, tt := cfg.Listeners[0].TLS, cfg.Listeners[1].TLS, cfg.Upstreams[0].Transport.TLS
	for _, c := range []struct{ key, got, want string }{
		{"cert_file", lt.CertFile, "a.pem"},
		{"key_file", lt.KeyFile, "a.key"},
		{"certificates[0].cert_file", ot.Certificates[0].CertFile, "b.pem"},
		{"certificates[0].key_file", ot.Certificates[0].KeyFile, "b.key"},
		{"client_ca_file", lt.ClientCAFile, "ca.pem"},
		{"transport.tls.ca_file", tt.CAFile, "ca.pem"},
		{"transport.tls.cert_file", tt.CertFile, "client.pem"},
		{"transport.tls.key_file", tt.KeyFile, "client.key"},
	} {
		if want := filepath.Join(dir, c.want); c.got != want {
			t.Errorf("%s: got %v, want %v", c.key, c.got, want)
		}
	}
}

// TestMissingRelativeRootNamesWhereItLooked: the problem says which
// directory was looked up, so an operator sees the config's directory.
func TestMissingRelativeRootNamesWhereItLooked(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "helios.yaml")
	src := "listeners: [{name: web, address: \":80\"}]\nroutes:\n  - {name: files, static: {root: ./nowhere}}\n"
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(file, envFrom(nil))
	want := file + `:3: routes[0].static.root: "` + filepath.Join(dir, "nowhere") + `" does not exist (an existing directory)`
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %v", err, want)
	}
}

// TestDefaultSocketsFollowGOMAXPROCS guards issue 12: under `docker run
// --cpus=1` on a 2-CPU host Helios opened 2 sockets (and 2 event loops)
// for one CPU. GOMAXPROCS follows the cgroup limit since Go 1.25; the
// default follows GOMAXPROCS.
func TestDefaultSocketsFollowGOMAXPROCS(t *testing.T) {
	prev := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	for _, n := range []int{1, 3} {
		runtime.GOMAXPROCS(n)
		cfg := mustParse(t, "listeners: [{name: web, address: \":80\"}]\nroutes: [{name: r, respond: {}}]\n", nil)
		if got := cfg.Listeners[0].Sockets; got != n {
			t.Errorf("GOMAXPROCS %d: sockets got %v, want %v", n, got, n)
		}
	}
}
