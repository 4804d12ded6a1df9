package listener

import (
	"fmt"
	"net"
	"os"
	"syscall"
)

// sysListen opens one TCP listening socket on addr with SO_REUSEADDR and
// SO_REUSEPORT set and the given backlog. Go's net.Listen offers neither
// the backlog nor, without a Control hook, reuseport; a raw socket gives
// both in one place.
func sysListen(addr *net.TCPAddr, backlog int) (net.Listener, error) {
	family := syscall.AF_INET6
	ip := addr.IP
	if ip4 := ip.To4(); ip4 != nil {
		family = syscall.AF_INET
		ip = ip4
	}
	fd, err := syscall.Socket(family, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, syscall.IPPROTO_TCP)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	ok := false
	defer func() {
		if !ok {
			syscall.Close(fd)
		}
	}()
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		return nil, os.NewSyscallError("setsockopt SO_REUSEADDR", err)
	}
	const soReusePort = 0xf // SO_REUSEPORT on Linux
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, soReusePort, 1); err != nil {
		return nil, os.NewSyscallError("setsockopt SO_REUSEPORT", err)
	}
	var sa syscall.Sockaddr
	if family == syscall.AF_INET {
		s4 := &syscall.SockaddrInet4{Port: addr.Port}
		copy(s4.Addr[:], ip)
		sa = s4
	} else {
		// An unspecified v6 address serves IPv4 too (dual stack), as
		// net.Listen does for ":port".
		if ip == nil || ip.IsUnspecified() {
			syscall.SetsockoptInt(fd, syscall.IPPROTO_IPV6, syscall.IPV6_V6ONLY, 0)
		}
		s6 := &syscall.SockaddrInet6{Port: addr.Port}
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
	if err := syscall.Bind(fd, sa); err != nil {
		return nil, os.NewSyscallError("bind", err)
	}
	if err := syscall.Listen(fd, backlog); err != nil {
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
