package config

import (
	"reflect"
	"testing"
	"time"
)

func TestParseHashKey(t *testing.T) {
	tests := []struct {
		in      string
		want    HashKey
		wantErr bool
	}{
		{in: "client_ip", want: HashKey{Kind: KeyClientIP}},
		{in: "path", want: HashKey{Kind: KeyPath}},
		{in: "header:X-User", want: HashKey{Kind: KeyHeader, Name: "X-User"}},
		{in: "cookie:session_id", want: HashKey{Kind: KeyCookie, Name: "session_id"}},
		{in: "query:user", want: HashKey{Kind: KeyQuery, Name: "user"}},
		{in: "query:a.b[c]", want: HashKey{Kind: KeyQuery, Name: "a.b[c]"}},
		{in: "", wantErr: true},
		{in: "ip", wantErr: true},
		{in: "client_ip:x", wantErr: true},
		{in: "path:/a", wantErr: true},
		{in: "header", wantErr: true},
		{in: "header:", wantErr: true},
		{in: "header:X User", wantErr: true},
		{in: "cookie:a=b", wantErr: true},
		{in: "query:", wantErr: true},
		{in: "query:a&b", wantErr: true},
		{in: "query:a b", wantErr: true},
		{in: "Header:X-User", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseHashKey(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error: got %v, want error %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestBalancingDefaults checks the defaults of the balancing keys: a hash
// strategy hashes client_ip and falls back to round_robin; no bound, no
// slow start; a split route gets the forwarding defaults.
func TestBalancingDefaults(t *testing.T) {
	cfg := mustParse(t, `listeners: [{name: web, address: ":80"}]
routes:
  - name: canary
    split: [{upstream: v1, weight: 95}, {upstream: v2, weight: 5, match: {header: X-Canary}}]
upstreams:
  - {name: v1, strategy: consistent_hash, backends: [{address: "127.0.0.1:9000"}]}
  - {name: v2, strategy: ip_hash, backends: [{address: "127.0.0.1:9001"}]}
  - {name: rr, backends: [{address: "127.0.0.1:9002"}]}
`, nil)
	for i, want := range []struct{ key, fallback string }{{"client_ip", "round_robin"}, {"client_ip", "round_robin"}, {"", ""}} {
		u := cfg.Upstreams[i]
		if u.HashKey != want.key || u.HashFallback != want.fallback || u.BoundedLoad != 0 || u.SlowStart != 0 {
			t.Errorf("upstream %s: got hash_key %q, hash_fallback %q, bounded_load %v, slow_start %v; want %q, %q, 0, 0",
				u.Name, u.HashKey, u.HashFallback, u.BoundedLoad, u.SlowStart, want.key, want.fallback)
		}
	}
	r := cfg.Routes[0]
	want := Route{
		Name: "canary",
		Split: []SplitTarget{
			{Upstream: "v1", Weight: 95},
			{Upstream: "v2", Weight: 5, Match: &SplitMatch{Header: "X-Canary"}},
		},
		Upgrades:         []string{"websocket"},
		RequestBuffering: "auto", MaxBodyBytes: 100 << 20, RequestBufferMemoryBytes: 64 << 10, RequestBufferFileBytes: 16 << 20,
		ResponseBuffering: "auto", ResponseBufferMemoryBytes: 64 << 10, ResponseBufferFileBytes: 64 << 20,
	}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("route: got %+v, want %+v", r, want)
	}
	if got := r.Action(); got != ActionSplit {
		t.Errorf("action: got %v, want %v", got, ActionSplit)
	}
	slow := mustParse(t, `listeners: [{name: web, address: ":80"}]
routes: [{name: a, upstream: app}]
upstreams:
  - {name: app, strategy: least_conn, slow_start: 30s, backends: [{address: "127.0.0.1:9000"}]}
`, nil)
	if got := slow.Upstreams[0].SlowStart.D(); got != 30*time.Second {
		t.Errorf("slow_start: got %v, want 30s", got)
	}
}

// TestBalancingProblems checks the message and line of each problem with
// the balancing keys: one problem per config.
func TestBalancingProblems(t *testing.T) {
	const head = "listeners: [{name: web, address: \":80\"}]\n"
	const app = "upstreams:\n  - name: app\n    backends: [{address: \"127.0.0.1:9000\"}]\n"
	const two = app + "  - name: v2\n    backends: [{address: \"127.0.0.1:9001\"}]\n"
	const route = "routes: [{name: a, upstream: app}]\n"
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{
			name: "hash_key with a strategy that does not hash",
			yaml: head + route + app + "    hash_key: path\n",
			want: `t.yaml:6: upstreams[0].hash_key: set with strategy round_robin (only consistent_hash reads a key)`,
		},
		{
			name: "hash_key not a key",
			yaml: head + route + app + "    strategy: consistent_hash\n    hash_key: user\n",
			want: `t.yaml:7: upstreams[0].hash_key: "user": not a key (client_ip, header:NAME, cookie:NAME, path or query:NAME)`,
		},
		{
			name: "hash_key header without a name",
			yaml: head + route + app + "    strategy: consistent_hash\n    hash_key: \"header:\"\n",
			want: `t.yaml:7: upstreams[0].hash_key: "header:": header needs a name, a token such as header:X-User (client_ip, header:NAME, cookie:NAME, path or query:NAME)`,
		},
		{
			name: "ip_hash with another key",
			yaml: head + route + app + "    strategy: ip_hash\n    hash_key: path\n",
			want: `t.yaml:7: upstreams[0].hash_key: "path" with strategy ip_hash, which hashes client_ip (use consistent_hash for another key)`,
		},
		{
			name: "hash_fallback with another strategy",
			yaml: head + route + app + "    strategy: ip_hash\n    hash_fallback: random\n",
			want: `t.yaml:7: upstreams[0].hash_fallback: set with strategy ip_hash (only consistent_hash falls back, for requests without the key)`,
		},
		{
			name: "hash_fallback that hashes",
			yaml: head + route + app + "    strategy: consistent_hash\n    hash_fallback: ip_hash\n",
			want: `t.yaml:7: upstreams[0].hash_fallback: "ip_hash" is not a strategy that can stand in for consistent_hash (round_robin, weighted_round_robin, least_conn, random, p2c)`,
		},
		{
			name: "bounded_load with a strategy that does not hash",
			yaml: head + route + app + "    bounded_load: 1.25\n",
			want: `t.yaml:6: upstreams[0].bounded_load: set with strategy round_robin (only consistent_hash and ip_hash are bounded)`,
		},
		{
			name: "bounded_load below 1",
			yaml: head + route + app + "    strategy: consistent_hash\n    bounded_load: 0.8\n",
			want: `t.yaml:7: upstreams[0].bounded_load: 0.8 is out of range (1-100, such as 1.25; 0 turns the bound off)`,
		},
		{
			name: "negative slow_start",
			yaml: head + route + app + "    slow_start: -1s\n",
			want: `t.yaml:6: upstreams[0].slow_start: -1s is out of range (0-1h, such as 30s; 0 turns slow start off)`,
		},
		{
			name: "slow_start over an hour",
			yaml: head + route + app + "    slow_start: 2h\n",
			want: `t.yaml:6: upstreams[0].slow_start: 2h0m0s is out of range (0-1h, such as 30s; 0 turns slow start off)`,
		},
		{
			name: "split and upstream",
			yaml: head + "routes:\n  - name: a\n    upstream: app\n    split: [{upstream: v2, weight: 1}]\n" + two,
			want: `t.yaml:3: routes[0]: upstream and split are both set (exactly one of upstream, split, respond, static, redirect)`,
		},
		{
			name: "empty split",
			yaml: head + "routes:\n  - name: a\n    split: []\n" + app,
			want: `t.yaml:4: routes[0].split: empty (upstreams with weights, such as [{upstream: v1, weight: 95}, {upstream: v2, weight: 5}])`,
		},
		{
			name: "split upstream missing",
			yaml: head + "routes:\n  - name: a\n    split:\n      - {upstream: app, weight: 1}\n      - {weight: 1}\n" + app,
			want: `t.yaml:6: routes[0].split[1].upstream: missing (the name of an upstream)`,
		},
		{
			name: "split upstream not defined",
			yaml: head + "routes:\n  - name: a\n    split:\n      - {upstream: app, weight: 1}\n      - {upstream: v3, weight: 1}\n" + two,
			want: `t.yaml:6: routes[0].split[1].upstream: upstream "v3" is not defined (defined: app, v2)`,
		},
		{
			name: "split upstream twice",
			yaml: head + "routes:\n  - name: a\n    split:\n      - {upstream: app, weight: 1}\n      - {upstream: app, weight: 1}\n" + app,
			want: `t.yaml:6: routes[0].split[1].upstream: "app" is already in the split at routes[0].split[0] (each upstream once)`,
		},
		{
			name: "split weight out of range",
			yaml: head + "routes:\n  - name: a\n    split:\n      - {upstream: app, weight: 1}\n      - {upstream: v2, weight: -5}\n" + two,
			want: `t.yaml:6: routes[0].split[1].weight: -5 is out of range (0-1000000)`,
		},
		{
			name: "split weight 0 without a match",
			yaml: head + "routes:\n  - name: a\n    split:\n      - {upstream: app, weight: 1}\n      - {upstream: v2}\n" + two,
			want: `t.yaml:6: routes[0].split[1].weight: 0 without a match: no request would reach "v2" (a weight, or a match)`,
		},
		{
			name: "split every weight 0",
			yaml: head + "routes:\n  - name: a\n    split:\n      - {upstream: app, weight: 0, match: {cookie: a}}\n      - {upstream: v2, weight: 0, match: {cookie: b}}\n" + two,
			want: `t.yaml:4: routes[0].split: every weight is 0 (at least one upstream needs a weight)`,
		},
		{
			name: "split match with neither",
			yaml: head + "routes:\n  - name: a\n    split:\n      - {upstream: app, weight: 1}\n      - {upstream: v2, weight: 1, match: {value: x}}\n" + two,
			want: `t.yaml:6: routes[0].split[1].match: neither header nor cookie is set (exactly one)`,
		},
		{
			name: "split match with both",
			yaml: head + "routes:\n  - name: a\n    split:\n      - {upstream: app, weight: 1}\n      - {upstream: v2, weight: 1, match: {header: X-A, cookie: a}}\n" + two,
			want: `t.yaml:6: routes[0].split[1].match: header and cookie are both set (exactly one)`,
		},
		{
			name: "split match header not a token",
			yaml: head + "routes:\n  - name: a\n    split:\n      - {upstream: app, weight: 1}\n      - {upstream: v2, weight: 1, match: {header: \"X A\"}}\n" + two,
			want: `t.yaml:6: routes[0].split[1].match.header: "X A" is not a header name (letters, digits and !#$%&'*+-.^_` + "`" + `|~)`,
		},
		{
			name: "split match value with a line break",
			yaml: head + "routes:\n  - name: a\n    split:\n      - {upstream: app, weight: 1}\n      - {upstream: v2, weight: 1, match: {cookie: c, value: \"a\\nb\"}}\n" + two,
			want: `t.yaml:6: routes[0].split[1].match.value: "a\nb" has a line break or NUL (a value on one line)`,
		},
		{
			name: "split_key without a split",
			yaml: head + "routes:\n  - name: a\n    upstream: app\n    split_key: client_ip\n" + app,
			want: `t.yaml:5: routes[0].split_key: set on a route without a split`,
		},
		{
			name: "split_key not a key",
			yaml: head + "routes:\n  - name: a\n    split: [{upstream: app, weight: 1}]\n    split_key: \"cookie:\"\n" + app,
			want: `t.yaml:5: routes[0].split_key: "cookie:": cookie needs a name, a token such as cookie:X-User (client_ip, header:NAME, cookie:NAME, path or query:NAME)`,
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
