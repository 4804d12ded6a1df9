package engine

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/tlsconf"
)

// testTLS is a listener's TLS provider for tests: one self-signed ECDSA
// certificate for localhost and 127.0.0.1, and the provider's gate (the
// cap on handshakes in progress, shedding, and the counts of how
// handshakes ended).
type testTLS struct {
	cfg          *tls.Config
	pool         *x509.CertPool
	timeout      time.Duration
	helloTimeout time.Duration
	max          int
	gate         tlsconf.Gate
}

func newTestTLS(t testing.TB) *testTLS {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return &testTLS{
		cfg:     &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}}, NextProtos: []string{"http/1.1"}},
		pool:    pool,
		timeout: testTimeout,
		max:     1000,
	}
}

func (p *testTLS) TLSConfig() *tls.Config            { return p.cfg }
func (p *testTLS) HandshakeTimeout() time.Duration   { return p.timeout }
func (p *testTLS) ClientHelloTimeout() time.Duration { return p.helloTimeout }
func (p *testTLS) NoHello()                          { p.gate.NoHello() }
func (p *testTLS) BeginHandshake(stop func()) *tlsconf.Handshake {
	return p.gate.Begin(p.max, stop)
}

// count returns how many handshakes ended with result (tlsconf.Result's
// label: ok, failed, timeout, refused, shed, no_hello).
func (p *testTLS) count(result string) uint64 {
	var n uint64
	p.gate.Stats().Each(func(r, _ string, _ bool, c uint64) {
		if r == result {
			n += c
		}
	})
	return n
}

// dialTLS connects to addr over TLS trusting p's certificate.
func dialTLS(t testing.TB, addr string, p *testTLS) *rawClient {
	t.Helper()
	nc, err := tls.DialWithDialer(&net.Dialer{Timeout: testTimeout}, "tcp", addr, &tls.Config{RootCAs: p.pool, ServerName: "localhost"})
	if err != nil {
		t.Fatalf("TLS dial: %v", err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(testTimeout))
	return &rawClient{t: t, nc: nc, br: bufio.NewReader(nc)}
}
