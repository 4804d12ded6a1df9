package tlsconf

import (
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/certgen"
)

func TestSNISelection(t *testing.T) {
	k := newPKI(t)
	def, defFiles := k.issue(t, "default", certgen.Request{Hosts: []string{"default.example"}})
	a, aFiles := k.issue(t, "a", certgen.Request{Hosts: []string{"a.example", "www.a.example"}})
	wild, wildFiles := k.issue(t, "wild", certgen.Request{Hosts: []string{"*.wild.example"}})
	exact, exactFiles := k.issue(t, "exact", certgen.Request{Hosts: []string{"special.wild.example"}})
	p := newTestProvider(t, ServerOptions{Certificates: []KeyPairFiles{defFiles, aFiles, wildFiles, exactFiles}}, Env{})
	addr := serve(t, p)

	tests := []struct {
		name string
		sni  string
		want *certgen.Cert
	}{
		{name: "exact name", sni: "a.example", want: a},
		{name: "second name of a certificate", sni: "www.a.example", want: a},
		{name: "upper case", sni: "WWW.A.Example", want: a},
		{name: "wildcard", sni: "x.wild.example", want: wild},
		{name: "exact beats wildcard", sni: "special.wild.example", want: exact},
		{name: "wildcard covers one label only", sni: "y.x.wild.example", want: def},
		{name: "wildcard does not cover its parent", sni: "wild.example", want: def},
		{name: "unknown name gets the default", sni: "other.example", want: def},
		{name: "no SNI gets the default", sni: "", want: def},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Verification is checked where the name is the certificate's;
			// for the fallback cases the client only looks.
			cfg := &tls.Config{ServerName: tt.sni, InsecureSkipVerify: true}
			if tt.want != def {
				cfg = k.clientConfig(tt.sni)
			}
			s := mustDial(t, addr, cfg)
			if got := s.served(); !got.Equal(tt.want.Leaf) {
				t.Errorf("got the certificate for %v, want the one for %v", got.DNSNames, tt.want.Leaf.DNSNames)
			}
		})
	}
}

func TestECDSAAndRSASideBySide(t *testing.T) {
	k := newPKI(t)
	// RSA is listed first: the ECDSA certificate still wins where the
	// client can use it.
	_, rsaFiles := k.issue(t, "rsa", certgen.Request{Hosts: []string{"site.example"}, Key: certgen.RSA2048})
	_, ecFiles := k.issue(t, "ec", certgen.Request{Hosts: []string{"site.example"}})
	p := newTestProvider(t, ServerOptions{Certificates: []KeyPairFiles{rsaFiles, ecFiles}}, Env{})
	addr := serve(t, p)

	tests := []struct {
		name    string
		client  func(*tls.Config)
		sni     string
		wantRSA bool
	}{
		{name: "TLS 1.3 client", client: func(*tls.Config) {}, sni: "site.example"},
		{name: "TLS 1.3 client without SNI (default group)", client: func(*tls.Config) {}},
		{name: "TLS 1.2 client with ECDSA suites", sni: "site.example", client: func(c *tls.Config) {
			c.MaxVersion = tls.VersionTLS12
			c.CipherSuites = []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}
		}},
		{name: "TLS 1.2 client with RSA suites only", sni: "site.example", wantRSA: true, client: func(c *tls.Config) {
			c.MaxVersion = tls.VersionTLS12
			c.CipherSuites = []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}
		}},
		{name: "TLS 1.2 client with RSA suites only, no SNI", wantRSA: true, client: func(c *tls.Config) {
			c.MaxVersion = tls.VersionTLS12
			c.CipherSuites = []uint16{tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := k.clientConfig("site.example")
			cfg.ServerName = tt.sni
			if tt.sni == "" {
				cfg.InsecureSkipVerify = true
			}
			tt.client(cfg)
			s := mustDial(t, addr, cfg)
			_, isRSA := s.served().PublicKey.(*rsa.PublicKey)
			_, isEC := s.served().PublicKey.(*ecdsa.PublicKey)
			if isRSA != tt.wantRSA || isEC == tt.wantRSA {
				t.Errorf("got RSA %v, ECDSA %v, want RSA %v", isRSA, isEC, tt.wantRSA)
			}
		})
	}
}

func TestMutualTLS(t *testing.T) {
	k := newPKI(t)
	_, serverFiles := k.issue(t, "server", certgen.Request{Hosts: []string{"mtls.example"}})
	clientCA, err := certgen.NewCA("client CA")
	if err != nil {
		t.Fatal(err)
	}
	strangerCA, err := certgen.NewCA("stranger CA")
	if err != nil {
		t.Fatal(err)
	}
	caFile := writeFile(t, k.dir, "clients.pem", clientCA.CertPEM())
	alice, err := clientCA.Issue(certgen.Request{CommonName: "alice", Client: true})
	if err != nil {
		t.Fatal(err)
	}
	mallory, err := strangerCA.Issue(certgen.Request{CommonName: "mallory", Client: true})
	if err != nil {
		t.Fatal(err)
	}
	p := newTestProvider(t, ServerOptions{Certificates: []KeyPairFiles{serverFiles}, ClientCAFile: caFile}, Env{})
	addr := serve(t, p)

	tests := []struct {
		name    string
		version uint16
		cert    *certgen.Cert
		wantOK  bool
	}{
		{name: "trusted client certificate, TLS 1.3", version: tls.VersionTLS13, cert: alice, wantOK: true},
		{name: "trusted client certificate, TLS 1.2", version: tls.VersionTLS12, cert: alice, wantOK: true},
		{name: "certificate from another CA", version: tls.VersionTLS13, cert: mallory},
		{name: "no certificate, TLS 1.3", version: tls.VersionTLS13},
		{name: "no certificate, TLS 1.2", version: tls.VersionTLS12},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := k.clientConfig("mtls.example")
			cfg.MaxVersion = tt.version
			if tt.cert != nil {
				cfg.Certificates = []tls.Certificate{tt.cert.TLS()}
			}
			_, err := dial(t, addr, cfg)
			if (err == nil) != tt.wantOK {
				t.Errorf("got %v, want success %v", err, tt.wantOK)
			}
		})
	}
	// A client can see its handshake fail (the server's alert) before
	// the server's side has counted it: wait, bounded, for all five.
	want := func(got map[string]uint64) bool {
		return got["ok 1.3 new"] == 1 && got["ok 1.2 new"] == 1 && got["failed 1.3 new"]+got["failed 1.2 new"]+got["failed unknown new"] == 3
	}
	got := counts(p)
	for deadline := time.Now().Add(5 * time.Second); !want(got) && time.Now().Before(deadline); got = counts(p) {
		time.Sleep(10 * time.Millisecond)
	}
	if !want(got) {
		t.Errorf("handshake counts: got %v, want 1 ok 1.3, 1 ok 1.2 and 3 failed", got)
	}
}

func TestSessionTicketsResumeAcrossListeners(t *testing.T) {
	k := newPKI(t)
	_, files := k.issue(t, "site", certgen.Request{Hosts: []string{"site.example"}})
	p := newTestProvider(t, ServerOptions{Certificates: []KeyPairFiles{files}}, Env{})
	// Two sockets of one listener (as SO_REUSEPORT sockets or event loops
	// are): they share the provider, and with it the ticket keys.
	addr1, addr2 := serve(t, p), serve(t, p)
	// Another listener has its own keys.
	other := newTestProvider(t, ServerOptions{Certificates: []KeyPairFiles{files}}, Env{})
	addr3 := serve(t, other)

	for _, version := range []uint16{tls.VersionTLS13, tls.VersionTLS12} {
		t.Run(tls.VersionName(version), func(t *testing.T) {
			cfg := k.clientConfig("site.example")
			cfg.MaxVersion = version
			// crypto/tls keys cached sessions by server name: the three
			// addresses share one entry.
			cfg.ClientSessionCache = tls.NewLRUClientSessionCache(8)
			if mustDial(t, addr1, cfg).conn.ConnectionState().DidResume {
				t.Fatalf("first connection resumed, want a full handshake")
			}
			if !mustDial(t, addr2, cfg).conn.ConnectionState().DidResume {
				t.Errorf("second socket of the listener: got a full handshake, want resumption")
			}
			if mustDial(t, addr3, cfg).conn.ConnectionState().DidResume {
				t.Errorf("another listener: got resumption, want a full handshake")
			}
		})
	}
	got := counts(p)
	if got["ok 1.3 resumed"] != 1 || got["ok 1.2 resumed"] != 1 || got["ok 1.3 new"] != 1 || got["ok 1.2 new"] != 1 {
		t.Errorf("handshake counts: got %v, want one new and one resumed of each version", got)
	}
}

func TestSessionTicketsOff(t *testing.T) {
	k := newPKI(t)
	_, files := k.issue(t, "site", certgen.Request{Hosts: []string{"site.example"}})
	p := newTestProvider(t, ServerOptions{Certificates: []KeyPairFiles{files}, DisableSessionTickets: true}, Env{})
	addr := serve(t, p)
	cfg := k.clientConfig("site.example")
	cfg.ClientSessionCache = tls.NewLRUClientSessionCache(8)
	mustDial(t, addr, cfg)
	if mustDial(t, addr, cfg).conn.ConnectionState().DidResume {
		t.Errorf("got resumption with tickets off, want a full handshake")
	}
}

func TestTicketKeyRotation(t *testing.T) {
	k := newPKI(t)
	_, files := k.issue(t, "site", certgen.Request{Hosts: []string{"site.example"}})
	p := newTestProvider(t, ServerOptions{Certificates: []KeyPairFiles{files}}, Env{TicketKeys: 2})
	addr := serve(t, p)
	cfg := k.clientConfig("site.example")
	cfg.ClientSessionCache = tls.NewLRUClientSessionCache(8)

	mustDial(t, addr, cfg) // a ticket under key 0
	p.RotateTicketKeys()   // keys 1, 0
	if !mustDial(t, addr, cfg).conn.ConnectionState().DidResume {
		t.Fatalf("after one rotation: got a full handshake, want the previous key to still resume")
	}
	// The resumed connection left a ticket under key 1; two more
	// rotations leave keys 3, 2.
	p.RotateTicketKeys()
	p.RotateTicketKeys()
	if mustDial(t, addr, cfg).conn.ConnectionState().DidResume {
		t.Errorf("after the key was dropped: got resumption, want a full handshake")
	}
}

func TestReloadSwapsCertificateKeepingOpenConnections(t *testing.T) {
	k := newPKI(t)
	oldCert, files := k.issue(t, "site", certgen.Request{Hosts: []string{"site.example"}, NotAfter: time.Now().Add(72 * time.Hour)})
	p := newTestProvider(t, ServerOptions{Certificates: []KeyPairFiles{files}, HTTP2: true}, Env{})
	addr := serve(t, p)
	cfg := k.clientConfig("site.example")
	cfg.NextProtos = []string{"h2", "http/1.1"}
	open := mustDial(t, addr, cfg)
	open.echo(t, "before")
	if got := open.conn.ConnectionState().NegotiatedProtocol; got != "h2" {
		t.Errorf("ALPN with http2: got %q, want h2", got)
	}

	// The renewed certificate is written over the old files, as certbot
	// and cert-manager do, and the settings change too.
	renewed, err := k.inter.Issue(certgen.Request{Hosts: []string{"site.example"}})
	if err != nil {
		t.Fatal(err)
	}
	writePair(t, k.dir, "site", renewed)
	if err := p.Reload(ServerOptions{Certificates: []KeyPairFiles{files}, MinVersion: tls.VersionTLS13}); err != nil {
		t.Fatalf("Reload: got %v, want nil", err)
	}

	open.echo(t, "after")
	if got := open.served(); !got.Equal(oldCert.Leaf) {
		t.Errorf("open connection: its certificate changed under it")
	}
	fresh := mustDial(t, addr, cfg)
	if got := fresh.served(); !got.Equal(renewed.Leaf) {
		t.Errorf("new connection: got certificate expiring %v, want the renewed one expiring %v", got.NotAfter, renewed.Leaf.NotAfter)
	}
	if got := fresh.conn.ConnectionState().NegotiatedProtocol; got != "http/1.1" {
		t.Errorf("ALPN after http2 was turned off: got %q, want http/1.1", got)
	}
	old := cfg.Clone()
	old.MaxVersion = tls.VersionTLS12
	if _, err := dial(t, addr, old); err == nil {
		t.Errorf("TLS 1.2 client after min_version 1.3: got a connection, want a refused handshake")
	}
	if got := p.Certificates()[0].NotAfter; !got.Equal(renewed.Leaf.NotAfter) {
		t.Errorf("Certificates()[0].NotAfter: got %v, want %v", got, renewed.Leaf.NotAfter)
	}
}

func TestReloadRefusesBadCertificate(t *testing.T) {
	k := newPKI(t)
	good, files := k.issue(t, "site", certgen.Request{Hosts: []string{"site.example"}})
	p := newTestProvider(t, ServerOptions{Certificates: []KeyPairFiles{files}}, Env{})
	addr := serve(t, p)
	open := mustDial(t, addr, k.clientConfig("site.example"))

	expired, err := k.inter.Issue(certgen.Request{Hosts: []string{"site.example"}, NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	_, stranger := k.issue(t, "stranger", certgen.Request{Hosts: []string{"site.example"}})
	expiredFiles := writePair(t, t.TempDir(), "expired", expired)
	caFile := writeFile(t, k.dir, "text.pem", []byte("not a CA\n"))

	tests := []struct {
		name    string
		opts    ServerOptions
		wantErr error
	}{
		{name: "key of another certificate", opts: ServerOptions{Certificates: []KeyPairFiles{{CertFile: files.CertFile, KeyFile: stranger.KeyFile}}}, wantErr: ErrKeyMismatch},
		{name: "missing file", opts: ServerOptions{Certificates: []KeyPairFiles{{CertFile: files.CertFile + ".gone", KeyFile: files.KeyFile}}}, wantErr: os.ErrNotExist},
		{name: "expired certificate", opts: ServerOptions{Certificates: []KeyPairFiles{expiredFiles}}},
		{name: "client CA file without certificates", opts: ServerOptions{Certificates: []KeyPairFiles{files}, ClientCAFile: caFile}, wantErr: ErrNoCertificate},
		{name: "no certificates", opts: ServerOptions{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := p.Reload(tt.opts)
			if err == nil {
				t.Fatalf("Reload: got nil, want an error")
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("Reload: got %v, want %v", err, tt.wantErr)
			}
			if tt.name == "expired certificate" {
				var ee *ExpiredError
				if !errors.As(err, &ee) || !ee.NotAfter.Equal(expired.Leaf.NotAfter) {
					t.Errorf("Reload: got %v, want an ExpiredError at %v", err, expired.Leaf.NotAfter)
				}
			}
			if got := mustDial(t, addr, k.clientConfig("site.example")).served(); !got.Equal(good.Leaf) {
				t.Errorf("after the refused reload: got another certificate, want the old one still served")
			}
			open.echo(t, "still here")
		})
	}
}

// TestHandshakeCap checks the Provider applies MaxHandshakes through its
// gate, and takes a new cap on reload.
func TestHandshakeCap(t *testing.T) {
	k := newPKI(t)
	_, files := k.issue(t, "site", certgen.Request{Hosts: []string{"site.example"}})
	p := newTestProvider(t, ServerOptions{Certificates: []KeyPairFiles{files}, MaxHandshakes: 2, HandshakeTimeout: 3 * time.Second, ClientHelloTimeout: time.Second}, Env{})
	if got := p.HandshakeTimeout(); got != 3*time.Second {
		t.Errorf("HandshakeTimeout: got %v, want 3s", got)
	}
	if got := p.ClientHelloTimeout(); got != time.Second {
		t.Errorf("ClientHelloTimeout: got %v, want 1s", got)
	}
	a, b := p.BeginHandshake(func() {}), p.BeginHandshake(func() {})
	if a == nil || b == nil {
		t.Fatalf("under the cap: got a refusal, want both admitted")
	}
	if h := p.BeginHandshake(func() {}); h != nil {
		t.Errorf("at the cap with none waiting: got admitted, want refused")
	}
	if got := p.HandshakesInProgress(); got != 2 {
		t.Errorf("in progress: got %d, want 2", got)
	}
	if got := counts(p)["refused unknown new"]; got != 1 {
		t.Errorf("refused: got %d, want 1", got)
	}
	// A reload lifts the cap.
	if err := p.Reload(ServerOptions{Certificates: []KeyPairFiles{files}}); err != nil {
		t.Fatal(err)
	}
	if p.BeginHandshake(func() {}) == nil {
		t.Errorf("after a reload without a cap: got refused, want admitted")
	}
}

func TestHandshakeTimeoutIsCounted(t *testing.T) {
	k := newPKI(t)
	_, files := k.issue(t, "site", certgen.Request{Hosts: []string{"site.example"}})
	p := newTestProvider(t, ServerOptions{Certificates: []KeyPairFiles{files}, HandshakeTimeout: 50 * time.Millisecond}, Env{})
	addr := serve(t, p)
	// A client that connects and says nothing.
	raw, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	buf := make([]byte, 1)
	raw.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := raw.Read(buf); err == nil {
		t.Fatalf("silent client: got bytes, want the server to close the connection")
	}
	// The handshake's context closes the connection before the
	// handshake returns and is counted.
	waitFor(t, "the timeout to be counted", func() bool { return counts(p)["timeout unknown new"] == 1 })
	if got := counts(p); len(got) != 1 {
		t.Errorf("counts: got %v, want one timeout only", got)
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want Result
	}{
		{name: "nil", want: ResultOK},
		{name: "deadline", err: os.ErrDeadlineExceeded, want: ResultTimeout},
		{name: "wrapped deadline", err: errors.Join(errors.New("read"), os.ErrDeadlineExceeded), want: ResultTimeout},
		{name: "other", err: errors.New("tls: bad record MAC"), want: ResultFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Classify(tt.err); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestHandshakesDuringReloadsAndRotations runs handshakes while the
// certificates are reloaded and the ticket keys rotate, for the race
// detector: every handshake must succeed with one of the certificates.
func TestHandshakesDuringReloadsAndRotations(t *testing.T) {
	k := newPKI(t)
	_, a := k.issue(t, "a", certgen.Request{Hosts: []string{"site.example"}})
	_, b := k.issue(t, "b", certgen.Request{Hosts: []string{"site.example"}, Key: certgen.Ed25519})
	p := newTestProvider(t, ServerOptions{Certificates: []KeyPairFiles{a}}, Env{})
	addr := serve(t, p)

	const clients, rounds = 4, 15
	errs := make(chan error, clients*rounds)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range rounds {
			files := a
			if i%2 == 1 {
				files = b
			}
			if err := p.Reload(ServerOptions{Certificates: []KeyPairFiles{files}, HTTP2: i%2 == 0}); err != nil {
				errs <- err
			}
			p.RotateTicketKeys()
		}
	}()
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg := k.clientConfig("site.example")
			cfg.ClientSessionCache = tls.NewLRUClientSessionCache(4)
			for range rounds {
				s, err := dial(t, addr, cfg)
				if err != nil {
					errs <- err
					continue
				}
				s.conn.Close()
			}
		}()
	}
	wg.Wait()
	<-done
	close(errs)
	for err := range errs {
		t.Errorf("got %v, want every handshake and reload to succeed", err)
	}
	if got := counts(p); got["ok 1.3 new"]+got["ok 1.3 resumed"] != clients*rounds {
		t.Errorf("handshakes counted: got %v, want %d ok", got, clients*rounds)
	}
}
