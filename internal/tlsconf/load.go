package tlsconf

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
)

// The problems LoadKeyPair and LoadCAs classify; test for them with
// errors.Is.
var (
	// ErrNoCertificate: the file holds no PEM CERTIFICATE block.
	ErrNoCertificate = errors.New("no PEM CERTIFICATE block")
	// ErrBadCertificate: a CERTIFICATE block is not a valid X.509
	// certificate.
	ErrBadCertificate = errors.New("certificate cannot be parsed")
	// ErrNoKey: the file holds no PEM private key block.
	ErrNoKey = errors.New("no PEM private key block")
	// ErrBadKey: the private key cannot be parsed or is encrypted.
	ErrBadKey = errors.New("private key cannot be parsed")
	// ErrKeyMismatch: the private key is not the key of the certificate.
	ErrKeyMismatch = errors.New("private key does not match the certificate")
)

// Part says which file of a key pair a KeyPairError is about.
type Part int

// The parts of a key pair.
const (
	// PartCert is the certificate file.
	PartCert Part = iota
	// PartKey is the private key file, including a key that does not
	// match the certificate.
	PartKey
)

// KeyPairError is why a certificate and key could not be loaded, and in
// which file the fault lies.
type KeyPairError struct {
	// Part is the file at fault.
	Part Part
	// File is its path.
	File string
	// Err is what is wrong: an error from reading the file (test it with
	// errors.Is(err, fs.ErrNotExist)), or one of ErrNoCertificate,
	// ErrBadCertificate, ErrNoKey, ErrBadKey, ErrKeyMismatch, wrapping
	// the parser's error where there is one.
	Err error
}

// Error says which file and what is wrong with it.
func (e *KeyPairError) Error() string { return e.File + ": " + e.Err.Error() }

// Unwrap returns Err.
func (e *KeyPairError) Unwrap() error { return e.Err }

// LoadKeyPair reads a PEM certificate chain (the certificate first, then
// the intermediates that lead to a root) and its PEM private key (PKCS #8,
// PKCS #1 RSA or SEC 1 EC; not encrypted). The result has Leaf set. Any
// error is a *KeyPairError.
func LoadKeyPair(certFile, keyFile string) (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, &KeyPairError{Part: PartCert, File: certFile, Err: unwrapPath(err)}
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, &KeyPairError{Part: PartKey, File: keyFile, Err: unwrapPath(err)}
	}
	chain, err := parseCertificates(certPEM)
	if err != nil {
		return nil, &KeyPairError{Part: PartCert, File: certFile, Err: err}
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, &KeyPairError{Part: PartKey, File: keyFile, Err: err}
	}
	pub, ok := chain[0].PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(key.Public()) {
		return nil, &KeyPairError{Part: PartKey, File: keyFile, Err: ErrKeyMismatch}
	}
	// crypto/tls builds the pair, so that Helios accepts exactly the key
	// types and encodings a tls.Config can serve.
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, &KeyPairError{Part: PartKey, File: keyFile, Err: fmt.Errorf("%w: %v", ErrBadKey, err)}
	}
	cert.Leaf = chain[0]
	return &cert, nil
}

// LoadCAs reads a PEM file of CA certificates into a pool and returns it
// with the certificates, in file order. A file without a certificate, or
// with one that does not parse, is an error (x509.CertPool's own
// AppendCertsFromPEM would skip it silently and trust nothing).
func LoadCAs(file string) (*x509.CertPool, []*x509.Certificate, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", file, unwrapPath(err))
	}
	certs, err := parseCertificates(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", file, err)
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, certs, nil
}

// parseCertificates parses every CERTIFICATE block of data, in order.
func parseCertificates(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for n := 1; ; {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w (certificate %d in the file): %v", ErrBadCertificate, n, err)
		}
		certs = append(certs, c)
		n++
	}
	if len(certs) == 0 {
		return nil, ErrNoCertificate
	}
	return certs, nil
}

// parseKey parses the first private key block of data.
func parseKey(data []byte) (crypto.Signer, error) {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, ErrNoKey
		}
		if !strings.HasSuffix(block.Type, "PRIVATE KEY") {
			continue
		}
		// PKCS #8 encryption, or the legacy OpenSSL header (RFC 1421).
		if block.Type == "ENCRYPTED PRIVATE KEY" || strings.Contains(block.Headers["Proc-Type"], "ENCRYPTED") {
			return nil, fmt.Errorf("%w: it is encrypted (Helios reads unencrypted keys; protect the file with its mode, 0600)", ErrBadKey)
		}
		var (
			key any
			err error
		)
		switch block.Type {
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(block.Bytes)
		default:
			key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadKey, err)
		}
		signer, ok := key.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("%w: a %T cannot sign", ErrBadKey, key)
		}
		return signer, nil
	}
}

// unwrapPath drops the path from an *os.PathError: messages name the file
// themselves.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
