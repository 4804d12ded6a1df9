package engine

import (
	"io"
	"syscall"

	"github.com/helios-lb/helios/internal/netpoll"
)

// Batched reads. On the io_uring poller (netpoll.KindURing) a loop reads
// the sockets of a batch of events in one system call before it hands
// the events to their connections: one io_uring_enter for the batch
// instead of one read(2) a socket, each of which costs about 1 µs of
// entry and exit alone on the machines this project is measured on
// (docs/performance.md, "Batched reads"). Only a connection that reads
// its socket through its fdReader as soon as it has the event is read
// ahead (preReader): an HTTP/1.1 client between requests and an HTTP/2
// client, over TLS (after the handshake) or not, and an HTTP/1.1 backend
// connection whose answer is awaited or coming. What it is given waits
// in its fdReader (pre), which hands it out before it reads the socket
// again; what a connection has not taken when the batch is done is
// copied out of the loop's buffer (unload).

// preSlot is the most a batched read takes of one socket: a request
// head or an answer's first piece; a connection that wants more reads
// the rest itself.
const preSlot = 2 << 10

// preRead is what a batched read gave a socket, not yet read by its
// connection: bytes, then, once they are taken, the end of the stream or
// an error (err), or the knowledge that the socket had nothing more
// (short: the read took less than it asked).
type preRead struct {
	b     []byte
	err   error
	short bool
}

// preloader is a loop's batched reads: the ring, the buffer the reads
// land in (preSlot a socket), their results and the readers given them.
type preloader struct {
	// on: the loop batches its reads (the ring may have failed since:
	// then rb is nil and preload only keeps earlier reads right).
	on    bool
	rb    *netpoll.RecvBatch
	buf   []byte
	res   []int32
	reads []preRead
	rds   []*fdReader
}

// batchSize is how many sockets one batched read takes at most (the
// rest of a larger batch of events read their sockets themselves).
const batchSize = 64

// newPreloader sets up batched reads for a loop of the io_uring poller;
// it returns the zero preloader (no batched reads) and why where the
// kernel refuses io_uring.
func newPreloader() (preloader, error) {
	rb, err := netpoll.NewRecvBatch(batchSize)
	if err != nil {
		return preloader{}, err
	}
	n := min(rb.Cap(), batchSize)
	return preloader{on: true, rb: rb, buf: make([]byte, n*preSlot), res: make([]int32, n), reads: make([]preRead, n)}, nil
}

// close releases the ring.
func (p *preloader) close() {
	if p.rb != nil {
		p.rb.Close()
		p.rb = nil
	}
}

// preReader returns the fdReader of the connection t (nil for another
// target), and whether t will read its socket through it as soon as it
// is given an In event. Connections that read their socket another way
// are not read ahead: a TLS client before and during its handshake (the
// ClientHello and the handshake read the socket directly), a PROXY
// header still to come, a tunnel, a connection to an HTTP/2 backend; and
// neither are HTTP/1.1 connections in the middle of an exchange, which
// may not read now.
func preReader(t target) (*fdReader, bool) {
	switch t := t.(type) {
	case *lconn:
		// lsIdle comes after a TLS handshake, never during it; lsH2's
		// session reads every frame through its source. (An HTTP/2
		// stream's lconn has no socket: its fdReader's fd is -1.)
		return &t.fr, t.state == lsIdle || t.state == lsH2
	case *lupconn:
		// The stream role has no socket either (fd -1).
		return &t.fr, (t.state == upWaitHead || t.state == upBody) && !t.tls.handshaking()
	}
	return nil, false
}

// preload reads, in one system call, the sockets of events whose
// connections preReader accepts.
func (l *loop) preload(events []netpoll.Event) {
	p := &l.pre
	for i := range events {
		ev := &events[i]
		if ev.Events&(evIn|evRdHup|evHup|evErr) == 0 {
			continue
		}
		fd := int(ev.FD)
		if fd < 0 || fd >= len(l.targets) || l.targets[fd] == nil || l.tags[fd] != ev.Tag {
			continue
		}
		r, now := preReader(l.targets[fd])
		switch {
		case r == nil || r.fd < 0:
			continue
		case r.pre != nil:
			// Read ahead earlier and not all taken yet; more has come
			// since, so the socket is not known to be drained.
			r.pre.short = false
			continue
		case !now || ev.Events&evIn == 0 || p.rb == nil || len(p.rds) == len(p.res):
			continue
		}
		k := len(p.rds)
		p.rb.Add(fd, p.buf[k*preSlot:(k+1)*preSlot])
		p.rds = append(p.rds, r)
	}
	if len(p.rds) == 0 {
		return
	}
	if err := p.rb.Run(p.res[:len(p.rds)]); err != nil {
		// What completed is taken below; from now on each connection
		// reads its socket itself.
		l.logf("io_uring_enter failed; the loop reads each socket with read(2) from now on", err)
		p.rb.Close()
		p.rb = nil
	}
	read := 0
	for k, r := range p.rds {
		n := p.res[k]
		pr := &p.reads[k]
		*pr = preRead{}
		switch {
		case n > 0:
			pr.b = p.buf[k*preSlot : k*preSlot+int(n)]
			pr.short = int(n) < preSlot
		case n == 0:
			pr.err = io.EOF
		case n == -int32(syscall.EAGAIN) || n == -int32(syscall.EINTR) || n == -int32(syscall.EINVAL) || n == -int32(syscall.EOPNOTSUPP):
			// Nothing read (a late event; or a receive the ring would
			// not do): the connection reads and finds out itself.
			continue
		default:
			pr.err = &opError{op: "read", err: syscall.Errno(-n)}
		}
		r.pre = pr
		read++
	}
	l.eng.batchedReads.Add(uint64(read))
}

// unload copies what the batch's connections did not take of their
// batched reads out of the loop's buffer, which the next batch reuses.
func (l *loop) unload() {
	p := &l.pre
	for k, r := range p.rds {
		if r.pre == &p.reads[k] {
			pr := *r.pre
			pr.b = append([]byte(nil), pr.b...)
			r.pre = &pr
		}
	}
	p.rds = p.rds[:0]
}

// readPre hands out what a batched read gave r (see fdReader.Read): its
// bytes, then its end or error; (0, nil) once nothing is left of it.
func (r *fdReader) readPre(p []byte) (int, error) {
	pr := r.pre
	if len(pr.b) == 0 {
		r.pre = nil
		return 0, pr.err
	}
	n := copy(p, pr.b)
	pr.b = pr.b[n:]
	if len(pr.b) > 0 || pr.err != nil {
		return n, nil
	}
	r.pre = nil
	if pr.short {
		r.drained = true
		r.p.Drained(r.fd)
	}
	return n, nil
}
