package config

import "testing"

// TestAdminExposure guards issue 9 item 8: an admin listener reachable
// from other hosts without a token, and a token whose variable is unset,
// passed validation, leaving /api/v1/reload and pprof open to anyone.
func TestAdminExposure(t *testing.T) {
	const head = "listeners: [{name: web, address: \":8080\"}]\nroutes: [{name: r, respond: {}}]\n"
	const allowed = "set admin.token, bind a loopback address such as 127.0.0.1:9901, or set admin.insecure_no_token: true"
	tests := []struct {
		name string
		yaml string
		env  map[string]string
		want string // "" means valid
	}{
		{name: "default loopback without token", yaml: head},
		{name: "127.0.0.2 without token", yaml: head + "admin: {address: \"127.0.0.2:9901\"}\n"},
		{name: "[::1] without token", yaml: head + "admin: {address: \"[::1]:9901\"}\n"},
		{name: "localhost without token", yaml: head + "admin: {address: \"localhost:9901\"}\n"},
		{name: "off", yaml: head + "admin: {address: \"off\"}\n"},
		{
			name: "0.0.0.0 without token",
			yaml: head + "admin:\n  address: \"0.0.0.0:9901\"\n",
			want: `t.yaml:4: admin.address: "0.0.0.0:9901" is reachable from other hosts and admin.token is not set: anyone could reload Helios (` + allowed + `)`,
		},
		{
			name: "all interfaces without token",
			yaml: head + "admin:\n  address: \":9901\"\n",
			want: `t.yaml:4: admin.address: ":9901" is reachable from other hosts and admin.token is not set: anyone could reload Helios (` + allowed + `)`,
		},
		{
			name: "[::] without token",
			yaml: head + "admin:\n  address: \"[::]:9901\"\n",
			want: `t.yaml:4: admin.address: "[::]:9901" is reachable from other hosts and admin.token is not set: anyone could reload Helios (` + allowed + `)`,
		},
		{
			name: "a hostname without token",
			yaml: head + "admin:\n  address: \"admin.example.com:9901\"\n",
			want: `t.yaml:4: admin.address: "admin.example.com:9901" is reachable from other hosts and admin.token is not set: anyone could reload Helios (` + allowed + `)`,
		},
		{name: "0.0.0.0 with token", yaml: head + "admin: {address: \"0.0.0.0:9901\", token: s3cret-s3cret-s3cret}\n"},
		{name: "0.0.0.0 with token from the environment", yaml: head + "admin: {address: \"0.0.0.0:9901\", token: \"${TOKEN}\"}\n", env: map[string]string{"TOKEN": "s3cret-s3cret-s3cret"}},
		{name: "0.0.0.0 opted out", yaml: head + "admin: {address: \"0.0.0.0:9901\", insecure_no_token: true}\n"},
		{
			name: "opted out with a token",
			yaml: head + "admin:\n  token: s3cret-s3cret-s3cret\n  insecure_no_token: true\n",
			want: `t.yaml:5: admin.insecure_no_token: true but admin.token is set (one or the other)`,
		},
		{
			name: "quoted token from an unset variable",
			yaml: head + "admin:\n  token: \"${HELIOS_ADMIN_TOKEN}\"\n",
			want: `t.yaml:4: admin.token: ${HELIOS_ADMIN_TOKEN} expanded to nothing, which would turn authentication off (set HELIOS_ADMIN_TOKEN, or remove the key)`,
		},
		{
			name: "unquoted token from an unset variable",
			yaml: head + "admin:\n  address: \"127.0.0.1:9901\"\n  token: ${HELIOS_ADMIN_TOKEN}\n",
			want: `t.yaml:5: admin.token: ${HELIOS_ADMIN_TOKEN} expanded to nothing, which would turn authentication off (set HELIOS_ADMIN_TOKEN, or remove the key)`,
		},
		{
			name: "token from an empty variable",
			yaml: head + "admin: {token: \"${TOKEN}\"}\n",
			env:  map[string]string{"TOKEN": ""},
			want: `t.yaml:3: admin.token: ${TOKEN} expanded to nothing, which would turn authentication off (set TOKEN, or remove the key)`,
		},
		{
			name: "token from an empty default",
			yaml: head + "admin: {token: \"${TOKEN:-}\"}\n",
			want: `t.yaml:3: admin.token: ${TOKEN} expanded to nothing, which would turn authentication off (set TOKEN, or remove the key)`,
		},
		{
			name: "empty token",
			yaml: head + "admin: {token: \"\"}\n",
			want: `t.yaml:3: admin.token: empty, which would turn authentication off (a token, or remove the key)`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ps := parseProblems(t, tt.yaml, tt.env)
			got := ""
			if ps != nil {
				got = ps.Error()
			}
			if got != tt.want {
				t.Errorf("got\n%v\nwant\n%v", got, tt.want)
			}
		})
	}
}

// TestAdminTokenStrength guards issue 18 item 5: the deployment examples
// ship a placeholder token, and Helios started with it (or with any short
// token) on a reachable admin port without a word.
func TestAdminTokenStrength(t *testing.T) {
	const head = "listeners: [{name: web, address: \":8080\"}]\nroutes: [{name: r, respond: {}}]\n"
	const how = "make one with: openssl rand -hex 32"
	tests := []struct {
		name  string
		token string
		want  string
	}{
		{name: "the shipped placeholder", token: "change-me-to-a-long-random-string", want: `t.yaml:3: admin.token: is the placeholder the examples ship, which anyone can read (` + how + `)`},
		{name: "short", token: "s3cret", want: `t.yaml:3: admin.token: is 6 bytes, too short to guess safely (at least 16; ` + how + `)`},
		{name: "15 bytes", token: "0123456789abcde", want: `t.yaml:3: admin.token: is 15 bytes, too short to guess safely (at least 16; ` + how + `)`},
		{name: "16 bytes", token: "0123456789abcdef"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ps := parseProblems(t, head+"admin: {address: \"0.0.0.0:9901\", token: \"${TOKEN}\"}\n", map[string]string{"TOKEN": tt.token})
			got := ""
			if ps != nil {
				got = ps.Error()
			}
			if got != tt.want {
				t.Errorf("got\n%v\nwant\n%v", got, tt.want)
			}
		})
	}
}
