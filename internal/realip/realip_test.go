package realip

import (
	"net/netip"
	"testing"

	"github.com/helios-lb/helios/internal/httpmsg"
)

func head(pairs ...string) *httpmsg.Header { return httpmsg.HeaderOf(pairs...) }

func TestClient(t *testing.T) {
	lb := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:1::/48")}
	peerLB := netip.MustParseAddr("10.1.2.3")
	outsider := netip.MustParseAddr("203.0.113.9")
	tests := []struct {
		name    string
		trusted []netip.Prefix
		source  Source
		peer    netip.Addr
		h       *httpmsg.Header
		want    string
	}{
		{name: "no trust: the peer, whatever it says", peer: outsider, h: head("X-Forwarded-For", "1.1.1.1"), want: "203.0.113.9"},
		{name: "untrusted peer's XFF ignored", trusted: lb, peer: outsider, h: head("X-Forwarded-For", "1.1.1.1"), want: "203.0.113.9"},
		{name: "trusted peer: right-most untrusted", trusted: lb, peer: peerLB, h: head("X-Forwarded-For", "6.6.6.6, 198.51.100.7"), want: "198.51.100.7"},
		{name: "spoofed prefix does not win", trusted: lb, peer: peerLB, h: head("X-Forwarded-For", "1.2.3.4", "X-Forwarded-For", "198.51.100.7, 10.9.9.9"), want: "198.51.100.7"},
		{name: "chain of trusted: left-most", trusted: lb, peer: peerLB, h: head("X-Forwarded-For", "10.0.0.5, 10.0.0.6"), want: "10.0.0.5"},
		{name: "trusted peer without the field", trusted: lb, peer: peerLB, h: head(), want: "10.1.2.3"},
		{name: "garbage stops at the last believed", trusted: lb, peer: peerLB, h: head("X-Forwarded-For", "198.51.100.7, nonsense, 10.0.0.7"), want: "10.0.0.7"},
		{name: "ports and brackets", trusted: lb, peer: peerLB, h: head("X-Forwarded-For", "[2001:db8::5]:443"), want: "2001:db8::5"},
		{name: "ipv4 with port", trusted: lb, peer: peerLB, h: head("X-Forwarded-For", "198.51.100.7:5555"), want: "198.51.100.7"},
		{name: "mapped peer", trusted: lb, peer: netip.MustParseAddr("::ffff:10.1.2.3"), h: head("X-Forwarded-For", "198.51.100.7"), want: "198.51.100.7"},
		{name: "zone refused", trusted: lb, peer: peerLB, h: head("X-Forwarded-For", "fe80::1%eth0"), want: "10.1.2.3"},
		{name: "forwarded", trusted: lb, source: Forwarded, peer: peerLB, h: head("Forwarded", `for=192.0.2.43, for="[2001:db8:cafe::17]:4711";proto=https`), want: "2001:db8:cafe::17"},
		{name: "forwarded ignores XFF", trusted: lb, source: Forwarded, peer: peerLB, h: head("X-Forwarded-For", "6.6.6.6", "Forwarded", "proto=http;for=192.0.2.43"), want: "192.0.2.43"},
		{name: "forwarded obfuscated node", trusted: lb, source: Forwarded, peer: peerLB, h: head("Forwarded", "for=_hidden"), want: "10.1.2.3"},
		{name: "x-real-ip", trusted: lb, source: XRealIP, peer: peerLB, h: head("X-Real-IP", "198.51.100.7"), want: "198.51.100.7"},
		{name: "x-real-ip from outsider", trusted: lb, source: XRealIP, peer: outsider, h: head("X-Real-IP", "198.51.100.7"), want: "203.0.113.9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(tt.trusted, tt.source)
			if got := r.Client(tt.peer, tt.h); got.String() != tt.want {
				t.Errorf("got %v, want %s", got, tt.want)
			}
		})
	}
}

func TestClientAllocatesNothing(t *testing.T) {
	r := New([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, XForwardedFor)
	h := head("X-Forwarded-For", "198.51.100.7, 10.0.0.7, [2001:db8::1]:80")
	peer := netip.MustParseAddr("10.1.2.3")
	if n := testing.AllocsPerRun(100, func() { r.Client(peer, h) }); n != 0 {
		t.Errorf("got %v allocations, want 0", n)
	}
}

// FuzzClient: whatever a client writes in the field, the address found is
// the peer, a trusted proxy or one the field names, never a panic.
func FuzzClient(f *testing.F) {
	f.Add("198.51.100.7, 10.0.0.7")
	f.Add(`for="[2001:db8::1]:80";proto=https, for=10.0.0.1`)
	f.Add("[::1]:x, ,,")
	f.Fuzz(func(t *testing.T, v string) {
		peer := netip.MustParseAddr("10.1.2.3")
		for _, src := range []Source{XForwardedFor, Forwarded, XRealIP} {
			r := New([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, src)
			h := head("X-Forwarded-For", v, "Forwarded", v, "X-Real-IP", v)
			got := r.Client(peer, h)
			if !got.IsValid() || got.Zone() != "" {
				t.Fatalf("%q (source %d): got %v", v, src, got)
			}
		}
	})
}
