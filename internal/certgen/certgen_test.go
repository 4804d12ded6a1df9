package certgen

import (
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"
)

func TestIssuedCertificatesVerify(t *testing.T) {
	root, err := NewCA("root")
	if err != nil {
		t.Fatal(err)
	}
	inter, err := root.NewIntermediate("intermediate")
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(root.Leaf)
	tests := []struct {
		name      string
		issuer    *Cert
		req       Request
		host      string
		usage     x509.ExtKeyUsage
		wantChain int // certificates in Chain
	}{
		{name: "ECDSA from the root", issuer: root, req: Request{Hosts: []string{"a.example"}}, host: "a.example", usage: x509.ExtKeyUsageServerAuth},
		{name: "RSA from the intermediate", issuer: inter, req: Request{Hosts: []string{"b.example"}, Key: RSA2048}, host: "b.example", usage: x509.ExtKeyUsageServerAuth, wantChain: 1},
		{name: "Ed25519 wildcard", issuer: inter, req: Request{Hosts: []string{"*.c.example"}, Key: Ed25519}, host: "x.c.example", usage: x509.ExtKeyUsageServerAuth, wantChain: 1},
		{name: "IP address", issuer: root, req: Request{Hosts: []string{"127.0.0.1"}}, host: "127.0.0.1", usage: x509.ExtKeyUsageServerAuth},
		{name: "client", issuer: root, req: Request{CommonName: "alice", Client: true}, usage: x509.ExtKeyUsageClientAuth},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tt.issuer.Issue(tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(c.Chain); got != tt.wantChain {
				t.Errorf("chain length: got %d, want %d", got, tt.wantChain)
			}
			inters := x509.NewCertPool()
			for _, der := range c.Chain {
				ic, err := x509.ParseCertificate(der)
				if err != nil {
					t.Fatal(err)
				}
				inters.AddCert(ic)
			}
			_, err = c.Leaf.Verify(x509.VerifyOptions{DNSName: tt.host, Roots: roots, Intermediates: inters, KeyUsages: []x509.ExtKeyUsage{tt.usage}})
			if err != nil {
				t.Errorf("verify: got %v, want nil", err)
			}
			keyPEM, err := c.KeyPEM()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tls.X509KeyPair(c.CertPEM(), keyPEM); err != nil {
				t.Errorf("X509KeyPair of CertPEM and KeyPEM: got %v, want nil", err)
			}
		})
	}
}

func TestSelfSigned(t *testing.T) {
	notAfter := time.Now().Add(48 * time.Hour).Truncate(time.Second)
	c, err := SelfSigned(Request{Hosts: []string{"localhost", "127.0.0.1"}, NotAfter: notAfter})
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(c.Leaf)
	for _, host := range []string{"localhost", "127.0.0.1"} {
		if _, err := c.Leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: pool}); err != nil {
			t.Errorf("verify %s against itself: got %v, want nil", host, err)
		}
	}
	if !c.Leaf.NotAfter.Equal(notAfter) {
		t.Errorf("NotAfter: got %v, want %v", c.Leaf.NotAfter, notAfter)
	}
	if _, err := c.Issue(Request{Hosts: []string{"x"}}); err == nil {
		t.Errorf("Issue from a non-CA: got nil error, want one")
	}
}
