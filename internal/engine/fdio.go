package engine

import (
	"errors"
	"io"
	"syscall"

	"github.com/helios-lb/helios/internal/netpoll"
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
	fd int
	// p is told when the socket is found drained (the portable poller
	// watches it again then).
	p       netpoll.Poller
	drained bool
	// rdhup: the peer has shut down its side; a short read then does not
	// prove there is nothing left (the EOF is), so drained is not trusted.
	rdhup bool
	// pre is what the loop's batched read took from the socket for this
	// reader and it has not read yet (preload.go); Read hands it out
	// first.
	pre *preRead
}

func (r *fdReader) Read(p []byte) (int, error) {
	if r.pre != nil {
		if n, err := r.readPre(p); n > 0 || err != nil {
			return n, err
		}
	}
	if r.drained && !r.rdhup {
		return 0, errWouldBlock
	}
	for {
		n, err := netpoll.Read(r.fd, p)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			r.drained = true
			r.p.Drained(r.fd)
			return 0, errWouldBlock
		case err != nil:
			return 0, &opError{op: "read", err: err}
		case n == 0:
			return 0, io.EOF
		}
		if n < len(p) {
			r.drained = true
			r.p.Drained(r.fd)
		}
		return n, nil
	}
}

// fdWriter writes a non-blocking socket. What the socket does not take
// now is kept in pending, and the loop writes it out when the socket is
// writable again (EPOLLOUT). Writes never block and never fail for lack
// of room; the loop stops producing while pending is large.
type fdWriter struct {
	fd int
	// p is told when a write leaves bytes over (the portable poller
	// watches for room then).
	p       netpoll.Poller
	pending []byte
	// A file range queued behind pending, sent with sendfile(2): file is
	// its descriptor (-1 for none), from fileOff up to fileEnd.
	file             int
	fileOff, fileEnd int64
	// sent counts bytes handed to the kernel (since its owner last
	// zeroed it).
	sent int64
	// more marks the next write as followed at once by more (a file),
	// so the kernel holds it for one segment with what follows.
	more bool
	// gathering, while set (gather), collects what is written instead of
	// writing it, for endGather to send in one system call.
	gathering *[]byte
}

// gather makes the writes up to endGather collect in *buf (empty; the
// loop's, reused) rather than leave one system call each: a tls.Conn
// writes each record of a large plaintext on its own. With bytes
// pending, writes are kept behind them as always.
func (w *fdWriter) gather(buf *[]byte) {
	w.gathering = buf
}

// endGather sends what gather collected, in one write; what the socket
// does not take is kept in pending, as Write keeps it.
func (w *fdWriter) endGather() error {
	g := w.gathering
	w.gathering = nil
	b := *g
	*g = b[:0]
	if len(b) == 0 {
		return nil
	}
	n, err := writeFD(w.fd, b)
	w.sent += int64(n)
	if err != nil {
		return err
	}
	if n < len(b) {
		w.keep(b[n:])
		w.p.Blocked(w.fd)
	}
	return nil
}

// queueFile queues bytes [off, end) of the open file fd behind what is
// pending; flushPending sends them. Nothing may be written after it until
// it is done (fileLeft reports false).
func (w *fdWriter) queueFile(fd int, off, end int64) {
	w.file, w.fileOff, w.fileEnd = fd, off, end
}

// fileLeft reports whether a queued file range is still being sent.
func (w *fdWriter) fileLeft() bool { return w.file >= 0 && w.fileOff < w.fileEnd }

// busy reports whether anything waits to be written.
func (w *fdWriter) busy() bool { return len(w.pending) > 0 || w.fileLeft() }

func (w *fdWriter) Write(p []byte) (int, error) {
	if len(w.pending) > 0 {
		w.keep(p)
		return len(p), nil
	}
	if w.gathering != nil {
		*w.gathering = append(*w.gathering, p...)
		return len(p), nil
	}
	var (
		n   int
		err error
	)
	if w.more {
		w.more = false
		n, err = writeFDMore(w.fd, p)
	} else {
		n, err = writeFD(w.fd, p)
	}
	w.sent += int64(n)
	if err != nil {
		return n, err
	}
	if n < len(p) {
		w.keep(p[n:])
		w.p.Blocked(w.fd)
	}
	return len(p), nil
}

// WriteVec writes the slices of bufs in order (any may be empty), in one
// writev(2) when nothing is pending (of up to netpoll.MaxWritev slices);
// what the socket does not take is kept as Write keeps it. The buffered
// writer uses it to send its buffered bytes with large pieces, and the
// framing around them, together. It returns how many bytes it took: all
// of them, or none with an error.
func (w *fdWriter) WriteVec(bufs [][]byte) (int, error) {
	total := 0
	for _, p := range bufs {
		total += len(p)
	}
	if len(w.pending) > 0 {
		for _, p := range bufs {
			w.keep(p)
		}
		return total, nil
	}
	w.more = false
	var n int
	for {
		var err error
		n, err = netpoll.Writev(w.fd, bufs)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			n = 0
		case err != nil:
			return 0, &opError{op: "write", err: err}
		}
		break
	}
	w.sent += int64(n)
	if n >= total {
		return total, nil
	}
	// A short write: go on as Write does, until the socket says EAGAIN
	// (which is what arms the wake-up when there is room again); once
	// bytes are pending, Write keeps the rest behind them.
	for _, p := range bufs {
		if n >= len(p) {
			n -= len(p)
			continue
		}
		if _, err := w.Write(p[n:]); err != nil {
			return 0, err
		}
		n = 0
	}
	return total, nil
}

// writeFDMore writes p with MSG_MORE, then as writeFD what is left.
func writeFDMore(fd int, p []byte) (int, error) {
	for {
		n, err := netpoll.WriteMore(fd, p)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return 0, nil
		case err != nil:
			return 0, &opError{op: "write", err: err}
		case n < len(p):
			m, err := writeFD(fd, p[n:])
			return n + m, err
		}
		return n, nil
	}
}

// keep appends p to pending, growing it by what is needed rather than by
// append's doubling: what waits for a slow client is bounded by the
// producer's limit, and the room it takes should be too.
func (w *fdWriter) keep(p []byte) {
	need := len(w.pending) + len(p)
	if need > cap(w.pending) {
		nb := make([]byte, len(w.pending), max(need, min(2*cap(w.pending), need+writeBufSize)))
		copy(nb, w.pending)
		w.pending = nb
	}
	w.pending = append(w.pending, p...)
}

// flushPending writes what is pending, then any queued file range; it
// reports whether nothing is left.
func (w *fdWriter) flushPending() (bool, error) {
	if len(w.pending) == 0 {
		return w.sendFile()
	}
	n, err := writeFD(w.fd, w.pending)
	w.sent += int64(n)
	if err != nil {
		return false, err
	}
	if n == len(w.pending) {
		w.pending = w.pending[:0]
		return w.sendFile()
	}
	m := copy(w.pending, w.pending[n:])
	w.pending = w.pending[:m]
	w.p.Blocked(w.fd)
	return false, nil
}

// sendFile sends what it can of the queued file range; it reports
// whether the range is done.
func (w *fdWriter) sendFile() (bool, error) {
	for w.fileLeft() {
		n, err := netpoll.Sendfile(w.fd, w.file, &w.fileOff, int(min(w.fileEnd-w.fileOff, 1<<30)))
		w.sent += int64(max(n, 0))
		switch {
		case err == syscall.EINTR:
		case err == syscall.EAGAIN:
			w.p.Blocked(w.fd)
			return false, nil
		case err != nil:
			return false, &opError{op: "write", err: err}
		case n == 0:
			// The file is shorter than promised (truncated meanwhile).
			return false, &opError{op: "sendfile", err: io.ErrUnexpectedEOF}
		}
	}
	w.file = -1
	return true, nil
}

// writeFD writes as much of p as the socket takes now; EAGAIN is not an
// error (the count says how much went).
func writeFD(fd int, p []byte) (int, error) {
	total := 0
	for total < len(p) {
		n, err := netpoll.Write(fd, p[total:])
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
