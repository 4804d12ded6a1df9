package config

// problemCase is a config holding exactly one problem, and the message
// it must get: exact text, file and line ($DIR and $FILE stand for the
// paths in testEnv). TestParseProblem runs them all.
type problemCase struct {
	name string
	yaml string
	want string
}

// frontProblems: request buffers, listeners and routes.
var frontProblems = []problemCase{
	// Request buffers.
	{
		name: "request_buffers connection_bytes too small",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, respond: {}}]
request_buffers:
  connection_bytes: 1000
`,
		want: `t.yaml:4: request_buffers.connection_bytes: 1000 is out of range (at least 65536)`,
	},
	{
		name: "request_buffers memory_bytes negative",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, respond: {}}]
request_buffers: {memory_bytes: -1}
`,
		want: `t.yaml:3: request_buffers.memory_bytes: -1 is out of range (0 keeps no body in memory, or more)`,
	},
	{
		name: "request_buffers file_bytes negative",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, respond: {}}]
request_buffers:
  file_bytes: -5
`,
		want: `t.yaml:4: request_buffers.file_bytes: -5 is out of range (0 writes no body to a file, or more)`,
	},
	{
		name: "request_buffers unknown key",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, respond: {}}]
request_buffers:
  streams: 3
`,
		want: `t.yaml:4: request_buffers.streams: unknown key (allowed: connection_bytes, memory_bytes, file_bytes)`,
	},
	// Listeners.
	{
		name: "no listeners key",
		yaml: `routes: [{name: r, respond: {}}]
`,
		want: `t.yaml:1: listeners: no listeners (at least one is required)`,
	},
	{
		name: "empty listeners",
		yaml: `routes: [{name: r, respond: {}}]
listeners: []
`,
		want: `t.yaml:2: listeners: no listeners (at least one is required)`,
	},
	{
		name: "listener without name",
		yaml: `listeners:
  - address: ":8080"
routes: [{name: r, respond: {}}]
`,
		want: `t.yaml:2: listeners[0].name: missing (a name, unique among listeners)`,
	},
	{
		name: "listener name used twice",
		yaml: `listeners:
  - name: web
    address: ":8080"
  - name: web
    address: ":8081"
routes: [{name: r, respond: {}}]
`,
		want: `t.yaml:4: listeners[1].name: "web" is already used by listeners[0] (names must be unique)`,
	},
	{
		name: "listener without address",
		yaml: `listeners:
  - name: web
routes: [{name: r, respond: {}}]
`,
		want: `t.yaml:2: listeners[0].address: missing (` + testHostPort + `)`,
	},
	{
		name: "listener address without port",
		yaml: `listeners:
  - name: web
    address: localhost
routes: [{name: r, respond: {}}]
`,
		want: `t.yaml:3: listeners[0].address: "localhost" is not host:port (` + testHostPort + `)`,
	},
	{
		name: "listener port out of range",
		yaml: `listeners:
  - name: web
    address: ":70000"
routes: [{name: r, respond: {}}]
`,
		want: `t.yaml:3: listeners[0].address: ":70000" has port 70000, out of range (` + testHostPort + `)`,
	},
	{
		name: "listener port zero",
		yaml: `listeners:
  - name: web
    address: "127.0.0.1:0"
routes: [{name: r, respond: {}}]
`,
		want: `t.yaml:3: listeners[0].address: "127.0.0.1:0" has port 0, out of range (` + testHostPort + `)`,
	},
	{
		name: "listener port by name",
		yaml: `listeners:
  - name: web
    address: "localhost:http"
routes: [{name: r, respond: {}}]
`,
		want: `t.yaml:3: listeners[0].address: "localhost:http" has port "http", not a number (` + testHostPort + `)`,
	},
	{
		name: "listener host not a hostname",
		yaml: `listeners:
  - name: web
    address: "bad_host:80"
routes: [{name: r, respond: {}}]
`,
		want: `t.yaml:3: listeners[0].address: "bad_host:80" has host "bad_host", not an IP address or hostname (` + testHostPort + `)`,
	},
	{
		name: "listener IPv6 without brackets",
		yaml: `listeners:
  - name: web
    address: "::1:80"
routes: [{name: r, respond: {}}]
`,
		want: `t.yaml:3: listeners[0].address: "::1:80" is not host:port (` + testHostPort + `)`,
	},
	{
		name: "listener address used twice, spelled differently",
		yaml: `listeners:
  - name: a
    address: "127.0.0.1:8080"
  - name: b
    address: "127.0.0.1:08080"
routes: [{name: r, respond: {}}]
`,
		want: `t.yaml:5: listeners[1].address: "127.0.0.1:08080" is already used by listeners[0] (addresses must be unique)`,
	},
	{
		name: "explicit zero sockets",
		yaml: `listeners:
  - name: web
    address: ":8080"
    sockets: 0
routes: [{name: r, respond: {}}]
`,
		want: `t.yaml:4: listeners[0].sockets: 0 is out of range (1-1024)`,
	},
	{
		name: "too many sockets",
		yaml: `listeners:
  - name: web
    address: ":8080"
    sockets: 1025
routes: [{name: r, respond: {}}]
`,
		want: `t.yaml:4: listeners[0].sockets: 1025 is out of range (1-1024)`,
	},
	{
		name: "backlog too large",
		yaml: `listeners:
  - name: web
    address: ":8080"
    backlog: 70000
routes: [{name: r, respond: {}}]
`,
		want: `t.yaml:4: listeners[0].backlog: 70000 is out of range (1-65535)`,
	},
	{
		name: "max_connections zero",
		yaml: `listeners:
  - name: web
    address: ":8080"
    max_connections: 0
routes: [{name: r, respond: {}}]
`,
		want: `t.yaml:4: listeners[0].max_connections: 0 is out of range (at least 1)`,
	},
	{
		name: "negative read_timeout",
		yaml: `listeners:
  - name: web
    address: ":8080"
    read_timeout: -1s
routes: [{name: r, respond: {}}]
`,
		want: `t.yaml:4: listeners[0].read_timeout: -1s is out of range (0 for no limit, or more)`,
	},
	{
		name: "max_header_bytes too small",
		yaml: `listeners:
  - name: web
    address: ":8080"
    max_header_bytes: 512
routes: [{name: r, respond: {}}]
`,
		want: `t.yaml:4: listeners[0].max_header_bytes: 512 is out of range (1024-1048576)`,
	},
	{
		name: "max_header_count zero",
		yaml: `listeners:
  - name: web
    address: ":8080"
    max_header_count: 0
routes: [{name: r, respond: {}}]
`,
		want: `t.yaml:4: listeners[0].max_header_count: 0 is out of range (1-10000)`,
	},
	{
		name: "max_method_bytes too large",
		yaml: `listeners:
  - name: web
    address: ":8080"
    max_method_bytes: 5000
routes: [{name: r, respond: {}}]
`,
		want: `t.yaml:4: listeners[0].max_method_bytes: 5000 is out of range (1-1024)`,
	},
	{
		name: "h2c upgrade",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes:
  - name: r
    upstream: app
    upgrades: [websocket, H2C]
upstreams: [{name: app, backends: [{address: "127.0.0.1:9000"}]}]
`,
		want: `t.yaml:5: routes[0].upgrades[1]: h2c is never forwarded (a cleartext HTTP/2 tunnel would bypass routing; use a listener with h2c instead)`,
	},
	{
		name: "upgrade not a token",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes:
  - name: r
    upstream: app
    upgrades: ["web socket"]
upstreams: [{name: app, backends: [{address: "127.0.0.1:9000"}]}]
`,
		want: `t.yaml:5: routes[0].upgrades[0]: "web socket" is not a protocol name (a token such as websocket)`,
	},
	{
		name: "upgrades on a respond route",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes:
  - name: r
    respond: {}
    upgrades: [websocket]
`,
		want: `t.yaml:5: routes[0].upgrades: set on a route without an upstream (only forwarded requests can be upgraded)`,
	},
	{
		name: "allow_methods with an ordinary method",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes:
  - name: r
    respond: {}
    allow_methods: [TRACE, GET]
`,
		want: `t.yaml:5: routes[0].allow_methods[1]: "GET" is not a method this key allows (TRACE, CONNECT; other methods need no allowing)`,
	},

	{
		name: "response buffering mode",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes:
  - name: r
    upstream: app
    response_buffering: "on"
    response_buffer_memory_bytes: 67108865
    response_buffer_file_bytes: -1
upstreams: [{name: app, backends: [{address: "127.0.0.1:9000"}]}]
`,
		want: `t.yaml:5: routes[0].response_buffering: "on" is not a response buffering mode (auto, off)
t.yaml:6: routes[0].response_buffer_memory_bytes: 67108865 is out of range (0-67108864)
t.yaml:7: routes[0].response_buffer_file_bytes: -1 is out of range (0 keeps answers in memory only, or more)`,
	},
	{
		name: "response buffering on a respond route",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes:
  - name: r
    respond: {}
    response_buffering: "off"
`,
		want: `t.yaml:5: routes[0].response_buffering: set on a route without an upstream (only answers from a backend are buffered)`,
	},
	{
		name: "response buffer caps",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, respond: {}}]
response_buffers:
  memory_bytes: -1
  file_bytes: -2
`,
		want: `t.yaml:4: response_buffers.memory_bytes: -1 is out of range (0 or more)
t.yaml:5: response_buffers.file_bytes: -2 is out of range (0 or more)`,
	},

	// Routes.
	{
		name: "no routes",
		yaml: `listeners: [{name: web, address: ":8080"}]
`,
		want: `t.yaml:1: routes: no routes (at least one is required)`,
	},
	{
		name: "route without name",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes:
  - respond: {}
`,
		want: `t.yaml:3: routes[0].name: missing (a name, unique among routes)`,
	},
	{
		name: "route name used twice",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes:
  - name: r
    respond: {}
  - name: r
    respond: {}
`,
		want: `t.yaml:5: routes[1].name: "r" is already used by routes[0] (names must be unique)`,
	},
	{
		name: "route without action",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes:
  - name: r
    match: {path: /}
`,
		want: `t.yaml:3: routes[0]: no action (exactly one of upstream, split, respond, static, redirect)`,
	},
	{
		name: "route with two actions",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes:
  - name: r
    upstream: app
    respond: {status: 404}
upstreams: [{name: app, backends: [{address: "127.0.0.1:9000"}]}]
`,
		want: `t.yaml:3: routes[0]: upstream and respond are both set (exactly one of upstream, split, respond, static, redirect)`,
	},
	{
		name: "route with three actions",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes:
  - name: r
    upstream: app
    respond: {}
    static: {root: "${DIR}"}
upstreams: [{name: app, backends: [{address: "127.0.0.1:9000"}]}]
`,
		want: `t.yaml:3: routes[0]: upstream, respond and static are all set (exactly one of them)`,
	},
	{
		name: "route names an undefined upstream",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes:
  - name: a
    upstream: app
  - name: b
    upstream: ap
upstreams:
  - {name: app, backends: [{address: "127.0.0.1:9000"}]}
  - {name: api, backends: [{address: "127.0.0.1:9001"}]}
`,
		want: `t.yaml:6: routes[1].upstream: upstream "ap" is not defined (defined: app, api)`,
	},
	{
		name: "route names an upstream when none is defined",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes:
  - name: a
    upstream: app
`,
		want: `t.yaml:4: routes[0].upstream: upstream "app" is not defined (no upstreams are defined)`,
	},
	{
		name: "match host with port",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes:
  - name: r
    match:
      host: "example.com:8080"
    respond: {}
`,
		want: `t.yaml:5: routes[0].match.host: "example.com:8080" is not a host (an exact hostname such as example.com, *.example.com, or *; no port)`,
	},
	{
		name: "match host with a wildcard inside",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes:
  - name: r
    match:
      host: "api.*.example.com"
    respond: {}
`,
		want: `t.yaml:5: routes[0].match.host: "api.*.example.com" is not a host (an exact hostname such as example.com, *.example.com, or *; no port)`,
	},
	{
		name: "match path without slash",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes:
  - name: r
    match:
      path: api
    respond: {}
`,
		want: `t.yaml:5: routes[0].match.path: "api" does not start with / (a path such as /api)`,
	},
	{
		name: "match path_prefix without slash",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes:
  - name: r
    match:
      path_prefix: api/
    respond: {}
`,
		want: `t.yaml:5: routes[0].match.path_prefix: "api/" does not start with / (a path such as /api/)`,
	},
	{
		name: "match path and path_prefix",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes:
  - name: r
    match:
      path: /a
      path_prefix: /b/
    respond: {}
`,
		want: `t.yaml:4: routes[0].match: path and path_prefix are both set (at most one)`,
	},
	{
		name: "respond status too large",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes:
  - name: r
    respond:
      status: 600
`,
		want: `t.yaml:5: routes[0].respond.status: 600 is out of range (100-599)`,
	},
	{
		name: "respond status explicit zero",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes:
  - name: r
    respond:
      status: 0
`,
		want: `t.yaml:5: routes[0].respond.status: 0 is out of range (100-599)`,
	},
	{
		name: "respond header name not a token",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes:
  - name: r
    respond:
      headers:
        X-Good: "1"
        "X Bad": "2"
`,
		want: "t.yaml:7: routes[0].respond.headers[\"X Bad\"]: \"X Bad\" is not a header name (letters, digits and !#$%&'*+-.^_`|~)",
	},
	{
		name: "respond header value with CRLF",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes:
  - name: r
    respond:
      headers:
        X-Split: "a\r\nSet-Cookie: x"
`,
		want: `t.yaml:6: routes[0].respond.headers.X-Split: "a\r\nSet-Cookie: x" has a line break or NUL (a value on one line)`,
	},
	{
		name: "respond header repeated in another case",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes:
  - name: r
    respond:
      headers:
        x-a: "1"
        X-B: "2"
        X-A: "3"
`,
		want: `t.yaml:8: routes[0].respond.headers.X-A: "X-A" repeats header "x-a" (names are case-insensitive; set each once)`,
	},
	{
		name: "admin address with empty port",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, respond: {}}]
admin: {address: "localhost:"}
`,
		want: `t.yaml:3: admin.address: "localhost:" has no port (` + testHostPort + `, or off)`,
	},
	{
		name: "static without root",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes:
  - name: r
    static:
      index: a.html
`,
		want: `t.yaml:4: routes[0].static.root: missing (an existing directory)`,
	},
	{
		name: "static root does not exist",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes:
  - name: r
    static:
      root: ${DIR}/missing
`,
		want: `t.yaml:5: routes[0].static.root: "$DIR/missing" does not exist (an existing directory)`,
	},
	{
		name: "static root is a file",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes:
  - name: r
    static:
      root: ${FILE}
`,
		want: `t.yaml:5: routes[0].static.root: "$FILE" is not a directory (an existing directory)`,
	},
	{
		name: "static index with a slash",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes:
  - name: r
    static:
      root: ${DIR}
      index: pages/index.html
`,
		want: `t.yaml:6: routes[0].static.index: "pages/index.html" is not a file name (a plain file name such as index.html, without /)`,
	},
	{
		name: "static strip_prefix without slash",
		yaml: `listeners: [{name: web, address: ":8080"}]
routes:
  - name: r
    static:
      root: ${DIR}
      strip_prefix: static
`,
		want: `t.yaml:6: routes[0].static.strip_prefix: "static" does not start with / (a path such as /static/)`,
	},
}
