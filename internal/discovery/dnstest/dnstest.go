// Package dnstest runs a DNS server on loopback for tests (UDP and TCP on
// one port), built on github.com/miekg/dns: records are set and changed
// while it runs, and it counts the queries it gets.
package dnstest

import (
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"
)

// Server is an authoritative server for whatever names it is given.
type Server struct {
	addr string
	udp  *dns.Server
	tcp  *dns.Server

	mu      sync.Mutex
	records map[key][]dns.RR
	extra   map[key][]dns.RR
	rcodes  map[string]int
	queries map[key]int
	tcpSeen map[key]int
	// truncateOver truncates UDP answers with more records than this
	// (0: never), as a server whose answer does not fit does.
	truncateOver int
}

type key struct {
	name  string
	qtype uint16
}

func keyOf(name string, qtype uint16) key {
	return key{strings.ToLower(dns.Fqdn(name)), qtype}
}

// Start starts a server on 127.0.0.1 that stops when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{
		records: make(map[key][]dns.RR), extra: make(map[key][]dns.RR),
		rcodes: make(map[string]int), queries: make(map[key]int), tcpSeen: make(map[key]int),
	}
	var (
		pc  net.PacketConn
		ln  net.Listener
		err error
	)
	for range 20 { // the TCP port may be taken where the UDP one was free
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		if ln, err = net.Listen("tcp", pc.LocalAddr().String()); err == nil {
			break
		}
		pc.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	s.addr = pc.LocalAddr().String()
	var started sync.WaitGroup
	started.Add(2)
	s.udp = &dns.Server{PacketConn: pc, Handler: s, NotifyStartedFunc: started.Done}
	s.tcp = &dns.Server{Listener: ln, Handler: s, NotifyStartedFunc: started.Done}
	go s.udp.ActivateAndServe()
	go s.tcp.ActivateAndServe()
	started.Wait()
	t.Cleanup(func() {
		s.udp.Shutdown()
		s.tcp.Shutdown()
	})
	return s
}

// Addr returns the server's ip:port.
func (s *Server) Addr() string { return s.addr }

// Set makes rrs, in zone file syntax ("app.test. 5 IN A 127.0.0.1"), the
// answer to queries for name of type qtype; none makes the name answer
// NOERROR with no records of that type (NXDOMAIN when it has no records of
// any type).
func (s *Server) Set(t testing.TB, name string, qtype uint16, rrs ...string) {
	t.Helper()
	s.setIn(t, s.records, name, qtype, rrs)
}

// SetExtra makes rrs the additional section of answers to queries for
// name of type qtype (the addresses of SRV targets).
func (s *Server) SetExtra(t testing.TB, name string, qtype uint16, rrs ...string) {
	t.Helper()
	s.setIn(t, s.extra, name, qtype, rrs)
}

func (s *Server) setIn(t testing.TB, m map[key][]dns.RR, name string, qtype uint16, rrs []string) {
	t.Helper()
	var list []dns.RR
	for _, z := range rrs {
		rr, err := dns.NewRR(z)
		if err != nil {
			t.Fatalf("record %q: %v", z, err)
		}
		list = append(list, rr)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if list == nil {
		delete(m, keyOf(name, qtype))
		return
	}
	m[keyOf(name, qtype)] = list
}

// SetRcode makes every query for name answer rcode (dns.RcodeServerFailure,
// dns.RcodeRefused...); dns.RcodeSuccess goes back to the records.
func (s *Server) SetRcode(name string, rcode int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rcodes[strings.ToLower(dns.Fqdn(name))] = rcode
}

// TruncateOver makes UDP answers with more than n records come back
// truncated and empty, so that clients must ask again over TCP; 0 never
// truncates.
func (s *Server) TruncateOver(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.truncateOver = n
}

// Queries returns how many queries for name of type qtype the server got,
// and how many of them came over TCP.
func (s *Server) Queries(name string, qtype uint16) (all, tcp int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := keyOf(name, qtype)
	return s.queries[k], s.tcpSeen[k]
}

// ServeDNS answers one query (dns.Handler).
func (s *Server) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	if len(r.Question) != 1 {
		m.Rcode = dns.RcodeFormatError
		w.WriteMsg(m)
		return
	}
	q := r.Question[0]
	k := keyOf(q.Name, q.Qtype)
	_, overTCP := w.RemoteAddr().(*net.TCPAddr)
	s.mu.Lock()
	s.queries[k]++
	if overTCP {
		s.tcpSeen[k]++
	}
	rcode, forced := s.rcodes[k.name]
	m.Answer = append(m.Answer, s.records[k]...)
	m.Extra = append(m.Extra, s.extra[k]...)
	exists := false
	for rk := range s.records {
		exists = exists || rk.name == k.name
	}
	truncate := s.truncateOver > 0 && len(m.Answer) > s.truncateOver && !overTCP
	s.mu.Unlock()
	switch {
	case forced && rcode != dns.RcodeSuccess:
		m.Rcode = rcode
		m.Answer, m.Extra = nil, nil
	case !exists:
		m.Rcode = dns.RcodeNameError
	case truncate:
		m.Truncated = true
		m.Answer, m.Extra = nil, nil
	}
	w.WriteMsg(m)
}
