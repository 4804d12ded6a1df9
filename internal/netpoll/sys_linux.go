//go:build linux

package netpoll

import (
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Read reads a non-blocking socket with a raw system call: the socket
// cannot block, and skipping the scheduler's syscall bookkeeping keeps it
// from handing the loop's processor to another thread mid-burst.
func Read(fd int, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// Write writes a non-blocking socket with a raw system call (see Read).
func Write(fd int, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// MaxWritev is the most slices Writev writes in one call; it writes the
// first MaxWritev of more (a short write).
const MaxWritev = 64

// Writev writes the slices of bufs in order to a non-blocking socket in
// one system call (see Read); any may be empty.
func Writev(fd int, bufs [][]byte) (int, error) {
	var iov [MaxWritev]unix.Iovec
	n := 0
	for _, p := range bufs {
		if len(p) > 0 {
			if n == MaxWritev {
				break
			}
			iov[n].Base = &p[0]
			iov[n].SetLen(len(p))
			n++
		}
	}
	if n == 0 {
		return 0, nil
	}
	r, _, e := unix.RawSyscall(unix.SYS_WRITEV, uintptr(fd), uintptr(unsafe.Pointer(&iov[0])), uintptr(n))
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// CloseFD closes a socket (no linger is set, so it cannot block) without
// the scheduler's bookkeeping.
func CloseFD(fd int) { unix.RawSyscall(unix.SYS_CLOSE, uintptr(fd), 0, 0) }

// Accept takes a queued connection from a listening socket, non-blocking
// and close-on-exec, with its peer's address.
func Accept(lfd int) (int, netip.AddrPort, error) {
	var rsa unix.RawSockaddrAny
	n := uint32(unix.SizeofSockaddrAny)
	r, _, e := unix.RawSyscall6(unix.SYS_ACCEPT4, uintptr(lfd), uintptr(unsafe.Pointer(&rsa)), uintptr(unsafe.Pointer(&n)),
		unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0, 0)
	if e != 0 {
		return -1, netip.AddrPort{}, e
	}
	return int(r), rawAddrPort(&rsa), nil
}

// rawAddrPort decodes an accept4 address.
func rawAddrPort(rsa *unix.RawSockaddrAny) netip.AddrPort {
	switch rsa.Addr.Family {
	case unix.AF_INET:
		p := (*unix.RawSockaddrInet4)(unsafe.Pointer(rsa))
		port := uint16(p.Port>>8) | uint16(p.Port<<8)
		return netip.AddrPortFrom(netip.AddrFrom4(p.Addr), port)
	case unix.AF_INET6:
		p := (*unix.RawSockaddrInet6)(unsafe.Pointer(rsa))
		port := uint16(p.Port>>8) | uint16(p.Port<<8)
		return netip.AddrPortFrom(netip.AddrFrom16(p.Addr).Unmap(), port)
	}
	return netip.AddrPort{}
}

// Yield lets other runnable threads use this CPU (sched_yield(2)); unlike
// runtime.Gosched it keeps the goroutine on its thread and processor, so
// it involves no wake-up.
func Yield() { unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }

// Sendfile sends up to n bytes of the file infd, from *off, to the socket
// outfd, advancing *off; EAGAIN when the socket is full.
func Sendfile(outfd, infd int, off *int64, n int) (int, error) {
	return unix.Sendfile(outfd, infd, off, n)
}

// Socket opens a non-blocking, close-on-exec TCP socket.
func Socket(family int) (int, error) {
	return unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
}

// WriteMore writes like Write, telling the kernel more follows at once
// (MSG_MORE), so a head and the file sent behind it leave in one segment.
func WriteMore(fd int, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r, _, e := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), unix.MSG_MORE, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}
