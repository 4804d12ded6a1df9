package acme

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/certmagic"
)

// StoredCert is a certificate found in an ACME storage.
type StoredCert struct {
	// Names are the certificate's DNS names.
	Names []string
	// NotAfter is when it expires.
	NotAfter time.Time
	// Issuer is the storage's name of the CA that issued it (the
	// directory URL's host and path, such as
	// acme-v02.api.letsencrypt.org-directory).
	Issuer string
	// Key is the certificate's key in the storage
	// (certificates/ISSUER/NAME/NAME.crt; a file under the directory of
	// a directory storage).
	Key string
}

// Stored lists the certificates in st (the layout certmagic writes:
// certificates/ISSUER/NAME/NAME.crt), ordered by first name then issuer.
// A storage without certificates holds none.
func Stored(ctx context.Context, st certmagic.Storage) ([]StoredCert, error) {
	keys, err := st.List(ctx, "certificates", true)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []StoredCert
	for _, k := range keys {
		if !strings.HasSuffix(k, ".crt") {
			continue
		}
		b, err := st.Load(ctx, k)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed meanwhile
			}
			return nil, err
		}
		blk, _ := pem.Decode(b)
		if blk == nil {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			continue
		}
		issuer, _, _ := strings.Cut(strings.TrimPrefix(path.Clean(k), "certificates/"), "/")
		out = append(out, StoredCert{Names: c.DNSNames, NotAfter: c.NotAfter, Issuer: issuer, Key: k})
	}
	slices.SortFunc(out, func(a, b StoredCert) int {
		if c := strings.Compare(first(a.Names), first(b.Names)); c != 0 {
			return c
		}
		return strings.Compare(a.Issuer, b.Issuer)
	})
	return out, nil
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}
