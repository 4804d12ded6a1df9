package h1

import (
	"errors"
	"io"
	"syscall"
	"unsafe"
)

// errWouldBlock is returned by the event loop's non-blocking sources when
// a socket has nothing more to read now. Readers pass it up unremembered;
// the loop resumes the work when the socket is readable again.
var errWouldBlock = errors.New("h1: would block")

// fdReader reads a non-blocking socket. Under edge-triggered epoll a read
// that returns less than asked means the socket is drained, so the next
// read is skipped (no EAGAIN syscall) until the loop sees readiness again
// and clears drained.
type fdReader struct {
	fd      int
	drained bool
	// rdhup: the peer has shut down its side; a short read then does not
	// prove there is nothing left (the EOF is), so drained is not trusted.
	rdhup bool
}

func (r *fdReader) Read(p []byte) (int, error) {
	if r.drained && !r.rdhup {
		return 0, errWouldBlock
	}
	for {
		n, err := rawRead(r.fd, p)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			r.drained = true
			return 0, errWouldBlock
		case err != nil:
			return 0, &opError{op: "read", err: err}
		case n == 0:
			return 0, io.EOF
		}
		if n < len(p) {
			r.drained = true
		}
		return n, nil
	}
}

// fdWriter writes a non-blocking socket. What the socket does not take
// now is kept in pending, and the loop writes it out when the socket is
// writable again (EPOLLOUT). Writes never block and never fail for lack
// of room; the loop stops producing while pending is large.
type fdWriter struct {
	fd      int
	pending []byte
	// sent counts bytes handed to the kernel (since its owner last
	// zeroed it).
	sent int64
}

func (w *fdWriter) Write(p []byte) (int, error) {
	if len(w.pending) > 0 {
		w.pending = append(w.pending, p...)
		return len(p), nil
	}
	n, err := writeFD(w.fd, p)
	w.sent += int64(n)
	if err != nil {
		return n, err
	}
	if n < len(p) {
		w.pending = append(w.pending[:0], p[n:]...)
	}
	return len(p), nil
}

// flushPending writes what is pending; it reports whether nothing is left.
func (w *fdWriter) flushPending() (bool, error) {
	if len(w.pending) == 0 {
		return true, nil
	}
	n, err := writeFD(w.fd, w.pending)
	w.sent += int64(n)
	if err != nil {
		return false, err
	}
	if n == len(w.pending) {
		w.pending = w.pending[:0]
		return true, nil
	}
	m := copy(w.pending, w.pending[n:])
	w.pending = w.pending[:m]
	return false, nil
}

// writeFD writes as much of p as the socket takes now; EAGAIN is not an
// error (the count says how much went).
func writeFD(fd int, p []byte) (int, error) {
	total := 0
	for total < len(p) {
		n, err := rawWrite(fd, p[total:])
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return total, nil
		case err != nil:
			return total, &opError{op: "write", err: err}
		}
		total += n
	}
	return total, nil
}

// opError says which socket operation failed, so errors can be told
// apart the way net.OpError allows (client side versus backend side).
type opError struct {
	op  string
	err error
}

func (e *opError) Error() string { return e.op + ": " + e.err.Error() }
func (e *opError) Unwrap() error { return e.err }

// rawRead and rawWrite make the system call without telling the Go
// scheduler: the sockets are non-blocking, so the call cannot block, and
// skipping the scheduler's syscall bookkeeping keeps it from handing the
// loop's P to another thread in the middle of a busy loop.
func rawRead(fd int, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r, _, e := syscall.RawSyscall(syscall.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

func rawWrite(fd int, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// rawClose closes a socket descriptor (no linger is set, so it cannot
// block) without the scheduler's bookkeeping.
func rawClose(fd int) {
	syscall.RawSyscall(syscall.SYS_CLOSE, uintptr(fd), 0, 0)
}
