// Package discovery finds an upstream's backends while Helios runs: DNS
// names (A and AAAA, or SRV with ports and weights) looked up again on a
// schedule the records' TTLs may shorten, and backends files re-read when
// they change. A Watcher runs one source on its own goroutine, off the
// request path, and keeps the last good answer: a failed lookup, a broken
// file or (unless allowed) an empty answer changes nothing.
//
// Lookups speak DNS with github.com/miekg/dns rather than through Go's
// resolver, which gives neither TTLs nor a choice of server: a Resolver
// asks the configured server, or the name servers of /etc/resolv.conf with
// its search list and ndots, over UDP and again over TCP when the answer
// was truncated.
package discovery

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// ErrNoRecords is returned (wrapped) when a name has no records of the
// types asked for: NXDOMAIN, or an answer without them. A Watcher counts it
// as a failed lookup unless empty answers are allowed.
var ErrNoRecords = errors.New("no records")

// ResolvConf is the file SystemResolver reads by default.
const ResolvConf = "/etc/resolv.conf"

// udpSize is the EDNS0 buffer size offered: the DNS flag day 2020 value,
// which fits an unfragmented packet on every path; larger answers come back
// truncated and are asked again over TCP.
const udpSize = 1232

// Resolver looks names up on DNS servers, tried in order. The zero
// Resolver has no server and fails every lookup.
type Resolver struct {
	// Servers are host:port addresses of DNS servers.
	Servers []string
	// Search and Ndots expand a relative name as resolv.conf(5) says: a
	// name with fewer than Ndots dots is tried with each Search suffix
	// first. A name ending in a dot is never expanded.
	Search []string
	Ndots  int
}

// NewResolver returns a Resolver that asks the one server at addr
// (ip:port) and expands no name.
func NewResolver(addr string) *Resolver { return &Resolver{Servers: []string{addr}, Ndots: 1} }

// SystemResolver returns a Resolver that asks the name servers of the
// resolv.conf(5) file at path (ResolvConf when empty), with its search list
// and ndots.
func SystemResolver(path string) (*Resolver, error) {
	if path == "" {
		path = ResolvConf
	}
	cc, err := dns.ClientConfigFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if len(cc.Servers) == 0 {
		return nil, fmt.Errorf("%s names no name server", path)
	}
	r := &Resolver{Search: cc.Search, Ndots: cc.Ndots}
	for _, s := range cc.Servers {
		r.Servers = append(r.Servers, net.JoinHostPort(s, cc.Port))
	}
	return r, nil
}

// names returns the names to try for name, in order.
func (r *Resolver) names(name string) []string {
	cc := dns.ClientConfig{Search: r.Search, Ndots: r.Ndots}
	return cc.NameList(name)
}

// LookupAddrs returns the A and AAAA records of name, the smallest TTL
// among them, and an error wrapping ErrNoRecords when there are none.
func (r *Resolver) LookupAddrs(ctx context.Context, name string) ([]netip.Addr, time.Duration, error) {
	var lastErr error
	for _, fq := range r.names(name) {
		addrs, ttl, err := r.addrs(ctx, fq)
		if err == nil {
			return addrs, ttl, nil
		}
		lastErr = err
		if !errors.Is(err, ErrNoRecords) {
			// A server failure says nothing about the other names
			// of the search list: trying them could find the wrong
			// service.
			return nil, 0, err
		}
	}
	return nil, 0, lastErr
}

// addrs asks for the A and AAAA records of the fully qualified name fq.
func (r *Resolver) addrs(ctx context.Context, fq string) ([]netip.Addr, time.Duration, error) {
	var (
		out  []netip.Addr
		ttl  uint32
		have bool
	)
	for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA} {
		in, err := r.query(ctx, fq, qt)
		if err != nil {
			if errors.Is(err, ErrNoRecords) {
				continue
			}
			return nil, 0, err
		}
		for _, rr := range in.Answer {
			a, ok := addrOf(rr)
			if !ok {
				continue // the CNAMEs on the way
			}
			out = append(out, a)
			ttl = minTTL(ttl, rr.Header().Ttl, have)
			have = true
		}
	}
	if len(out) == 0 {
		return nil, 0, fmt.Errorf("%s: %w (A, AAAA)", strings.TrimSuffix(fq, "."), ErrNoRecords)
	}
	return out, time.Duration(ttl) * time.Second, nil
}

// SRVRecord is one SRV record.
type SRVRecord struct {
	Target   string
	Port     uint16
	Priority uint16
	Weight   uint16
	// Addrs are the target's addresses when the answer carried them (in
	// its additional section); nil otherwise.
	Addrs []netip.Addr
}

// LookupSRV returns the SRV records of name, the smallest TTL among them,
// and an error wrapping ErrNoRecords when there are none.
func (r *Resolver) LookupSRV(ctx context.Context, name string) ([]SRVRecord, time.Duration, error) {
	var lastErr error
	for _, fq := range r.names(name) {
		in, err := r.query(ctx, fq, dns.TypeSRV)
		if err != nil {
			lastErr = err
			if errors.Is(err, ErrNoRecords) {
				continue
			}
			return nil, 0, err
		}
		glue := make(map[string][]netip.Addr)
		for _, rr := range in.Extra {
			if a, ok := addrOf(rr); ok {
				k := strings.ToLower(rr.Header().Name)
				glue[k] = append(glue[k], a)
			}
		}
		var (
			out []SRVRecord
			ttl uint32
		)
		for _, rr := range in.Answer {
			s, ok := rr.(*dns.SRV)
			if !ok || s.Target == "." { // "." : the service is decidedly not available (RFC 2782)
				continue
			}
			ttl = minTTL(ttl, s.Hdr.Ttl, len(out) > 0)
			out = append(out, SRVRecord{Target: s.Target, Port: s.Port, Priority: s.Priority, Weight: s.Weight, Addrs: glue[strings.ToLower(s.Target)]})
		}
		if len(out) == 0 {
			lastErr = fmt.Errorf("%s: %w (SRV)", strings.TrimSuffix(fq, "."), ErrNoRecords)
			continue
		}
		return out, time.Duration(ttl) * time.Second, nil
	}
	return nil, 0, lastErr
}

// addrOf returns the address of an A or AAAA record; false for other
// records.
func addrOf(rr dns.RR) (netip.Addr, bool) {
	var a netip.Addr
	switch rr := rr.(type) {
	case *dns.A:
		a, _ = netip.AddrFromSlice(rr.A.To4())
	case *dns.AAAA:
		a, _ = netip.AddrFromSlice(rr.AAAA)
	}
	return a, a.IsValid()
}

func minTTL(cur, ttl uint32, have bool) uint32 {
	if !have || ttl < cur {
		return ttl
	}
	return cur
}

// query asks each server in turn for the records of type qt of fq, over
// UDP and, when the answer was truncated, again over TCP. NXDOMAIN and an
// answer without records are ErrNoRecords; another failure of every server
// is the last server's error.
func (r *Resolver) query(ctx context.Context, fq string, qt uint16) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(fq, qt)
	m.SetEdns0(udpSize, false)
	var lastErr error = errors.New("no DNS server to ask")
	for i, server := range r.Servers {
		// Each server gets its share of what is left of the time, so
		// that one that does not answer leaves time for the next.
		sctx, cancel := shareOf(ctx, len(r.Servers)-i)
		in, err := exchange(sctx, m, server)
		cancel()
		if err != nil {
			lastErr = err
			if ctx.Err() != nil {
				break
			}
			continue
		}
		switch in.Rcode {
		case dns.RcodeSuccess:
			for _, rr := range in.Answer {
				if rr.Header().Rrtype == qt {
					return in, nil
				}
			}
			return nil, fmt.Errorf("%s: %w (%s)", strings.TrimSuffix(fq, "."), ErrNoRecords, dns.TypeToString[qt])
		case dns.RcodeNameError:
			return nil, fmt.Errorf("%s: %w (NXDOMAIN)", strings.TrimSuffix(fq, "."), ErrNoRecords)
		default:
			lastErr = fmt.Errorf("%s %s: %s answered %s", strings.TrimSuffix(fq, "."), dns.TypeToString[qt], server, dns.RcodeToString[in.Rcode])
		}
	}
	return nil, lastErr
}

// exchange sends m to server over UDP, and over TCP when the answer came
// back truncated.
func exchange(ctx context.Context, m *dns.Msg, server string) (*dns.Msg, error) {
	c := &dns.Client{Net: "udp", UDPSize: udpSize}
	if d, ok := ctx.Deadline(); ok {
		c.Timeout = time.Until(d)
	}
	in, _, err := c.ExchangeContext(ctx, m, server)
	if err == nil && in.Truncated {
		c.Net = "tcp"
		in, _, err = c.ExchangeContext(ctx, m, server)
	}
	if err != nil {
		return nil, fmt.Errorf("asking %s: %w", server, stable(err))
	}
	return in, nil
}

// stable strips from a network error what changes from one query to the
// next (the local port), so that a failure that repeats reads the same
// and is logged once.
func stable(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return errNoAnswer
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return fmt.Errorf("%s: %w", oe.Op, oe.Err)
	}
	return err
}

// errNoAnswer is a server that did not answer in time.
var errNoAnswer = errors.New("no answer in time")

// shareOf returns a context whose deadline leaves ctx's remaining time
// shared out among n tries.
func shareOf(ctx context.Context, n int) (context.Context, context.CancelFunc) {
	d, ok := ctx.Deadline()
	if !ok || n <= 1 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, time.Until(d)/time.Duration(n))
}

// hostPort joins an address and a port as Helios writes backend addresses.
func hostPort(a netip.Addr, port int) string {
	return net.JoinHostPort(a.Unmap().String(), strconv.Itoa(port))
}
