package config

import (
	"cmp"
	"maps"
	"regexp"
	"slices"
	"strings"
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
