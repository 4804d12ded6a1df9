package engine

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"

	"github.com/helios-lb/helios/internal/wire"
)

// TLS to backends. Once the connect is done, a backend connection's
// handshake runs on a goroutine of its own, as a client's does
// (tls.go): the socket blocks that goroutine until the loop says it is
// ready, and the loop does nothing else with the connection meanwhile.
// Then the loop reads and writes through the tls.Conn, non-blocking.

// upTLS is a backend connection's TLS state.
type upTLS struct {
	sock *tlsSock
	tc   *tls.Conn
	// closing: the connection was closed while its handshake ran; the
	// socket is closed when the handshake goroutine is done with it.
	closing bool
}

// handshaking reports whether the handshake's goroutine has the socket.
func (t *upTLS) handshaking() bool { return t.sock != nil && t.sock.blocking }

// startUpTLS begins the handshake of a backend connection whose connect
// is done; done runs on the loop with the result (the connection
// state has been checked against the transport's ALPN).
func (l *loop) startUpTLS(t *upTLS, fd int, fr *fdReader, fw *fdWriter, tr *wire.Transport, addr string, done func(err error)) {
	ctx := l.eng.ctx
	var cancel context.CancelFunc
	if d := tr.Settings.DialTimeout; d > 0 {
		ctx, cancel = context.WithTimeout(ctx, d)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	t.sock = &tlsSock{fr: fr, fw: fw, fd: fd, p: l.poller, blocking: true, ready: make(chan struct{}, 1), ctx: ctx, cancel: cancel}
	t.tc = tls.Client(t.sock, tr.TLS.Config(addr))
	tc, ctls := t.tc, tr.TLS
	l.handshakesWoken = true
	go func() {
		err := tc.HandshakeContext(ctx)
		cancel()
		if err == nil {
			err = ctls.CheckALPN(tc.ConnectionState())
		}
		if err != nil {
			err = fmt.Errorf("%w: TLS handshake with %s: %w", wire.ErrConnect, addr, err)
		}
		l.post(func() {
			t.sock.blocking = false
			// The handshake's goroutine may have taken the socket's last
			// readiness report without reading it dry (its last read
			// returned a record): a poller that reports a socket again
			// only once told it is drained (the portable one) would then
			// never report the answer. Have it look again; a socket with
			// nothing to read is simply watched.
			t.sock.fr.drained = false
			l.poller.Drained(fd)
			done(err)
		})
	}()
}

// abort stops a handshake under way; reports whether the socket must
// wait for its goroutine before it is closed (done then closes it).
func (t *upTLS) abort() bool {
	if !t.handshaking() {
		return false
	}
	t.closing = true
	t.sock.cancel()
	return true
}

// tlsUpSource reads a backend's plaintext through its tls.Conn for the
// loop.
type tlsUpSource struct{ tc *tls.Conn }

func (s tlsUpSource) Read(p []byte) (int, error) {
	n, err := s.tc.Read(p)
	if err == errNotYet {
		return n, errWouldBlock
	}
	return n, err
}

// tlsUpSink writes a backend's plaintext through its tls.Conn: the
// records go to the connection's fdWriter, which keeps what the socket
// does not take.
type tlsUpSink struct{ u *lupconn }

func (s tlsUpSink) Write(p []byte) (int, error) { return s.u.l.tlsWrite(s.u.tls.tc, &s.u.fw, p) }

// needsTLS reports whether the connection is still to be handshaken.
func (u *lupconn) needsTLS() bool {
	return u.pool.opts.TLS && u.pool.local == nil && u.tls.tc == nil
}

// startTLS handshakes a backend connection whose connect is done, for
// c's request, which goes on once it is done.
func (u *lupconn) startTLS(c *lconn) {
	fd := u.fd
	if u.pp != nil {
		err := writeProxyHeader(fd, u.pp, u.pool.addr)
		u.pp = nil
		if err != nil {
			c.upFailed(err, false)
			return
		}
	}
	u.l.startUpTLS(&u.tls, fd, &u.fr, &u.fw, c.tr, u.pool.addr, func(err error) {
		switch {
		case u.tls.closing:
			u.l.closeFD(fd) // closed meanwhile: the socket is ours again
		case u.state == upClosed:
		case u.client != c || c.up != u || c.state != lsForward:
			u.close()
		case err != nil:
			u.tls.tc = nil
			c.upFailed(err, false)
		default:
			u.state = upIdle
			c.sendRequest()
		}
	})
}

// src returns what the backend's answer is read from.
func (u *lupconn) src() io.Reader {
	if u.tls.tc != nil {
		return tlsUpSource{u.tls.tc}
	}
	return &u.fr
}

// sink returns what the request is written to.
func (u *lupconn) sink() io.Writer {
	if u.tls.tc != nil {
		return tlsUpSink{u}
	}
	return &u.fw
}

// busy reports whether some of the request still waits to go out.
func (u *lupconn) busy() bool { return u.fw.busy() || u.tfile != nil }

// fileLeft reports whether a file range of the request is still going
// out (sendfile, or over TLS read back and encrypted).
func (u *lupconn) fileLeft() bool { return u.fw.fileLeft() || u.tfile != nil }

// flushPending writes out what is pending for the backend, then, over
// TLS, what the socket takes of a queued file range; it reports whether
// nothing is left.
func (u *lupconn) flushPending() (bool, error) {
	done, err := u.fw.flushPending()
	if err != nil || !done || u.tfile == nil {
		return done, err
	}
	buf := u.l.scratch()
	for len(u.fw.pending) <= defaultOutputBufferBytes {
		if u.tfileOff >= u.tfileEnd {
			u.tfile = nil
			return !u.fw.busy(), nil
		}
		n, err := u.tfile.ReadAt(buf[:min(int64(len(buf)), u.tfileEnd-u.tfileOff)], u.tfileOff)
		if n > 0 {
			if _, werr := u.tls.tc.Write(buf[:n]); werr != nil {
				return false, werr
			}
			u.tfileOff += int64(n)
		}
		if err != nil && u.tfileOff < u.tfileEnd {
			return false, errFileShort(err)
		}
	}
	return false, nil
}
