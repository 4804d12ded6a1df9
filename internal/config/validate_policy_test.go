package config

import (
	"strings"
	"testing"
)

// policyProblems are the edge policy keys' problems, each config with
// exactly one, each message with its file and line. The head of every
// config is policyHead: a listener and an upstream; {{ROUTE}} and
// {{LISTENER}} stand for what a test adds to the route and the listener.
var policyProblems = []struct {
	name      string
	listener  string // YAML lines added to the listener (indented 4)
	route     string // YAML lines added to the route (indented 4)
	transport string // YAML lines added to the upstream's transport (indented 6)
	want      string
}{
	// Matching.
	{name: "method not a token", route: "match: {methods: [GET, \"BAD METHOD\"]}", want: `t.yaml:7: routes[0].match.methods[1]: "BAD METHOD" is not a method (a token such as GET)`},
	{name: "header name not a token", route: "match:\n      headers: {\"bad name\": \"*\"}", want: `t.yaml:8: routes[0].match.headers["bad name"]: "bad name" is not a header name (letters, digits and !#$%&'*+-.^_` + "`" + `|~)`},
	{name: "header regex", route: "match:\n      headers: {X-A: \"~(\"}", want: "t.yaml:8: routes[0].match.headers.X-A: \"(\" is not a regular expression: error parsing regexp: missing closing ): `(` (\"*\" (present), \"~REGEX\", or the exact value)"},
	{name: "header empty value", route: "match:\n      headers: {X-A: \"\"}", want: `t.yaml:8: routes[0].match.headers.X-A: empty ("*" (present), "~REGEX", or the exact value)`},
	{name: "query regex", route: "match:\n      query: {page: \"~[\"}", want: "t.yaml:8: routes[0].match.query.page: \"[\" is not a regular expression: error parsing regexp: missing closing ]: `[` (\"*\" (present), \"~REGEX\", or the exact value)"},
	{name: "client cidr", route: "match:\n      client_cidrs: [10.0.0.0/8, 10.0.0.0/33]", want: `t.yaml:8: routes[0].match.client_cidrs[1]: "10.0.0.0/33" is not a CIDR or an IP address (a CIDR such as 10.0.0.0/8 or 2001:db8::/32, or an IP address)`},
	{name: "not empty", route: "match:\n      not: {host: \"*\"}", want: `t.yaml:8: routes[0].match.not: empty: it would match every request, so the route none (a host, path or condition to exclude)`},
	{name: "not checked as a match", route: "match:\n      not: {path: nope}", want: `t.yaml:8: routes[0].match.not.path: "nope" does not start with / (a path such as /api)`},

	// The listener's client policy.
	{name: "trusted proxy", listener: "trusted_proxies: [10.0.0.0/8, nope]", want: `t.yaml:4: listeners[0].trusted_proxies[1]: "nope" is not a CIDR or an IP address (a CIDR such as 10.0.0.0/8 or 2001:db8::/32, or an IP address)`},
	{name: "client ip header", listener: "trusted_proxies: [10.0.0.1]\n    client_ip_header: x-client", want: `t.yaml:5: listeners[0].client_ip_header: "x-client" is not a field a client address is read from (x-forwarded-for, forwarded, x-real-ip)`},
	{name: "client ip header without trusted proxies", listener: "client_ip_header: forwarded", want: `t.yaml:4: listeners[0].client_ip_header: set without trusted_proxies (only trusted proxies' fields are read)`},
	{name: "proxy protocol mode", listener: "trusted_proxies: [10.0.0.1]\n    proxy_protocol: v3", want: `t.yaml:5: listeners[0].proxy_protocol: "v3" is not a PROXY protocol mode (v1, v2, optional)`},
	{name: "proxy protocol without trusted proxies", listener: "proxy_protocol: v2", want: `t.yaml:4: listeners[0].proxy_protocol: set without trusted_proxies (the load balancers allowed to send the header)`},
	{name: "redirect_https on TLS", listener: "redirect_https: true\n    tls: {cert_file: $FILE, key_file: $FILE}", want: `t.yaml:4: listeners[0].redirect_https: set on a TLS listener (it redirects cleartext requests)` + "\n" +
		`t.yaml:5: listeners[0].tls.cert_file: "$FILE" holds no PEM certificate (a PEM file: the certificate, then the intermediates of its chain)`},
	{name: "max connections per ip", listener: "max_connections_per_ip: -1", want: `t.yaml:4: listeners[0].max_connections_per_ip: -1 is out of range (0 for no cap, or more)`},
	{name: "transport proxy protocol", transport: ", proxy_protocol: optional", want: `t.yaml:8: upstreams[0].transport.proxy_protocol: "optional" is not a PROXY protocol version (v1, v2)`},

	// Header rules, rewrites and redirects.
	{name: "request header hop-by-hop", route: "request_headers:\n      set: {X-A: a, Connection: close}", want: `t.yaml:8: routes[0].request_headers.set.Connection: Connection is hop-by-hop (RFC 9110 §7.6.1): it belongs to one connection, and Helios writes its own`},
	{name: "request header bad variable", route: "request_headers:\n      add: {X-A: \"{nope}\"}", want: `t.yaml:8: routes[0].request_headers.add.X-A: X-A: "{nope}": unknown variable {nope}; the variables are {client_ip}, {host}, {path}, {query}, {?query} ("?" and the query when there is one), {scheme}, {request_id}, {header.NAME}`},
	{name: "response header remove framing", route: "response_headers:\n      remove: [Server, Content-Length]", want: `t.yaml:8: routes[0].response_headers.remove[1]: Content-Length is framing: Helios writes it for the body it sends`},
	{name: "rewrite regex with prefix", route: "rewrite: {regex: \"^/a\", replacement: /b, strip_prefix: /a}", want: `t.yaml:7: routes[0].rewrite: regex cannot go with strip_prefix or add_prefix`},
	{name: "rewrite empty", route: "rewrite: {keep_query: true}", want: `t.yaml:7: routes[0].rewrite: empty (strip_prefix, add_prefix, or regex with replacement)`},
	{name: "redirect without to", route: "redirect: {status: 302}", want: "t.yaml:5: routes[0]: upstream and redirect are both set (exactly one of upstream, split, respond, static, redirect)\nt.yaml:7: routes[0].redirect.to: missing (a URL or path, such as https://example.com{path}{?query})"},
	{name: "redirect bad variable", route: "redirect: {to: \"https://x{nope}\"}", want: "t.yaml:5: routes[0]: upstream and redirect are both set (exactly one of upstream, split, respond, static, redirect)\nt.yaml:7: routes[0].redirect.to: \"https://x{nope}\": unknown variable {nope}; the variables are {client_ip}, {host}, {path}, {query}, {?query} (\"?\" and the query when there is one), {scheme}, {request_id}, {header.NAME}"},
	{name: "rewrite regex", route: "rewrite: {regex: \"(\", replacement: /x}", want: "t.yaml:7: routes[0].rewrite: regex: error parsing regexp: missing closing ): `(`"},
	{name: "rewrite replacement", route: "rewrite: {regex: \"^/a\", replacement: b}", want: "t.yaml:7: routes[0].rewrite: replacement: want a path starting with /"},
	{name: "rewrite prefix", route: "rewrite: {add_prefix: v2}", want: "t.yaml:7: routes[0].rewrite: strip_prefix and add_prefix start with /"},
	{name: "redirect status", route: "redirect: {to: /x, status: 200}", want: "t.yaml:5: routes[0]: upstream and redirect are both set (exactly one of upstream, split, respond, static, redirect)\nt.yaml:7: routes[0].redirect.status: 200 is not a redirect status (301, 302, 303, 307, 308)"},

	// Access control, authentication, rate limits.
	{name: "allow", route: "allow: [10.0.0.0/8, 300.1.1.1]", want: `t.yaml:7: routes[0].allow[1]: "300.1.1.1" is not a CIDR or an IP address (a CIDR such as 10.0.0.0/8 or 2001:db8::/32, or an IP address)`},
	{name: "deny", route: "deny: [\"fe80::1%eth0\"]", want: `t.yaml:7: routes[0].deny[0]: "fe80::1%eth0" is not a CIDR or an IP address (a CIDR such as 10.0.0.0/8 or 2001:db8::/32, or an IP address)`},
	{name: "basic auth without users", route: "basic_auth: {realm: admin}", want: `t.yaml:7: routes[0].basic_auth.users_file: missing (an htpasswd file of bcrypt hashes, as htpasswd -B writes it)`},
	{name: "basic auth users file not bcrypt", route: "basic_auth: {users_file: $FILE}", want: `t.yaml:7: routes[0].basic_auth.users_file: $FILE:1: want name:hash`},
	{name: "basic auth realm", route: "basic_auth:\n      realm: \"a\\\"b\"\n      users_file: $FILE", want: `t.yaml:8: routes[0].basic_auth.realm: "a\"b" has a quote, a backslash or a control character (a plain name such as Restricted)` + "\n" + `t.yaml:9: routes[0].basic_auth.users_file: $FILE:1: want name:hash`},
	{name: "forward auth address", route: "forward_auth: {address: \"auth:9000\"}", want: `t.yaml:7: routes[0].forward_auth.address: "auth:9000" is not an http or https URL (such as http://auth.internal:9000/verify)`},
	{name: "forward auth copy headers", route: "forward_auth: {address: \"http://a\", copy_headers: [\"x y\"]}", want: "t.yaml:7: routes[0].forward_auth.copy_headers[0]: \"x y\" is not a header name (letters, digits and !#$%&'*+-.^_`|~)"},
	{name: "forward auth timeout", route: "forward_auth: {address: \"http://a\", timeout: 2m}", want: `t.yaml:7: routes[0].forward_auth.timeout: 2m0s is out of range (1ms-1m, such as 5s)`},
	{name: "rate limit without requests", route: "rate_limit: {per: 1m}", want: "t.yaml:7: routes[0].rate_limit.requests: missing (the requests allowed per `per`, at least 1)"},
	{name: "rate limit requests", route: "rate_limit: {requests: 0}", want: `t.yaml:7: routes[0].rate_limit.requests: 0 is out of range (at least 1)`},
	{name: "rate limit per", route: "rate_limit: {requests: 10, per: 0s}", want: `t.yaml:7: routes[0].rate_limit.per: 0s is out of range (1ms-24h, such as 1s or 1m)`},
	{name: "rate limit burst", route: "rate_limit: {requests: 10, burst: -1}", want: `t.yaml:7: routes[0].rate_limit.burst: -1 is out of range (at least 0)`},
	{name: "rate limit key", route: "rate_limit: {requests: 10, key: \"cookie:a\"}", want: `t.yaml:7: routes[0].rate_limit.key: "cookie:a" is not a rate limit key (client_ip, header:NAME, route)`},
	{name: "rate limit too fast", route: "rate_limit: {requests: 2000000, per: 1ms}", want: `t.yaml:7: routes[0].rate_limit.requests: 2000000 per 1ms is more than one a nanosecond (a lower rate, or a longer per)`},
	{name: "rate limit store scheme", route: "rate_limit: {requests: 10, store: \"http://redis:6379\"}", want: `t.yaml:7: routes[0].rate_limit.store: "http://redis:6379": scheme "http" is not redis or rediss (redis://[[USER]:PASSWORD@]HOST[:PORT][/DB] or rediss://... for TLS, such as redis://redis:6379/0)`},
	{name: "rate limit store database", route: "rate_limit: {requests: 10, store: \"redis://:secret@redis/x\"}", want: `t.yaml:7: routes[0].rate_limit.store: "redis://:xxxxx@redis/x": database "x" is not a number (the path is /DB, such as /0)`},
	{name: "rate limit store port", route: "rate_limit: {requests: 10, store: \"rediss://redis:0\"}", want: `t.yaml:7: routes[0].rate_limit.store: "rediss://redis:0": port "0" is out of range (1-65535)`},
	{name: "rate limit store query", route: "rate_limit: {requests: 10, store: \"redis://redis?pool_size=1\"}", want: `t.yaml:7: routes[0].rate_limit.store: "redis://redis?pool_size=1": a query or fragment is not allowed (redis://[[USER]:PASSWORD@]HOST[:PORT][/DB] or rediss://... for TLS, such as redis://redis:6379/0)`},
	{name: "rate limit store no host", route: "rate_limit: {requests: 10, store: \"redis:///0\"}", want: `t.yaml:7: routes[0].rate_limit.store: "redis:///0": no host (redis://[[USER]:PASSWORD@]HOST[:PORT][/DB] or rediss://... for TLS, such as redis://redis:6379/0)`},
	{name: "rate limit store password unset", route: "rate_limit:\n      requests: 10\n      store: redis://redis\n      store_password_env: NOPE_UNSET", want: `t.yaml:10: routes[0].rate_limit.store_password_env: the environment variable NOPE_UNSET is not set (it holds the Redis password)`},
	{name: "rate limit store password name", route: "rate_limit: {requests: 10, store: redis://redis, store_password_env: \"A-B\"}", want: `t.yaml:7: routes[0].rate_limit.store_password_env: "A-B" is not an environment variable's name (letters, digits and _)`},
	{name: "rate limit instances", route: "rate_limit: {requests: 10, store: redis://redis, instances: 0}", want: `t.yaml:7: routes[0].rate_limit.instances: 0 is out of range (at least 1: how many instances share the store)`},
	{name: "rate limit instances without store", route: "rate_limit: {requests: 10, instances: 3}", want: `t.yaml:7: routes[0].rate_limit.instances: only applies with store (a Redis URL the instances share)`},
}

// policyConfig renders one of policyProblems' configs.
func policyConfig(listener, route, transport string) string {
	cfg := `listeners:
  - name: web
    address: ":8080"
{{LISTENER}}routes:
  - name: app
    upstream: app
{{ROUTE}}upstreams:
  - {name: app, backends: [{address: "127.0.0.1:9000"}], transport: {max_idle_per_backend: 1{{TRANSPORT}}}}
`
	// A route's first added line is line 7 when the listener adds none;
	// the lines after a first one carry their own indentation.
	indent := func(s, pad string) string {
		if s == "" {
			return ""
		}
		return pad + s + "\n"
	}
	return strings.NewReplacer("{{LISTENER}}", indent(listener, "    "), "{{ROUTE}}", indent(route, "    "), "{{TRANSPORT}}", transport).Replace(cfg)
}

func TestPolicyProblems(t *testing.T) {
	for _, tt := range policyProblems {
		t.Run(tt.name, func(t *testing.T) {
			env := testEnv(t)
			src := strings.ReplaceAll(policyConfig(tt.listener, tt.route, tt.transport), "$FILE", env["FILE"])
			want := strings.ReplaceAll(tt.want, "$FILE", env["FILE"])
			_, ps := parseProblems(t, src, env)
			if got := ps.Error(); got != want {
				t.Errorf("got\n%v\nwant\n%v\nin\n%s", got, want, src)
			}
		})
	}
}

// TestRateLimitStore: a shared rate limit's keys, their defaults, and the
// password read from the variable store_password_env names.
func TestRateLimitStore(t *testing.T) {
	cfg := mustParse(t, policyConfig("", "rate_limit:\n      requests: 10\n      store: rediss://helios@redis.internal/3\n      store_password_env: REDIS_PW", ""), map[string]string{"REDIS_PW": "p@ss/word"})
	rl := cfg.Routes[0].RateLimit
	if rl.Instances != 1 || rl.StorePassword != "p@ss/word" {
		t.Errorf("got instances %d, password %q; want 1, %q", rl.Instances, rl.StorePassword, "p@ss/word")
	}
	u, err := ParseStoreURL(rl.Store)
	want := StoreURL{TLS: true, Addr: "redis.internal:6379", Host: "redis.internal", DB: 3, Username: "helios"}
	if err != nil || u != want {
		t.Errorf("ParseStoreURL: got %+v, %v; want %+v", u, err, want)
	}
	if got := u.Redacted(); got != "rediss://redis.internal:6379/3" {
		t.Errorf("Redacted: got %q, want rediss://redis.internal:6379/3", got)
	}
	u, err = ParseStoreURL("redis://:s%40cret@[::1]:6380")
	want = StoreURL{Addr: "[::1]:6380", Host: "::1", Password: "s@cret"}
	if err != nil || u != want {
		t.Errorf("ParseStoreURL with an IPv6 host: got %+v, %v; want %+v", u, err, want)
	}
}

// TestPolicyKeysOnTheWrongRoute checks the keys that only some actions
// take: request_headers on a route that does not forward, rewrite on a
// fixed answer.
func TestPolicyKeysOnTheWrongRoute(t *testing.T) {
	_, ps := parseProblems(t, `listeners: [{name: web, address: ":8080"}]
routes:
  - name: fixed
    respond: {}
    request_headers: {remove: [X-A]}
    rewrite: {strip_prefix: /a}
`, nil)
	want := "t.yaml:5: routes[0].request_headers: set on a route without an upstream (only forwarded requests go on)\n" +
		"t.yaml:6: routes[0].rewrite: set on a route that neither forwards nor serves files (there is no path to rewrite)"
	if got := ps.Error(); got != want {
		t.Errorf("got\n%v\nwant\n%v", got, want)
	}
}
