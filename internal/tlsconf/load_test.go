package tlsconf

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/helios-lb/helios/internal/certgen"
)

func TestLoadKeyPair(t *testing.T) {
	k := newPKI(t)
	good, goodFiles := k.issue(t, "good", certgen.Request{Hosts: []string{"a.example"}})
	_, otherFiles := k.issue(t, "other", certgen.Request{Hosts: []string{"b.example"}})
	rsa, rsaFiles := k.issue(t, "rsa", certgen.Request{Hosts: []string{"a.example"}, Key: certgen.RSA2048})
	keyPEM, err := good.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(keyPEM)
	encrypted := writeFile(t, k.dir, "encrypted.key", pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: block.Bytes}))
	legacy := writeFile(t, k.dir, "legacy.key", pem.EncodeToMemory(&pem.Block{
		Type: "EC PRIVATE KEY", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED", "DEK-Info": "AES-128-CBC,00"}, Bytes: block.Bytes,
	}))
	both := writeFile(t, k.dir, "both.pem", append(good.CertPEM(), keyPEM...))
	garbage := writeFile(t, k.dir, "garbage.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("not DER")}))
	badKey := writeFile(t, k.dir, "bad.key", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("not DER")}))
	text := writeFile(t, k.dir, "text.pem", []byte("hello\n"))
	missing := filepath.Join(k.dir, "missing.pem")

	tests := []struct {
		name      string
		cert, key string
		wantPart  Part
		wantErr   error // nil: loads
		wantLeaf  *x509.Certificate
	}{
		{name: "ECDSA pair", cert: goodFiles.CertFile, key: goodFiles.KeyFile, wantLeaf: good.Leaf},
		{name: "RSA pair", cert: rsaFiles.CertFile, key: rsaFiles.KeyFile, wantLeaf: rsa.Leaf},
		{name: "certificate and key in one file", cert: both, key: both, wantLeaf: good.Leaf},
		{name: "certificate file missing", cert: missing, key: goodFiles.KeyFile, wantPart: PartCert, wantErr: fs.ErrNotExist},
		{name: "key file missing", cert: goodFiles.CertFile, key: missing, wantPart: PartKey, wantErr: fs.ErrNotExist},
		{name: "no certificate in the file", cert: text, key: goodFiles.KeyFile, wantPart: PartCert, wantErr: ErrNoCertificate},
		{name: "a key where the certificate should be", cert: goodFiles.KeyFile, key: goodFiles.KeyFile, wantPart: PartCert, wantErr: ErrNoCertificate},
		{name: "certificate that does not parse", cert: garbage, key: goodFiles.KeyFile, wantPart: PartCert, wantErr: ErrBadCertificate},
		{name: "no key in the file", cert: goodFiles.CertFile, key: goodFiles.CertFile, wantPart: PartKey, wantErr: ErrNoKey},
		{name: "key that does not parse", cert: goodFiles.CertFile, key: badKey, wantPart: PartKey, wantErr: ErrBadKey},
		{name: "encrypted PKCS 8 key", cert: goodFiles.CertFile, key: encrypted, wantPart: PartKey, wantErr: ErrBadKey},
		{name: "encrypted legacy key", cert: goodFiles.CertFile, key: legacy, wantPart: PartKey, wantErr: ErrBadKey},
		{name: "key of another certificate", cert: goodFiles.CertFile, key: otherFiles.KeyFile, wantPart: PartKey, wantErr: ErrKeyMismatch},
		{name: "RSA key for an ECDSA certificate", cert: goodFiles.CertFile, key: rsaFiles.KeyFile, wantPart: PartKey, wantErr: ErrKeyMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cert, err := LoadKeyPair(tt.cert, tt.key)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				if !cert.Leaf.Equal(tt.wantLeaf) {
					t.Errorf("leaf: got %s, want %s", cert.Leaf.Subject, tt.wantLeaf.Subject)
				}
				if got := len(cert.Certificate); got != 2 {
					t.Errorf("chain: got %d certificates, want 2 (leaf and intermediate)", got)
				}
				return
			}
			var kpe *KeyPairError
			if !errors.As(err, &kpe) {
				t.Fatalf("got %v (%T), want a *KeyPairError", err, err)
			}
			if kpe.Part != tt.wantPart || !errors.Is(err, tt.wantErr) {
				t.Errorf("got part %d, %v, want part %d, %v", kpe.Part, err, tt.wantPart, tt.wantErr)
			}
		})
	}
}

func TestLoadCAs(t *testing.T) {
	k := newPKI(t)
	two := writeFile(t, k.dir, "cas.pem", append(k.root.CertPEM(), k.inter.CertPEM()...))
	text := writeFile(t, k.dir, "text.pem", []byte("no certificates here\n"))
	tests := []struct {
		name    string
		file    string
		want    int
		wantErr error
	}{
		{name: "two CAs", file: two, want: 2},
		{name: "no certificate", file: text, wantErr: ErrNoCertificate},
		{name: "missing", file: filepath.Join(k.dir, "missing.pem"), wantErr: fs.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool, certs, err := LoadCAs(tt.file)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if len(certs) != tt.want {
				t.Errorf("got %d certificates, want %d", len(certs), tt.want)
			}
			if _, err := k.inter.Leaf.Verify(x509.VerifyOptions{Roots: pool}); err != nil {
				t.Errorf("verifying the intermediate against the pool: got %v, want nil", err)
			}
		})
	}
}
