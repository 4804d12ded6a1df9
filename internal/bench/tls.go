package bench

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certFiles are the paths of a throwaway TLS certificate for 127.0.0.1.
type certFiles struct {
	Cert, Key, Both string
}

// writeSelfSigned writes a self-signed ECDSA P-256 certificate for
// 127.0.0.1 and localhost, valid for a day, into dir: cert.pem, key.pem and
// both in one file (haproxy's crt wants that).
func writeSelfSigned(dir string) (certFiles, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return certFiles{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "helios-bench"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return certFiles{}, err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return certFiles{}, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
	f := certFiles{
		Cert: filepath.Join(dir, "cert.pem"),
		Key:  filepath.Join(dir, "key.pem"),
		Both: filepath.Join(dir, "cert-and-key.pem"),
	}
	for path, b := range map[string][]byte{f.Cert: certPEM, f.Key: keyPEM, f.Both: append(append([]byte{}, certPEM...), keyPEM...)} {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			return certFiles{}, err
		}
	}
	return f, nil
}
