package config

import (
	"net"
	"strconv"
	"strings"

	"github.com/helios-lb/helios/internal/tlsconf"
)

// ACME gets a TLS listener's certificates from an ACME CA (RFC 8555,
// Let's Encrypt by default) and renews them, instead of (or beside)
// certificate files. The CA checks that Helios controls each name by
// connecting to it: on port 80 (HTTP-01, answered by a cleartext
// listener) or port 443 (TLS-ALPN-01, answered by this listener).
type ACME struct {
	// Email is the ACME account's contact, where the CA writes about
	// expiring certificates and policy changes. Empty: no contact.
	Email string `yaml:"email"`
	// CA is the ACME directory URL. Default Let's Encrypt's production
	// directory, or its staging one with Staging.
	CA string `yaml:"ca"`
	// Staging makes the default CA Let's Encrypt's staging directory:
	// higher rate limits, certificates that no client trusts. Not with
	// CA. Default false.
	Staging bool `yaml:"staging"`
	// Domains are the names to get certificates for, one certificate
	// each; exact names only (a wildcard needs the DNS-01 challenge,
	// which Helios does not do). Absent: the exact hosts of the routes'
	// match.host that no certificate file of the listener carries.
	Domains []string `yaml:"domains"`
	// Challenges are the challenge types offered to the CA: http-01
	// (needs HTTPListener) and tls-alpn-01. Default both, or tls-alpn-01
	// alone when there is no HTTPListener.
	Challenges []string `yaml:"challenges"`
	// HTTPListener names the cleartext listener the CA's HTTP-01
	// requests reach (on port 80, directly or forwarded). Default the
	// cleartext listener whose port is 80, if there is one. (Every
	// listener answers HTTP-01 requests for a challenge Helios presented;
	// this one is what tells certmagic the port is Helios's.)
	HTTPListener string `yaml:"http_listener"`
	// KeyType is the certificates' key: p256 (ECDSA P-256) or rsa2048.
	// Default p256.
	KeyType string `yaml:"key_type"`
	// Storage holds the account, certificates, keys and the per-name
	// locks: a directory, or a Redis server
	// (redis://[[USER]:PASSWORD@]HOST[:PORT][/DB], rediss:// for TLS).
	// Several Helios instances sharing it (a shared volume, or the same
	// Redis) get each certificate once and all serve it. A directory is
	// relative to the config file's directory and created (mode 0700) if
	// missing. Default /var/lib/helios/acme.
	Storage string `yaml:"storage"`
	// StoragePasswordEnv names an environment variable holding the
	// password of a Redis Storage (it replaces one in the URL). "" means
	// none.
	StoragePasswordEnv string `yaml:"storage_password_env"`
	// StoragePassword is the value of StoragePasswordEnv, read when the
	// configuration is loaded. Not a YAML key.
	StoragePassword string `yaml:"-"`
	// CARoot is a PEM file of the roots trusted for the CA's own HTTPS
	// endpoint, for a private CA or a test CA. Empty: the system's.
	CARoot string `yaml:"ca_root"`
	// EAB binds the ACME account to one the CA knows already (external
	// account binding: ZeroSSL, Google, private CAs). Nil: none.
	EAB *EAB `yaml:"eab"`
	// OnDemand gets a certificate at the first handshake for a name that
	// none of Domains and no certificate file carries, when the Ask
	// endpoint approves it. Nil: only Domains.
	OnDemand *OnDemand `yaml:"on_demand"`
}

// EAB is an external account binding's credentials, as the CA gives
// them.
type EAB struct {
	// KeyID is the CA's key identifier. Required.
	KeyID string `yaml:"key_id"`
	// MACKey is the base64url-encoded MAC key. Required; keep it out of
	// the file with ${ENV}.
	MACKey string `yaml:"mac_key"`
}

// OnDemand configures on-demand certificates.
type OnDemand struct {
	// Ask is the http or https URL asked, with ?domain=NAME, before a
	// certificate is requested for NAME: a 200 answer allows it, any
	// other answer (or none within 5s) refuses. Required.
	Ask string `yaml:"ask"`
	// Burst is how many certificates may be requested per Interval, at
	// least 1. Default 10.
	Burst int `yaml:"burst"`
	// Interval is the rate limit's window, more than 0. Default 1m.
	Interval Duration `yaml:"interval"`
}

// The ACME defaults and values.
const (
	// ACMELetsEncrypt is the default ACME.CA.
	ACMELetsEncrypt = "https://acme-v02.api.letsencrypt.org/directory"
	// ACMELetsEncryptStaging is the default ACME.CA with Staging.
	ACMELetsEncryptStaging = "https://acme-staging-v02.api.letsencrypt.org/directory"
	// ACMEDefaultStorage is the default ACME.Storage.
	ACMEDefaultStorage = "/var/lib/helios/acme"
	// ChallengeHTTP01 and ChallengeTLSALPN01 are the ACME.Challenges.
	ChallengeHTTP01    = "http-01"
	ChallengeTLSALPN01 = "tls-alpn-01"
	// KeyP256 and KeyRSA2048 are the ACME.KeyType values.
	KeyP256    = "p256"
	KeyRSA2048 = "rsa2048"
)

// HTTPSRedirects reports Route.HTTPSRedirect, reading nil as the
// default, true.
func (r *Route) HTTPSRedirects() bool { return r.HTTPSRedirect == nil || *r.HTTPSRedirect }

// setACMEDefaults fills the absent keys of the acme block of listener i.
func setACMEDefaults(c *Config, i int, p string) {
	t := c.Listeners[i].TLS
	if t == nil || t.ACME == nil {
		return
	}
	a, m := t.ACME, c.meta
	if a.Staging {
		setString(&a.CA, ACMELetsEncryptStaging)
	}
	setString(&a.CA, ACMELetsEncrypt)
	if a.HTTPListener == "" {
		for _, l := range c.Listeners {
			if l.TLS == nil && portOf(l.Address) == 80 {
				a.HTTPListener = l.Name
				break
			}
		}
	}
	if absent(m, p+".challenges", a.Challenges == nil) {
		a.Challenges = []string{ChallengeTLSALPN01}
		if a.HTTPListener != "" {
			a.Challenges = []string{ChallengeHTTP01, ChallengeTLSALPN01}
		}
	}
	setString(&a.KeyType, KeyP256)
	setString(&a.Storage, ACMEDefaultStorage)
	if od := a.OnDemand; od != nil {
		setDefault(m, p+".on_demand.burst", &od.Burst, 10)
		setDefault(m, p+".on_demand.interval", &od.Interval, seconds(60))
	}
}

// portOf returns the port of a host:port address, 0 when it has none.
func portOf(addr string) int {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(p)
	return n
}

// ACMENames returns the names the acme block of l gets certificates for:
// its domains, or else the exact hosts of the routes' match.host, lower
// case and in route order, less those a certificate file of l carries.
// wild lists the indexes of the routes whose host is a wildcard no file
// of l carries (a certificate for it needs DNS-01). Certificate files
// that cannot be read are taken to carry nothing.
func (c *Config) ACMENames(l *Listener) (names []string, wild []int) {
	a := l.TLS.ACME
	if len(a.Domains) > 0 {
		for _, d := range a.Domains {
			names = append(names, strings.ToLower(d))
		}
		return names, nil
	}
	carried := fileNames(l.TLS)
	seen := make(map[string]bool)
	for i, r := range c.Routes {
		h := strings.ToLower(r.Match.Host)
		switch {
		case h == "" || h == "*" || seen[h] || carries(carried, h):
		case strings.HasPrefix(h, "*."):
			wild = append(wild, i)
		default:
			names = append(names, h)
		}
		seen[h] = true
	}
	return names, wild
}

// fileNames returns the DNS names of the listener's certificate files.
func fileNames(t *ListenerTLS) map[string]bool {
	out := make(map[string]bool)
	for _, p := range t.Pairs() {
		if p.CertFile == "" || p.KeyFile == "" {
			continue
		}
		if c, err := tlsconf.LoadKeyPair(p.CertFile, p.KeyFile); err == nil {
			for _, n := range c.Leaf.DNSNames {
				out[strings.ToLower(n)] = true
			}
		}
	}
	return out
}

// carries reports whether a certificate with the names in set covers
// host: exactly, or (for an exact host) through a wildcard.
func carries(set map[string]bool, host string) bool {
	if set[host] {
		return true
	}
	if strings.HasPrefix(host, "*.") {
		return false
	}
	i := strings.IndexByte(host, '.')
	return i > 0 && set["*"+host[i:]]
}
