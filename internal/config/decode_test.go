package config

import (
	"testing"
)

// TestParseDecodeProblem checks problems found while decoding: unknown and
// duplicate keys, wrong types and YAML syntax. Each config holds exactly one
// problem; in particular a value of the wrong type must not also be reported
// as missing or out of range.
func TestParseDecodeProblem(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{
			name: "unknown key",
			yaml: `routes: [{name: r, respond: {}}]
listeners:
  - name: web
    address: ":8080"
    sockets: 2
    backlog: 10
    adress: ":8081"
`,
			want: `t.yaml:7: listeners[0].adress: unknown key (allowed: name, address, sockets, backlog, max_connections, read_header_timeout, read_timeout, write_timeout, idle_timeout, max_header_bytes, max_header_count, max_method_bytes, underscores_in_headers, output_buffer_bytes, poller, engine, tls, http2, h2c, trusted_proxies, client_ip_header, proxy_protocol, redirect_https, max_connections_per_ip)`,
		},
		{
			name: "unknown top-level key",
			yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, respond: {}}]
file: x.yaml
`,
			want: `t.yaml:3: file: unknown key (allowed: listeners, routes, upstreams, admin, logging, discovery, request_buffers, response_buffers, tracing)`,
		},
		{
			name: "string for an integer",
			yaml: `listeners:
  - name: web
    address: ":8080"
    sockets: "two"
routes: [{name: r, respond: {}}]
`,
			want: `t.yaml:4: listeners[0].sockets: "two" is not an integer (a whole number)`,
		},
		{
			name: "quoted number for an integer",
			yaml: `listeners:
  - name: web
    address: ":8080"
    sockets: "2"
routes: [{name: r, respond: {}}]
`,
			want: `t.yaml:4: listeners[0].sockets: "2" is not an integer (a whole number)`,
		},
		{
			name: "fraction for an integer",
			yaml: `listeners:
  - name: web
    address: ":8080"
    backlog: 1.5
routes: [{name: r, respond: {}}]
`,
			want: `t.yaml:4: listeners[0].backlog: "1.5" is not an integer (a whole number)`,
		},
		{
			name: "bad duration",
			yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, upstream: app}]
upstreams:
  - name: app
    backends: [{address: "10.0.0.1:80"}]
    transport:
      dial_timeout: 2x
`,
			want: `t.yaml:7: upstreams[0].transport.dial_timeout: "2x" is not a duration (a Go duration such as 500ms, 2s or 1m)`,
		},
		{
			name: "duration without unit",
			yaml: `listeners:
  - name: web
    address: ":8080"
    idle_timeout: 30
routes: [{name: r, respond: {}}]
`,
			want: `t.yaml:4: listeners[0].idle_timeout: "30" is not a duration (a Go duration such as 500ms, 2s or 1m)`,
		},
		{
			name: "yes for a boolean",
			yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, respond: {}}]
admin:
  pprof: yes
`,
			want: `t.yaml:4: admin.pprof: "yes" is not a boolean (true or false)`,
		},
		{
			name: "word for a number",
			yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, upstream: app}]
upstreams:
  - name: app
    backends: [{address: "10.0.0.1:80"}]
    circuit_breaker:
      failure_ratio: half
`,
			want: `t.yaml:7: upstreams[0].circuit_breaker.failure_ratio: "half" is not a number (such as 0.5)`,
		},
		{
			name: "list for a string",
			yaml: `listeners:
  - name: [web]
    address: ":8080"
routes: [{name: r, respond: {}}]
`,
			want: `t.yaml:2: listeners[0].name: a list is not a string (a single value)`,
		},
		{
			name: "mapping for a list",
			yaml: `listeners:
  name: web
  address: ":8080"
routes: [{name: r, respond: {}}]
`,
			want: `t.yaml:1: listeners: a mapping is not a list (a sequence of "- " items)`,
		},
		{
			name: "string for a list item mapping",
			yaml: `listeners:
  - ":8080"
routes: [{name: r, respond: {}}]
`,
			want: `t.yaml:2: listeners[0]: ":8080" is not a mapping (keys: name, address, sockets, backlog, max_connections, read_header_timeout, read_timeout, write_timeout, idle_timeout, max_header_bytes, max_header_count, max_method_bytes, underscores_in_headers, output_buffer_bytes, poller, engine, tls, http2, h2c, trusted_proxies, client_ip_header, proxy_protocol, redirect_https, max_connections_per_ip)`,
		},
		{
			name: "string for an optional block",
			yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, upstream: app}]
upstreams:
  - name: app
    backends: [{address: "10.0.0.1:80"}]
    health_check: /healthz
`,
			want: `t.yaml:6: upstreams[0].health_check: "/healthz" is not a mapping (keys: path, interval, timeout, fails, passes, expect_status)`,
		},
		{
			name: "list for headers",
			yaml: `listeners: [{name: web, address: ":8080"}]
routes:
  - name: r
    respond:
      headers: [X-A]
`,
			want: `t.yaml:5: routes[0].respond.headers: a list is not a mapping (name: value pairs)`,
		},
		{
			name: "string for the whole file",
			yaml: `helios
`,
			want: `t.yaml:1: "helios" is not a mapping (keys: listeners, routes, upstreams, admin, logging, discovery, request_buffers, response_buffers, tracing)`,
		},
		{
			name: "duplicate key",
			yaml: `listeners:
  - name: web
    address: ":8080"
    name: api
routes: [{name: r, respond: {}}]
`,
			want: `t.yaml:4: listeners[0].name: duplicate key (first set on line 2; set each key once)`,
		},
		{
			name: "duplicate header",
			yaml: `listeners: [{name: web, address: ":8080"}]
routes:
  - name: r
    respond:
      headers:
        X-A: "1"
        X-A: "2"
`,
			want: `t.yaml:7: routes[0].respond.headers.X-A: duplicate key (first set on line 6; set each key once)`,
		},
		{
			name: "list as a key",
			yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, respond: {}}]
? [a, b]
: c
`,
			want: `t.yaml:3: a list is not a key (a plain name)`,
		},
		{
			name: "bad indentation",
			yaml: `listeners:
  - name: web
   address: ":8080"
routes: [{name: r, respond: {}}]
`,
			want: `t.yaml:3: did not find expected '-' indicator (YAML syntax)`,
		},
		{
			name: "unclosed flow sequence after a closed one",
			// The line of the "[" left open, not of the first line
			// after the closed one (yaml.v3 says line 1).
			yaml: `listeners: [
  {name: web, address: ":8080"}]
routes: [{name: r, respond: {}}
admin: {}
`,
			want: `t.yaml:3: did not find expected ',' or ']' (YAML syntax)`,
		},
		{
			name: "syntax error on the first line",
			yaml: `listeners: a: b
`,
			want: `t.yaml:1: mapping values are not allowed in this context (YAML syntax)`,
		},
		{
			name: "tab indentation",
			yaml: `listeners:
	- name: web
`,
			want: `t.yaml:2: found character that cannot start any token (YAML syntax)`,
		},
		{
			name: "undefined anchor",
			yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, respond: {}}]
admin: *missing
`,
			want: `t.yaml:3: unknown anchor 'missing' referenced (YAML syntax)`,
		},
		{
			name: "alias to a list that contains it",
			yaml: `listeners: &l
  - name: web
    address: ":8080"
    sockets: *l
routes: [{name: r, respond: {}}]
`,
			want: `t.yaml:4: listeners[0].sockets: a list is not an integer (a whole number)`,
		},
		{
			name: "second document",
			yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, respond: {}}]
---
logging: {level: debug}
`,
			want: `t.yaml:3: a second YAML document (one document per file)`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ps := parseProblems(t, tt.yaml, nil)
			if got := ps.Error(); got != tt.want {
				t.Errorf("got\n%v\nwant\n%v", got, tt.want)
			}
		})
	}
}

// TestParseNullAndAlias checks that a null value is the same as an absent
// key and that aliases are followed.
func TestParseNullAndAlias(t *testing.T) {
	cfg := mustParse(t, `listeners:
  - name: web
    address: ":8080"
    sockets: ~
routes: [{name: r, upstream: a}]
upstreams:
  - name: a
    backends: [{address: "10.0.0.1:80"}]
    transport: &fast
      dial_timeout: 100ms
    health_check:
  - name: b
    backends: [{address: "10.0.0.2:80"}]
    transport: *fast
`, nil)
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"null sockets gets the default", cfg.Listeners[0].Sockets, testNumCPU()},
		{"null health_check is no health check", cfg.Upstreams[0].HealthCheck == nil, true},
		{"anchor value", cfg.Upstreams[0].Transport.DialTimeout, Duration(100e6)},
		{"alias value", cfg.Upstreams[1].Transport.DialTimeout, Duration(100e6)},
		{"alias keeps defaults", cfg.Upstreams[1].Transport.IdleTimeout, Duration(90e9)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %v, want %v", tt.got, tt.want)
			}
		})
	}
}
