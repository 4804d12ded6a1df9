//go:build unix

package netpoll

import (
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// portable watches sockets through Go's netpoller: for each socket a
// goroutine parks until it is readable (syscall.RawConn.Read, with a
// zero-timeout poll(2) as its test, since the netpoller forgets readiness
// it reported before) and posts the report to the loop; it watches again
// once the loop says the socket is drained, which is the edge-triggered
// contract. Writability is watched only after the loop says it is
// blocked. Slower than epoll (a goroutine per socket, a channel hop per
// report), it runs wherever Go runs and is the fallback off Linux.
type portable struct {
	events chan Event
	mu     sync.Mutex
	socks  map[int]*watched
	woken  chan struct{}
}

// watched is one socket and its watchers.
type watched struct {
	f      *os.File
	rc     syscall.RawConn
	tag    int32
	listen bool
	// rearm wakes the read watcher when the loop has drained the socket;
	// writer is set while a write watcher runs.
	rearm  chan struct{}
	writer bool
	done   chan struct{}
}

func newPortable() *portable {
	return &portable{events: make(chan Event, 4096), socks: make(map[int]*watched), woken: make(chan struct{}, 1)}
}

func (p *portable) add(fd int, tag int32, listen bool) error {
	wfd := fd
	if listen {
		// A listening socket belongs to a net.Listener, which has it in
		// the netpoller already: watch a duplicate of it.
		var err error
		if wfd, err = unix.Dup(fd); err != nil {
			return os.NewSyscallError("dup", err)
		}
		unix.CloseOnExec(wfd)
	}
	f := os.NewFile(uintptr(wfd), "socket")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return err
	}
	w := &watched{f: f, rc: rc, tag: tag, listen: listen, rearm: make(chan struct{}, 1), done: make(chan struct{})}
	p.mu.Lock()
	p.socks[fd] = w
	p.mu.Unlock()
	go p.watchRead(fd, w)
	if !listen {
		// A socket just connected (or connecting) is reported writable
		// once, as epoll does on registration.
		p.Blocked(fd)
	}
	return nil
}

func (p *portable) Add(fd int, tag int32) error { return p.add(fd, tag, false) }
func (p *portable) AddListener(fd int) error    { return p.add(fd, 0, true) }

func (p *portable) take(fd int) *watched {
	p.mu.Lock()
	w := p.socks[fd]
	delete(p.socks, fd)
	p.mu.Unlock()
	return w
}

// Remove stops watching a listening socket (its duplicate is closed; the
// socket stays open). Connections are only ever closed.
func (p *portable) Remove(fd int) {
	if w := p.take(fd); w != nil {
		close(w.done)
		if w.listen {
			w.f.Close()
		}
	}
}

func (p *portable) Close(fd int) {
	if w := p.take(fd); w != nil {
		close(w.done)
		w.f.Close() // closes fd and wakes the watchers
		return
	}
	CloseFD(fd)
}

func (p *portable) get(fd int) *watched {
	p.mu.Lock()
	w := p.socks[fd]
	p.mu.Unlock()
	return w
}

func (p *portable) Drained(fd int) {
	if w := p.get(fd); w != nil {
		select {
		case w.rearm <- struct{}{}:
		default:
		}
	}
}

func (p *portable) Blocked(fd int) {
	p.mu.Lock()
	w := p.socks[fd]
	start := w != nil && !w.writer
	if start {
		w.writer = true
	}
	p.mu.Unlock()
	if start {
		go p.watchWrite(fd, w)
	}
}

// ready polls fd without waiting and returns its readiness as event bits.
func ready(fd int, want int16) uint32 {
	pfd := []unix.PollFd{{Fd: int32(fd), Events: want}}
	n, err := unix.Poll(pfd, 0)
	if err != nil || n == 0 {
		return 0
	}
	var ev uint32
	r := pfd[0].Revents
	if r&unix.POLLIN != 0 {
		ev |= In
	}
	if r&unix.POLLOUT != 0 {
		ev |= Out
	}
	if r&unix.POLLERR != 0 {
		ev |= Err
	}
	if r&unix.POLLHUP != 0 {
		ev |= Hup | In
	}
	return ev
}

func (p *portable) watchRead(fd int, w *watched) {
	for {
		var ev uint32
		err := w.rc.Read(func(s uintptr) bool {
			ev = ready(int(s), unix.POLLIN)
			return ev != 0
		})
		if err != nil {
			return // closed
		}
		if !w.listen && (ev&(Err|Hup) != 0 || ev&In != 0 && peerShut(fd)) {
			ev |= RdHup
		}
		select {
		case p.events <- Event{Events: ev, FD: int32(fd), Tag: w.tag}:
		case <-w.done:
			return
		}
		select {
		case <-w.rearm:
		case <-w.done:
			return
		}
	}
}

func (p *portable) watchWrite(fd int, w *watched) {
	var ev uint32
	err := w.rc.Write(func(s uintptr) bool {
		ev = ready(int(s), unix.POLLOUT)
		return ev != 0
	})
	p.mu.Lock()
	w.writer = false
	p.mu.Unlock()
	if err != nil {
		return
	}
	select {
	case p.events <- Event{Events: ev, FD: int32(fd), Tag: w.tag}:
	case <-w.done:
	}
}

// peerShut peeks at a readable socket: true when its next read is the
// end, or an error (a reset).
func peerShut(fd int) bool {
	var b [1]byte
	n, _, err := unix.Recvfrom(fd, b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
	return err == nil && n == 0 || err != nil && err != unix.EAGAIN
}

func (p *portable) Poll(events []Event) (int, error) {
	n := 0
	for n < len(events) {
		select {
		case ev := <-p.events:
			events[n] = ev
			n++
		case <-p.woken:
			events[n] = Event{FD: WakeFD}
			n++
		default:
			return n, nil
		}
	}
	return n, nil
}

func (p *portable) Wait(events []Event, d time.Duration) (int, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case ev := <-p.events:
		events[0] = ev
	case <-p.woken:
		events[0] = Event{FD: WakeFD}
	case <-t.C:
		return 0, nil
	}
	n, err := p.Poll(events[1:])
	return n + 1, err
}

func (p *portable) Wake() {
	select {
	case p.woken <- struct{}{}:
	default:
	}
}

// Shutdown stops watching the listening sockets; connections are closed
// by the loop before it shuts its poller down.
func (p *portable) Shutdown() error {
	p.mu.Lock()
	var fds []int
	for fd, w := range p.socks {
		if w.listen {
			fds = append(fds, fd)
		}
	}
	p.mu.Unlock()
	for _, fd := range fds {
		p.Remove(fd)
	}
	return nil
}
