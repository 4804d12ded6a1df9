package tlsconf

import (
	"crypto/tls"
	"strings"
)

// ACMETLS1 is the ALPN protocol of TLS-ALPN-01 validations (RFC 8737):
// a handshake that agrees on it only proves control of the name, and
// the connection is closed after it.
const ACMETLS1 = "acme-tls/1"

// Managed is a source of certificates that get and renew themselves
// (internal/acme's Manager implements it). A listener's handshakes ask it
// for the names it manages before the listener's certificate files.
type Managed interface {
	// Manages reports whether name (lower case, without a trailing dot;
	// "" for a client that sent no SNI) is one of the source's names.
	Manages(name string) bool
	// OnDemand reports whether a name that none of the listener's files
	// carries goes to the source too.
	OnDemand() bool
	// Certificate returns the certificate for hello's name, nil when
	// there is none (yet): the handshake then fails with the
	// unrecognized_name alert.
	Certificate(hello *tls.ClientHelloInfo) *tls.Certificate
	// ChallengeCertificate returns the certificate that answers a
	// TLS-ALPN-01 validation of hello's name.
	ChallengeCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error)
}

// isACMEChallenge reports whether hello is a TLS-ALPN-01 validation: a
// name, and acme-tls/1 as the only protocol offered (RFC 8737, section 3).
func isACMEChallenge(hello *tls.ClientHelloInfo) bool {
	return hello.ServerName != "" && len(hello.SupportedProtos) == 1 && hello.SupportedProtos[0] == ACMETLS1
}

// challengeConfig is the configuration of TLS-ALPN-01 validations on a
// listener whose certificates m manages: only acme-tls/1, no client
// certificate asked for (a CA has none), no session to resume.
func challengeConfig(m Managed) *tls.Config {
	return &tls.Config{
		GetCertificate:         m.ChallengeCertificate,
		NextProtos:             []string{ACMETLS1},
		MinVersion:             tls.VersionTLS12,
		SessionTicketsDisabled: true,
	}
}

// chooser returns the GetCertificate of a listener with the certificate
// files of set (possibly none) and the managed certificates of m (nil
// when none): a name m manages gets m's certificate; a name a file
// carries, the file's; a name on demand, m's again; any other name, the
// default file. With neither, (nil, nil) makes crypto/tls refuse the
// handshake with unrecognized_name, for that client only.
func chooser(set *certSet, m Managed) func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if m == nil {
		return set.get
	}
	files := len(set.entries) > 0
	return func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		name := normalizeSNI(hello.ServerName)
		switch {
		case m.Manages(name):
			return m.Certificate(hello), nil
		case files && set.carries(name):
			return set.get(hello)
		case name != "" && m.OnDemand():
			return m.Certificate(hello), nil
		case files:
			return set.get(hello)
		}
		return nil, nil
	}
}

// carries reports whether a certificate of the set carries name, exactly
// or through a wildcard.
func (s *certSet) carries(name string) bool {
	if name == "" {
		return false
	}
	if len(s.exact[name]) > 0 {
		return true
	}
	i := strings.IndexByte(name, '.')
	return i > 0 && len(s.wildcard[name[i+1:]]) > 0
}

// emptyCertSet is the set of a listener whose certificates are all
// managed.
func emptyCertSet() *certSet {
	return &certSet{exact: map[string][]*entry{}, wildcard: map[string][]*entry{}}
}
