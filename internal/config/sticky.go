package config

import (
	"strings"
	"time"
)

// Sticky keeps each client on one backend of an upstream with a cookie
// (sticky sessions): a request whose cookie names an available backend
// goes there, whatever the strategy would pick; any other request is
// balanced as usual and its answer sets the cookie to the backend that
// served it. The cookie's value is a keyed hash of the upstream's name and
// the backend's address, so it does not reveal the address, and a
// reload that keeps the backend keeps its clients.
type Sticky struct {
	// Cookie is the cookie's name, a token. Default helios_ followed by
	// the upstream's name (which must then make a token).
	Cookie string `yaml:"cookie"`
	// TTL is the cookie's Max-Age, whole seconds from 1s to 400 days (as
	// long as browsers keep a cookie), after which the client is balanced
	// afresh; 0 makes a session cookie, kept until the browser closes.
	// Default 0.
	TTL Duration `yaml:"ttl"`
	// Secure sends the cookie over HTTPS only. Default false.
	Secure bool `yaml:"secure"`
	// HTTPOnly hides the cookie from scripts. nil means the default,
	// true; HTTPOnlySet reads it.
	HTTPOnly *bool `yaml:"http_only"`
	// SameSite is the cookie's SameSite attribute: lax, strict or none
	// (none needs Secure, which browsers require of it). Default lax.
	SameSite string `yaml:"same_site"`
	// Path is the cookie's Path attribute, starting with /. Default /.
	Path string `yaml:"path"`
	// Secret keys the hash of the cookie's values, at least 16 bytes.
	// Default "": one made when Helios starts, kept across reloads but
	// not across restarts; Helios instances that share clients, and a
	// binary upgrade that should keep them, need the same secret.
	Secret string `yaml:"secret"`
}

// The Sticky.SameSite values.
const (
	SameSiteLax    = "lax"
	SameSiteStrict = "strict"
	SameSiteNone   = "none"
)

// HTTPOnlySet reports HTTPOnly, reading nil as the default, true.
func (s *Sticky) HTTPOnlySet() bool { return s.HTTPOnly == nil || *s.HTTPOnly }

// maxStickyTTL is the longest Sticky.TTL: browsers cap a cookie's
// Max-Age at 400 days (RFC 6265bis §5.5).
const maxStickyTTL = 400 * 24 * time.Hour

// minStickySecret is the shortest Sticky.Secret.
const minStickySecret = 16

// setStickyDefaults fills the absent keys of the sticky block of the
// upstream u.
func setStickyDefaults(u *Upstream) {
	s := u.Sticky
	if s == nil {
		return
	}
	setString(&s.Cookie, "helios_"+u.Name)
	setString(&s.SameSite, SameSiteLax)
	setString(&s.Path, "/")
	if s.HTTPOnly == nil {
		t := true
		s.HTTPOnly = &t
	}
}

// sticky checks the sticky block of the upstream u at p.
func (v *validator) sticky(u *Upstream, p string) {
	s := u.Sticky
	if s == nil {
		return
	}
	p += ".sticky"
	if !isToken(s.Cookie) {
		why := "letters, digits and !#$%&'*+-.^_`|~"
		if !v.meta.present(p + ".cookie") {
			why = "the default is helios_ and the upstream's name: set one"
		}
		v.addf(p+".cookie", "%q is not a cookie name (%s)", s.Cookie, why)
	}
	if d := s.TTL.D(); d < 0 || d > maxStickyTTL || d%time.Second != 0 {
		v.addf(p+".ttl", "%s is out of range (whole seconds up to 9600h, 400 days, such as 24h; 0 for a session cookie)", s.TTL)
	}
	switch s.SameSite {
	case SameSiteLax, SameSiteStrict:
	case SameSiteNone:
		if !s.Secure {
			v.addf(p+".same_site", "none without secure: true (browsers refuse SameSite=None on a cookie that is not Secure)")
		}
	default:
		v.addf(p+".same_site", "%q is not a SameSite value (%s, %s, %s)", s.SameSite, SameSiteLax, SameSiteStrict, SameSiteNone)
	}
	if !strings.HasPrefix(s.Path, "/") || strings.ContainsAny(s.Path, ";,") || !isVisibleASCII(s.Path) {
		v.addf(p+".path", "%q is not a cookie path (starts with /; visible ASCII without ; or ,)", s.Path)
	}
	if s.Secret != "" && len(s.Secret) < minStickySecret {
		v.addf(p+".secret", "%d bytes is too short (at least %d, such as 32 random characters from a secret store)", len(s.Secret), minStickySecret)
	}
}
