package config

import "testing"

func TestExpandEnv(t *testing.T) {
	const allowed = "(${NAME}, ${NAME:-default}, or $$ for a literal $; NAME is letters, digits and _)"
	tests := []struct {
		name     string
		in       string
		env      map[string]string
		want     string
		problems string
	}{
		{name: "set", in: "a: ${X}\n", env: map[string]string{"X": "1"}, want: "a: 1\n"},
		{name: "unset is empty", in: "a: ${X}\n", want: "a: \n"},
		{name: "default when unset", in: "a: ${X:-d}\n", want: "a: d\n"},
		{name: "default when empty", in: "a: ${X:-d}\n", env: map[string]string{"X": ""}, want: "a: d\n"},
		{name: "default not used when set", in: "a: ${X:-d}\n", env: map[string]string{"X": "v"}, want: "a: v\n"},
		{name: "empty default", in: "a: ${X:-}\n", want: "a: \n"},
		{name: "default with colons", in: "a: ${X:-127.0.0.1:80}\n", want: "a: 127.0.0.1:80\n"},
		{name: "set but empty without default", in: "a: ${X}\n", env: map[string]string{"X": ""}, want: "a: \n"},
		{name: "two on a line", in: "${A}${B}", env: map[string]string{"A": "1", "B": "2"}, want: "12"},
		{name: "dollar dollar", in: "a: $$X $${X} $$$$\n", env: map[string]string{"X": "no"}, want: "a: $X ${X} $$\n"},
		{name: "dollar dollar before reference", in: "$$${X}", env: map[string]string{"X": "1"}, want: "$1"},
		{name: "lone dollars", in: "a: 5$ $X $\n", env: map[string]string{"X": "no"}, want: "a: 5$ $X $\n"},
		{name: "dollar at the end", in: "a$", want: "a$"},
		{name: "value is not expanded again", in: "${X}", env: map[string]string{"X": "${Y}", "Y": "no"}, want: "${Y}"},
		{name: "in a comment", in: "# ${X}\n", env: map[string]string{"X": "1"}, want: "# 1\n"},
		{
			name:     "unclosed",
			in:       "a: 1\nb: ${X\nc: ${Y}\n",
			env:      map[string]string{"Y": "2"},
			want:     "a: 1\nb: ${X\nc: 2\n",
			problems: `t.yaml:2: unclosed "${" ` + allowed,
		},
		{
			name:     "name starting with a digit",
			in:       "a: ${1X}\n",
			want:     "a: ${1X}\n",
			problems: `t.yaml:1: "${1X}" is not a variable reference ` + allowed,
		},
		{
			name:     "empty name",
			in:       "a: 1\nb: ${}\n",
			want:     "a: 1\nb: ${}\n",
			problems: `t.yaml:2: "${}" is not a variable reference ` + allowed,
		},
		{
			name:     "value with a line break",
			in:       "a: 1\nb: ${X}\n",
			env:      map[string]string{"X": "x\ny"},
			want:     "a: 1\nb: \n",
			problems: `t.yaml:2: the value of X has a line break (a value on one line)`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, ps := expandEnv([]byte(tt.in), "t.yaml", envFrom(tt.env))
			if string(got) != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if ps.Error() != tt.problems {
				t.Errorf("got problems %q, want %q", ps.Error(), tt.problems)
			}
		})
	}
}

// TestParseEnv checks expansion through Parse: values land in the Config, an
// unset variable leaves a key null (so it gets its default), and problems on
// later lines keep their lines.
func TestParseEnv(t *testing.T) {
	const src = `listeners:
  - name: ${NAME:-web}
    address: "${HOST}:${PORT}"
    idle_timeout: ${IDLE}
routes: [{name: r, respond: {}}]
admin: {token: "${TOKEN}"}
`
	t.Run("values", func(t *testing.T) {
		cfg := mustParse(t, src, map[string]string{"PORT": "8080", "TOKEN": "s3cret-s3cret-s3cret"})
		l := cfg.Listeners[0]
		tests := []struct {
			name string
			got  any
			want any
		}{
			{"default", l.Name, "web"},
			{"unset in a string", l.Address, ":8080"},
			{"unset value gets the key's default", l.IdleTimeout, Duration(60e9)},
			{"quoted", cfg.Admin.Token, "s3cret-s3cret-s3cret"},
		}
		for _, tt := range tests {
			if tt.got != tt.want {
				t.Errorf("%s: got %v, want %v", tt.name, tt.got, tt.want)
			}
		}
	})
	t.Run("problems", func(t *testing.T) {
		_, ps := parseProblems(t, src, map[string]string{"NAME": "web", "PORT": "${", "IDLE": "forever", "TOKEN": "s3cret-s3cret-s3cret"})
		want := `t.yaml:3: listeners[0].address: ":${" has port "${", not a number (` + testHostPort + `)
t.yaml:4: listeners[0].idle_timeout: "forever" is not a duration (a Go duration such as 500ms, 2s or 1m)`
		if got := ps.Error(); got != want {
			t.Errorf("got\n%v\nwant\n%v", got, want)
		}
	})
}

// TestUnsetVariableIsNamed guards issue 18 item 2: a value that came from
// a ${VAR} whose variable was unset or empty was reported as "missing" or
// as "/helios.pem does not exist", leaving the reader to guess why. Every
// such message names the variable now.
func TestUnsetVariableIsNamed(t *testing.T) {
	const head = "listeners: [{name: web, address: \":8080\"}]\nroutes: [{name: r, upstream: app}]\n"
	tests := []struct {
		name string
		yaml string
		env  map[string]string
		want string
	}{
		{
			name: "quoted and unset",
			yaml: head + "upstreams:\n  - name: app\n    backends:\n      - address: \"${BACKEND}\"\n",
			want: `t.yaml:6: upstreams[0].backends[0].address: missing (` + testHostPort + `) (from ${BACKEND}, which is not set)`,
		},
		{
			name: "unquoted and unset: the key is null, and the item has no address",
			yaml: head + "upstreams:\n  - name: app\n    backends:\n      - weight: 2\n        address: ${BACKEND}\n",
			want: `t.yaml:6: upstreams[0].backends[0]: no address, dns or srv (exactly one: address host:port, dns NAME with a port, or srv NAME) (from ${BACKEND}, which is not set)`,
		},
		{
			name: "set but empty",
			yaml: head + "upstreams:\n  - name: app\n    backends: [{address: \"${BACKEND}\"}]\n",
			env:  map[string]string{"BACKEND": ""},
			want: `t.yaml:5: upstreams[0].backends[0].address: missing (` + testHostPort + `) (from ${BACKEND}, which is empty)`,
		},
		{
			name: "part of a path",
			yaml: "listeners:\n  - name: web\n    address: \":8443\"\n    tls: {cert_file: \"${TLS_DIR}/helios.pem\", key_file: \"${TLS_DIR}/helios.key\"}\nroutes: [{name: r, respond: {}}]\n",
			want: `t.yaml:4: listeners[0].tls.cert_file: "/helios.pem" does not exist (a PEM file: the certificate, then the intermediates of its chain) (from ${TLS_DIR}, which is not set)
t.yaml:4: listeners[0].tls.key_file: "/helios.key" does not exist (a PEM file with the certificate's unencrypted private key) (from ${TLS_DIR}, which is not set)`,
		},
		{
			name: "a default used",
			yaml: head + "upstreams:\n  - name: app\n    backends: [{address: \"${BACKEND:-nowhere}\"}]\n",
			want: `t.yaml:5: upstreams[0].backends[0].address: "nowhere" is not host:port (` + testHostPort + `) (from ${BACKEND:-nowhere}, BACKEND is not set, so its default)`,
		},
		{
			name: "set: no note",
			yaml: head + "upstreams:\n  - name: app\n    backends: [{address: \"${BACKEND}\"}]\n",
			env:  map[string]string{"BACKEND": "nowhere"},
			want: `t.yaml:5: upstreams[0].backends[0].address: "nowhere" is not host:port (` + testHostPort + `)`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ps := parseProblems(t, tt.yaml, tt.env)
			if got := ps.Error(); got != tt.want {
				t.Errorf("got\n%v\nwant\n%v", got, tt.want)
			}
		})
	}
}
