package tlsconf

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// KeyPairFiles names a certificate file and its key file.
type KeyPairFiles struct {
	// CertFile holds the certificate, then its chain, in PEM.
	CertFile string
	// KeyFile holds the certificate's private key in PEM.
	KeyFile string
}

// entry is one certificate of a set.
type entry struct {
	file        string
	leaf        *x509.Certificate
	issuer      *x509.Certificate // from the chain; nil when absent: no OCSP
	names       []string          // DNS names from the SANs, lower case
	fingerprint [32]byte          // of the leaf, to carry a staple across reloads
	base        *tls.Certificate  // as loaded, without a staple
	served      atomic.Pointer[served]
}

// served is what an entry hands to handshakes: its certificate, with the
// current OCSP staple when there is one.
type served struct {
	cert *tls.Certificate
	// thisUpdate and nextUpdate bound the staple's validity; zero without
	// a staple.
	thisUpdate, nextUpdate time.Time
}

// stapled reports whether s carries an OCSP staple.
func (s *served) stapled() bool { return len(s.cert.OCSPStaple) > 0 }

// certSet is the certificates of a listener, indexed for selection by
// SNI. It never changes once built; a reload builds another.
type certSet struct {
	entries  []*entry            // configuration order
	exact    map[string][]*entry // host name -> certificates, preferred first
	wildcard map[string][]*entry // "example.com" for *.example.com
	// fallback serves clients without SNI or with a name no certificate
	// has: the default certificate (the first configured) and the others
	// for the same names, preferred first, then every other certificate.
	fallback []*entry
}

// loadCertSet loads every pair of files. The first pair is the default.
func loadCertSet(pairs []KeyPairFiles) (*certSet, error) {
	s := &certSet{exact: make(map[string][]*entry), wildcard: make(map[string][]*entry)}
	for _, p := range pairs {
		cert, err := LoadKeyPair(p.CertFile, p.KeyFile)
		if err != nil {
			return nil, err
		}
		e := &entry{file: p.CertFile, leaf: cert.Leaf, base: cert, fingerprint: sha256.Sum256(cert.Leaf.Raw)}
		if len(cert.Certificate) > 1 {
			if issuer, err := x509.ParseCertificate(cert.Certificate[1]); err == nil && cert.Leaf.CheckSignatureFrom(issuer) == nil {
				e.issuer = issuer
			}
		}
		e.served.Store(&served{cert: cert})
		for _, n := range cert.Leaf.DNSNames {
			n = strings.TrimSuffix(strings.ToLower(n), ".")
			e.names = append(e.names, n)
			switch {
			case strings.HasPrefix(n, "*."):
				s.wildcard[n[2:]] = append(s.wildcard[n[2:]], e)
			case !strings.Contains(n, "*"):
				s.exact[n] = append(s.exact[n], e)
			}
		}
		slices.Sort(e.names)
		s.entries = append(s.entries, e)
	}
	for _, list := range s.exact {
		sortPreferred(list)
	}
	for _, list := range s.wildcard {
		sortPreferred(list)
	}
	def := s.entries[0]
	var group, rest []*entry
	for _, e := range s.entries {
		if e == def || (len(def.names) > 0 && slices.Equal(e.names, def.names)) {
			group = append(group, e)
		} else {
			rest = append(rest, e)
		}
	}
	sortPreferred(group)
	s.fallback = append(group, rest...)
	return s, nil
}

// sortPreferred orders certificates for the same name: ECDSA first (the
// cheapest handshake every current client supports), then Ed25519, then
// RSA, each kind in configuration order.
func sortPreferred(list []*entry) {
	slices.SortStableFunc(list, func(a, b *entry) int { return keyRank(a) - keyRank(b) })
}

func keyRank(e *entry) int {
	switch e.leaf.PublicKey.(type) {
	case *ecdsa.PublicKey:
		return 0
	case ed25519.PublicKey:
		return 1
	}
	return 2
}

// get is the tls.Config.GetCertificate of the set: the certificates for
// the exact SNI name, else for its wildcard, else the fallback; within
// those, the first the client can use (its signature algorithms, curves
// and, in TLS 1.2, cipher suites), as tls.ClientHelloInfo.SupportsCertificate
// decides. When the client can use none of a name's certificates, the
// most preferred is served and the handshake fails on the client's terms.
func (s *certSet) get(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	// The name has been matched here; SupportsCertificate is asked only
	// about algorithms, so a fallback certificate is not refused for a
	// name it does not carry.
	h := *hello
	h.ServerName = ""
	if name := normalizeSNI(hello.ServerName); name != "" {
		if list := s.exact[name]; len(list) > 0 {
			return pick(&h, list), nil
		}
		if i := strings.IndexByte(name, '.'); i > 0 {
			if list := s.wildcard[name[i+1:]]; len(list) > 0 {
				return pick(&h, list), nil
			}
		}
	}
	return pick(&h, s.fallback), nil
}

// pick returns the first certificate of list that hello supports, or the
// first of list. list is not empty.
func pick(hello *tls.ClientHelloInfo, list []*entry) *tls.Certificate {
	for _, e := range list {
		c := e.served.Load().cert
		if hello.SupportsCertificate(c) == nil {
			return c
		}
	}
	return list[0].served.Load().cert
}

// normalizeSNI lower-cases name and drops a trailing dot, allocating only
// when it must.
func normalizeSNI(name string) string {
	name = strings.TrimSuffix(name, ".")
	for i := 0; i < len(name); i++ {
		if c := name[i]; 'A' <= c && c <= 'Z' {
			return strings.ToLower(name)
		}
	}
	return name
}
