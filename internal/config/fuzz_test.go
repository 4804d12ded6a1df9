package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// fuzzEnv is the environment of fuzzed configs: fixed, so that a failure
// replays.
var fuzzEnv = map[string]string{
	"ADDR":        "127.0.0.1:8080",
	"EMPTY":       "",
	"TOKEN":       "s3cret-s3cret-s3cret",
	"STATIC_ROOT": "testdata",
	"NL":          "a\nb",
	"DOLLAR":      "$x ${ADDR}",
}

// configSeeds are small configs that reach the decoder's and validator's
// corners: environment references, anchors and aliases, nulls, duplicate
// and unknown keys, wrong types, several documents and syntax errors.
var configSeeds = []string{
	"listeners: [{name: web, address: \":8080\"}]\nroutes: [{name: r, respond: {}}]\n",
	"listeners: [{name: web, address: \"${ADDR}\", engine: goroutine}]\nroutes: [{name: r, respond: {status: 204, body: \"$$5\", headers: {X-A: \"1\"}}}]\nadmin: {address: \"${ADDR:-:9901}\", token: ${TOKEN}}\n",
	"listeners: [{name: web, address: \":80\"}]\nroutes: [{name: s, static: {root: ${STATIC_ROOT}, strip_prefix: /s}}]\nlogging: {level: debug, format: console, access_log: stdout}\n",
	"x: &l {name: web, address: \":80\", read_timeout: 1m30s, idle_timeout: 0}\nlisteners: [*l]\n",
	"listeners: [&l {name: web, address: \":80\"}]\nroutes:\n  - name: api\n    upstream: u\n    upgrades: []\n    request_buffering: \"off\"\n" +
		"upstreams:\n  - name: u\n    strategy: p2c\n    backends: [{address: \"[::1]:9000\", weight: 2}, {address: b:9000}]\n" +
		"    health_check: {}\n    passive: ~\n    circuit_breaker: {failure_ratio: 0.25}\n    retries: {attempts: 0, on: [timeout, 503], idempotent_only: false}\n",
	"listeners:\n  - name: web\n    address: \":80\"\n    name: again\nroutes: [{name: r, respond: {}, static: {root: /}}]\n",
	"listeners: {name: web}\nroutes: 5\nadmin: [1]\nlogging: {level: [debug]}\nupstreams: [{name: u, backends: [{weight: two}]}]\n",
	"listeners: [{name: web, address: ${EMPTY}, sockets: ${NL}, backlog: ${UNSET:-}, max_connections: ${1BAD}}]\n",
	"admin: {token: ${EMPTY}}\nlogging: {access_log: ${DOLLAR}}\n",
	"a: *undefined\n", "listeners: [\n", "- a\n- b\n", "---\na: 1\n---\nb: 2\n", "\"k\\ny\": 1\n", "? [a, b]\n: c\n",
	"<<: {listeners: []}\n", "routes: [{name: r, respond: {headers: {\"a b\": \"x\\ny\"}}}]\n", "\t\n", "~\n", "",
	"listeners: [{name: web, address: \":80\", read_header_timeout: -5s, sockets: 99999999999999999999}]\n",
	"routes: [{name: r, upstream: u, max_body_bytes: 9223372036854775807}]\nupstreams: [{name: u, circuit_breaker: {failure_ratio: .nan}, retries: {budget_ratio: -.inf}}]\n",
}

// FuzzConfig parses arbitrary YAML with Parse. It checks that Parse never
// panics; that it returns either a Config or Problems, every one of them
// in the FILE:LINE: key.path: message form on one line, with a line inside
// the file and a key path written as the paths Helios reports are; and
// that a Config that parses without problems validates, keeps its values
// through SetDefaults again, and round-trips: written back as YAML (with
// the keys the file had, and the defaults) and parsed again, it is the
// same Config.
func FuzzConfig(f *testing.F) {
	for _, s := range configSeeds {
		f.Add([]byte(s))
	}
	var files []string
	for _, pattern := range []string{"testdata/*.yaml", "../../configs/*.yaml", "../../configs/examples/*.yaml"} {
		m, _ := filepath.Glob(pattern)
		files = append(files, m...)
	}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	lookup := envFrom(fuzzEnv)
	f.Fuzz(func(t *testing.T, data []byte) {
		const file = "f.yaml"
		cfg, err := Parse(data, file, lookup)
		if err != nil {
			var ps Problems
			if !errors.As(err, &ps) || len(ps) == 0 || cfg != nil {
				t.Fatalf("%q: got %T %v and a Config %v, want Problems and no Config", data, err, err, cfg != nil)
			}
			lines := yamlLines(data)
			for _, p := range ps {
				checkProblem(t, data, p, file, lines)
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("%q: parsed, then Validate got %v", data, err)
		}
		again := *cfg
		SetDefaults(&again)
		if !reflect.DeepEqual(&again, cfg) {
			t.Fatalf("%q: SetDefaults changed a parsed config:\n%s\nwant\n%s", data, toJSON(&again), toJSON(cfg))
		}
		out := encodeConfig(t, cfg)
		cfg2, err := Parse(out, file, lookup)
		if err != nil {
			t.Fatalf("%q written back as\n%s\ngot problems:\n%v", data, out, err)
		}
		c1, c2 := *cfg, *cfg2
		// Warnings name lines, which writing back moves.
		c1.meta, c2.meta, c1.Warnings, c2.Warnings = nil, nil, nil, nil
		if !reflect.DeepEqual(c1, c2) {
			t.Fatalf("%q written back as\n%s\nparsed as\n%s\nwant\n%s", data, out, toJSON(c2), toJSON(c1))
		}
	})
}

// checkProblem checks that p is reported as FILE:LINE: key.path: message
// on one line, with LINE a line of data.
func checkProblem(t *testing.T, data []byte, p Problem, file string, lines int) {
	t.Helper()
	s := p.String()
	want := file + ":" + strconv.Itoa(p.Line) + ": "
	if p.Path != "" {
		want += p.Path + ": "
	}
	if p.File != file || p.Line < 1 || p.Line > lines || p.Msg == "" || !strings.HasPrefix(s, want) || strings.ContainsAny(s, "\r\n") {
		t.Fatalf("%q: got problem %q (line %d of %d), want %s<message> on one line", data, s, p.Line, lines, want)
	}
	if p.Path != "" && !wellFormedPath(p.Path) {
		t.Fatalf("%q: problem %q: path %q is not a key path", data, s, p.Path)
	}
}

// yamlLines counts the lines of data as YAML does (yaml.v3 gives node
// lines): CRLF, CR, LF, and the Unicode breaks NEL, LS and PS end a line.
func yamlLines(data []byte) int {
	s := strings.ReplaceAll(string(data), "\r\n", "\n")
	return 1 + strings.Count(s, "\n") + strings.Count(s, "\r") +
		strings.Count(s, "\u0085") + strings.Count(s, "\u2028") + strings.Count(s, "\u2029")
}

// wellFormedPath reports whether path is written as childPath and
// indexPath write key paths: plain keys joined by dots, [N] for list
// items, and ["quoted"] for keys that are not plain names.
func wellFormedPath(path string) bool {
	for first := true; path != ""; first = false {
		switch {
		case strings.HasPrefix(path, `["`):
			q, err := strconv.QuotedPrefix(path[1:])
			if err != nil || !strings.HasPrefix(path[1+len(q):], "]") {
				return false
			}
			path = path[len(q)+2:]
		case path[0] == '[':
			end := strings.IndexByte(path, ']')
			if end < 0 {
				return false
			}
			if _, err := strconv.ParseUint(path[1:end], 10, 0); err != nil {
				return false
			}
			path = path[end+1:]
		case first || path[0] == '.':
			if !first {
				path = path[1:]
			}
			n := strings.IndexAny(path, ".[")
			if n < 0 {
				n = len(path)
			}
			if !isPlainKey(path[:n]) {
				return false
			}
			path = path[n:]
		default:
			return false
		}
	}
	return true
}

// encodeConfig writes cfg back as YAML, with the admin token as it is.
func encodeConfig(t *testing.T, cfg *Config) []byte {
	t.Helper()
	out, err := cfg.encode(false)
	if err != nil {
		t.Fatalf("writing back %s: %v", toJSON(cfg), err)
	}
	return out
}
