package listener

import (
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"

	"github.com/helios-lb/helios/internal/netpoll"
)

// sysListen opens one TCP listening socket on addr with SO_REUSEADDR and
// SO_REUSEPORT set and the given backlog. Go's net.Listen offers neither
// the backlog nor, without a Control hook, reuseport; a raw socket gives
// both in one place.
func sysListen(addr *net.TCPAddr, backlog int) (net.Listener, error) {
	family := unix.AF_INET6
	ip := addr.IP
	if ip4 := ip.To4(); ip4 != nil {
		family = unix.AF_INET
		ip = ip4
	}
	fd, err := netpoll.Socket(family)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	ok := false
	defer func() {
		if !ok {
			unix.Close(fd)
		}
	}()
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return nil, os.NewSyscallError("setsockopt SO_REUSEADDR", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
		return nil, os.NewSyscallError("setsockopt SO_REUSEPORT", err)
	}
	var sa unix.Sockaddr
	if family == unix.AF_INET {
		s4 := &unix.SockaddrInet4{Port: addr.Port}
		copy(s4.Addr[:], ip)
		sa = s4
	} else {
		// An unspecified v6 address serves IPv4 too (dual stack), as
		// net.Listen does for ":port".
		if ip == nil || ip.IsUnspecified() {
			unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 0)
		}
		s6 := &unix.SockaddrInet6{Port: addr.Port}
		if ip != nil {
			copy(s6.Addr[:], ip.To16())
		}
		if addr.Zone != "" {
			if ifi, err := net.InterfaceByName(addr.Zone); err == nil {
				s6.ZoneId = uint32(ifi.Index)
			}
		}
		sa = s6
	}
	if err := unix.Bind(fd, sa); err != nil {
		return nil, os.NewSyscallError("bind", err)
	}
	if err := unix.Listen(fd, backlog); err != nil {
		return nil, os.NewSyscallError("listen", err)
	}
	f := os.NewFile(uintptr(fd), fmt.Sprintf("tcp:%s", addr))
	ok = true
	ln, err := net.FileListener(f)
	f.Close() // FileListener dups the descriptor
	if err != nil {
		return nil, err
	}
	return ln, nil
}
