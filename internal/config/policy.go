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
