package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/certgen"
)

// tlsListener returns a config whose one listener has the tls block body
// (YAML indented by six spaces, starting on line 5) and extra listener
// keys (indented by four, after the block).
func tlsListener(body, extra string) string {
	return `listeners:
  - name: web
    address: ":8443"
    tls:
` + body + extra + `routes: [{name: r, respond: {}}]
`
}

// tlsTransport returns a config whose upstream's transport block has body
// (YAML indented by six spaces, starting on line 7).
func tlsTransport(body string) string {
	return `listeners: [{name: web, address: ":8080"}]
routes: [{name: r, upstream: app}]
upstreams:
  - name: app
    backends: [{address: "127.0.0.1:9000"}]
    transport:
` + body
}

// writeDatedCert writes name.pem and name.key into dir: a certificate for
// name.example valid from notBefore to notAfter.
func writeDatedCert(t *testing.T, dir, name string, notBefore, notAfter time.Time) {
	t.Helper()
	c, err := certgen.SelfSigned(certgen.Request{Hosts: []string{name + ".example"}, NotBefore: notBefore, NotAfter: notAfter})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.WriteFiles(dir, name); err != nil {
		t.Fatal(err)
	}
}

func TestTLSProblems(t *testing.T) {
	dir := writeTestTLS(t)
	now := time.Now()
	expired := now.Add(-time.Hour)
	writeDatedCert(t, dir, "expired", now.Add(-48*time.Hour), expired)
	if err := os.WriteFile(filepath.Join(dir, "empty.pem"), []byte("nothing\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const pair = "      cert_file: ${D}/a.pem\n      key_file: ${D}/a.key\n"
	tests := []struct {
		name string
		yaml string
		want string // $D stands for the certificates' directory
	}{
		{
			name: "http2 without tls",
			yaml: "listeners:\n  - name: web\n    address: \":8080\"\n    http2: true\nroutes: [{name: r, respond: {}}]\n",
			want: `t.yaml:4: listeners[0].http2: true on a listener without tls (HTTP/2 is offered through TLS; for cleartext HTTP/2 set h2c: true)`,
		},
		{
			name: "h2c with tls",
			yaml: tlsListener(pair, "    h2c: true\n"),
			want: `t.yaml:7: listeners[0].h2c: true on a listener with tls (h2c is cleartext HTTP/2; a TLS listener offers HTTP/2 through ALPN, see http2)`,
		},
		{
			name: "no certificate",
			yaml: tlsListener("      min_version: \"1.3\"\n", ""),
			want: `t.yaml:4: listeners[0].tls: no certificate (cert_file and key_file, certificates, or acme)`,
		},
		{
			name: "cert_file without key_file",
			yaml: tlsListener("      cert_file: ${D}/a.pem\n", ""),
			want: `t.yaml:4: listeners[0].tls.key_file: missing (cert_file and key_file go together: a PEM file with the certificate's unencrypted private key)`,
		},
		{
			name: "key_file without cert_file",
			yaml: tlsListener("      key_file: ${D}/a.key\n", ""),
			want: `t.yaml:4: listeners[0].tls.cert_file: missing (cert_file and key_file go together: a PEM file: the certificate, then the intermediates of its chain)`,
		},
		{
			name: "cert_file and certificates",
			yaml: tlsListener(pair+"      certificates: [{cert_file: ${D}/b.pem, key_file: ${D}/b.key}]\n", ""),
			want: `t.yaml:7: listeners[0].tls.certificates: set along with cert_file (one or the other; list every certificate under certificates)`,
		},
		{
			name: "empty certificates",
			yaml: tlsListener("      certificates: []\n", ""),
			want: `t.yaml:5: listeners[0].tls.certificates: empty (at least one {cert_file, key_file})`,
		},
		{
			name: "certificate without key_file",
			yaml: tlsListener("      certificates:\n        - {cert_file: ${D}/a.pem, key_file: ${D}/a.key}\n        - {cert_file: ${D}/b.pem}\n", ""),
			want: `t.yaml:7: listeners[0].tls.certificates[1].key_file: missing (cert_file and key_file go together: a PEM file with the certificate's unencrypted private key)`,
		},
		{
			name: "certificate listed twice",
			yaml: tlsListener("      certificates:\n        - {cert_file: ${D}/a.pem, key_file: ${D}/a.key}\n        - {cert_file: ${D}/a.pem, key_file: ${D}/a.key}\n", ""),
			want: `t.yaml:7: listeners[0].tls.certificates[1].cert_file: "$D/a.pem" is already served by listeners[0].tls.certificates[0] (list each certificate once)`,
		},
		{
			name: "missing certificate file",
			yaml: tlsListener("      cert_file: ${D}/nope.pem\n      key_file: ${D}/a.key\n", ""),
			want: `t.yaml:5: listeners[0].tls.cert_file: "$D/nope.pem" does not exist (a PEM file: the certificate, then the intermediates of its chain)`,
		},
		{
			name: "missing key file",
			yaml: tlsListener("      cert_file: ${D}/a.pem\n      key_file: ${D}/nope.key\n", ""),
			want: `t.yaml:6: listeners[0].tls.key_file: "$D/nope.key" does not exist (a PEM file with the certificate's unencrypted private key)`,
		},
		{
			name: "key of another certificate",
			yaml: tlsListener("      cert_file: ${D}/a.pem\n      key_file: ${D}/client.key\n", ""),
			want: `t.yaml:6: listeners[0].tls.key_file: "$D/client.key" is not the private key of "$D/a.pem" (a PEM file with the certificate's unencrypted private key)`,
		},
		{
			name: "key where the certificate should be",
			yaml: tlsListener("      cert_file: ${D}/a.key\n      key_file: ${D}/a.key\n", ""),
			want: `t.yaml:5: listeners[0].tls.cert_file: "$D/a.key" holds no PEM certificate (a PEM file: the certificate, then the intermediates of its chain)`,
		},
		{
			name: "certificate where the key should be",
			yaml: tlsListener("      cert_file: ${D}/a.pem\n      key_file: ${D}/a.pem\n", ""),
			want: `t.yaml:6: listeners[0].tls.key_file: "$D/a.pem" holds no PEM private key (a PEM file with the certificate's unencrypted private key)`,
		},
		{
			name: "expired certificate",
			yaml: tlsListener("      cert_file: ${D}/expired.pem\n      key_file: ${D}/expired.key\n", ""),
			want: `t.yaml:5: listeners[0].tls.cert_file: "$D/expired.pem" (expired.example) expired on ` + expired.UTC().Format("2006-01-02 15:04 MST") + ` (renew it)`,
		},
		{
			name: "TLS 1.1",
			yaml: tlsListener(pair+"      min_version: \"1.1\"\n", ""),
			want: `t.yaml:7: listeners[0].tls.min_version: "1.1" is not a TLS version ("1.2" or "1.3")`,
		},
		{
			name: "missing client CA file",
			yaml: tlsListener(pair+"      client_ca_file: ${D}/nope.pem\n", ""),
			want: `t.yaml:7: listeners[0].tls.client_ca_file: "$D/nope.pem" does not exist (a PEM file of CA certificates)`,
		},
		{
			name: "client CA file without certificates",
			yaml: tlsListener(pair+"      client_ca_file: ${D}/empty.pem\n", ""),
			want: `t.yaml:7: listeners[0].tls.client_ca_file: "$D/empty.pem" holds no PEM certificate (a PEM file of CA certificates)`,
		},
		{
			name: "no handshake timeout",
			yaml: tlsListener(pair+"      handshake_timeout: 0s\n", ""),
			want: `t.yaml:7: listeners[0].tls.handshake_timeout: 0s is out of range (more than 0, such as 2s)`,
		},
		{
			name: "no client hello timeout",
			yaml: tlsListener(pair+"      client_hello_timeout: 0s\n", ""),
			want: `t.yaml:7: listeners[0].tls.client_hello_timeout: 0s is out of range (more than 0, such as 2s)`,
		},
		{
			name: "client hello timeout beyond the handshake timeout",
			yaml: tlsListener(pair+"      handshake_timeout: 3s\n      client_hello_timeout: 4s\n", ""),
			want: `t.yaml:8: listeners[0].tls.client_hello_timeout: 4s is more than handshake_timeout, 3s (at most the handshake's whole time)`,
		},
		{
			name: "negative max_handshakes",
			yaml: tlsListener(pair+"      max_handshakes: -1\n", ""),
			want: `t.yaml:7: listeners[0].tls.max_handshakes: -1 is out of range (0 for no cap, or more)`,
		},
		// Upstream transports.
		{
			name: "unknown protocol",
			yaml: tlsTransport("      protocol: h3\n"),
			want: `t.yaml:7: upstreams[0].transport.protocol: "h3" is not a protocol (http1, h2 (HTTP/2 over TLS) or h2c (cleartext HTTP/2))`,
		},
		{
			name: "h2c with tls",
			yaml: tlsTransport("      protocol: h2c\n      tls: {ca_file: ${D}/ca.pem}\n"),
			want: `t.yaml:8: upstreams[0].transport.tls: set with protocol h2c (h2c is cleartext HTTP/2; use protocol h2 for HTTP/2 over TLS)`,
		},
		{
			name: "server_name that is no name",
			yaml: tlsTransport("      tls:\n        server_name: \"api internal\"\n"),
			want: `t.yaml:8: upstreams[0].transport.tls.server_name: "api internal" is not a host name or IP address (the name in the backends' certificates, such as api.internal)`,
		},
		{
			name: "client certificate without key",
			yaml: tlsTransport("      tls:\n        cert_file: ${D}/client.pem\n"),
			want: `t.yaml:7: upstreams[0].transport.tls.key_file: missing (cert_file and key_file go together: a PEM file with the certificate's unencrypted private key)`,
		},
		{
			name: "client key of another certificate",
			yaml: tlsTransport("      tls:\n        cert_file: ${D}/client.pem\n        key_file: ${D}/a.key\n"),
			want: `t.yaml:9: upstreams[0].transport.tls.key_file: "$D/a.key" is not the private key of "$D/client.pem" (a PEM file with the certificate's unencrypted private key)`,
		},
		{
			name: "CA file without certificates",
			yaml: tlsTransport("      tls:\n        ca_file: ${D}/empty.pem\n"),
			want: `t.yaml:8: upstreams[0].transport.tls.ca_file: "$D/empty.pem" holds no PEM certificate (a PEM file of CA certificates)`,
		},
		{
			name: "insecure_skip_verify with ca_file",
			yaml: tlsTransport("      tls:\n        ca_file: ${D}/ca.pem\n        insecure_skip_verify: true\n"),
			want: `t.yaml:9: upstreams[0].transport.tls.insecure_skip_verify: true along with ca_file, which it would ignore (one or the other)`,
		},
		{
			name: "upstream TLS 1.0",
			yaml: tlsTransport("      tls: {min_version: \"1.0\"}\n"),
			want: `t.yaml:7: upstreams[0].transport.tls.min_version: "1.0" is not a TLS version ("1.2" or "1.3")`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ps := parseProblems(t, tt.yaml, map[string]string{"D": dir})
			want := strings.ReplaceAll(tt.want, "$D", dir)
			if got := ps.Error(); got != want {
				t.Errorf("got\n%v\nwant\n%v", got, want)
			}
		})
	}
}

func TestTLSWarnings(t *testing.T) {
	dir := writeTestTLS(t)
	now := time.Now()
	soon := now.Add(5*24*time.Hour - time.Hour)
	later := now.Add(30 * 24 * time.Hour)
	writeDatedCert(t, dir, "soon", now.Add(-time.Hour), soon)
	writeDatedCert(t, dir, "tomorrow", now.Add(-time.Hour), now.Add(20*time.Hour+30*time.Minute))
	writeDatedCert(t, dir, "future", now.Add(24*time.Hour), later)
	day := func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 MST") }
	tests := []struct {
		name string
		yaml string
		want string // "" for no warning
	}{
		{
			name: "valid for a long time",
			yaml: tlsListener("      cert_file: ${D}/a.pem\n      key_file: ${D}/a.key\n", ""),
		},
		{
			name: "expires within 14 days",
			yaml: tlsListener("      cert_file: ${D}/soon.pem\n      key_file: ${D}/soon.key\n", ""),
			want: `t.yaml:5: listeners[0].tls.cert_file: WARNING: "$D/soon.pem" (soon.example) expires in 5 days, on ` + day(soon) + ` (renew it)`,
		},
		{
			name: "expires within a day",
			yaml: tlsListener("      certificates:\n        - {cert_file: ${D}/a.pem, key_file: ${D}/a.key}\n        - {cert_file: ${D}/tomorrow.pem, key_file: ${D}/tomorrow.key}\n", ""),
			want: `t.yaml:7: listeners[0].tls.certificates[1].cert_file: WARNING: "$D/tomorrow.pem" (tomorrow.example) expires in 21 hours, on ` + day(now.Add(20*time.Hour+30*time.Minute)) + ` (renew it)`,
		},
		{
			name: "not valid yet",
			yaml: tlsListener("      cert_file: ${D}/future.pem\n      key_file: ${D}/future.key\n", ""),
			want: `t.yaml:5: listeners[0].tls.cert_file: WARNING: "$D/future.pem" (future.example) is not valid before ` + day(now.Add(24*time.Hour)) + `: clients refuse it until then (check the clock)`,
		},
		{
			name: "backend client certificate expires soon",
			yaml: tlsTransport("      tls: {cert_file: ${D}/soon.pem, key_file: ${D}/soon.key}\n"),
			want: `t.yaml:7: upstreams[0].transport.tls.cert_file: WARNING: "$D/soon.pem" (soon.example) expires in 5 days, on ` + day(soon) + ` (renew it)`,
		},
		{
			name: "insecure_skip_verify",
			yaml: tlsTransport("      protocol: h2\n      tls:\n        insecure_skip_verify: true\n"),
			want: `t.yaml:9: upstreams[0].transport.tls.insecure_skip_verify: WARNING: backends' certificates are not verified: anyone on the network path can impersonate them (set ca_file to the CA that issued them)`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := mustParse(t, tt.yaml, map[string]string{"D": dir})
			want := strings.ReplaceAll(tt.want, "$D", dir)
			if got := cfg.Warnings.Error(); got != want {
				t.Errorf("got\n%v\nwant\n%v", got, want)
			}
		})
	}
}

func TestTLSDefaults(t *testing.T) {
	dir := writeTestTLS(t)
	cfg := mustParse(t, `listeners:
  - {name: web, address: ":8443", tls: {cert_file: "${D}/a.pem", key_file: "${D}/a.key"}}
  - {name: plain, address: ":8080"}
routes: [{name: r, upstream: grpc}]
upstreams:
  - {name: grpc, backends: [{address: "10.0.0.5:50051"}], transport: {protocol: h2}}
`, map[string]string{"D": dir})
	web, plain := cfg.Listeners[0], cfg.Listeners[1]
	want := ListenerTLS{
		CertFile: dir + "/a.pem", KeyFile: dir + "/a.key", MinVersion: "1.2",
		HandshakeTimeout: Duration(10 * time.Second), ClientHelloTimeout: Duration(5 * time.Second), MaxHandshakes: 1024, SessionTickets: ptr(true),
	}
	if got := *web.TLS; got.CertFile != want.CertFile || got.MinVersion != want.MinVersion ||
		got.HandshakeTimeout != want.HandshakeTimeout || got.ClientHelloTimeout != want.ClientHelloTimeout ||
		got.MaxHandshakes != want.MaxHandshakes || !got.Tickets() {
		t.Errorf("tls: got %+v, want %+v", got, want)
	}
	if got := web.TLS.Pairs(); len(got) != 1 || got[0].CertFile != want.CertFile || got[0].KeyFile != want.KeyFile {
		t.Errorf("Pairs: got %+v, want the one cert_file/key_file pair", got)
	}
	if !web.OffersHTTP2() || plain.OffersHTTP2() || plain.H2C {
		t.Errorf("http2: got web %v, plain %v (h2c %v), want true, false (false)", web.OffersHTTP2(), plain.OffersHTTP2(), plain.H2C)
	}
	tr := cfg.Upstreams[0].Transport
	if tr.Protocol != ProtocolH2 || tr.TLS == nil || tr.TLS.MinVersion != "1.2" || tr.TLS.CAFile != "" {
		t.Errorf("h2 transport: got protocol %q, tls %+v, want h2 with a default tls block", tr.Protocol, tr.TLS)
	}
}

// TestClientHelloTimeoutDefault checks client_hello_timeout's default:
// 5s, or handshake_timeout when that is shorter.
func TestClientHelloTimeoutDefault(t *testing.T) {
	dir := writeTestTLS(t)
	pair := "      cert_file: ${D}/a.pem\n      key_file: ${D}/a.key\n"
	tests := []struct {
		name string
		keys string
		want time.Duration
	}{
		{name: "defaults", want: 5 * time.Second},
		{name: "a short handshake timeout", keys: "      handshake_timeout: 2s\n", want: 2 * time.Second},
		{name: "a long handshake timeout", keys: "      handshake_timeout: 30s\n", want: 5 * time.Second},
		{name: "set", keys: "      client_hello_timeout: 500ms\n", want: 500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := mustParse(t, tlsListener(pair+tt.keys, ""), map[string]string{"D": dir})
			if got := cfg.Listeners[0].TLS.ClientHelloTimeout.D(); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}
