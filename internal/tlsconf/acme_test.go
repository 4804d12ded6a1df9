package tlsconf

import (
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/certgen"
)

// fakeManaged manages names with one certificate, and answers
// TLS-ALPN-01 validations with another.
type fakeManaged struct {
	names     map[string]bool
	onDemand  bool
	cert      *tls.Certificate
	challenge *tls.Certificate
}

func (f *fakeManaged) Manages(name string) bool { return f.names[name] }
func (f *fakeManaged) OnDemand() bool           { return f.onDemand }
func (f *fakeManaged) Certificate(hello *tls.ClientHelloInfo) *tls.Certificate {
	if f.names[hello.ServerName] || f.onDemand && strings.HasPrefix(hello.ServerName, "yes.") {
		return f.cert
	}
	return nil
}
func (f *fakeManaged) ChallengeCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return f.challenge, nil
}

func tlsCert(c *certgen.Cert) *tls.Certificate { tc := c.TLS(); return &tc }

// A listener with managed certificates: managed names get the manager's
// certificate, names a file carries the file's, on-demand names the
// manager's again, and a name nobody serves fails its handshake with
// unrecognized_name (for that client only), with or without files.
func TestManagedCertificateSelection(t *testing.T) {
	k := newPKI(t)
	file, fileFiles := k.issue(t, "file", certgen.Request{Hosts: []string{"file.example", "*.wild.example"}})
	managed, _ := k.issue(t, "managed", certgen.Request{Hosts: []string{"acme.example", "yes.demand.example"}})
	m := &fakeManaged{names: map[string]bool{"acme.example": true}, onDemand: true, cert: tlsCert(managed)}

	tests := []struct {
		name  string
		files []KeyPairFiles
		sni   string
		want  *certgen.Cert // nil: refused with unrecognized_name
	}{
		{name: "managed name", files: []KeyPairFiles{fileFiles}, sni: "acme.example", want: managed},
		{name: "a file's name", files: []KeyPairFiles{fileFiles}, sni: "file.example", want: file},
		{name: "a file's wildcard before on demand", files: []KeyPairFiles{fileFiles}, sni: "a.wild.example", want: file},
		{name: "on demand", files: []KeyPairFiles{fileFiles}, sni: "yes.demand.example", want: managed},
		{name: "refused on demand", files: []KeyPairFiles{fileFiles}, sni: "no.demand.example"},
		{name: "managed only: managed name", sni: "acme.example", want: managed},
		{name: "managed only: unknown name", sni: "no.demand.example"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newTestProvider(t, ServerOptions{Certificates: tt.files, Managed: m}, Env{})
			addr := serve(t, p)
			s, err := dial(t, addr, k.clientConfig(tt.sni))
			if tt.want == nil {
				if err == nil || !strings.Contains(err.Error(), "unrecognized name") {
					t.Fatalf("got %v, want the unrecognized_name alert", err)
				}
				// The listener still serves the others.
				mustDial(t, addr, k.clientConfig("acme.example"))
				return
			}
			if err != nil {
				t.Fatalf("got %v, want a handshake", err)
			}
			if got := s.served(); !got.Equal(tt.want.Leaf) {
				t.Errorf("got the certificate for %v, want the one for %v", got.DNSNames, tt.want.Leaf.DNSNames)
			}
		})
	}
}

// A ClientHello offering only acme-tls/1 gets the challenge certificate
// and that protocol, without the client certificate the listener asks
// every other client for (a CA has none); a client offering acme-tls/1
// among others is an ordinary client.
func TestACMETLSALPNChallengeConfig(t *testing.T) {
	k := newPKI(t)
	_, fileFiles := k.issue(t, "file", certgen.Request{Hosts: []string{"acme.example"}})
	chal, err := certgen.SelfSigned(certgen.Request{Hosts: []string{"acme.example"}})
	if err != nil {
		t.Fatal(err)
	}
	m := &fakeManaged{names: map[string]bool{}, challenge: tlsCert(chal)}
	ca := writeFile(t, k.dir, "clients.pem", k.root.CertPEM())
	p := newTestProvider(t, ServerOptions{Certificates: []KeyPairFiles{fileFiles}, Managed: m, ClientCAFile: ca, HTTP2: true}, Env{})
	addr := serve(t, p)

	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
		&tls.Config{ServerName: "acme.example", NextProtos: []string{ACMETLS1}, InsecureSkipVerify: true})
	if err != nil {
		t.Fatalf("TLS-ALPN-01 handshake: got %v, want success without a client certificate", err)
	}
	cs := c.ConnectionState()
	c.Close()
	if cs.NegotiatedProtocol != ACMETLS1 || !cs.PeerCertificates[0].Equal(chal.Leaf) {
		t.Errorf("got protocol %q and the certificate for %v, want %q and the challenge certificate", cs.NegotiatedProtocol, cs.PeerCertificates[0].DNSNames, ACMETLS1)
	}

	// Offering it with another protocol: an ordinary client, whose
	// missing client certificate is refused.
	if _, err := dial(t, addr, &tls.Config{ServerName: "acme.example", NextProtos: []string{ACMETLS1, "http/1.1"}, RootCAs: k.pool}); err == nil {
		t.Errorf("acme-tls/1 among other protocols: got a handshake without a client certificate, want it refused")
	}
}
