package config

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func ptr[T any](v T) *T { return &v }

// TestLoadFull loads a config that sets every key, none to its default, and
// compares the whole result.
func TestLoadFull(t *testing.T) {
	root := t.TempDir()
	tlsDir := writeTestTLS(t)
	logDir := t.TempDir()
	cfg, err := Load("testdata/full.yaml", envFrom(map[string]string{"STATIC_ROOT": root, "TLS_DIR": tlsDir, "LOG_DIR": logDir}))
	if err != nil {
		t.Fatalf("Load: got %v, want no error", err)
	}
	want := &Config{
		File: "testdata/full.yaml",
		Listeners: []Listener{
			{
				Name: "web", Address: ":8080", Sockets: 4, Backlog: 1024, MaxConnections: 5000,
				ReadHeaderTimeout: dur(5 * time.Second), ReadTimeout: dur(30 * time.Second),
				WriteTimeout: dur(time.Minute), IdleTimeout: dur(2 * time.Minute), MaxHeaderBytes: 32768, Poller: PollerNative,
				MaxHeaderCount: 50, MaxMethodBytes: 16, UnderscoresInHeaders: true, OutputBufferBytes: 32768,
				TLS: &ListenerTLS{
					Certificates: []CertKey{
						{CertFile: tlsDir + "/a.pem", KeyFile: tlsDir + "/a.key"},
						{CertFile: tlsDir + "/b.pem", KeyFile: tlsDir + "/b.key"},
					},
					MinVersion: "1.3", ClientCAFile: tlsDir + "/ca.pem", HandshakeTimeout: dur(5 * time.Second),
					ClientHelloTimeout: dur(2 * time.Second), MaxHandshakes: 100, SessionTickets: ptr(false),
				},
				HTTP2: ptr(false),
			},
			{
				Name: "internal", Address: "[::1]:8081", Sockets: testNumCPU(), Backlog: 4096, MaxConnections: 20000,
				ReadHeaderTimeout: dur(10 * time.Second), IdleTimeout: dur(60 * time.Second), MaxHeaderBytes: 65536, Poller: PollerNative,
				WriteTimeout: dur(60 * time.Second), MaxHeaderCount: 100, MaxMethodBytes: 32, OutputBufferBytes: 65536,
				H2C: true,
			},
		},
		Routes: []Route{
			{
				Name: "api", Match: Match{Host: "api.example.com", PathPrefix: "/v1/"}, Upstream: "api",
				Upgrades: []string{"websocket", "example-protocol"}, AllowMethods: []string{"TRACE", "CONNECT"},
				RequestBuffering: "on", MaxBodyBytes: 1 << 20, RequestBufferMemoryBytes: 8192, RequestBufferFileBytes: 1000000,
				ResponseBuffering: "off", ResponseBufferMemoryBytes: 4096, ResponseBufferFileBytes: 100000,
			},
			{
				Name:  "ping",
				Match: Match{Host: "*.example.com", Path: "/ping"},
				Respond: &Respond{Status: 204, Headers: map[string]string{
					"Cache-Control": "no-store", "X-Helios": "1",
				}},
			},
			{
				Name:   "files",
				Match:  Match{PathPrefix: "/static/"},
				Static: &Static{Root: root, Index: "home.html", StripPrefix: "/static"},
			},
			{
				Name: "shop", Match: Match{PathPrefix: "/shop/"},
				Split: []SplitTarget{
					{Upstream: "api", Weight: 90},
					{Upstream: "shop-v2", Weight: 10, Match: &SplitMatch{Cookie: "canary", Value: "yes"}},
				},
				SplitKey: "cookie:session",
				Upgrades: []string{"websocket"}, RequestBuffering: "auto",
				MaxBodyBytes: 100 << 20, RequestBufferMemoryBytes: 64 << 10, RequestBufferFileBytes: 16 << 20,
				ResponseBuffering: "auto", ResponseBufferMemoryBytes: 64 << 10, ResponseBufferFileBytes: 64 << 20,
			},
		},
		Upstreams: []Upstream{{
			Name:     "api",
			Strategy: "weighted_round_robin",
			Backends: []Backend{
				{Address: "10.0.0.1:9000", Weight: 3}, {Address: "backend.internal:9000", Weight: 1},
				{DNS: "app.internal", Port: 8080, Weight: 2, Refresh: dur(10 * time.Second)},
				{SRV: "_http._tcp.app.internal", Refresh: dur(30 * time.Second)},
			},
			BackendsFile: "testdata/backends.yaml",
			AllowEmpty:   true,
			Transport: Transport{
				MaxIdlePerBackend: 64, IdleTimeout: dur(30 * time.Second),
				DialTimeout: dur(500 * time.Millisecond), ResponseHeaderTimeout: dur(10 * time.Second),
				ReadTimeout: dur(45 * time.Second), MaxConnsPerBackend: 100, MaxQueuePerBackend: 50, QueueTimeout: dur(3 * time.Second),
				Protocol: "h2",
				TLS: &TransportTLS{
					CAFile: tlsDir + "/ca.pem", ServerName: "api.internal",
					CertFile: tlsDir + "/client.pem", KeyFile: tlsDir + "/client.key", MinVersion: "1.3",
				},
			},
			HealthCheck: &HealthCheck{
				Path: "/health", Interval: dur(5 * time.Second), Timeout: dur(2 * time.Second),
				Fails: 3, Passes: 1, ExpectStatus: "200,204",
			},
			Passive: &Passive{
				MaxFails: 5, FailWindow: dur(20 * time.Second), EjectFor: dur(15 * time.Second), MaxEjectFor: dur(2 * time.Minute),
			},
			CircuitBreaker: &CircuitBreaker{
				ConsecutiveFailures: 10, FailureRatio: 0.25, MinRequests: 50,
				Interval: dur(30 * time.Second), OpenFor: dur(5 * time.Second), HalfOpenRequests: 3,
			},
			Retries: &Retries{
				Attempts: 1, On: []string{"connect_error", "reset", "timeout", "503"},
				IdempotentOnly: ptr(false), BudgetRatio: 0.1,
				Backoff:       &Backoff{Base: dur(50 * time.Millisecond), Max: dur(time.Second)},
				PerTryTimeout: dur(3 * time.Second),
			},
		}, {
			Name: "shop-v2", Strategy: "consistent_hash", HashKey: "header:X-User", HashFallback: "least_conn",
			BoundedLoad: 1.25, SlowStart: dur(30 * time.Second),
			Backends: []Backend{{Address: "10.0.0.2:9000", Weight: 1}},
			Transport: Transport{
				MaxIdlePerBackend: 256, IdleTimeout: dur(90 * time.Second),
				DialTimeout: dur(2 * time.Second), ResponseHeaderTimeout: dur(30 * time.Second),
				ReadTimeout: dur(60 * time.Second), MaxQueuePerBackend: 256, QueueTimeout: dur(10 * time.Second),
				Protocol: "http1",
			},
			Retries: &Retries{Attempts: 2, On: []string{"connect_error", "reset", "502", "503", "504"}, IdempotentOnly: ptr(true), BudgetRatio: 0.2},
		}},
		Admin:   Admin{Address: "127.0.0.1:9999", Token: "changeme-changeme-changeme", Pprof: true},
		Logging: Logging{Level: "debug", Format: "console", AccessLog: logDir + "/access.log"},
		Discovery: Discovery{
			Resolver: "10.0.0.53:5353", Timeout: dur(2 * time.Second), MinRefresh: dur(2 * time.Second), FileRefresh: dur(3 * time.Second),
		},
		RequestBuffers:  RequestBuffers{ConnectionBytes: 8 << 20, MemoryBytes: 64 << 20, FileBytes: 0},
		ResponseBuffers: ResponseBuffers{MemoryBytes: 1 << 20, FileBytes: 10 << 20},
	}
	cfg.meta = nil // compared through the values it produced
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("got\n%s\nwant\n%s", toJSON(cfg), toJSON(want))
	}
}

// TestParseDefaults parses the smallest useful config and compares the whole
// result, defaults included.
func TestParseDefaults(t *testing.T) {
	cfg := mustParse(t, `listeners: [{name: web, address: ":80"}]
routes:
  - {name: a, upstream: app}
  - {name: b, respond: {}}
  - {name: c, static: {root: "${DIR}"}}
upstreams:
  - name: app
    backends: [{address: "127.0.0.1:9000"}]
  - name: checked
    backends: [{address: "127.0.0.1:9001"}]
    health_check: {}
    passive: {}
    circuit_breaker: {}
    retries: {attempts: 1}
`, testEnv(t))
	dir := cfg.Routes[2].Static.Root
	defaultRetries := func() *Retries {
		return &Retries{Attempts: 2, On: []string{"connect_error", "reset", "502", "503", "504"}, IdempotentOnly: ptr(true), BudgetRatio: 0.2}
	}
	transport := Transport{
		MaxIdlePerBackend: 256, IdleTimeout: dur(90 * time.Second),
		DialTimeout: dur(2 * time.Second), ResponseHeaderTimeout: dur(30 * time.Second),
		ReadTimeout: dur(60 * time.Second), MaxQueuePerBackend: 256, QueueTimeout: dur(10 * time.Second),
		Protocol: "http1",
	}
	retries := defaultRetries()
	retries.Attempts = 1
	want := &Config{
		File: "t.yaml",
		Listeners: []Listener{{
			Name: "web", Address: ":80", Sockets: testNumCPU(), Backlog: 4096, MaxConnections: 20000,
			ReadHeaderTimeout: dur(10 * time.Second), IdleTimeout: dur(60 * time.Second), MaxHeaderBytes: 65536, Poller: PollerNative,
			WriteTimeout: dur(60 * time.Second), MaxHeaderCount: 100, MaxMethodBytes: 32, OutputBufferBytes: 65536,
		}},
		Routes: []Route{
			{
				Name: "a", Upstream: "app", Upgrades: []string{"websocket"},
				RequestBuffering: "auto", MaxBodyBytes: 100 << 20, RequestBufferMemoryBytes: 64 << 10, RequestBufferFileBytes: 16 << 20,
				ResponseBuffering: "auto", ResponseBufferMemoryBytes: 64 << 10, ResponseBufferFileBytes: 64 << 20,
			},
			{Name: "b", Respond: &Respond{Status: 200}},
			{Name: "c", Static: &Static{Root: dir, Index: "index.html"}},
		},
		Upstreams: []Upstream{
			{
				Name: "app", Strategy: "round_robin",
				Backends:  []Backend{{Address: "127.0.0.1:9000", Weight: 1}},
				Transport: transport,
				Retries:   defaultRetries(),
			},
			{
				Name: "checked", Strategy: "round_robin",
				Backends:  []Backend{{Address: "127.0.0.1:9001", Weight: 1}},
				Transport: transport,
				HealthCheck: &HealthCheck{
					Path: "/healthz", Interval: dur(2 * time.Second), Timeout: dur(time.Second),
					Fails: 2, Passes: 2, ExpectStatus: "200-399",
				},
				Passive: &Passive{
					MaxFails: 3, FailWindow: dur(10 * time.Second), EjectFor: dur(30 * time.Second), MaxEjectFor: dur(300 * time.Second),
				},
				CircuitBreaker: &CircuitBreaker{
					ConsecutiveFailures: 5, FailureRatio: 0.5, MinRequests: 20,
					Interval: dur(10 * time.Second), OpenFor: dur(10 * time.Second), HalfOpenRequests: 1,
				},
				Retries: retries,
			},
		},
		Admin:           Admin{Address: "127.0.0.1:9901"},
		Logging:         Logging{Level: "info", Format: "json", AccessLog: "off"},
		Discovery:       Discovery{Timeout: dur(5 * time.Second), MinRefresh: dur(time.Second), FileRefresh: dur(time.Second)},
		RequestBuffers:  RequestBuffers{ConnectionBytes: 32 << 20, MemoryBytes: 256 << 20, FileBytes: 1 << 30},
		ResponseBuffers: ResponseBuffers{MemoryBytes: 64 << 20, FileBytes: 1 << 30},
	}
	cfg.meta = nil
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("got\n%s\nwant\n%s", toJSON(cfg), toJSON(want))
	}
	if &cfg.Upstreams[0].Retries.On[0] == &cfg.Upstreams[1].Retries.On[0] {
		t.Errorf("got upstreams sharing one default Retries.On, want a copy each")
	}
}

// TestParseExplicitZero checks that an explicit 0 is kept (and judged) while
// an absent key gets its default.
func TestParseExplicitZero(t *testing.T) {
	const head = `listeners: [{name: web, address: ":80"}]
routes: [{name: a, upstream: app}]
`
	tests := []struct {
		name     string
		yaml     string
		get      func(*Config) any
		want     any
		problems string
	}{
		{
			name: "absent weight is 1",
			yaml: head + `upstreams: [{name: app, backends: [{address: "10.0.0.1:80"}]}]`,
			get:  func(c *Config) any { return c.Upstreams[0].Backends[0].Weight },
			want: 1,
		},
		{
			name:     "weight 0 is an error",
			yaml:     head + `upstreams: [{name: app, backends: [{address: "10.0.0.1:80", weight: 0}]}]`,
			problems: `t.yaml:3: upstreams[0].backends[0].weight: 0 is out of range (1-1000)`,
		},
		{
			name: "absent sockets is the number of CPUs",
			yaml: `listeners: [{name: web, address: ":80"}]
routes: [{name: a, respond: {}}]`,
			get:  func(c *Config) any { return c.Listeners[0].Sockets },
			want: testNumCPU(),
		},
		{
			name: "sockets 0 is an error",
			yaml: `listeners: [{name: web, address: ":80", sockets: 0}]
routes: [{name: a, respond: {}}]`,
			problems: `t.yaml:1: listeners[0].sockets: 0 is out of range (1-1024)`,
		},
		{
			name: "absent retries is the default policy",
			yaml: head + `upstreams: [{name: app, backends: [{address: "10.0.0.1:80"}]}]`,
			get:  func(c *Config) any { return *c.Upstreams[0].Retries },
			want: Retries{Attempts: 2, On: []string{"connect_error", "reset", "502", "503", "504"}, IdempotentOnly: ptr(true), BudgetRatio: 0.2},
		},
		{
			name: "attempts 0 disables retries",
			yaml: head + `upstreams: [{name: app, backends: [{address: "10.0.0.1:80"}], retries: {attempts: 0}}]`,
			get:  func(c *Config) any { return c.Upstreams[0].Retries.Attempts },
			want: 0,
		},
		{
			name: "retries with no conditions and no attempts is fine",
			yaml: head + `upstreams: [{name: app, backends: [{address: "10.0.0.1:80"}], retries: {attempts: 0, on: []}}]`,
			get:  func(c *Config) any { return len(c.Upstreams[0].Retries.On) },
			want: 0,
		},
		{
			name: "budget_ratio 0 is kept",
			yaml: head + `upstreams: [{name: app, backends: [{address: "10.0.0.1:80"}], retries: {budget_ratio: 0}}]`,
			get:  func(c *Config) any { return c.Upstreams[0].Retries.BudgetRatio },
			want: 0.0,
		},
		{
			name: "consecutive_failures 0 turns that trigger off",
			yaml: head + `upstreams: [{name: app, backends: [{address: "10.0.0.1:80"}], circuit_breaker: {consecutive_failures: 0}}]`,
			get: func(c *Config) any {
				b := c.Upstreams[0].CircuitBreaker
				return [2]float64{float64(b.ConsecutiveFailures), b.FailureRatio}
			},
			want: [2]float64{0, 0.5},
		},
		{
			name: "failure_ratio 0 turns that trigger off",
			yaml: head + `upstreams: [{name: app, backends: [{address: "10.0.0.1:80"}], circuit_breaker: {failure_ratio: 0}}]`,
			get: func(c *Config) any {
				b := c.Upstreams[0].CircuitBreaker
				return [2]float64{float64(b.ConsecutiveFailures), b.FailureRatio}
			},
			want: [2]float64{5, 0},
		},
		{
			name: "max_idle_per_backend 0 is kept",
			yaml: head + `upstreams: [{name: app, backends: [{address: "10.0.0.1:80"}], transport: {max_idle_per_backend: 0}}]`,
			get:  func(c *Config) any { return c.Upstreams[0].Transport.MaxIdlePerBackend },
			want: 0,
		},
		{
			name: "idle_timeout 0 is kept",
			yaml: `listeners: [{name: web, address: ":80", idle_timeout: 0s}]
routes: [{name: a, respond: {}}]`,
			get:  func(c *Config) any { return c.Listeners[0].IdleTimeout },
			want: Duration(0),
		},
		{
			name: "response buffer caps of 0 are kept",
			yaml: head + `upstreams: [{name: app, backends: [{address: "10.0.0.1:80"}]}]
response_buffers: {memory_bytes: 0, file_bytes: 0}`,
			get:  func(c *Config) any { return c.ResponseBuffers },
			want: ResponseBuffers{},
		},
		{
			name: "response_buffer_file_bytes 0 is kept",
			yaml: `listeners: [{name: web, address: ":80"}]
routes: [{name: a, upstream: app, response_buffer_file_bytes: 0}]
upstreams: [{name: app, backends: [{address: "10.0.0.1:80"}]}]`,
			get:  func(c *Config) any { return c.Routes[0].ResponseBufferFileBytes },
			want: int64(0),
		},
		{
			name: "admin off",
			yaml: `listeners: [{name: web, address: ":80"}]
routes: [{name: a, respond: {}}]
admin: {address: "off"}`,
			get:  func(c *Config) any { return c.Admin.Enabled() },
			want: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, ps := parseProblems(t, tt.yaml, nil)
			if got := ps.Error(); got != tt.problems {
				t.Fatalf("got problems\n%v\nwant\n%v", got, tt.problems)
			}
			if tt.get == nil {
				return
			}
			if got := tt.get(cfg); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", toJSON(got), toJSON(tt.want))
			}
		})
	}
}

// TestParseManyProblems checks that problems of every stage are reported
// together, sorted by line and then path.
func TestParseManyProblems(t *testing.T) {
	const src = `listeners:
  - name: web
    address: ":8080"
    sockets: many
    backlog: 0
  - name: web
    adress: ":8081"
routes:
  - name: r
    upstream: ap
    respond: {status: 99}
upstreams:
  - name: app
    strategy: fastest
    backends:
      - address: "10.0.0.1"
        weight: 0
    health_check: {timeout: ${TIMEOUT}}
logging: {level: loud, format: ${FORMAT}
`
	// The last line is a syntax error, which stops decoding: fix it and the
	// rest is reported.
	_, ps := parseProblems(t, src, map[string]string{"TIMEOUT": "5s", "FORMAT": "text"})
	want := `t.yaml:19: did not find expected ',' or '}' (YAML syntax)`
	if got := ps.Error(); got != want {
		t.Errorf("got\n%v\nwant\n%v", got, want)
	}

	fixed := strings.Replace(src, "${FORMAT}\n", "${FORMAT}}\n# token: ${TOKEN\n", 1)
	_, ps = parseProblems(t, fixed, map[string]string{"TIMEOUT": "5s", "FORMAT": "text"})
	want = strings.Join([]string{
		`t.yaml:4: listeners[0].sockets: "many" is not an integer (a whole number)`,
		`t.yaml:5: listeners[0].backlog: 0 is out of range (1-65535)`,
		`t.yaml:6: listeners[1].address: missing (` + testHostPort + `)`,
		`t.yaml:6: listeners[1].name: "web" is already used by listeners[0] (names must be unique)`,
		`t.yaml:7: listeners[1].adress: unknown key (allowed: name, address, sockets, backlog, max_connections, read_header_timeout, read_timeout, write_timeout, idle_timeout, max_header_bytes, max_header_count, max_method_bytes, underscores_in_headers, output_buffer_bytes, poller, engine, tls, http2, h2c, trusted_proxies, client_ip_header, proxy_protocol, redirect_https, max_connections_per_ip)`,
		`t.yaml:9: routes[0]: upstream and respond are both set (exactly one of upstream, split, respond, static, redirect)`,
		`t.yaml:10: routes[0].upstream: upstream "ap" is not defined (defined: app)`,
		`t.yaml:11: routes[0].respond.status: 99 is out of range (100-599)`,
		`t.yaml:14: upstreams[0].strategy: "fastest" is not a strategy (round_robin, weighted_round_robin, least_conn, consistent_hash, ip_hash, random, p2c)`,
		`t.yaml:16: upstreams[0].backends[0].address: "10.0.0.1" is not host:port (` + testHostPort + `)`,
		`t.yaml:17: upstreams[0].backends[0].weight: 0 is out of range (1-1000)`,
		`t.yaml:18: upstreams[0].health_check.timeout: 5s is longer than the interval 2s (at most the interval)`,
		`t.yaml:19: logging.format: "text" is not a format (json, console)`,
		`t.yaml:19: logging.level: "loud" is not a level (debug, info, warn, error)`,
		`t.yaml:20: unclosed "${" (${NAME}, ${NAME:-default}, or $$ for a literal $; NAME is letters, digits and _)`,
	}, "\n")
	if got := ps.Error(); got != want {
		t.Errorf("got\n%v\nwant\n%v", got, want)
	}
	if len(ps) != 15 {
		t.Errorf("got %d problems, want 15", len(ps))
	}
}

// TestNameWithLineBreak: a name YAML folds over a blank line holds a line
// break; it is refused at its own line with the name quoted, is not offered
// as a defined upstream, and every problem stays on one line.
func TestNameWithLineBreak(t *testing.T) {
	src := `listeners: [{name: web, address: ":8080"}]
routes:
  - name: r
    upstream: app
upstreams:
  - name: app

      x
    backends: [{address: "127.0.0.1:9000"}]
`
	_, ps := parseProblems(t, src, nil)
	want := strings.Join([]string{
		`t.yaml:4: routes[0].upstream: upstream "app" is not defined (no upstreams are defined)`,
		`t.yaml:6: upstreams[0].name: "app\nx" has a control character such as a line break (a name is printable text on one line)`,
	}, "\n")
	if got := ps.Error(); got != want {
		t.Errorf("got\n%v\nwant\n%v", got, want)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	write := func(path, s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(good, "listeners: [{name: web, address: \"${HELIOS_TEST_ADDR}\"}]\nroutes: [{name: r, respond: {}}]\n")
	write(bad, "listeners: []\nroutes: [{name: r, respond: {}}]\n")

	t.Run("missing file", func(t *testing.T) {
		_, err := Load(filepath.Join(dir, "nope.yaml"), nil)
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("got %v, want an error wrapping fs.ErrNotExist", err)
		}
		var ps Problems
		if errors.As(err, &ps) {
			t.Errorf("got Problems %v, want a read error", ps)
		}
	})
	t.Run("problems name the file", func(t *testing.T) {
		_, err := Load(bad, nil)
		want := bad + ":1: listeners: no listeners (at least one is required)"
		if err == nil || err.Error() != want {
			t.Errorf("got %v, want %v", err, want)
		}
	})
	t.Run("nil lookupEnv reads the environment", func(t *testing.T) {
		t.Setenv("HELIOS_TEST_ADDR", "127.0.0.1:8088")
		cfg, err := Load(good, nil)
		if err != nil {
			t.Fatalf("got %v, want no error", err)
		}
		if cfg.File != good || cfg.Listeners[0].Address != "127.0.0.1:8088" {
			t.Errorf("got File %q, address %q, want %q, %q", cfg.File, cfg.Listeners[0].Address, good, "127.0.0.1:8088")
		}
	})
}

func TestParseEmpty(t *testing.T) {
	for _, src := range []string{"", "# nothing\n", "~\n"} {
		t.Run(src, func(t *testing.T) {
			_, ps := parseProblems(t, src, nil)
			want := "t.yaml:1: listeners: no listeners (at least one is required)\nt.yaml:1: routes: no routes (at least one is required)"
			if got := ps.Error(); got != want {
				t.Errorf("got\n%v\nwant\n%v", got, want)
			}
		})
	}
}

func dur(d time.Duration) Duration { return Duration(d) }

// toJSON renders v for failure messages, following pointers.
func toJSON(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err.Error()
	}
	return string(b)
}
