package config

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/netip"
	"os"
	"time"

	"github.com/helios-lb/helios/internal/tlsconf"
)

// The "what is allowed" parts of TLS messages.
const (
	certAllowed    = "a PEM file: the certificate, then the intermediates of its chain"
	keyAllowed     = "a PEM file with the certificate's unencrypted private key"
	caAllowed      = "a PEM file of CA certificates"
	versionAllowed = `"1.2" or "1.3"`
	protoAllowed   = "http1, h2 (HTTP/2 over TLS) or h2c (cleartext HTTP/2)"
)

// expiryWarning is how close to its expiry a certificate gets a warning.
const expiryWarning = 14 * 24 * time.Hour

// listenerTLS checks the TLS keys of the listener l at path p: the
// certificate and key files are read, each key must match its
// certificate, and an expired certificate is a problem (one that expires
// within 14 days, a warning).
func (v *validator) listenerTLS(l *Listener, p string) {
	t, tp := l.TLS, p+".tls"
	if t == nil {
		if l.HTTP2 != nil && *l.HTTP2 {
			v.addf(p+".http2", "true on a listener without tls (HTTP/2 is offered through TLS; for cleartext HTTP/2 set h2c: true)")
		}
		return
	}
	if l.H2C {
		v.addf(p+".h2c", "true on a listener with tls (h2c is cleartext HTTP/2; a TLS listener offers HTTP/2 through ALPN, see http2)")
	}
	single := t.CertFile != "" || t.KeyFile != ""
	switch {
	case single && len(t.Certificates) > 0:
		v.addf(tp+".certificates", "set along with cert_file (one or the other; list every certificate under certificates)")
	case !single && v.meta.present(tp+".certificates") && len(t.Certificates) == 0:
		v.addf(tp+".certificates", "empty (at least one {cert_file, key_file})")
	case !single && len(t.Certificates) == 0 && t.ACME == nil:
		v.addf(tp, "no certificate (cert_file and key_file, certificates, or acme)")
	}
	if single {
		v.keyPair(tp, t.CertFile, t.KeyFile)
	}
	seen := make(map[string]string)
	if t.CertFile != "" {
		seen[t.CertFile] = tp + ".cert_file"
	}
	for j, ck := range t.Certificates {
		cp := indexPath(tp+".certificates", j)
		if first, dup := seen[ck.CertFile]; dup && ck.CertFile != "" {
			v.addf(cp+".cert_file", "%q is already served by %s (list each certificate once)", ck.CertFile, first)
			continue
		}
		seen[ck.CertFile] = cp
		v.keyPair(cp, ck.CertFile, ck.KeyFile)
	}
	v.tlsVersion(tp+".min_version", t.MinVersion)
	if t.ClientCAFile != "" {
		v.caFile(tp+".client_ca_file", t.ClientCAFile)
	}
	v.positive(tp+".handshake_timeout", t.HandshakeTimeout)
	v.positive(tp+".client_hello_timeout", t.ClientHelloTimeout)
	if t.HandshakeTimeout > 0 && t.ClientHelloTimeout > t.HandshakeTimeout {
		v.addf(tp+".client_hello_timeout", "%s is more than handshake_timeout, %s (at most the handshake's whole time)", t.ClientHelloTimeout, t.HandshakeTimeout)
	}
	if t.MaxHandshakes < 0 {
		v.addf(tp+".max_handshakes", "%d is out of range (0 for no cap, or more)", t.MaxHandshakes)
	}
}

// transportTLS checks an upstream's protocol and TLS keys at tp (the
// transport's path).
func (v *validator) transportTLS(t *Transport, tp string) {
	switch t.Protocol {
	case ProtocolHTTP1, ProtocolH2, ProtocolH2C:
	default:
		v.addf(tp+".protocol", "%q is not a protocol (%s)", t.Protocol, protoAllowed)
	}
	c := t.TLS
	if c == nil {
		return
	}
	sp := tp + ".tls"
	if t.Protocol == ProtocolH2C {
		v.addf(sp, "set with protocol h2c (h2c is cleartext HTTP/2; use protocol h2 for HTTP/2 over TLS)")
	}
	if c.CAFile != "" {
		v.caFile(sp+".ca_file", c.CAFile)
	}
	if c.ServerName != "" {
		if _, err := netip.ParseAddr(c.ServerName); err != nil && !isHostname(c.ServerName) {
			v.addf(sp+".server_name", "%q is not a host name or IP address (the name in the backends' certificates, such as api.internal)", c.ServerName)
		}
	}
	if c.CertFile != "" || c.KeyFile != "" {
		v.keyPair(sp, c.CertFile, c.KeyFile)
	}
	v.tlsVersion(sp+".min_version", c.MinVersion)
	if c.InsecureSkipVerify {
		if c.CAFile != "" {
			v.addf(sp+".insecure_skip_verify", "true along with ca_file, which it would ignore (one or the other)")
		} else {
			v.warnf(sp+".insecure_skip_verify", "backends' certificates are not verified: anyone on the network path can impersonate them (set ca_file to the CA that issued them)")
		}
	}
}

// keyPair checks the certificate and key files at p.cert_file and
// p.key_file: both set, readable, the key the certificate's, and the
// certificate not expired.
func (v *validator) keyPair(p, certFile, keyFile string) {
	cp, kp := p+".cert_file", p+".key_file"
	switch {
	case certFile == "" && keyFile == "":
		v.addf(cp, "missing (%s)", certAllowed)
		v.addf(kp, "missing (%s)", keyAllowed)
		return
	case certFile == "":
		v.addf(cp, "missing (cert_file and key_file go together: %s)", certAllowed)
		return
	case keyFile == "":
		v.addf(kp, "missing (cert_file and key_file go together: %s)", keyAllowed)
		return
	}
	cert, err := tlsconf.LoadKeyPair(certFile, keyFile)
	var kpe *tlsconf.KeyPairError
	switch {
	case errors.As(err, &kpe):
		path, file, allowed := cp, certFile, certAllowed
		if kpe.Part == tlsconf.PartKey {
			path, file, allowed = kp, keyFile, keyAllowed
		}
		switch {
		case errors.Is(err, tlsconf.ErrKeyMismatch):
			v.addf(kp, "%q is not the private key of %q (%s)", keyFile, certFile, keyAllowed)
		default:
			v.fileProblem(path, file, kpe.Err, allowed)
		}
		if kpe.Part != tlsconf.PartKey {
			// The certificate failed before the key was read: say what
			// is wrong with the key too, so that one run of validate
			// names both (issue 18 item 4).
			if f, err := os.Open(keyFile); err != nil {
				v.fileProblem(kp, keyFile, unwrapPathError(err), keyAllowed)
			} else {
				f.Close()
			}
		}
	case err != nil:
		v.addf(cp, "%q cannot be used: %v (%s)", certFile, err, certAllowed)
	default:
		v.expiry(cp, certFile, cert.Leaf)
	}
}

// caFile checks the CA file at path.
func (v *validator) caFile(path, file string) {
	_, _, err := tlsconf.LoadCAs(file)
	if err != nil {
		v.fileProblem(path, file, errors.Unwrap(err), caAllowed)
	}
}

// fileProblem reports what err says is wrong with file at path: missing,
// unreadable, or not what it should hold.
func (v *validator) fileProblem(path, file string, err error, allowed string) {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		v.addf(path, "%q does not exist (%s)", file, allowed)
	case errors.Is(err, tlsconf.ErrNoCertificate):
		v.addf(path, "%q holds no PEM certificate (%s)", file, allowed)
	case errors.Is(err, tlsconf.ErrNoKey):
		v.addf(path, "%q holds no PEM private key (%s)", file, allowed)
	case errors.Is(err, tlsconf.ErrBadCertificate), errors.Is(err, tlsconf.ErrBadKey):
		v.addf(path, "%q: %v (%s)", file, err, allowed)
	default:
		v.addf(path, "%q cannot be read: %v (%s)", file, err, allowed)
	}
}

// expiry reports an expired certificate as a problem and one that expires
// within expiryWarning as a warning.
func (v *validator) expiry(path, file string, leaf *x509.Certificate) {
	now := v.now()
	left := leaf.NotAfter.Sub(now)
	when := leaf.NotAfter.UTC().Format("2006-01-02 15:04 MST")
	switch {
	case left <= 0:
		v.addf(path, "%q (%s) expired on %s (renew it)", file, certName(leaf), when)
	case left < expiryWarning:
		v.warnf(path, "%q (%s) expires in %s, on %s (renew it)", file, certName(leaf), roughly(left), when)
	case now.Before(leaf.NotBefore):
		v.warnf(path, "%q (%s) is not valid before %s: clients refuse it until then (check the clock)", file, certName(leaf), leaf.NotBefore.UTC().Format("2006-01-02 15:04 MST"))
	}
}

// certName names a certificate in a message: its first DNS name, else its
// subject's common name.
func certName(c *x509.Certificate) string {
	if len(c.DNSNames) > 0 {
		return c.DNSNames[0]
	}
	if c.Subject.CommonName != "" {
		return c.Subject.CommonName
	}
	return "no name"
}

// roughly formats d in days, or in hours below two days, rounded up (a
// certificate valid for 4 days and 23 hours expires in 5 days).
func roughly(d time.Duration) string {
	if d < 48*time.Hour {
		h := int(math.Ceil(d.Hours()))
		if h == 1 {
			return "1 hour"
		}
		return fmt.Sprintf("%d hours", h)
	}
	return fmt.Sprintf("%d days", int(math.Ceil(d.Hours()/24)))
}

// tlsVersion checks a min_version.
func (v *validator) tlsVersion(path, s string) {
	if s != TLS12 && s != TLS13 {
		v.addf(path, "%q is not a TLS version (%s)", s, versionAllowed)
	}
}
