package config

import (
	"testing"
	"time"
)

// TestStickyAndMirrorDefaults checks the defaults of upstreams[].sticky
// and routes[].mirror, and that their absence leaves both nil.
func TestStickyAndMirrorDefaults(t *testing.T) {
	cfg := mustParse(t, `listeners: [{name: web, address: ":80"}]
routes:
  - {name: a, upstream: app, mirror: {upstream: shadow}}
  - {name: b, upstream: app}
upstreams:
  - {name: app, sticky: {}, backends: [{address: "127.0.0.1:9000"}]}
  - {name: shadow, backends: [{address: "127.0.0.1:9001"}]}
`, nil)
	s := cfg.Upstreams[0].Sticky
	if s == nil {
		t.Fatal("sticky: got nil, want the block with its defaults")
	}
	if s.Cookie != "helios_app" || s.TTL != 0 || s.Secure || !s.HTTPOnlySet() || s.SameSite != "lax" || s.Path != "/" || s.Secret != "" {
		t.Errorf("sticky: got %+v (http_only %v), want cookie helios_app, ttl 0, secure false, http_only true, same_site lax, path /, no secret", *s, s.HTTPOnlySet())
	}
	if cfg.Upstreams[1].Sticky != nil {
		t.Errorf("sticky of an upstream without the key: got %+v, want nil", cfg.Upstreams[1].Sticky)
	}
	m := cfg.Routes[0].Mirror
	if m == nil {
		t.Fatal("mirror: got nil, want the block with its defaults")
	}
	if want := (Mirror{Upstream: "shadow", Percent: 100, MaxInflight: 32, Timeout: Duration(10 * time.Second)}); *m != want {
		t.Errorf("mirror: got %+v, want %+v", *m, want)
	}
	if cfg.Routes[1].Mirror != nil {
		t.Errorf("mirror of a route without the key: got %+v, want nil", cfg.Routes[1].Mirror)
	}

	set := mustParse(t, `listeners: [{name: web, address: ":80"}]
routes: [{name: a, upstream: app, mirror: {upstream: app, percent: 0, max_inflight: 4, timeout: 2s}}]
upstreams:
  - name: app
    sticky: {cookie: srv, ttl: 24h, secure: true, http_only: false, same_site: none, path: /app, secret: "0123456789abcdef"}
    backends: [{address: "127.0.0.1:9000"}]
`, nil)
	s = set.Upstreams[0].Sticky
	if s.Cookie != "srv" || s.TTL.D() != 24*time.Hour || !s.Secure || s.HTTPOnlySet() || s.SameSite != "none" || s.Path != "/app" || s.Secret != "0123456789abcdef" {
		t.Errorf("sticky: got %+v (http_only %v), want what the file says", *s, s.HTTPOnlySet())
	}
	if want := (Mirror{Upstream: "app", Percent: 0, MaxInflight: 4, Timeout: Duration(2 * time.Second)}); *set.Routes[0].Mirror != want {
		t.Errorf("mirror: got %+v, want %+v (an explicit percent: 0 stays)", *set.Routes[0].Mirror, want)
	}
}

// TestStickyAndMirrorProblems checks the message and line of each
// problem with the sticky and mirror keys: one problem per config.
func TestStickyAndMirrorProblems(t *testing.T) {
	const head = "listeners: [{name: web, address: \":80\"}]\n"
	const route = "routes: [{name: a, upstream: app}]\n"
	const app = "upstreams:\n  - name: app\n    backends: [{address: \"127.0.0.1:9000\"}]\n"
	const routes = "routes:\n  - name: a\n    upstream: app\n"
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{
			name: "sticky cookie not a token",
			yaml: head + route + app + "    sticky: {cookie: \"a b\"}\n",
			want: `t.yaml:6: upstreams[0].sticky.cookie: "a b" is not a cookie name (letters, digits and !#$%&'*+-.^_` + "`" + `|~)`,
		},
		{
			name: "sticky default cookie from a name that is not a token",
			yaml: head + "routes: [{name: a, upstream: \"my app\"}]\n" + "upstreams:\n  - name: my app\n    backends: [{address: \"127.0.0.1:9000\"}]\n    sticky: {}\n",
			want: `t.yaml:6: upstreams[0].sticky.cookie: "helios_my app" is not a cookie name (the default is helios_ and the upstream's name: set one)`,
		},
		{
			name: "sticky ttl negative",
			yaml: head + route + app + "    sticky:\n      ttl: -1s\n",
			want: `t.yaml:7: upstreams[0].sticky.ttl: -1s is out of range (whole seconds up to 9600h, 400 days, such as 24h; 0 for a session cookie)`,
		},
		{
			name: "sticky ttl not whole seconds",
			yaml: head + route + app + "    sticky:\n      ttl: 1500ms\n",
			want: `t.yaml:7: upstreams[0].sticky.ttl: 1.5s is out of range (whole seconds up to 9600h, 400 days, such as 24h; 0 for a session cookie)`,
		},
		{
			name: "sticky ttl over 400 days",
			yaml: head + route + app + "    sticky:\n      ttl: 9601h\n",
			want: `t.yaml:7: upstreams[0].sticky.ttl: 9601h0m0s is out of range (whole seconds up to 9600h, 400 days, such as 24h; 0 for a session cookie)`,
		},
		{
			name: "sticky same_site unknown",
			yaml: head + route + app + "    sticky:\n      same_site: loose\n",
			want: `t.yaml:7: upstreams[0].sticky.same_site: "loose" is not a SameSite value (lax, strict, none)`,
		},
		{
			name: "sticky same_site none without secure",
			yaml: head + route + app + "    sticky:\n      same_site: none\n",
			want: `t.yaml:7: upstreams[0].sticky.same_site: none without secure: true (browsers refuse SameSite=None on a cookie that is not Secure)`,
		},
		{
			name: "sticky path without a slash",
			yaml: head + route + app + "    sticky:\n      path: app\n",
			want: `t.yaml:7: upstreams[0].sticky.path: "app" is not a cookie path (starts with /; visible ASCII without ; or ,)`,
		},
		{
			name: "sticky path with a semicolon",
			yaml: head + route + app + "    sticky:\n      path: \"/a;Domain=x\"\n",
			want: `t.yaml:7: upstreams[0].sticky.path: "/a;Domain=x" is not a cookie path (starts with /; visible ASCII without ; or ,)`,
		},
		{
			name: "sticky secret too short",
			yaml: head + route + app + "    sticky:\n      secret: short\n",
			want: `t.yaml:7: upstreams[0].sticky.secret: 5 bytes is too short (at least 16, such as 32 random characters from a secret store)`,
		},
		{
			name: "sticky unknown key",
			yaml: head + route + app + "    sticky:\n      domain: example.com\n",
			want: `t.yaml:7: upstreams[0].sticky.domain: unknown key (allowed: cookie, ttl, secure, http_only, same_site, path, secret)`,
		},
		{
			name: "mirror on a route that does not forward",
			yaml: head + "routes:\n  - name: a\n    respond: {status: 204}\n    mirror: {upstream: app}\n" + app,
			want: `t.yaml:5: routes[0].mirror: set on a route without an upstream (only forwarded requests are mirrored)`,
		},
		{
			name: "mirror without an upstream",
			yaml: head + routes + "    mirror: {percent: 5}\n" + app,
			want: `t.yaml:5: routes[0].mirror.upstream: missing (the name of the shadow upstream)`,
		},
		{
			name: "mirror upstream not defined",
			yaml: head + routes + "    mirror:\n      upstream: shadow\n" + app,
			want: `t.yaml:6: routes[0].mirror.upstream: upstream "shadow" is not defined (defined: app)`,
		},
		{
			name: "mirror percent over 100",
			yaml: head + routes + "    mirror:\n      upstream: app\n      percent: 150\n" + app,
			want: `t.yaml:7: routes[0].mirror.percent: 150 is out of range (0-100, such as 10)`,
		},
		{
			name: "mirror max_inflight 0",
			yaml: head + routes + "    mirror:\n      upstream: app\n      max_inflight: 0\n" + app,
			want: `t.yaml:7: routes[0].mirror.max_inflight: 0 is out of range (1-10000)`,
		},
		{
			name: "mirror timeout too long",
			yaml: head + routes + "    mirror:\n      upstream: app\n      timeout: 1h\n" + app,
			want: `t.yaml:7: routes[0].mirror.timeout: 1h0m0s is out of range (1ms-10m, such as 10s)`,
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
