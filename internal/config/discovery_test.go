package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// discoveryHead starts the configs of the discovery tests: an upstream app
// whose keys follow.
const discoveryHead = `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, upstream: app}]
upstreams:
  - name: app
`

// TestParseDiscoveryDefaults checks the defaults of dns and srv entries and
// of the discovery block, and that a backends file path is taken relative
// to the configuration's directory.
func TestParseDiscoveryDefaults(t *testing.T) {
	cfg, err := Parse([]byte(discoveryHead+`    backends:
      - dns: app.internal
        port: 8080
      - srv: _http._tcp.app.internal
    backends_file: more.yaml
`), "/etc/helios/helios.yaml", envFrom(nil))
	if err != nil {
		t.Fatal(err)
	}
	u := cfg.Upstreams[0]
	want := []Backend{
		{DNS: "app.internal", Port: 8080, Weight: 1, Refresh: dur(5 * time.Second)},
		{SRV: "_http._tcp.app.internal", Refresh: dur(5 * time.Second)},
	}
	if !reflect.DeepEqual(u.Backends, want) {
		t.Errorf("got backends %+v, want %+v", u.Backends, want)
	}
	if u.BackendsFile != "/etc/helios/more.yaml" || u.AllowEmpty {
		t.Errorf("got backends_file %q, allow_empty %v, want /etc/helios/more.yaml, false", u.BackendsFile, u.AllowEmpty)
	}
	wantD := Discovery{Timeout: dur(5 * time.Second), MinRefresh: dur(time.Second), FileRefresh: dur(time.Second)}
	if cfg.Discovery != wantD {
		t.Errorf("got discovery %+v, want %+v", cfg.Discovery, wantD)
	}
	for i, k := range []string{"dns", "srv"} {
		if got := u.Backends[i].Kind(); got != k {
			t.Errorf("backend %d: got kind %q, want %q", i, got, k)
		}
	}
}

// TestParseDiscoveryProblem checks the message and line of each problem
// the discovery keys can have. Each config holds exactly one.
func TestParseDiscoveryProblem(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{
			name: "entry with nothing to name a backend",
			yaml: discoveryHead + "    backends:\n      - weight: 2\n",
			want: `t.yaml:6: upstreams[0].backends[0]: no address, dns or srv (exactly one: address host:port, dns NAME with a port, or srv NAME)`,
		},
		{
			name: "address and dns",
			yaml: discoveryHead + "    backends:\n      - {address: \"10.0.0.1:80\", dns: app.internal, port: 80}\n",
			want: `t.yaml:6: upstreams[0].backends[0]: address and dns are both set (exactly one of address, dns, srv)`,
		},
		{
			name: "all three",
			yaml: discoveryHead + "    backends:\n      - {address: \"10.0.0.1:80\", dns: a.internal, srv: _x._tcp.a.internal}\n",
			want: `t.yaml:6: upstreams[0].backends[0]: address, dns and srv are all set (exactly one of them)`,
		},
		{
			name: "dns without port",
			yaml: discoveryHead + "    backends:\n      - dns: app.internal\n",
			want: `t.yaml:6: upstreams[0].backends[0].port: missing (the port of the name's addresses, 1-65535)`,
		},
		{
			name: "dns port out of range",
			yaml: discoveryHead + "    backends:\n      - dns: app.internal\n        port: 0\n",
			want: `t.yaml:7: upstreams[0].backends[0].port: 0 is out of range (1-65535)`,
		},
		{
			name: "dns not a host name",
			yaml: discoveryHead + "    backends:\n      - {dns: \"app_internal\", port: 80}\n",
			want: `t.yaml:6: upstreams[0].backends[0].dns: "app_internal" is not a host name (a DNS name such as app.internal)`,
		},
		{
			name: "dns weight out of range",
			yaml: discoveryHead + "    backends:\n      - {dns: app.internal, port: 80, weight: 0}\n",
			want: `t.yaml:6: upstreams[0].backends[0].weight: 0 is out of range (1-1000)`,
		},
		{
			name: "dns name twice",
			yaml: discoveryHead + "    backends:\n      - {dns: app.internal, port: 80}\n      - {dns: APP.internal., port: 80}\n",
			want: `t.yaml:7: upstreams[0].backends[1].dns: "APP.internal." is already used by upstreams[0].backends[0] (each name once per upstream)`,
		},
		{
			name: "refresh below the minimum",
			yaml: discoveryHead + "    backends:\n      - {dns: app.internal, port: 80, refresh: 500ms}\n",
			want: `t.yaml:6: upstreams[0].backends[0].refresh: 500ms is out of range (at least discovery.min_refresh, 1s)`,
		},
		{
			name: "refresh below a configured minimum",
			yaml: discoveryHead + "    backends:\n      - srv: _http._tcp.app.internal\n        refresh: 5s\ndiscovery: {min_refresh: 10s}\n",
			want: `t.yaml:7: upstreams[0].backends[0].refresh: 5s is out of range (at least discovery.min_refresh, 10s)`,
		},
		{
			name: "srv not a service name",
			yaml: discoveryHead + "    backends:\n      - srv: \"_http._tcp.app internal\"\n",
			want: `t.yaml:6: upstreams[0].backends[0].srv: "_http._tcp.app internal" is not a service name (such as _http._tcp.app.internal)`,
		},
		{
			name: "srv with a weight",
			yaml: discoveryHead + "    backends:\n      - srv: _http._tcp.app.internal\n        weight: 3\n",
			want: `t.yaml:7: upstreams[0].backends[0].weight: set on an srv entry (its records carry the weights)`,
		},
		{
			name: "srv with a port",
			yaml: discoveryHead + "    backends:\n      - srv: _http._tcp.app.internal\n        port: 80\n",
			want: `t.yaml:7: upstreams[0].backends[0].port: set on an srv entry (only for dns entries)`,
		},
		{
			name: "address with a port",
			yaml: discoveryHead + "    backends:\n      - address: \"10.0.0.1:80\"\n        port: 80\n",
			want: `t.yaml:7: upstreams[0].backends[0].port: set on an address entry (only for dns entries)`,
		},
		{
			name: "address with a refresh",
			yaml: discoveryHead + "    backends:\n      - address: \"10.0.0.1:80\"\n        refresh: 5s\n",
			want: `t.yaml:7: upstreams[0].backends[0].refresh: set on an address entry (only for dns and srv entries)`,
		},
		{
			name: "allow_empty without discovery",
			yaml: discoveryHead + "    backends: [{address: \"10.0.0.1:80\"}]\n    allow_empty: true\n",
			want: `t.yaml:6: upstreams[0].allow_empty: set on an upstream without dns, srv or backends_file (it is about what they answer)`,
		},
		{
			name: "backends_file not a string",
			yaml: discoveryHead + "    backends_file: [a, b]\n",
			want: `t.yaml:5: upstreams[0].backends_file: a list is not a string (a single value)`,
		},
		{
			name: "resolver not an IP address",
			yaml: discoveryHead + "    backends: [{address: \"10.0.0.1:80\"}]\ndiscovery:\n  resolver: dns.internal:53\n",
			want: `t.yaml:7: discovery.resolver: "dns.internal:53" is not an IP address or IP:port (an IP address, with a port or not: 10.0.0.2, 10.0.0.2:53, [fd00::2]:53)`,
		},
		{
			name: "resolver port 0",
			yaml: discoveryHead + "    backends: [{address: \"10.0.0.1:80\"}]\ndiscovery:\n  resolver: \"10.0.0.2:0\"\n",
			want: `t.yaml:7: discovery.resolver: "10.0.0.2:0" has port 0 (an IP address, with a port or not: 10.0.0.2, 10.0.0.2:53, [fd00::2]:53)`,
		},
		{
			name: "timeout zero",
			yaml: discoveryHead + "    backends: [{address: \"10.0.0.1:80\"}]\ndiscovery:\n  timeout: 0s\n",
			want: `t.yaml:7: discovery.timeout: 0s is out of range (more than 0, such as 2s)`,
		},
		{
			name: "min_refresh negative",
			yaml: discoveryHead + "    backends: [{address: \"10.0.0.1:80\"}]\ndiscovery:\n  min_refresh: -1s\n",
			want: `t.yaml:7: discovery.min_refresh: -1s is out of range (more than 0, such as 2s)`,
		},
		{
			name: "file_refresh zero",
			yaml: discoveryHead + "    backends: [{address: \"10.0.0.1:80\"}]\ndiscovery:\n  file_refresh: 0s\n",
			want: `t.yaml:7: discovery.file_refresh: 0s is out of range (more than 0, such as 2s)`,
		},
		{
			name: "unknown discovery key",
			yaml: discoveryHead + "    backends: [{address: \"10.0.0.1:80\"}]\ndiscovery:\n  resolvers: [10.0.0.2]\n",
			want: `t.yaml:7: discovery.resolvers: unknown key (allowed: resolver, timeout, min_refresh, file_refresh)`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ps := parseProblems(t, tt.yaml, nil)
			if got := ps.Error(); got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// TestParseDiscoveryAccepts checks configs that use the new keys as meant.
func TestParseDiscoveryAccepts(t *testing.T) {
	for _, y := range []string{
		"    backends_file: backends.json\n",
		"    backends_file: backends.yaml\n    allow_empty: true\n",
		"    backends: [{dns: app.internal., port: 80, refresh: 1s}, {address: \"10.0.0.1:80\"}]\n",
		"    backends: [{dns: app.internal, port: 80}, {dns: app.internal, port: 81}, {srv: _a._tcp.app.internal}]\n",
		"    backends: [{srv: _http._tcp.app.internal.}]\ndiscovery: {resolver: \"::1\", min_refresh: 100ms}\n",
		"    backends: [{srv: _http._tcp.app.internal}]\ndiscovery: {resolver: \"[fd00::2]:5353\"}\n",
	} {
		mustParse(t, discoveryHead+y, nil)
	}
}

// TestResolverAddr checks the address discovery.resolver is dialled at.
func TestResolverAddr(t *testing.T) {
	tests := []struct{ in, want string }{
		{"10.0.0.2", "10.0.0.2:53"},
		{"10.0.0.2:5353", "10.0.0.2:5353"},
		{"::1", "[::1]:53"},
		{"[fd00::2]:53", "[fd00::2]:53"},
	}
	for _, tt := range tests {
		if got, err := ResolverAddr(tt.in); err != nil || got != tt.want {
			t.Errorf("ResolverAddr(%q): got %q, %v, want %q", tt.in, got, err, tt.want)
		}
	}
}

// TestParseBackends checks backends files: YAML and JSON, defaults, and
// each problem reported as FILE:LINE: [N].key: message.
func TestParseBackends(t *testing.T) {
	tests := []struct {
		name string
		data string
		want []FileBackend
		errs string
	}{
		{
			name: "yaml",
			data: "- address: 10.0.0.1:80\n  weight: 3\n- address: \"[::1]:81\"\n",
			want: []FileBackend{{Address: "10.0.0.1:80", Weight: 3}, {Address: "[::1]:81", Weight: 1}},
		},
		{
			name: "json",
			data: `[{"address": "10.0.0.1:80", "weight": 2}, {"address": "app.internal:80"}]`,
			want: []FileBackend{{Address: "10.0.0.1:80", Weight: 2}, {Address: "app.internal:80", Weight: 1}},
		},
		{name: "empty list", data: "[]\n", want: []FileBackend{}},
		{name: "empty file", data: "", want: nil},
		{
			name: "syntax error",
			data: "- address: 10.0.0.1:80\n- address: [\n",
			errs: `b.yaml:2: did not find expected node content (YAML syntax)`,
		},
		{
			name: "not a list",
			data: "address: 10.0.0.1:80\n",
			errs: `b.yaml:1: a mapping is not a list (a sequence of "- " items)`,
		},
		{
			name: "unknown key",
			data: "- address: 10.0.0.1:80\n  dns: app.internal\n",
			errs: `b.yaml:2: [0].dns: unknown key (allowed: address, weight)`,
		},
		{
			name: "bad address and weight",
			data: "- address: 10.0.0.1:80\n- address: 10.0.0.2\n  weight: 0\n",
			errs: "b.yaml:2: [1].address: \"10.0.0.2\" is not host:port (" + testHostPort + ")\n" +
				"b.yaml:3: [1].weight: 0 is out of range (1-1000)",
		},
		{
			name: "duplicate",
			data: "- address: 10.0.0.1:80\n- address: 10.0.0.1:080\n",
			errs: `b.yaml:2: [1].address: "10.0.0.1:080" is already used by [0] (addresses must be unique)`,
		},
		{
			name: "weight of the wrong type",
			data: "- {address: 10.0.0.1:80, weight: heavy}\n",
			errs: `b.yaml:1: [0].weight: "heavy" is not an integer (a whole number)`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseBackends([]byte(tt.data), "b.yaml")
			if tt.errs != "" {
				if err == nil || err.Error() != tt.errs {
					t.Fatalf("got %v, want\n%s", err, tt.errs)
				}
				for _, line := range strings.Split(err.Error(), "\n") {
					if !strings.HasPrefix(line, "b.yaml:") {
						t.Errorf("problem %q does not start with FILE:LINE", line)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestBackendsFileWarnings checks that validation warns, on one line, of
// a backends file that cannot be read or has problems, without refusing
// the configuration: the file may come, or be fixed, while Helios runs.
func TestBackendsFileWarnings(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(good, []byte("- address: 10.0.0.1:80\n"), 0o644)
	os.WriteFile(bad, []byte("- address: 10.0.0.1\n- {address: 10.0.0.2:80, weight: 0}\n"), 0o644)
	tests := []struct {
		file, want string
	}{
		{good, ""},
		{bad, `t.yaml:5: upstreams[0].backends_file: WARNING: ` + bad + `:1: [0].address: "10.0.0.1" is not host:port (` + testHostPort + `) (and 1 more): the upstream starts without this file's backends and reads it again when it changes`},
		{filepath.Join(dir, "missing.yaml"), `t.yaml:5: upstreams[0].backends_file: WARNING: no such file or directory: the upstream starts without this file's backends and reads it once it can`},
		{dir, `t.yaml:5: upstreams[0].backends_file: WARNING: ` + dir + ` is not a regular file: the upstream starts without this file's backends and reads it once it can`},
		{"/dev/zero", `t.yaml:5: upstreams[0].backends_file: WARNING: /dev/zero is not a regular file: the upstream starts without this file's backends and reads it once it can`},
	}
	for _, tt := range tests {
		cfg := mustParse(t, discoveryHead+"    backends_file: "+tt.file+"\n", nil)
		got := ""
		if len(cfg.Warnings) > 0 {
			got = cfg.Warnings.Error()
		}
		if got != tt.want {
			t.Errorf("%s: got warnings\n%s\nwant\n%s", filepath.Base(tt.file), got, tt.want)
		}
	}
}

// FuzzParseBackends reads arbitrary bytes as a backends file: it never
// panics, returns either entries or Problems, each problem FILE:LINE:
// [N].key: message on one line with a line inside the file, and every
// entry it returns is valid (a host:port address, a weight 1-1000).
func FuzzParseBackends(f *testing.F) {
	for _, s := range []string{
		"- address: 10.0.0.1:80\n  weight: 3\n", `[{"address": "[::1]:81"}]`, "[]\n", "", "~\n",
		"- address: 10.0.0.2\n  weight: 0\n", "address: x\n", "- {address: a:1, dns: b}\n", "- [\n",
		"- address: 10.0.0.1:80\n- address: 10.0.0.1:080\n", "---\n- address: a:1\n---\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		const file = "b.yaml"
		list, err := ParseBackends(data, file)
		if err != nil {
			var ps Problems
			if !errors.As(err, &ps) || len(ps) == 0 || list != nil {
				t.Fatalf("%q: got %T %v and %d entries, want Problems and none", data, err, err, len(list))
			}
			lines := yamlLines(data)
			for _, p := range ps {
				checkProblem(t, data, p, file, lines)
			}
			return
		}
		for _, b := range list {
			if hostPortError(b.Address) != "" || b.Weight < 1 || b.Weight > 1000 {
				t.Fatalf("%q: got entry %+v, want a valid one", data, b)
			}
		}
	})
}
