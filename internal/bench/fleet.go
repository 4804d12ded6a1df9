package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// The servers of the fleet scenarios: a DNS server the discovery
// scenario's Helios finds the three backends on (an SRV lookup, as on
// Consul's or Kubernetes's DNS), and the redis-server that keeps the
// shared-limit scenario's rate limit.

// startFleetServers starts the DNS server when a selected case finds its
// backends by DNS, and redis-server when one shares its limit; both stop
// with the run.
func (r *runner) startFleetServers(ctx context.Context) error {
	var dnsOn, redisOn bool
	for i := range r.sels {
		s := &r.sels[i]
		if r.scenarioResult(s).Skipped != "" {
			continue
		}
		for _, c := range s.Run {
			dnsOn = dnsOn || c.Discovery
			redisOn = redisOn || c.SharedLimit
		}
	}
	if dnsOn {
		d, err := startDNS(r.addr(portDNS), []string{r.addr(portBackend1), r.addr(portBackend1 + 1), r.addr(portBackend1 + 2)})
		if err != nil {
			return err
		}
		r.dns = d
	}
	if redisOn {
		addr := r.addr(portRedis)
		argv := []string{r.tools["redis-server"], "--bind", "127.0.0.1", "--port", strconv.Itoa(r.opt.BasePort + portRedis),
			"--save", "", "--appendonly", "no", "--daemonize", "no"}
		p, err := r.ps.start("redis", argv, nil, r.loadCPUs(), filepath.Join(r.tmp, "redis.log"))
		if err != nil {
			return err
		}
		if err := waitRedis(ctx, addr, p, 10*time.Second); err != nil {
			return fmt.Errorf("redis-server did not start: %w", err)
		}
	}
	return nil
}

// waitRedis waits until the redis-server p on addr answers PING.
func waitRedis(ctx context.Context, addr string, p *proc, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if p.exited() {
			return fmt.Errorf("it exited (%v); see its log %s", p.err, p.log)
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.SetDeadline(time.Now().Add(time.Second))
			_, err = c.Write([]byte("PING\r\n"))
			b := make([]byte, 7)
			if err == nil {
				_, err = io.ReadFull(c, b)
			}
			c.Close()
			if err == nil && string(b) == "+PONG\r\n" {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no PONG on %s within %s: %v", addr, timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Names the bench's DNS server answers for.
const (
	// benchSRVName is the service whose SRV records are the backends.
	benchSRVName = "_http._tcp.backends.bench."
	// benchTarget is every SRV record's target, 127.0.0.1.
	benchTarget = "backend.bench."
	// benchTTL is the records' TTL in seconds: Helios looks them up again
	// every second, the most often discovery.min_refresh allows here.
	benchTTL = 1
)

// dnsServer answers SRV queries for benchSRVName with one record per
// backend port (their target's address in the additional section) and A
// queries for benchTarget, over UDP and TCP on one loopback port.
type dnsServer struct {
	udp, tcp *dns.Server
	addr     string
	ports    []uint16
	queries  atomic.Int64
}

// startDNS starts a dnsServer on addr (127.0.0.1:PORT) whose SRV answer
// names the backends at addrs (host:port, all on 127.0.0.1).
func startDNS(addr string, backends []string) (*dnsServer, error) {
	s := &dnsServer{addr: addr}
	for _, b := range backends {
		ap, err := netip.ParseAddrPort(b)
		if err != nil {
			return nil, fmt.Errorf("backend %q: %w", b, err)
		}
		s.ports = append(s.ports, ap.Port())
	}
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("DNS server: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		pc.Close()
		return nil, fmt.Errorf("DNS server: %w", err)
	}
	h := dns.HandlerFunc(s.serve)
	s.udp = &dns.Server{PacketConn: pc, Handler: h}
	s.tcp = &dns.Server{Listener: ln, Handler: h}
	go s.udp.ActivateAndServe()
	go s.tcp.ActivateAndServe()
	return s, nil
}

// serve answers one query.
func (s *dnsServer) serve(w dns.ResponseWriter, req *dns.Msg) {
	s.queries.Add(1)
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	if len(req.Question) != 1 {
		m.Rcode = dns.RcodeFormatError
		w.WriteMsg(m)
		return
	}
	q := req.Question[0]
	name := strings.ToLower(q.Name)
	target := func() dns.RR {
		return &dns.A{Hdr: dns.RR_Header{Name: benchTarget, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: benchTTL}, A: net.IPv4(127, 0, 0, 1)}
	}
	switch {
	case name == benchSRVName && q.Qtype == dns.TypeSRV:
		for _, p := range s.ports {
			m.Answer = append(m.Answer, &dns.SRV{Hdr: dns.RR_Header{Name: benchSRVName, Rrtype: dns.TypeSRV, Class: dns.ClassINET, Ttl: benchTTL},
				Priority: 0, Weight: 1, Port: p, Target: benchTarget})
		}
		m.Extra = append(m.Extra, target())
	case name == benchTarget && q.Qtype == dns.TypeA:
		m.Answer = append(m.Answer, target())
	case name == benchSRVName || name == benchTarget:
		// The name exists; no records of this type (NOERROR, empty).
	default:
		m.Rcode = dns.RcodeNameError
	}
	w.WriteMsg(m)
}

// Queries returns how many queries the server has answered.
func (s *dnsServer) Queries() int64 { return s.queries.Load() }

// close stops the server.
func (s *dnsServer) close() {
	s.udp.Shutdown()
	s.tcp.Shutdown()
}
