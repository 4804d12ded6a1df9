//go:build unix && !linux

package netpoll

import (
	"net/netip"
	"runtime"

	"golang.org/x/sys/unix"
)

const native = KindPortable

// Read reads a non-blocking socket.
func Read(fd int, p []byte) (int, error) { return unix.Read(fd, p) }

// Write writes a non-blocking socket.
func Write(fd int, p []byte) (int, error) { return unix.Write(fd, p) }

// MaxWritev is the most slices Writev writes in one call (all of them
// here: a call each).
const MaxWritev = 64

// Writev writes the slices of bufs in order to a non-blocking socket (a
// call each here: writev is not in x/sys/unix on every system); any may
// be empty. It stops at the first short write.
func Writev(fd int, bufs [][]byte) (int, error) {
	n := 0
	for _, p := range bufs {
		if len(p) == 0 {
			continue
		}
		m, err := unix.Write(fd, p)
		if err != nil {
			if n > 0 {
				return n, nil // the error comes again on the next write
			}
			return 0, err
		}
		n += m
		if m < len(p) {
			return n, nil
		}
	}
	return n, nil
}

// CloseFD closes a socket.
func CloseFD(fd int) { unix.Close(fd) }

// Accept takes a queued connection from a listening socket, non-blocking
// and close-on-exec, with its peer's address.
func Accept(lfd int) (int, netip.AddrPort, error) {
	fd, sa, err := unix.Accept(lfd)
	if err != nil {
		return -1, netip.AddrPort{}, err
	}
	unix.CloseOnExec(fd)
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return -1, netip.AddrPort{}, err
	}
	var ap netip.AddrPort
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		ap = netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port))
	case *unix.SockaddrInet6:
		ap = netip.AddrPortFrom(netip.AddrFrom16(a.Addr).Unmap(), uint16(a.Port))
	}
	return fd, ap, nil
}

// Yield lets other goroutines run.
func Yield() { runtime.Gosched() }

func newEpoll() (Poller, error) { return newPortable(), nil }

// Sendfile sends up to n bytes of the file infd, from *off, to the socket
// outfd, advancing *off; EAGAIN when the socket is full.
func Sendfile(outfd, infd int, off *int64, n int) (int, error) {
	written, err := unix.Sendfile(outfd, infd, off, n)
	return written, err
}

// Socket opens a non-blocking, close-on-exec TCP socket.
func Socket(family int) (int, error) {
	fd, err := unix.Socket(family, unix.SOCK_STREAM, unix.IPPROTO_TCP)
	if err != nil {
		return -1, err
	}
	unix.CloseOnExec(fd)
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// WriteMore writes like Write (systems without MSG_MORE send at once).
func WriteMore(fd int, p []byte) (int, error) { return unix.Write(fd, p) }
