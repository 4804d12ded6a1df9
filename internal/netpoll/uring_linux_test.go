package netpoll

import (
	"bytes"
	"net"
	"testing"

	"golang.org/x/sys/unix"
)

// tcpPair returns a connected loopback TCP socket, non-blocking (ours),
// and its peer.
func tcpPair(t *testing.T) (int, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	f, err := s.(*net.TCPConn).File()
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Dup(int(f.Fd()))
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	unix.SetNonblock(fd, true)
	t.Cleanup(func() { unix.Close(fd) })
	return fd, c
}

// TestRecvBatch reads five sockets in one Run: one with a few bytes, one
// with more than its buffer, one with nothing (which must not block the
// batch: -EAGAIN), one whose peer closed (0) and one closed with unread
// data on the peer's side (a reset). Each result lands in its Add's
// place.
func TestRecvBatch(t *testing.T) {
	b, err := NewRecvBatch(8)
	if err != nil {
		t.Skipf("io_uring is not available here: %v", err)
	}
	defer b.Close()
	if b.Cap() < 5 {
		t.Fatalf("Cap %d, want at least 5", b.Cap())
	}
	few, fewPeer := tcpPair(t)
	many, manyPeer := tcpPair(t)
	empty, _ := tcpPair(t)
	ended, endedPeer := tcpPair(t)
	reset, resetPeer := tcpPair(t)
	fewPeer.Write([]byte("hello"))
	big := bytes.Repeat([]byte("x"), 3000)
	manyPeer.Write(big)
	endedPeer.Close()
	// SO_LINGER 0: closing sends a reset.
	resetPeer.(*net.TCPConn).SetLinger(0)
	resetPeer.Close()
	waitReadable(t, few, many, ended, reset)

	bufs := make([][]byte, 5)
	for i := range bufs {
		bufs[i] = make([]byte, 1024)
	}
	for round := 0; round < 2; round++ {
		res := []int32{99, 99, 99, 99, 99}
		for i, fd := range []int{few, many, empty, ended, reset} {
			b.Add(fd, bufs[i])
		}
		if err := b.Run(res); err != nil {
			t.Fatal(err)
		}
		if round == 1 {
			// The second round: what is left of many, and nothing
			// (already read) or the end from the others.
			if res[1] != 1024 || res[2] != -int32(unix.EAGAIN) || res[3] != 0 {
				t.Fatalf("second round: %v, want [_ 1024 -EAGAIN 0 _]", res)
			}
			break
		}
		want := []int32{5, 1024, -int32(unix.EAGAIN), 0, -int32(unix.ECONNRESET)}
		for i := range want {
			if res[i] != want[i] {
				t.Fatalf("results %v, want %v", res, want)
			}
		}
		if string(bufs[0][:5]) != "hello" || !bytes.Equal(bufs[1], big[:1024]) {
			t.Fatalf("read %q and %q", bufs[0][:5], bufs[1][:8])
		}
	}
	// An empty Run is no call and no error.
	if err := b.Run(nil); err != nil {
		t.Fatal(err)
	}
}

// waitReadable waits until each fd is readable (or at its end).
func waitReadable(t *testing.T, fds ...int) {
	t.Helper()
	for _, fd := range fds {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if n, err := unix.Poll(pfd, 5000); n != 1 || err != nil {
			t.Fatalf("fd %d not readable: %d %v", fd, n, err)
		}
	}
}
