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
			src := policyConfig(tt.listener, tt.route, tt.transport)
			_, ps := parseProblems(t, src, testEnv(t))
			if got := ps.Error(); got != tt.want {
				t.Errorf("got\n%v\nwant\n%v\nin\n%s", got, tt.want, src)
			}
		})
	}
}
