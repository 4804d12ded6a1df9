package netpoll

import (
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// kinds are the pollers every test runs on.
var kinds = []Kind{KindEpoll, KindPortable}

func eachKind(t *testing.T, f func(t *testing.T, p Poller)) {
	for _, k := range kinds {
		t.Run(string(k), func(t *testing.T) {
			p, err := New(k)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Shutdown()
			f(t, p)
		})
	}
}

// pair returns a connected non-blocking socket (ours) and its peer.
func pair(t *testing.T) (int, int) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	unix.SetNonblock(fds[0], true)
	unix.SetNonblock(fds[1], true)
	t.Cleanup(func() { unix.Close(fds[1]) })
	return fds[0], fds[1]
}

// next waits for an event for fd with any of the bits in want.
func next(t *testing.T, p Poller, fd int, want uint32) Event {
	t.Helper()
	ev := make([]Event, 16)
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		n, err := p.Wait(ev, 100*time.Millisecond)
		if err != nil && err != syscall.EINTR {
			t.Fatal(err)
		}
		for _, e := range ev[:n] {
			if int(e.FD) == fd && e.Events&want != 0 {
				return e
			}
		}
	}
	t.Fatalf("no event %#x for fd %d", want, fd)
	return Event{}
}

// none checks no event with any bit of want comes for fd within d.
func none(t *testing.T, p Poller, fd int, want uint32, d time.Duration) {
	t.Helper()
	ev := make([]Event, 16)
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		n, _ := p.Wait(ev, 20*time.Millisecond)
		for _, e := range ev[:n] {
			if int(e.FD) == fd && e.Events&want != 0 {
				t.Fatalf("got event %#x for fd %d, want none", e.Events, fd)
			}
		}
	}
}

func TestReadableEdges(t *testing.T) {
	eachKind(t, func(t *testing.T, p Poller) {
		fd, peer := pair(t)
		if err := p.Add(fd, 7); err != nil {
			t.Fatal(err)
		}
		defer p.Close(fd)
		unix.Write(peer, []byte("hello"))
		if ev := next(t, p, fd, In); ev.Tag != 7 {
			t.Errorf("got tag %d, want 7", ev.Tag)
		}
		// Not drained yet: the edge contract promises nothing more until
		// the loop reads to the end (epoll may still report new bytes).
		buf := make([]byte, 64)
		if n, _ := Read(fd, buf); n != 5 {
			t.Fatalf("got %d bytes, want 5", n)
		}
		p.Drained(fd)
		unix.Write(peer, []byte("again"))
		next(t, p, fd, In)
		Read(fd, buf)
		p.Drained(fd)
		// Shut down, not closed: pair's cleanup closes it, and a second
		// close could hit the number reused by then.
		unix.Shutdown(peer, unix.SHUT_RDWR)
		if ev := next(t, p, fd, In|RdHup|Hup); ev.Events&(RdHup|Hup) == 0 {
			t.Errorf("got %#x at the peer's close, want RdHup or Hup", ev.Events)
		}
	})
}

func TestWritableAfterBlocked(t *testing.T) {
	eachKind(t, func(t *testing.T, p Poller) {
		fd, peer := pair(t)
		if err := p.Add(fd, 1); err != nil {
			t.Fatal(err)
		}
		defer p.Close(fd)
		big := make([]byte, 64<<10)
		for {
			if _, err := Write(fd, big); err == unix.EAGAIN {
				break
			}
		}
		p.Blocked(fd)
		// Drain the peer: room appears. The reader stops before the test
		// ends (cleanups run last-in first-out: before pair's closes the
		// peer). Left running, it once read from the descriptor number
		// after it was reused, TestWake's eventfd, and swallowed the wake.
		stop, stopped := make(chan struct{}), make(chan struct{})
		t.Cleanup(func() { close(stop); <-stopped })
		go func() {
			defer close(stopped)
			buf := make([]byte, 1<<20)
			for i := 0; i < 200; i++ {
				if _, err := unix.Read(peer, buf); err != nil && err != unix.EAGAIN {
					return
				}
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
				}
			}
		}()
		next(t, p, fd, Out)
	})
}

func TestWake(t *testing.T) {
	eachKind(t, func(t *testing.T, p Poller) {
		go func() {
			time.Sleep(20 * time.Millisecond)
			p.Wake()
		}()
		ev := make([]Event, 4)
		start := time.Now()
		var (
			waits int
			errs  []error
		)
		for time.Since(start) < 3*time.Second {
			n, err := p.Wait(ev, time.Second)
			waits++
			if err != nil && len(errs) < 5 {
				errs = append(errs, err)
			}
			for _, e := range ev[:n] {
				if e.FD == WakeFD {
					return
				}
			}
		}
		t.Fatalf("Wake did not end the wait (%d waits, errors %v)", waits, errs)
	})
}

func TestListenerAndAccept(t *testing.T) {
	eachKind(t, func(t *testing.T, p Poller) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		f, err := ln.(*net.TCPListener).File()
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		lfd := int(f.Fd())
		unix.SetNonblock(lfd, true)
		if err := p.AddListener(lfd); err != nil {
			t.Fatal(err)
		}
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		next(t, p, lfd, In)
		fd, addr, err := Accept(lfd)
		if err != nil {
			t.Fatalf("accept: %v", err)
		}
		defer CloseFD(fd)
		if addr.String() != c.LocalAddr().String() {
			t.Errorf("got peer %v, want %v", addr, c.LocalAddr())
		}
		if _, _, err := Accept(lfd); err != unix.EAGAIN {
			t.Errorf("got %v from an empty queue, want EAGAIN", err)
		}
		p.Drained(lfd)
		p.Remove(lfd)
		// The listener still works after Remove.
		c2, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c2.Close()
		none(t, p, lfd, In, 100*time.Millisecond)
	})
}

func TestCloseClosesTheSocket(t *testing.T) {
	eachKind(t, func(t *testing.T, p Poller) {
		fd, peer := pair(t)
		if err := p.Add(fd, 1); err != nil {
			t.Fatal(err)
		}
		p.Close(fd)
		buf := make([]byte, 1)
		deadline := time.Now().Add(time.Second)
		for {
			n, err := unix.Read(peer, buf)
			if n == 0 && err == nil {
				return // EOF: closed
			}
			if time.Now().After(deadline) {
				t.Fatalf("peer got (%d, %v), want EOF after Close", n, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}
