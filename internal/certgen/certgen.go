// Package certgen makes X.509 certificates and their keys with
// crypto/x509: a self-signed certificate for the demo (helios cert
// selfsigned), and a throwaway CA with the certificates it issues, for
// tests that need real TLS on loopback. Nothing here is meant to guard
// production traffic: the keys never leave the files they are written to,
// and nothing is revoked or renewed.
package certgen

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// KeyType is the kind of key a certificate is made for.
type KeyType int

// The key types. The zero KeyType is ECDSAP256, the fastest to generate
// and to handshake with.
const (
	ECDSAP256 KeyType = iota
	RSA2048
	Ed25519
)

// String names the key type ("ECDSA-P256", "RSA-2048", "Ed25519").
func (k KeyType) String() string {
	switch k {
	case ECDSAP256:
		return "ECDSA-P256"
	case RSA2048:
		return "RSA-2048"
	case Ed25519:
		return "Ed25519"
	}
	return fmt.Sprintf("KeyType(%d)", int(k))
}

// Request describes a certificate to make. The zero value of each field is
// noted.
type Request struct {
	// Hosts are the names the certificate is for: DNS names (wildcards such
	// as *.example.com included) and IP addresses, put in its subject
	// alternative names. The first also becomes the subject's common name.
	// Empty: none (a CA, or a client certificate named by CommonName).
	Hosts []string
	// CommonName is the subject's common name. Empty: Hosts[0], or
	// "helios" when there are no hosts.
	CommonName string
	// Key is the key type. Zero: ECDSA P-256.
	Key KeyType
	// NotBefore and NotAfter bound the validity. Zero NotBefore: an hour
	// ago (clocks drift). Zero NotAfter: NotBefore plus a year.
	NotBefore, NotAfter time.Time
	// OCSPServer lists OCSP responder URLs put in the certificate's
	// Authority Information Access. Empty: none (no stapling).
	OCSPServer []string
	// Client makes a client certificate (extended key usage clientAuth)
	// instead of a server one (serverAuth).
	Client bool
}

// Cert is a certificate, its key, and the chain of certificates above it
// up to, but not including, the self-signed root.
type Cert struct {
	// Leaf is the certificate, parsed.
	Leaf *x509.Certificate
	// Key is its private key.
	Key crypto.Signer
	// Chain holds the DER certificates between Leaf and the self-signed
	// root, Leaf's issuer first: empty for a root and for a certificate a
	// root issued, the intermediate for one an intermediate issued.
	Chain [][]byte
	// isCA marks a certificate that may issue others.
	isCA bool
}

// NewCA makes a self-signed CA certificate named name, valid from an
// hour ago for ten years, with an ECDSA P-256 key.
func NewCA(name string) (*Cert, error) {
	key, err := newKey(ECDSAP256)
	if err != nil {
		return nil, err
	}
	tmpl := caTemplate(name, 10*365*24*time.Hour)
	return create(tmpl, tmpl, key.Public(), key, key, nil, true)
}

// NewIntermediate makes a CA certificate named name that ca issues, as a
// public CA issues certificates from an intermediate rather than its root.
// Certificates it issues carry it in their Chain.
func (ca *Cert) NewIntermediate(name string) (*Cert, error) {
	if !ca.isCA {
		return nil, errors.New("certgen: issuing certificate is not a CA")
	}
	key, err := newKey(ECDSAP256)
	if err != nil {
		return nil, err
	}
	return create(caTemplate(name, 5*365*24*time.Hour), ca.Leaf, key.Public(), key, ca.Key, ca.chainBelow(), true)
}

// SelfSigned makes a certificate for r.Hosts signed by its own key: what
// a client trusts by trusting the certificate itself (curl --cacert).
func SelfSigned(r Request) (*Cert, error) { return issue(r, nil) }

// Issue makes a certificate for r signed by ca, which must come from
// NewCA or NewIntermediate.
func (ca *Cert) Issue(r Request) (*Cert, error) {
	if !ca.isCA {
		return nil, errors.New("certgen: issuing certificate is not a CA")
	}
	return issue(r, ca)
}

// issue makes a certificate for r signed by ca, or by itself when ca is
// nil.
func issue(r Request, ca *Cert) (*Cert, error) {
	key, err := newKey(r.Key)
	if err != nil {
		return nil, err
	}
	tmpl, err := template(r)
	if err != nil {
		return nil, err
	}
	if ca == nil {
		return create(tmpl, tmpl, key.Public(), key, key, nil, false)
	}
	return create(tmpl, ca.Leaf, key.Public(), key, ca.Key, ca.chainBelow(), false)
}

// chainBelow returns the Chain of a certificate ca issues: ca and its own
// chain, unless ca is a self-signed root, which clients already hold.
func (ca *Cert) chainBelow() [][]byte {
	if isSelfSigned(ca.Leaf) {
		return nil
	}
	return append([][]byte{ca.Leaf.Raw}, ca.Chain...)
}

// CertPEM returns the certificate followed by its chain, PEM-encoded: the
// content of a cert_file.
func (c *Cert) CertPEM() []byte {
	out := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Leaf.Raw})
	for _, der := range c.Chain {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	return out
}

// KeyPEM returns the private key as PEM-encoded PKCS #8: the content of a
// key_file.
func (c *Cert) KeyPEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(c.Key)
	if err != nil {
		return nil, fmt.Errorf("certgen: encoding key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// WriteFiles writes CertPEM to dir/name.pem (mode 0644) and KeyPEM to
// dir/name.key (mode 0600) and returns their paths.
func (c *Cert) WriteFiles(dir, name string) (certFile, keyFile string, err error) {
	keyPEM, err := c.KeyPEM()
	if err != nil {
		return "", "", err
	}
	certFile = filepath.Join(dir, name+".pem")
	keyFile = filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, c.CertPEM(), 0o644); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// caTemplate returns the template of a CA certificate named name, valid
// from an hour ago for validFor.
func caTemplate(name string, validFor time.Duration) *x509.Certificate {
	now := time.Now()
	return &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"Helios test CA"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validFor),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
}

// template builds the certificate template of r.
func template(r Request) (*x509.Certificate, error) {
	notBefore := r.NotBefore
	if notBefore.IsZero() {
		notBefore = time.Now().Add(-time.Hour)
	}
	notAfter := r.NotAfter
	if notAfter.IsZero() {
		notAfter = notBefore.Add(365 * 24 * time.Hour)
	}
	cn := r.CommonName
	if cn == "" && len(r.Hosts) > 0 {
		cn = r.Hosts[0]
	}
	if cn == "" {
		cn = "helios"
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		OCSPServer:            r.OCSPServer,
	}
	if r.Client {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	if r.Key == RSA2048 {
		// RSA key exchange (TLS 1.2 without ECDHE) encrypts with the key.
		tmpl.KeyUsage |= x509.KeyUsageKeyEncipherment
	}
	for _, h := range r.Hosts {
		h = strings.TrimSpace(h)
		switch ip := net.ParseIP(h); {
		case h == "":
			return nil, errors.New("certgen: empty host name")
		case ip != nil:
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		default:
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return tmpl, nil
}

// create signs tmpl with signer on behalf of parent and returns the result.
func create(tmpl, parent *x509.Certificate, pub crypto.PublicKey, key, signer crypto.Signer, chain [][]byte, isCA bool) (*Cert, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		return nil, fmt.Errorf("certgen: signing: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("certgen: parsing what was signed: %w", err)
	}
	return &Cert{Leaf: leaf, Key: key, Chain: chain, isCA: isCA}, nil
}

// newKey generates a private key of type t.
func newKey(t KeyType) (crypto.Signer, error) {
	switch t {
	case ECDSAP256:
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case RSA2048:
		return rsa.GenerateKey(rand.Reader, 2048)
	case Ed25519:
		_, k, err := ed25519.GenerateKey(rand.Reader)
		return k, err
	}
	return nil, fmt.Errorf("certgen: unknown key type %v", t)
}

// serial returns a random 128-bit serial number, as RFC 5280 asks (at most
// 20 octets, unpredictable).
func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		// crypto/rand.Reader does not fail on supported platforms.
		panic("certgen: reading randomness: " + err.Error())
	}
	return n
}

// isSelfSigned reports whether c is its own issuer.
func isSelfSigned(c *x509.Certificate) bool {
	return c.CheckSignatureFrom(c) == nil
}

// TLS returns c as a tls.Certificate (leaf, chain and key), for a test
// server or client that takes one directly rather than from files.
func (c *Cert) TLS() tls.Certificate {
	return tls.Certificate{
		Certificate: append([][]byte{c.Leaf.Raw}, c.Chain...),
		PrivateKey:  c.Key,
		Leaf:        c.Leaf,
	}
}
