package acme

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// StoredCert is a certificate found in an ACME storage directory.
type StoredCert struct {
	// Names are the certificate's DNS names.
	Names []string
	// NotAfter is when it expires.
	NotAfter time.Time
	// Issuer is the storage's name of the CA that issued it (the
	// directory URL's host and path, such as
	// acme-v02.api.letsencrypt.org-directory).
	Issuer string
	// File is the certificate's file.
	File string
}

// Stored lists the certificates in the storage directory dir (the layout
// certmagic's file storage writes: certificates/ISSUER/NAME/NAME.crt),
// ordered by first name then issuer. A directory that does not exist
// holds none.
func Stored(dir string) ([]StoredCert, error) {
	root := filepath.Join(dir, "certificates")
	var out []StoredCert
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == root {
				return fs.SkipAll
			}
			return err
		}
		if d.IsDir() || !strings.HasSuffix(p, ".crt") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		blk, _ := pem.Decode(b)
		if blk == nil {
			return nil
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		issuer, _, _ := strings.Cut(rel, string(filepath.Separator))
		out = append(out, StoredCert{Names: c.DNSNames, NotAfter: c.NotAfter, Issuer: issuer, File: p})
		return nil
	})
	slices.SortFunc(out, func(a, b StoredCert) int {
		if c := strings.Compare(first(a.Names), first(b.Names)); c != 0 {
			return c
		}
		return strings.Compare(a.Issuer, b.Issuer)
	})
	return out, err
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}
