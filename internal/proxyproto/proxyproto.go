// Package proxyproto reads and writes the PROXY protocol header (HAProxy's
// "PROXY protocol", versions 1 and 2) that layer-4 load balancers put in
// front of a connection to say who the client is.
//
// Parse is strict: a header that is malformed, truncated past its stated
// length, or longer than the specification allows is an error, never a
// guess, since a listener that trusts the header believes the address it
// names. It never blocks and never allocates: it reads from a buffer and
// says how many bytes the header took, or that more are needed.
package proxyproto

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"unsafe"
)

// Errors Parse returns.
var (
	// ErrNoHeader means the bytes do not start with a PROXY header of
	// either version.
	ErrNoHeader = errors.New("proxyproto: no PROXY protocol header")
	// ErrMalformed means a header started but does not follow the
	// specification.
	ErrMalformed = errors.New("proxyproto: malformed PROXY protocol header")
)

// Version is a version of the protocol.
type Version uint8

// The versions.
const (
	V1 Version = 1
	V2 Version = 2
)

// Header is what a PROXY header said.
type Header struct {
	// Version is the header's version.
	Version Version
	// Local is true when the header describes no client: version 2's
	// LOCAL command (a health check by the load balancer itself) or
	// version 1's UNKNOWN. Source and Destination are then zero, and the
	// connection's own addresses stand.
	Local bool
	// Source is the client's address and port (an IPv4-mapped IPv6
	// address is given as the IPv4 address it maps).
	Source netip.AddrPort
	// Destination is the address and port the client connected to.
	Destination netip.AddrPort
}

// v2Sig is the 12-byte signature a version 2 header starts with.
var v2Sig = []byte("\r\n\r\n\x00\r\nQUIT\n")

// MaxV1 is the longest version 1 header, CRLF included.
const MaxV1 = 107

// Parse reads a PROXY header at the start of b. It returns the header and
// its length in bytes; n is 0 with a nil error when b holds only the start
// of one (more is needed). A version 2 header's TLVs are skipped.
func Parse(b []byte) (h Header, n int, err error) {
	if len(b) == 0 {
		return h, 0, nil
	}
	switch b[0] {
	case 'P':
		return parseV1(b)
	case '\r':
		return parseV2(b)
	}
	return h, 0, ErrNoHeader
}

// Prefix reports whether b could still be the start of a PROXY header
// (false once it cannot be).
func Prefix(b []byte) bool {
	n := min(len(b), 6)
	if bytes.Equal(b[:n], []byte("PROXY ")[:n]) {
		return true
	}
	n = min(len(b), len(v2Sig))
	return bytes.Equal(b[:n], v2Sig[:n])
}

func parseV1(b []byte) (h Header, n int, err error) {
	const sig = "PROXY "
	m := min(len(b), len(sig))
	if string(b[:m]) != sig[:m] {
		return h, 0, ErrNoHeader
	}
	end := bytes.Index(b[:min(len(b), MaxV1)], []byte("\r\n"))
	if end < 0 {
		if len(b) >= MaxV1 {
			return h, 0, ErrMalformed
		}
		if bytes.IndexByte(b, '\n') >= 0 {
			return h, 0, ErrMalformed // a bare LF
		}
		return h, 0, nil
	}
	line := b[len(sig):end]
	h.Version = V1
	proto, rest, ok := bytes.Cut(line, []byte(" "))
	switch string(proto) {
	case "UNKNOWN":
		// The rest of the line is ignored (the specification).
		h.Local = true
		return h, end + 2, nil
	case "TCP4", "TCP6":
	default:
		return h, 0, ErrMalformed
	}
	if !ok {
		return h, 0, ErrMalformed
	}
	var parts [4][]byte
	for i := range parts {
		var p []byte
		p, rest, ok = bytes.Cut(rest, []byte(" "))
		if len(p) == 0 || (i < 3) != ok {
			return h, 0, ErrMalformed
		}
		parts[i] = p
	}
	// The strings are not kept (a zone, which netip would intern, is
	// refused below): reading them in place allocates nothing.
	src, err1 := netip.ParseAddr(unsafe.String(&parts[0][0], len(parts[0])))
	dst, err2 := netip.ParseAddr(unsafe.String(&parts[1][0], len(parts[1])))
	sp, ok1 := parsePort(parts[2])
	dp, ok2 := parsePort(parts[3])
	if err1 != nil || err2 != nil || !ok1 || !ok2 || src.Zone() != "" || dst.Zone() != "" {
		return h, 0, ErrMalformed
	}
	v4 := string(proto) == "TCP4"
	if src.Is4() != v4 || dst.Is4() != v4 {
		return h, 0, ErrMalformed
	}
	h.Source = netip.AddrPortFrom(src.Unmap(), sp)
	h.Destination = netip.AddrPortFrom(dst.Unmap(), dp)
	return h, end + 2, nil
}

// parsePort accepts 0 to 65535 in decimal without leading zeros (the
// specification's form).
func parsePort(p []byte) (uint16, bool) {
	if len(p) == 0 || len(p) > 5 || (len(p) > 1 && p[0] == '0') {
		return 0, false
	}
	n := 0
	for _, c := range p {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if n > 65535 {
		return 0, false
	}
	return uint16(n), true
}

func parseV2(b []byte) (h Header, n int, err error) {
	m := min(len(b), len(v2Sig))
	if !bytes.Equal(b[:m], v2Sig[:m]) {
		return h, 0, ErrNoHeader
	}
	if len(b) < 16 {
		return h, 0, nil
	}
	verCmd, famProto := b[12], b[13]
	length := int(binary.BigEndian.Uint16(b[14:16]))
	if verCmd>>4 != 2 {
		return h, 0, ErrMalformed
	}
	if len(b) < 16+length {
		return h, 0, nil
	}
	body := b[16 : 16+length]
	h.Version = V2
	switch verCmd & 0xf {
	case 0: // LOCAL
		h.Local = true
		return h, 16 + length, nil
	case 1: // PROXY
	default:
		return h, 0, ErrMalformed
	}
	switch famProto {
	case 0x11, 0x12: // TCP or UDP over IPv4
		if length < 12 {
			return h, 0, ErrMalformed
		}
		src := netip.AddrFrom4([4]byte(body[0:4]))
		dst := netip.AddrFrom4([4]byte(body[4:8]))
		h.Source = netip.AddrPortFrom(src, binary.BigEndian.Uint16(body[8:10]))
		h.Destination = netip.AddrPortFrom(dst, binary.BigEndian.Uint16(body[10:12]))
	case 0x21, 0x22: // TCP or UDP over IPv6
		if length < 36 {
			return h, 0, ErrMalformed
		}
		src := netip.AddrFrom16([16]byte(body[0:16]))
		dst := netip.AddrFrom16([16]byte(body[16:32]))
		h.Source = netip.AddrPortFrom(src.Unmap(), binary.BigEndian.Uint16(body[32:34]))
		h.Destination = netip.AddrPortFrom(dst.Unmap(), binary.BigEndian.Uint16(body[34:36]))
	case 0x00:
		// UNSPEC with PROXY: the receiver must ignore the addresses.
		h.Local = true
	default:
		// Unix sockets and unknown families say nothing a TCP
		// listener can use as a client address.
		return h, 0, ErrMalformed
	}
	return h, 16 + length, nil
}

// AppendV1 appends a version 1 header for a connection from src to dst:
// TCP4 when both are IPv4, TCP6 otherwise (an IPv4 address beside an
// IPv6 one is written mapped); UNKNOWN when either is invalid.
func AppendV1(b []byte, src, dst netip.AddrPort) []byte {
	s, d, v4, ok := family(src.Addr(), dst.Addr())
	if !ok {
		return append(b, "PROXY UNKNOWN\r\n"...)
	}
	if v4 {
		b = append(b, "PROXY TCP4 "...)
	} else {
		b = append(b, "PROXY TCP6 "...)
	}
	b = s.AppendTo(b)
	b = append(b, ' ')
	b = d.AppendTo(b)
	b = append(b, ' ')
	b = appendUint(b, src.Port())
	b = append(b, ' ')
	b = appendUint(b, dst.Port())
	return append(b, "\r\n"...)
}

// AppendV2 appends a version 2 header (command PROXY, TCP) for a
// connection from src to dst, over IPv4 or IPv6 as AppendV1 chooses;
// command LOCAL when either is invalid.
func AppendV2(b []byte, src, dst netip.AddrPort) []byte {
	b = append(b, v2Sig...)
	s, d, v4, ok := family(src.Addr(), dst.Addr())
	switch {
	case !ok:
		return append(b, 0x20, 0x00, 0, 0)
	case v4:
		b = append(b, 0x21, 0x11, 0, 12)
		a4, d4 := s.As4(), d.As4()
		b = append(b, a4[:]...)
		b = append(b, d4[:]...)
	default:
		b = append(b, 0x21, 0x21, 0, 36)
		a16, d16 := s.As16(), d.As16()
		b = append(b, a16[:]...)
		b = append(b, d16[:]...)
	}
	b = binary.BigEndian.AppendUint16(b, src.Port())
	return binary.BigEndian.AppendUint16(b, dst.Port())
}

// family returns s and d as one family (IPv4 when both are, both IPv6
// otherwise), without zones; ok is false when either is invalid.
func family(s, d netip.Addr) (s2, d2 netip.Addr, v4, ok bool) {
	s, d = s.Unmap().WithZone(""), d.Unmap().WithZone("")
	if !s.IsValid() || !d.IsValid() {
		return s, d, false, false
	}
	if s.Is4() && d.Is4() {
		return s, d, true, true
	}
	return netip.AddrFrom16(s.As16()), netip.AddrFrom16(d.As16()), false, true
}

func appendUint(b []byte, v uint16) []byte {
	var tmp [5]byte
	i := len(tmp)
	for {
		i--
		tmp[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			break
		}
	}
	return append(b, tmp[i:]...)
}
