//go:build linux

package netpoll

import (
	"errors"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const native = KindURing

// epoll is one loop's epoll instance, with an eventfd to wake it.
type epoll struct {
	ep   int
	wake int
	raw  []unix.EpollEvent

	// The epoll descriptor as Go's netpoller sees it (an epoll descriptor
	// is readable when events are ready), so that an idle loop parks its
	// goroutine like any other and its processor runs other goroutines
	// at once. A blocking epoll_wait would hold the processor until
	// sysmon took it back (20 µs to 10 ms).
	file    *os.File
	rc      syscall.RawConn
	waitFn  func(uintptr) bool
	waitN   int
	waitErr error
	out     []Event
}

func newEpoll() (*epoll, error) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	wfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(ep)
		return nil, os.NewSyscallError("eventfd", err)
	}
	p := &epoll{ep: ep, wake: wfd, raw: make([]unix.EpollEvent, 256)}
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, wfd, &unix.EpollEvent{Events: In, Fd: int32(wfd)}); err != nil {
		p.closeAll()
		return nil, os.NewSyscallError("epoll_ctl", err)
	}
	if err := unix.SetNonblock(ep, true); err != nil {
		p.closeAll()
		return nil, os.NewSyscallError("fcntl", err)
	}
	p.file = os.NewFile(uintptr(ep), "epoll")
	if p.rc, err = p.file.SyscallConn(); err != nil {
		p.file.Close()
		unix.Close(wfd)
		return nil, err
	}
	p.waitFn = func(uintptr) bool {
		p.waitN, p.waitErr = p.pollRaw()
		return p.waitN != 0 || p.waitErr != nil
	}
	return p, nil
}

func (p *epoll) closeAll() {
	unix.Close(p.ep)
	unix.Close(p.wake)
}

// etFlags are a connection's registration: every readiness, edge-triggered.
const etFlags = In | Out | RdHup | unix.EPOLLET

func (p *epoll) Add(fd int, tag int32) error {
	if err := unix.EpollCtl(p.ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: etFlags, Fd: int32(fd), Pad: tag}); err != nil {
		return os.NewSyscallError("epoll_ctl", err)
	}
	return nil
}

func (p *epoll) AddListener(fd int) error {
	if err := unix.EpollCtl(p.ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: In | unix.EPOLLET, Fd: int32(fd)}); err != nil {
		return os.NewSyscallError("epoll_ctl", err)
	}
	return nil
}

func (p *epoll) Remove(fd int) { unix.EpollCtl(p.ep, unix.EPOLL_CTL_DEL, fd, nil) }

// Close closes fd, which takes it out of the epoll set.
func (p *epoll) Close(fd int) { CloseFD(fd) }

func (p *epoll) Drained(int) {}
func (p *epoll) Blocked(int) {}

func (p *epoll) Poll(events []Event) (int, error) {
	n, err := p.pollRaw()
	return p.convert(events, n), err
}

// pollRaw calls epoll_wait without blocking and without the scheduler's
// syscall bookkeeping.
func (p *epoll) pollRaw() (int, error) {
	r, _, e := unix.RawSyscall6(unix.SYS_EPOLL_WAIT, uintptr(p.ep), uintptr(unsafe.Pointer(&p.raw[0])), uintptr(len(p.raw)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// convert copies n raw events into events, turning the eventfd's into a
// WakeFD event (and reading it, to be told again).
func (p *epoll) convert(events []Event, n int) int {
	n = min(n, len(events))
	for i := 0; i < n; i++ {
		r := &p.raw[i]
		if int(r.Fd) == p.wake {
			var buf [8]byte
			unix.Read(p.wake, buf[:])
			events[i] = Event{FD: WakeFD}
			continue
		}
		events[i] = Event{Events: r.Events, FD: r.Fd, Tag: r.Pad}
	}
	return n
}

func (p *epoll) Wait(events []Event, d time.Duration) (int, error) {
	p.waitN, p.waitErr = 0, nil
	p.file.SetReadDeadline(time.Now().Add(d))
	if err := p.rc.Read(p.waitFn); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		return 0, err
	}
	return p.convert(events, p.waitN), p.waitErr
}

func (p *epoll) Wake() {
	one := [8]byte{1}
	unix.Write(p.wake, one[:])
}

func (p *epoll) Shutdown() error {
	err := p.file.Close()
	unix.Close(p.wake)
	return err
}
