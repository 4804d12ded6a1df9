package config

import (
	"slices"
	"strings"
	"testing"
)

// acmeConfig returns a config with a cleartext listener on port 80 (unless
// noHTTP), a TLS listener whose acme block is body (YAML indented by eight
// spaces, from line 9 on, or line 6 without the HTTP listener), and the
// routes given.
func acmeConfig(body, routes string, noHTTP bool) string {
	ls := "listeners:\n"
	if !noHTTP {
		ls += "  - name: http\n    address: \":80\"\n"
	}
	ls += "  - name: https\n    address: \":443\"\n    tls:\n      acme:\n" + body
	if routes == "" {
		routes = "routes: [{name: r, match: {host: a.example}, respond: {}}]\n"
	}
	return ls + routes
}

func TestACMEDefaults(t *testing.T) {
	tests := []struct {
		name       string
		yaml       string
		ca         string
		challenges []string
		http       string
		names      []string
	}{
		{
			name:       "port 80 listener answers http-01",
			yaml:       acmeConfig("        storage: ${DIR}\n", "", false),
			ca:         ACMELetsEncrypt,
			challenges: []string{ChallengeHTTP01, ChallengeTLSALPN01},
			http:       "http",
			names:      []string{"a.example"},
		},
		{
			name:       "without a port 80 listener, tls-alpn-01 only",
			yaml:       acmeConfig("        storage: ${DIR}\n", "", true),
			ca:         ACMELetsEncrypt,
			challenges: []string{ChallengeTLSALPN01},
			names:      []string{"a.example"},
		},
		{
			name:       "staging",
			yaml:       acmeConfig("        storage: ${DIR}\n        staging: true\n", "", false),
			ca:         ACMELetsEncryptStaging,
			challenges: []string{ChallengeHTTP01, ChallengeTLSALPN01},
			http:       "http",
			names:      []string{"a.example"},
		},
		{
			name: "names from the routes' exact hosts, once each, lower case",
			yaml: acmeConfig("        storage: ${DIR}\n", `routes:
  - {name: a, match: {host: A.example, path: /x}, respond: {}}
  - {name: b, match: {host: a.example}, respond: {}}
  - {name: c, match: {host: b.example}, respond: {}}
  - {name: any, respond: {}}
`, false),
			ca:         ACMELetsEncrypt,
			challenges: []string{ChallengeHTTP01, ChallengeTLSALPN01},
			http:       "http",
			names:      []string{"a.example", "b.example"},
		},
		{
			name:       "domains win over the routes",
			yaml:       acmeConfig("        storage: ${DIR}\n        domains: [X.example]\n", "", false),
			ca:         ACMELetsEncrypt,
			challenges: []string{ChallengeHTTP01, ChallengeTLSALPN01},
			http:       "http",
			names:      []string{"x.example"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := testEnv(t)
			cfg := mustParse(t, tt.yaml, env)
			l := &cfg.Listeners[len(cfg.Listeners)-1]
			a := l.TLS.ACME
			if a.CA != tt.ca {
				t.Errorf("ca: got %q, want %q", a.CA, tt.ca)
			}
			if !slices.Equal(a.Challenges, tt.challenges) {
				t.Errorf("challenges: got %v, want %v", a.Challenges, tt.challenges)
			}
			if a.HTTPListener != tt.http {
				t.Errorf("http_listener: got %q, want %q", a.HTTPListener, tt.http)
			}
			if a.KeyType != KeyP256 {
				t.Errorf("key_type: got %q, want %q", a.KeyType, KeyP256)
			}
			names, wild := cfg.ACMENames(l)
			if !slices.Equal(names, tt.names) || len(wild) != 0 {
				t.Errorf("names: got %v %v, want %v", names, wild, tt.names)
			}
		})
	}
}

func TestACMEStorageDefaultAndRelative(t *testing.T) {
	cfg := mustParse(t, acmeConfig("        email: ops@a.example\n", "", false), nil)
	if got := cfg.Listeners[1].TLS.ACME.Storage; got != ACMEDefaultStorage {
		t.Errorf("storage: got %q, want %q", got, ACMEDefaultStorage)
	}
	c := &Config{Listeners: []Listener{{TLS: &ListenerTLS{ACME: &ACME{Storage: "state/acme", CARoot: "ca.pem"}}}}}
	c.resolvePaths("/etc/helios")
	if a := c.Listeners[0].TLS.ACME; a.Storage != "/etc/helios/state/acme" || a.CARoot != "/etc/helios/ca.pem" {
		t.Errorf("paths: got %q and %q, want them under /etc/helios", a.Storage, a.CARoot)
	}

}

func TestACMEOnDemandDefaults(t *testing.T) {
	cfg := mustParse(t, acmeConfig("        storage: ${DIR}\n        on_demand: {ask: \"http://127.0.0.1:9/ask\"}\n", "routes: [{name: r, respond: {}}]\n", false), testEnv(t))
	od := cfg.Listeners[1].TLS.ACME.OnDemand
	if od.Burst != 10 || od.Interval.D().Seconds() != 60 {
		t.Errorf("on_demand: got burst %d interval %v, want 10 and 1m", od.Burst, od.Interval.D())
	}
}

func TestACMEProblems(t *testing.T) {
	dir := writeTestTLS(t)
	tests := []struct {
		name   string
		yaml   string
		noHTTP bool
		routes string
		want   string
	}{
		{
			name:   "wildcard route host needs DNS-01",
			yaml:   "        storage: ${D}\n",
			routes: "routes:\n  - {name: r, match: {host: \"*.a.example\"}, respond: {}}\n",
			want:   `t.yaml:10: routes[0].match.host: "*.a.example": a wildcard certificate needs the DNS-01 challenge, which Helios does not do, and listeners[1] takes its names from the routes (list the names under listeners[1].tls.acme.domains, or give the listener a certificate file for it)`,
		},
		{
			name: "wildcard domain",
			yaml: "        storage: ${D}\n        domains: [\"*.a.example\"]\n",
			want: `t.yaml:9: listeners[1].tls.acme.domains[0]: "*.a.example": a wildcard certificate needs the DNS-01 challenge, which Helios does not do (list the names, or serve it with a certificate file)`,
		},
		{
			name: "duplicate and malformed domains",
			yaml: "        storage: ${D}\n        domains: [a.example, A.example, \"a b\", 10.0.0.1]\n",
			want: `t.yaml:9: listeners[1].tls.acme.domains[1]: "a.example" is already listed at listeners[1].tls.acme.domains[0] (list each name once)
t.yaml:9: listeners[1].tls.acme.domains[2]: "a b" is not a host name (an exact host name such as example.com)
t.yaml:9: listeners[1].tls.acme.domains[3]: "10.0.0.1" is an IP address (an exact host name such as example.com; ACME CAs issue for names)`,
		},
		{
			name:   "no names at all",
			yaml:   "        storage: ${D}\n",
			routes: "routes: [{name: r, respond: {}}]\n",
			want:   `t.yaml:7: listeners[1].tls.acme: no names to get certificates for (list them under domains, give routes an exact match.host, or set on_demand)`,
		},
		{
			name:   "http-01 without a port 80 listener",
			yaml:   "        storage: ${D}\n        challenges: [http-01]\n",
			noHTTP: true,
			want:   `t.yaml:7: listeners[0].tls.acme.challenges[0]: http-01 needs a cleartext listener that the CA reaches on port 80: a listener on port 80, or one named by http_listener`,
		},
		{
			name: "unknown and repeated challenges",
			yaml: "        storage: ${D}\n        challenges: [dns-01, tls-alpn-01, tls-alpn-01]\n",
			want: `t.yaml:9: listeners[1].tls.acme.challenges[0]: "dns-01" is not a challenge Helios answers (http-01, tls-alpn-01)
t.yaml:9: listeners[1].tls.acme.challenges[2]: "tls-alpn-01" is listed twice`,
		},
		{
			name: "http_listener with tls",
			yaml: "        storage: ${D}\n        http_listener: https\n",
			want: `t.yaml:9: listeners[1].tls.acme.http_listener: "https" has tls (the CA's HTTP-01 requests are cleartext, to port 80)`,
		},
		{
			name: "http_listener unknown",
			yaml: "        storage: ${D}\n        http_listener: nope\n",
			want: `t.yaml:9: listeners[1].tls.acme.http_listener: "nope" is not a listener's name`,
		},
		{
			name: "staging with ca",
			yaml: "        storage: ${D}\n        staging: true\n        ca: https://ca.example/dir\n",
			want: `t.yaml:9: listeners[1].tls.acme.staging: true along with ca (staging picks Let's Encrypt's staging CA; with ca set, point ca at the staging directory instead)`,
		},
		{
			name: "ca not https",
			yaml: "        storage: ${D}\n        ca: http://ca.example/dir\n",
			want: `t.yaml:9: listeners[1].tls.acme.ca: "http://ca.example/dir" is not an ACME directory URL (https://..., such as https://acme-v02.api.letsencrypt.org/directory)`,
		},
		{
			name: "key type",
			yaml: "        storage: ${D}\n        key_type: ed25519\n",
			want: `t.yaml:9: listeners[1].tls.acme.key_type: "ed25519" is not a key type (p256, rsa2048)`,
		},
		{
			name: "storage is a file",
			yaml: "        storage: ${D}/ca.pem\n",
			want: `t.yaml:8: listeners[1].tls.acme.storage: "$D/ca.pem" is not a directory (a directory for the account, certificates and locks; created if missing)`,
		},
		{
			name: "ca_root without certificates",
			yaml: "        storage: ${D}\n        ca_root: ${D}/a.key\n",
			want: `t.yaml:9: listeners[1].tls.acme.ca_root: "$D/a.key" holds no PEM certificate (a PEM file of CA certificates)`,
		},
		{
			name: "eab incomplete",
			yaml: "        storage: ${D}\n        eab: {key_id: kid, mac_key: \"not base64!\"}\n",
			want: `t.yaml:9: listeners[1].tls.acme.eab.mac_key: is not base64url (the MAC key as the CA gave it)`,
		},
		{
			name: "on_demand without ask",
			yaml: "        storage: ${D}\n        on_demand: {burst: 0}\n",
			want: `t.yaml:9: listeners[1].tls.acme.on_demand.ask: "" is not an http or https URL (the endpoint asked ?domain=NAME before each on-demand certificate)
t.yaml:9: listeners[1].tls.acme.on_demand.burst: 0 is out of range (at least 1)`,
		},
		{
			name: "email",
			yaml: "        storage: ${D}\n        email: nobody\n",
			want: `t.yaml:9: listeners[1].tls.acme.email: "nobody" is not an email address (the ACME account's contact, such as ops@example.com)`,
		},
		{
			name: "redis storage",
			yaml: "        storage: redis://redis:6379/x\n",
			want: `t.yaml:8: listeners[1].tls.acme.storage: "redis://redis:6379/x": database "x" is not a number (the path is /DB, such as /0)`,
		},
		{
			name: "storage password with a directory",
			yaml: "        storage: ${D}\n        storage_password_env: PW\n",
			want: `t.yaml:9: listeners[1].tls.acme.storage_password_env: only applies when storage is a Redis URL (redis://... or rediss://...)`,
		},
		{
			name: "unknown key",
			yaml: "        storage: ${D}\n        renew_before: 30d\n",
			want: `t.yaml:9: listeners[1].tls.acme.renew_before: unknown key (allowed: email, ca, staging, domains, challenges, http_listener, key_type, storage, storage_password_env, ca_root, eab, on_demand)`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ps := parseProblems(t, acmeConfig(tt.yaml, tt.routes, tt.noHTTP), map[string]string{"D": dir})
			want := strings.ReplaceAll(tt.want, "$D", dir)
			if got := ps.Error(); got != want {
				t.Errorf("got\n%v\nwant\n%v", got, want)
			}
		})
	}
}

// A wildcard route host that a certificate file of the listener carries
// is served by the file: no DNS-01 is needed, and no problem reported.
func TestACMEWildcardRouteServedByFile(t *testing.T) {
	dir := writeTestTLS(t)
	src := `listeners:
  - name: https
    address: ":443"
    tls:
      cert_file: ${D}/b.pem
      key_file: ${D}/b.key
      acme: {storage: ${D}}
routes:
  - {name: w, match: {host: "*.b.example"}, respond: {}}
  - {name: x, match: {host: x.b.example}, respond: {}}
  - {name: y, match: {host: y.example}, respond: {}}
`
	cfg := mustParse(t, src, map[string]string{"D": dir})
	names, wild := cfg.ACMENames(&cfg.Listeners[0])
	if !slices.Equal(names, []string{"y.example"}) || len(wild) != 0 {
		t.Errorf("got names %v, wildcards %v; want [y.example] and none", names, wild)
	}
}

// TestACMERedisStorage: a Redis storage is kept as written (not taken as
// a path relative to the config file), with the password its variable
// holds.
func TestACMERedisStorage(t *testing.T) {
	src := acmeConfig("        storage: redis://redis:6379/2\n        storage_password_env: PW\n", "", false)
	cfg, err := Parse([]byte(src), "/etc/helios/t.yaml", envFrom(map[string]string{"PW": "secret"}))
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.Listeners[1].TLS.ACME
	if a.Storage != "redis://redis:6379/2" || a.StoragePassword != "secret" {
		t.Errorf("got storage %q, password %q; want redis://redis:6379/2, secret", a.Storage, a.StoragePassword)
	}
}
