package listener

import (
	"net"
	"os"
	"syscall"
)

// probeBind binds a socket to addr with SO_REUSEADDR but without
// SO_REUSEPORT, and closes it. SO_REUSEADDR keeps connections in
// TIME_WAIT from counting; it never lets a bind share a listening
// address on Linux.
func probeBind(addr *net.TCPAddr) error {
	family, sa := sockaddr(addr)
	// socket and close-on-exec in two steps (not every system has
	// SOCK_CLOEXEC), under the fork lock so that no exec in between
	// inherits the descriptor.
	syscall.ForkLock.RLock()
	fd, err := syscall.Socket(family, syscall.SOCK_STREAM, syscall.IPPROTO_TCP)
	if err == nil {
		syscall.CloseOnExec(fd)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return os.NewSyscallError("socket", err)
	}
	defer syscall.Close(fd)
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		return os.NewSyscallError("setsockopt SO_REUSEADDR", err)
	}
	if family == syscall.AF_INET6 && (addr.IP == nil || addr.IP.IsUnspecified()) {
		syscall.SetsockoptInt(fd, syscall.IPPROTO_IPV6, syscall.IPV6_V6ONLY, 0)
	}
	if err := syscall.Bind(fd, sa); err != nil {
		return os.NewSyscallError("bind", err)
	}
	return nil
}

// sockaddr returns the address family and socket address for addr: IPv4
// for an IPv4 address, IPv6 otherwise (an empty host is the IPv6 any
// address, dual stack, as net.Listen does for ":port").
func sockaddr(addr *net.TCPAddr) (int, syscall.Sockaddr) {
	if ip4 := addr.IP.To4(); ip4 != nil {
		s4 := &syscall.SockaddrInet4{Port: addr.Port}
		copy(s4.Addr[:], ip4)
		return syscall.AF_INET, s4
	}
	s6 := &syscall.SockaddrInet6{Port: addr.Port}
	if addr.IP != nil {
		copy(s6.Addr[:], addr.IP.To16())
	}
	if addr.Zone != "" {
		if ifi, err := net.InterfaceByName(addr.Zone); err == nil {
			s6.ZoneId = uint32(ifi.Index)
		}
	}
	return syscall.AF_INET6, s6
}
