package config

import (
	"encoding/base64"
	"errors"
	"io/fs"
	"net"
	"net/url"
	"slices"
	"strings"
)

// The "what is allowed" parts of ACME messages.
const (
	challengeAllowed = "http-01, tls-alpn-01"
	keyTypeAllowed   = "p256, rsa2048"
	domainAllowed    = "an exact host name such as example.com"
	dns01            = "a wildcard certificate needs the DNS-01 challenge, which Helios does not do"
)

// acme checks the acme block of every TLS listener: its keys, and that
// it has names to get certificates for.
func (v *validator) acme(c *Config) {
	for i := range c.Listeners {
		l := &c.Listeners[i]
		if l.TLS == nil || l.TLS.ACME == nil {
			continue
		}
		v.acmeBlock(c, l, indexPath("listeners", i)+".tls.acme")
	}
}

func (v *validator) acmeBlock(c *Config, l *Listener, p string) {
	a := l.TLS.ACME
	if a.Email != "" && (!strings.Contains(a.Email, "@") || strings.ContainsAny(a.Email, " \t<>")) {
		v.addf(p+".email", "%q is not an email address (the ACME account's contact, such as ops@example.com)", a.Email)
	}
	if a.Staging && v.meta.present(p+".ca") {
		v.addf(p+".staging", "true along with ca (staging picks Let's Encrypt's staging CA; with ca set, point ca at the staging directory instead)")
	}
	if u, err := url.Parse(a.CA); err != nil || u.Scheme != "https" || u.Host == "" {
		v.addf(p+".ca", "%q is not an ACME directory URL (https://..., such as %s)", a.CA, ACMELetsEncrypt)
	}
	seen := make(map[string]string)
	for j, d := range a.Domains {
		dp := indexPath(p+".domains", j)
		d = strings.ToLower(d)
		switch {
		case strings.HasPrefix(d, "*."):
			v.addf(dp, "%q: %s (list the names, or serve it with a certificate file)", d, dns01)
		case net.ParseIP(d) != nil:
			v.addf(dp, "%q is an IP address (%s; ACME CAs issue for names)", d, domainAllowed)
		case !isHostname(d):
			v.addf(dp, "%q is not a host name (%s)", d, domainAllowed)
		case seen[d] != "":
			v.addf(dp, "%q is already listed at %s (list each name once)", d, seen[d])
		default:
			seen[d] = dp
		}
	}
	if v.meta.present(p+".domains") && len(a.Domains) == 0 {
		v.addf(p+".domains", "empty (list names, or leave the key out to take them from the routes' match.host)")
	}
	if len(a.Domains) == 0 {
		names, wild := c.ACMENames(l)
		for _, r := range wild {
			v.addf(indexPath("routes", r)+".match.host", "%q: %s, and %s takes its names from the routes (list the names under %s.domains, or give the listener a certificate file for it)",
				c.Routes[r].Match.Host, dns01, strings.TrimSuffix(p, ".tls.acme"), p)
		}
		if len(names) == 0 && len(wild) == 0 && a.OnDemand == nil {
			v.addf(p, "no names to get certificates for (list them under domains, give routes an exact match.host, or set on_demand)")
		}
	}
	if len(a.Challenges) == 0 {
		v.addf(p+".challenges", "empty (%s)", challengeAllowed)
	}
	for j, ch := range a.Challenges {
		cp := indexPath(p+".challenges", j)
		switch {
		case ch != ChallengeHTTP01 && ch != ChallengeTLSALPN01:
			v.addf(cp, "%q is not a challenge Helios answers (%s)", ch, challengeAllowed)
		case slices.Index(a.Challenges, ch) < j:
			v.addf(cp, "%q is listed twice", ch)
		case ch == ChallengeHTTP01 && a.HTTPListener == "":
			v.addf(cp, "http-01 needs a cleartext listener that the CA reaches on port 80: a listener on port 80, or one named by http_listener")
		}
	}
	if a.HTTPListener != "" {
		i := slices.IndexFunc(c.Listeners, func(o Listener) bool { return o.Name == a.HTTPListener })
		switch {
		case i < 0:
			v.addf(p+".http_listener", "%q is not a listener's name", a.HTTPListener)
		case c.Listeners[i].TLS != nil:
			v.addf(p+".http_listener", "%q has tls (the CA's HTTP-01 requests are cleartext, to port 80)", a.HTTPListener)
		}
	}
	if a.KeyType != KeyP256 && a.KeyType != KeyRSA2048 {
		v.addf(p+".key_type", "%q is not a key type (%s)", a.KeyType, keyTypeAllowed)
	}
	if IsStoreURL(a.Storage) {
		v.store(p+".storage", a.Storage, p+".storage_password_env", a.StoragePasswordEnv, &a.StoragePassword)
	} else if a.StoragePasswordEnv != "" {
		v.addf(p+".storage_password_env", "only applies when storage is a Redis URL (redis://... or rediss://...)")
	} else if fi, err := v.stat(a.Storage); err == nil && !fi.IsDir() {
		v.addf(p+".storage", "%q is not a directory (a directory for the account, certificates and locks; created if missing)", a.Storage)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		v.addf(p+".storage", "%q cannot be used: %v", a.Storage, err)
	}
	if a.CARoot != "" {
		v.caFile(p+".ca_root", a.CARoot)
	}
	if e := a.EAB; e != nil {
		if e.KeyID == "" {
			v.addf(p+".eab.key_id", "missing (the key identifier the CA gave)")
		}
		if e.MACKey == "" {
			v.addf(p+".eab.mac_key", "missing (the base64url MAC key the CA gave)")
		} else if _, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(e.MACKey, "=")); err != nil {
			v.addf(p+".eab.mac_key", "is not base64url (the MAC key as the CA gave it)")
		}
	}
	if od := a.OnDemand; od != nil {
		if u, err := url.Parse(od.Ask); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.addf(p+".on_demand.ask", "%q is not an http or https URL (the endpoint asked ?domain=NAME before each on-demand certificate)", od.Ask)
		}
		v.atLeast(p+".on_demand.burst", od.Burst, 1)
		v.positive(p+".on_demand.interval", od.Interval)
	}
}
