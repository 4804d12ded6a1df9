package config

import (
	"net/netip"
	"strings"
)

// ParsePrefix reads a CIDR ("10.0.0.0/8", "2001:db8::/32") or a single
// address ("192.0.2.7", a /32 or /128), as client_cidrs, trusted_proxies,
// allow and deny write them. Zones are refused.
func ParsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			return netip.PrefixFrom(a.Unmap(), p.Bits()-96).Masked(), nil
		}
		if p.Addr().Zone() != "" {
			return netip.Prefix{}, errZone
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	if a.Zone() != "" {
		return netip.Prefix{}, errZone
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// ParsePrefixes reads a list ParsePrefix reads; on a validated Config it
// cannot fail.
func ParsePrefixes(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		p, err := ParsePrefix(s)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

type zoneError struct{}

func (zoneError) Error() string { return "an address with a zone" }

var errZone error = zoneError{}

// HeaderRules edit the fields of a head: Remove first, then Set
// (replacing every field of the name), then Add (beside any there are).
// Values may use the variables {client_ip}, {host}, {path}, {query},
// {?query}, {scheme}, {request_id} and {header.NAME}. Hop-by-hop fields,
// Content-Length and Host cannot be written.
type HeaderRules struct {
	// Set maps field names to values that replace every field of the
	// name. nil means none.
	Set map[string]string `yaml:"set"`
	// Add maps field names to values added beside any fields of the
	// name. nil means none.
	Add map[string]string `yaml:"add"`
	// Remove lists field names to remove. nil means none.
	Remove []string `yaml:"remove"`
}

// Rewrite changes the path a request goes on with: StripPrefix removed,
// then AddPrefix put in front; or Regex's match replaced with
// Replacement. The query goes on as it came, unless Replacement has one
// of its own ("?" in it), which replaces it (KeepQuery appends the
// client's).
type Rewrite struct {
	// StripPrefix is removed from the start of the path (a whole
	// segment: /api strips /api and /api/x, not /apix). "" means none.
	StripPrefix string `yaml:"strip_prefix"`
	// AddPrefix is put in front of the path. "" means none.
	AddPrefix string `yaml:"add_prefix"`
	// Regex is a regular expression (RE2) the path is matched against;
	// "" means none. Not with StripPrefix or AddPrefix.
	Regex string `yaml:"regex"`
	// Replacement replaces Regex's match: a path starting with "/", with
	// $1 or ${name} for the groups. Required with Regex.
	Replacement string `yaml:"replacement"`
	// KeepQuery appends the client's query to a query Replacement sets.
	// Default false.
	KeepQuery bool `yaml:"keep_query"`
}

// Redirect is a route's answer: a redirect.
type Redirect struct {
	// To is the Location, with the variables of HeaderRules
	// ("https://example.com{path}{?query}"). Required.
	To string `yaml:"to"`
	// Status is 301, 302, 303, 307 or 308. Default 308.
	Status int `yaml:"status"`
}

// BasicAuth asks for HTTP Basic credentials, checked against a file of
// bcrypt hashes (as `htpasswd -B` writes them). The file is read when the
// configuration is loaded (and reloaded); a right password is verified
// with bcrypt once, off the event loops, and remembered.
type BasicAuth struct {
	// Realm is named in the 401's WWW-Authenticate. Default "Restricted".
	Realm string `yaml:"realm"`
	// UsersFile is the htpasswd file: name:hash lines, bcrypt hashes
	// only. Required. A relative path is relative to the directory of the
	// configuration file.
	UsersFile string `yaml:"users_file"`
}

// ForwardAuth asks an authentication service about each request (nginx's
// auth_request, Traefik's and Caddy's forward_auth): a GET with the
// request's header fields and X-Forwarded-Method, -Proto, -Host, -Uri and
// -For. A 2xx answer lets the request through with CopyHeaders copied
// onto it; any other answer goes to the client as the service sent it.
type ForwardAuth struct {
	// Address is the service's URL (http or https). Required.
	Address string `yaml:"address"`
	// CopyHeaders lists the fields of a 2xx answer copied onto the
	// request (replacing any the client sent). nil means none.
	CopyHeaders []string `yaml:"copy_headers"`
	// Timeout bounds each subrequest, 1ms-1m; past it the client gets
	// 504. Default 5s.
	Timeout Duration `yaml:"timeout"`
}

// RateLimit limits a route's requests: Requests per Per, with Burst more
// allowed at once (GCRA, a token bucket); a request over it gets 429 with
// Retry-After and the RateLimit-Policy and RateLimit fields. Each route
// keeps at most 100000 keys in memory; when full, expired keys go first,
// then the least active of a sample. With Store, the limit is shared by
// every Helios instance using the same Redis (the route's name is part
// of the keys there).
type RateLimit struct {
	// Requests is the sustained rate per Per, at least 1. Required.
	Requests int `yaml:"requests"`
	// Per is the period of Requests, 1ms-24h. Default 1s.
	Per Duration `yaml:"per"`
	// Burst is how many requests beyond the rate may come at once, at
	// least 0. Default 0.
	Burst int `yaml:"burst"`
	// Key is what requests are counted by: client_ip (each client
	// address the listener found), header:NAME (each value of the field;
	// requests without it by client address) or route (every request
	// together). Default client_ip.
	Key string `yaml:"key"`
	// Store is a Redis server (redis://[[USER]:PASSWORD@]HOST[:PORT][/DB],
	// rediss:// for TLS) that holds the limit's state for every instance
	// using it: each instance takes tokens from it in small batches, off
	// the event loops. "" keeps the limit in this process. Default "".
	Store string `yaml:"store"`
	// StorePasswordEnv names an environment variable holding Store's
	// password (it replaces one in the URL). "" means none.
	StorePasswordEnv string `yaml:"store_password_env"`
	// Instances is how many Helios instances share the limit: while
	// Store cannot be reached, each decides alone with Requests /
	// Instances (and Burst / Instances). At least 1; only with Store.
	// Default 1.
	Instances int `yaml:"instances"`
	// StorePassword is the value of StorePasswordEnv, read when the
	// configuration is loaded. Not a YAML key.
	StorePassword string `yaml:"-"`
}

// The RateLimit.Key values other than header:NAME.
const (
	RateKeyClientIP = "client_ip"
	RateKeyRoute    = "route"
)

// setRoutePolicyDefaults fills the absent keys of route r's policy.
func setRoutePolicyDefaults(m *meta, r *Route, p string) {
	if rd := r.Redirect; rd != nil {
		setDefault(m, p+".redirect.status", &rd.Status, 308)
	}
	if b := r.BasicAuth; b != nil {
		setString(&b.Realm, "Restricted")
	}
	if f := r.ForwardAuth; f != nil {
		setDefault(m, p+".forward_auth.timeout", &f.Timeout, seconds(5))
	}
	if rl := r.RateLimit; rl != nil {
		setDefault(m, p+".rate_limit.per", &rl.Per, seconds(1))
		setString(&rl.Key, RateKeyClientIP)
		setDefault(m, p+".rate_limit.instances", &rl.Instances, 1)
		// Burst defaults to 0.
	}
}

// ParseRateKey splits a rate_limit.key: client_ip, route, or header:NAME
// (name is NAME). ok is false for anything else.
func ParseRateKey(s string) (kind, name string, ok bool) {
	switch s {
	case RateKeyClientIP, RateKeyRoute:
		return s, "", true
	}
	if n, found := strings.CutPrefix(s, "header:"); found && isToken(n) {
		return "header", n, true
	}
	return "", "", false
}
