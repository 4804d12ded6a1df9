package config

import (
	"cmp"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/helios-lb/helios/internal/auth"
	"github.com/helios-lb/helios/internal/httpmsg"
	"github.com/helios-lb/helios/internal/rules"
)

// The "what is allowed" parts of the policy keys' messages.
const (
	cidrAllowed       = "a CIDR such as 10.0.0.0/8 or 2001:db8::/32, or an IP address"
	matchValueAllowed = `"*" (present), "~REGEX", or the exact value`
)

// matchConditions checks a match's methods, headers, query, client_cidrs
// and not.
func (v *validator) matchConditions(m *Match, p string) {
	for i, meth := range m.Methods {
		if !isToken(meth) {
			v.addf(indexPath(p+".methods", i), "%q is not a method (a token such as GET)", meth)
		}
	}
	v.matchValues(m.Headers, p+".headers", true)
	v.matchValues(m.Query, p+".query", false)
	v.cidrs(m.ClientCIDRs, p+".client_cidrs")
	if n := m.Not; n != nil {
		if n.empty() {
			v.addf(p+".not", "empty: it would match every request, so the route none (a host, path or condition to exclude)")
		}
		v.match(n, p+".not")
	}
}

// empty reports whether m has no condition at all.
func (m *Match) empty() bool {
	return (m.Host == "" || m.Host == "*") && m.Path == "" && m.PathPrefix == "" && len(m.Methods) == 0 &&
		len(m.Headers) == 0 && len(m.Query) == 0 && len(m.ClientCIDRs) == 0 && m.Not == nil
}

// matchValues checks a match's headers (header names) or query
// (parameter names): a name, and a value that is "*", "~REGEX" or exact.
func (v *validator) matchValues(vals map[string]string, p string, header bool) {
	for _, name := range v.keysInFileOrder(vals, p) {
		kp := childPath(p, name)
		switch {
		case header && !isToken(name):
			v.addf(kp, "%q is not a header name (letters, digits and !#$%%&'*+-.^_`|~)", name)
		case name == "":
			v.addf(kp, "empty (a query parameter name)")
		}
		val := vals[name]
		if re, ok := strings.CutPrefix(val, "~"); ok {
			if _, err := regexp.Compile(re); err != nil {
				v.addf(kp, "%q is not a regular expression: %v (%s)", re, err, matchValueAllowed)
			}
		} else if val == "" {
			v.addf(kp, "empty (%s)", matchValueAllowed)
		}
	}
}

// keysInFileOrder returns m's keys in the order of their lines in the
// file (then by name), so that problems are reported in order.
func (v *validator) keysInFileOrder(m map[string]string, p string) []string {
	names := slices.Collect(maps.Keys(m))
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(cmp.Compare(v.meta.line(childPath(p, a)), v.meta.line(childPath(p, b))), cmp.Compare(a, b))
	})
	return names
}

// cidrs checks a list of CIDRs or addresses.
func (v *validator) cidrs(list []string, p string) {
	for i, s := range list {
		if _, err := ParsePrefix(s); err != nil {
			v.addf(indexPath(p, i), "%q is not a CIDR or an IP address (%s)", s, cidrAllowed)
		}
	}
}

// listenerPolicy checks the client policy keys of listener i at p.
func (v *validator) listenerPolicy(ls []Listener, i int, p string) {
	l := &ls[i]
	v.cidrs(l.TrustedProxies, p+".trusted_proxies")
	switch l.ClientIPHeader {
	case ClientIPXForwardedFor, ClientIPForwarded, ClientIPXRealIP:
		if len(l.TrustedProxies) == 0 {
			v.addf(p+".client_ip_header", "set without trusted_proxies (only trusted proxies' fields are read)")
		}
	case "":
	default:
		v.addf(p+".client_ip_header", "%q is not a field a client address is read from (%s, %s, %s)",
			l.ClientIPHeader, ClientIPXForwardedFor, ClientIPForwarded, ClientIPXRealIP)
	}
	switch l.ProxyProtocol {
	case "":
	case ProxyProtocolV1, ProxyProtocolV2, ProxyProtocolOptional:
		if len(l.TrustedProxies) == 0 {
			v.addf(p+".proxy_protocol", "set without trusted_proxies (the load balancers allowed to send the header)")
		}
	default:
		v.addf(p+".proxy_protocol", "%q is not a PROXY protocol mode (%s, %s, %s)", l.ProxyProtocol,
			ProxyProtocolV1, ProxyProtocolV2, ProxyProtocolOptional)
	}
	if l.RedirectHTTPS && l.TLS != nil {
		v.addf(p+".redirect_https", "set on a TLS listener (it redirects cleartext requests)")
	}
	if l.MaxConnectionsPerIP < 0 {
		v.addf(p+".max_connections_per_ip", "%d is out of range (0 for no cap, or more)", l.MaxConnectionsPerIP)
	}
}

// routePolicy checks route r's edge policy keys: header rules, rewrite,
// redirect, access lists, authentication and rate limit.
func (v *validator) routePolicy(r *Route, p string) {
	if rw := r.Rewrite; rw != nil {
		v.rewrite(rw, p+".rewrite")
		if !r.Forwards() && r.Static == nil {
			v.addf(p+".rewrite", "set on a route that neither forwards nor serves files (there is no path to rewrite)")
		}
	}
	if h := r.RequestHeaders; h != nil {
		v.headerRules(h, p+".request_headers")
		if !r.Forwards() {
			v.addf(p+".request_headers", "set on a route without an upstream (only forwarded requests go on)")
		}
	}
	if h := r.ResponseHeaders; h != nil {
		v.headerRules(h, p+".response_headers")
	}
	if rd := r.Redirect; rd != nil {
		if rd.To == "" {
			v.addf(p+".redirect.to", "missing (a URL or path, such as https://example.com{path}{?query})")
		} else if _, err := rules.Compile(rd.To); err != nil {
			v.addf(p+".redirect.to", "%v", err)
		}
		if _, err := rules.CompileRedirect("/", rd.Status); err != nil {
			v.addf(p+".redirect.status", "%d is not a redirect status (301, 302, 303, 307, 308)", rd.Status)
		}
	}
	v.cidrs(r.Allow, p+".allow")
	v.cidrs(r.Deny, p+".deny")
	if b := r.BasicAuth; b != nil {
		bp := p + ".basic_auth"
		if !httpmsg.ValidValue(b.Realm) || strings.ContainsAny(b.Realm, `"\`) {
			v.addf(bp+".realm", "%q has a quote, a backslash or a control character (a plain name such as Restricted)", b.Realm)
		}
		if b.UsersFile == "" {
			v.addf(bp+".users_file", "missing (an htpasswd file of bcrypt hashes, as htpasswd -B writes it)")
		} else if _, err := auth.LoadUsers(b.UsersFile); err != nil {
			v.addf(bp+".users_file", "%v", unwrapPathError(err))
		}
	}
	if f := r.ForwardAuth; f != nil {
		fp := p + ".forward_auth"
		if u, err := url.Parse(f.Address); f.Address == "" || err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
			v.addf(fp+".address", "%q is not an http or https URL (such as http://auth.internal:9000/verify)", f.Address)
		}
		for i, h := range f.CopyHeaders {
			if !isToken(h) {
				v.addf(indexPath(fp+".copy_headers", i), "%q is not a header name (letters, digits and !#$%%&'*+-.^_`|~)", h)
			}
		}
		if f.Timeout < Duration(time.Millisecond) || f.Timeout > Duration(time.Minute) {
			v.addf(fp+".timeout", "%s is out of range (1ms-1m, such as 5s)", f.Timeout)
		}
	}
	if rl := r.RateLimit; rl != nil {
		rp := p + ".rate_limit"
		if rl.Requests < 1 {
			if !v.meta.present(rp+".requests") && rl.Requests == 0 {
				v.addf(rp+".requests", "missing (the requests allowed per `per`, at least 1)")
			} else {
				v.addf(rp+".requests", "%d is out of range (at least 1)", rl.Requests)
			}
		}
		if rl.Per < Duration(time.Millisecond) || rl.Per > Duration(24*time.Hour) {
			v.addf(rp+".per", "%s is out of range (1ms-24h, such as 1s or 1m)", rl.Per)
		}
		if rl.Requests > 0 && rl.Per > 0 && rl.Per.D()/time.Duration(rl.Requests) <= 0 {
			v.addf(rp+".requests", "%d per %s is more than one a nanosecond (a lower rate, or a longer per)", rl.Requests, rl.Per)
		}
		if rl.Burst < 0 {
			v.addf(rp+".burst", "%d is out of range (at least 0)", rl.Burst)
		}
		if _, _, ok := ParseRateKey(rl.Key); !ok {
			v.addf(rp+".key", "%q is not a rate limit key (client_ip, header:NAME, route)", rl.Key)
		}
		if rl.Instances < 1 {
			v.addf(rp+".instances", "%d is out of range (at least 1: how many instances share the store)", rl.Instances)
		}
		if rl.Store != "" {
			v.store(rp+".store", rl.Store, rp+".store_password_env", rl.StorePasswordEnv, &rl.StorePassword)
		} else {
			for _, k := range []string{"instances", "store_password_env"} {
				if v.meta.present(rp + "." + k) {
					v.addf(rp+"."+k, "only applies with store (a Redis URL the instances share)")
				}
			}
		}
	}
}

// rewrite checks a route's rewrite.
func (v *validator) rewrite(rw *Rewrite, p string) {
	if rw.StripPrefix == "" && rw.AddPrefix == "" && rw.Regex == "" {
		v.addf(p, "empty (strip_prefix, add_prefix, or regex with replacement)")
		return
	}
	_, err := rules.CompileRewrite(rules.RewriteConfig{
		StripPrefix: rw.StripPrefix, AddPrefix: rw.AddPrefix, Regex: rw.Regex, Replacement: rw.Replacement, KeepQuery: rw.KeepQuery,
	})
	if err != nil {
		v.addf(p, "%v", err)
	}
}

// headerRules checks request or response header rules, each field on its
// own line: a name a rule may write, and a value template.
func (v *validator) headerRules(h *HeaderRules, p string) {
	for _, m := range []struct {
		key  string
		vals map[string]string
	}{{"set", h.Set}, {"add", h.Add}} {
		for _, name := range v.keysInFileOrder(m.vals, p+"."+m.key) {
			if _, err := rules.CompileHeaderRules(map[string]string{name: m.vals[name]}, nil, nil); err != nil {
				v.addf(childPath(p+"."+m.key, name), "%v", err)
			}
		}
	}
	for i, name := range h.Remove {
		if _, err := rules.CompileHeaderRules(nil, nil, []string{name}); err != nil {
			v.addf(indexPath(p+".remove", i), "%v", err)
		}
	}
}
