package h1

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
	"sync/atomic"
	"testing"
	"time"
)

// testTLS is a listener's TLS provider for tests: one self-signed ECDSA
// certificate for localhost and 127.0.0.1, a cap on handshakes, and
// counters of what it saw.
type testTLS struct {
	cfg        *tls.Config
	pool       *x509.CertPool
	timeout    time.Duration
	max        int32
	inProgress atomic.Int32
	ok, failed atomic.Int32
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

func (p *testTLS) TLSConfig() *tls.Config          { return p.cfg }
func (p *testTLS) HandshakeTimeout() time.Duration { return p.timeout }
func (p *testTLS) EndHandshake()                   { p.inProgress.Add(-1) }
func (p *testTLS) BeginHandshake() bool {
	if p.inProgress.Add(1) > p.max {
		p.inProgress.Add(-1)
		return false
	}
	return true
}
func (p *testTLS) Record(_ tls.ConnectionState, err error) {
	if err == nil {
		p.ok.Add(1)
	} else {
		p.failed.Add(1)
	}
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
