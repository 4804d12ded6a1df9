package config

// backProblems: upstreams, health checks, passive ejection, circuit
// breakers, retries, admin and logging (problemCase).
var backProblems = []problemCase{
	// Upstreams.
	{
		name: "upstream without name",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, respond: {}}]
upstreams:
  - backends: [{address: "127.0.0.1:9000"}]
`,
		want: `t.yaml:4: upstreams[0].name: missing (a name, unique among upstreams)`,
	},
	{
		name: "upstream name used twice",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, upstream: app}]
upstreams:
  - name: app
    backends: [{address: "127.0.0.1:9000"}]
  - name: app
    backends: [{address: "127.0.0.1:9001"}]
`,
		want: `t.yaml:6: upstreams[1].name: "app" is already used by upstreams[0] (names must be unique)`,
	},
	{
		name: "unknown strategy",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, upstream: app}]
upstreams:
  - name: app
    strategy: fastest
    backends: [{address: "127.0.0.1:9000"}]
`,
		want: `t.yaml:5: upstreams[0].strategy: "fastest" is not a strategy (round_robin, weighted_round_robin, least_conn, consistent_hash, ip_hash, random, p2c)`,
	},
	{
		name: "upstream without backends key",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, upstream: app}]
upstreams:
  - name: app
`,
		want: `t.yaml:4: upstreams[0].backends: no backends (at least one, or a backends_file)`,
	},
	{
		name: "upstream with empty backends",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, upstream: app}]
upstreams:
  - name: app
    backends: []
`,
		want: `t.yaml:5: upstreams[0].backends: no backends (at least one, or a backends_file)`,
	},
	{
		name: "backend address without port",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, upstream: app}]
upstreams:
  - name: app
    backends:
      - address: "10.0.0.1"
`,
		want: `t.yaml:6: upstreams[0].backends[0].address: "10.0.0.1" is not host:port (` + testHostPort + `)`,
	},
	{
		name: "backend address used twice",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, upstream: app}]
upstreams:
  - name: app
    backends:
      - address: "10.0.0.1:80"
      - address: "10.0.0.2:80"
      - address: "10.0.0.1:80"
`,
		want: `t.yaml:8: upstreams[0].backends[2].address: "10.0.0.1:80" is already used by upstreams[0].backends[0] (addresses must be unique within an upstream)`,
	},
	{
		name: "explicit zero weight",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, upstream: app}]
upstreams:
  - name: app
    backends:
      - address: "10.0.0.1:80"
        weight: 0
`,
		want: `t.yaml:7: upstreams[0].backends[0].weight: 0 is out of range (1-1000)`,
	},
	{
		name: "weight too large",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, upstream: app}]
upstreams:
  - name: app
    backends:
      - address: "10.0.0.1:80"
      - address: "10.0.0.2:80"
        weight: 1001
`,
		want: `t.yaml:8: upstreams[0].backends[1].weight: 1001 is out of range (1-1000)`,
	},
	{
		name: "negative max_idle_per_backend",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, upstream: app}]
upstreams:
  - name: app
    backends: [{address: "10.0.0.1:80"}]
    transport:
      max_idle_per_backend: -1
`,
		want: `t.yaml:7: upstreams[0].transport.max_idle_per_backend: -1 is out of range (0-100000)`,
	},
	{
		name: "zero dial_timeout",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, upstream: app}]
upstreams:
  - name: app
    backends: [{address: "10.0.0.1:80"}]
    transport:
      dial_timeout: 0s
`,
		want: `t.yaml:7: upstreams[0].transport.dial_timeout: 0s is out of range (more than 0, such as 2s)`,
	},

	// Health checks.
	{
		name: "health check path without slash",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, upstream: app}]
upstreams:
  - name: app
    backends: [{address: "10.0.0.1:80"}]
    health_check:
      path: healthz
`,
		want: `t.yaml:7: upstreams[0].health_check.path: "healthz" does not start with / (a path such as /healthz)`,
	},
	{
		name: "health check zero interval",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, upstream: app}]
upstreams:
  - name: app
    backends: [{address: "10.0.0.1:80"}]
    health_check:
      interval: 0
`,
		want: `t.yaml:7: upstreams[0].health_check.interval: 0s is out of range (more than 0, such as 2s)`,
	},
	{
		name: "health check timeout longer than the default interval",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, upstream: app}]
upstreams:
  - name: app
    backends: [{address: "10.0.0.1:80"}]
    health_check:
      timeout: 3s
`,
		want: `t.yaml:7: upstreams[0].health_check.timeout: 3s is longer than the interval 2s (at most the interval)`,
	},
	{
		name: "health check zero timeout",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, upstream: app}]
upstreams:
  - name: app
    backends: [{address: "10.0.0.1:80"}]
    health_check:
      timeout: 0s
`,
		want: `t.yaml:7: upstreams[0].health_check.timeout: 0s is out of range (more than 0, such as 2s)`,
	},
	{
		name: "health check zero fails",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, upstream: app}]
upstreams:
  - name: app
    backends: [{address: "10.0.0.1:80"}]
    health_check:
      fails: 0
`,
		want: `t.yaml:7: upstreams[0].health_check.fails: 0 is out of range (at least 1)`,
	},
	{
		name: "health check zero passes",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, upstream: app}]
upstreams:
  - name: app
    backends: [{address: "10.0.0.1:80"}]
    health_check:
      passes: 0
`,
		want: `t.yaml:7: upstreams[0].health_check.passes: 0 is out of range (at least 1)`,
	},
	{
		name: "expect_status range backwards",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, upstream: app}]
upstreams:
  - name: app
    backends: [{address: "10.0.0.1:80"}]
    health_check:
      expect_status: "200,399-300"
`,
		want: `t.yaml:7: upstreams[0].health_check.expect_status: "200,399-300" is not a status list: range 399-300 ends before it starts (codes 100-599 and lo-hi ranges, comma-separated, such as 200-399 or 200,204,300-399)`,
	},
	{
		name: "expect_status code out of range",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, upstream: app}]
upstreams:
  - name: app
    backends: [{address: "10.0.0.1:80"}]
    health_check:
      expect_status: 200-600
`,
		want: `t.yaml:7: upstreams[0].health_check.expect_status: "200-600" is not a status list: status 600 is out of range 100-599 (codes 100-599 and lo-hi ranges, comma-separated, such as 200-399 or 200,204,300-399)`,
	},
	{
		name: "expect_status not a code",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, upstream: app}]
upstreams:
  - name: app
    backends: [{address: "10.0.0.1:80"}]
    health_check:
      expect_status: 2xx
`,
		want: `t.yaml:7: upstreams[0].health_check.expect_status: "2xx" is not a status list: "2xx" is not a status code (codes 100-599 and lo-hi ranges, comma-separated, such as 200-399 or 200,204,300-399)`,
	},

	// Passive ejection.
	{
		name: "passive zero max_fails",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, upstream: app}]
upstreams:
  - name: app
    backends: [{address: "10.0.0.1:80"}]
    passive:
      max_fails: 0
`,
		want: `t.yaml:7: upstreams[0].passive.max_fails: 0 is out of range (at least 1)`,
	},
	{
		name: "passive zero fail_window",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, upstream: app}]
upstreams:
  - name: app
    backends: [{address: "10.0.0.1:80"}]
    passive:
      fail_window: 0s
`,
		want: `t.yaml:7: upstreams[0].passive.fail_window: 0s is out of range (more than 0, such as 2s)`,
	},
	{
		name: "passive zero eject_for",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, upstream: app}]
upstreams:
  - name: app
    backends: [{address: "10.0.0.1:80"}]
    passive:
      eject_for: 0s
`,
		want: `t.yaml:7: upstreams[0].passive.eject_for: 0s is out of range (more than 0, such as 2s)`,
	},
	{
		name: "passive max_eject_for shorter than the default eject_for",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, upstream: app}]
upstreams:
  - name: app
    backends: [{address: "10.0.0.1:80"}]
    passive:
      max_eject_for: 10s
`,
		want: `t.yaml:7: upstreams[0].passive.max_eject_for: 10s is shorter than eject_for 30s (at least eject_for)`,
	},

	// Circuit breakers.
	{
		name: "breaker negative consecutive_failures",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, upstream: app}]
upstreams:
  - name: app
    backends: [{address: "10.0.0.1:80"}]
    circuit_breaker:
      consecutive_failures: -1
`,
		want: `t.yaml:7: upstreams[0].circuit_breaker.consecutive_failures: -1 is out of range (at least 0; 0 turns this trigger off)`,
	},
	{
		name: "breaker failure_ratio above 1",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, upstream: app}]
upstreams:
  - name: app
    backends: [{address: "10.0.0.1:80"}]
    circuit_breaker:
      failure_ratio: 1.5
`,
		want: `t.yaml:7: upstreams[0].circuit_breaker.failure_ratio: 1.5 is out of range (0-1; 0 turns this trigger off)`,
	},
	{
		name: "breaker failure_ratio NaN",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, upstream: app}]
upstreams:
  - name: app
    backends: [{address: "10.0.0.1:80"}]
    circuit_breaker:
      failure_ratio: .nan
`,
		want: `t.yaml:7: upstreams[0].circuit_breaker.failure_ratio: NaN is out of range (0-1; 0 turns this trigger off)`,
	},
	{
		name: "breaker with both triggers off",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, upstream: app}]
upstreams:
  - name: app
    backends: [{address: "10.0.0.1:80"}]
    circuit_breaker:
      consecutive_failures: 0
      failure_ratio: 0
`,
		want: `t.yaml:6: upstreams[0].circuit_breaker: consecutive_failures and failure_ratio are both 0 (at least one trigger must be on)`,
	},
	{
		name: "breaker zero min_requests",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, upstream: app}]
upstreams:
  - name: app
    backends: [{address: "10.0.0.1:80"}]
    circuit_breaker:
      min_requests: 0
`,
		want: `t.yaml:7: upstreams[0].circuit_breaker.min_requests: 0 is out of range (at least 1)`,
	},
	{
		name: "breaker zero interval",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, upstream: app}]
upstreams:
  - name: app
    backends: [{address: "10.0.0.1:80"}]
    circuit_breaker:
      interval: 0s
`,
		want: `t.yaml:7: upstreams[0].circuit_breaker.interval: 0s is out of range (more than 0, such as 2s)`,
	},
	{
		name: "breaker negative open_for",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, upstream: app}]
upstreams:
  - name: app
    backends: [{address: "10.0.0.1:80"}]
    circuit_breaker:
      open_for: -5s
`,
		want: `t.yaml:7: upstreams[0].circuit_breaker.open_for: -5s is out of range (more than 0, such as 2s)`,
	},
	{
		name: "breaker zero half_open_requests",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, upstream: app}]
upstreams:
  - name: app
    backends: [{address: "10.0.0.1:80"}]
    circuit_breaker:
      half_open_requests: 0
`,
		want: `t.yaml:7: upstreams[0].circuit_breaker.half_open_requests: 0 is out of range (1-1000)`,
	},
	{
		name: "breaker too many half_open_requests",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, upstream: app}]
upstreams:
  - name: app
    backends: [{address: "10.0.0.1:80"}]
    circuit_breaker:
      half_open_requests: 1001
`,
		want: `t.yaml:7: upstreams[0].circuit_breaker.half_open_requests: 1001 is out of range (1-1000)`,
	},

	// Retries.
	{
		name: "too many retry attempts",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, upstream: app}]
upstreams:
  - name: app
    backends: [{address: "10.0.0.1:80"}]
    retries:
      attempts: 11
`,
		want: `t.yaml:7: upstreams[0].retries.attempts: 11 is out of range (0-10; 0 disables retries)`,
	},
	{
		name: "retry on a 4xx status",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, upstream: app}]
upstreams:
  - name: app
    backends: [{address: "10.0.0.1:80"}]
    retries:
      on:
        - connect_error
        - 404
`,
		want: `t.yaml:9: upstreams[0].retries.on[1]: "404" is not a retry condition (connect_error, reset, timeout, or a status 500-599)`,
	},
	{
		name: "retry on an unknown condition",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, upstream: app}]
upstreams:
  - name: app
    backends: [{address: "10.0.0.1:80"}]
    retries:
      on: [refused]
`,
		want: `t.yaml:7: upstreams[0].retries.on[0]: "refused" is not a retry condition (connect_error, reset, timeout, or a status 500-599)`,
	},
	{
		name: "retry on nothing",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, upstream: app}]
upstreams:
  - name: app
    backends: [{address: "10.0.0.1:80"}]
    retries:
      on: []
`,
		want: `t.yaml:7: upstreams[0].retries.on: empty (at least one of connect_error, reset, timeout, or a status 500-599; attempts: 0 disables retries)`,
	},
	{
		name: "retry budget above 1",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, upstream: app}]
upstreams:
  - name: app
    backends: [{address: "10.0.0.1:80"}]
    retries:
      budget_ratio: 2
`,
		want: `t.yaml:7: upstreams[0].retries.budget_ratio: 2 is out of range (0-1; 0 turns the budget off)`,
	},

	// Admin and logging.
	{
		name: "admin address without port",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, respond: {}}]
admin:
  address: localhost
`,
		want: `t.yaml:4: admin.address: "localhost" is not host:port (` + testHostPort + `, or off)`,
	},
	{
		name: "unknown log level",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, respond: {}}]
logging:
  level: verbose
`,
		want: `t.yaml:4: logging.level: "verbose" is not a level (debug, info, warn, error)`,
	},
	{
		name: "unknown log format",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, respond: {}}]
logging:
  format: text
`,
		want: `t.yaml:4: logging.format: "text" is not a format (json, console)`,
	},
}
