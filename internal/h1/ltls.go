package h1

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"github.com/helios-lb/helios/internal/netpoll"
)

// TLS on the loop. A TLS listener's connection is handshaken on a
// goroutine of its own (a handshake is the most CPU a connection ever
// costs at once, and runs in parallel with the loops), reading and
// writing the socket directly and waiting for the loop to say it is ready
// again; the loop does nothing else with the connection meanwhile. Then
// the connection serves HTTP like any other, the loop reading and writing
// through the tls.Conn: crypto/tls keeps a partial record when its socket
// has nothing more (the error is a temporary net.Error, which it does not
// remember), so its reads fit the loop's non-blocking ones.

// TLS is what a TLS listener's provider gives the engine
// (tlsconf.Provider implements it).
type TLS interface {
	// TLSConfig returns the configuration handshakes run with.
	TLSConfig() *tls.Config
	// HandshakeTimeout bounds a handshake; 0 means none.
	HandshakeTimeout() time.Duration
	// BeginHandshake reports whether another handshake may start now;
	// when it does, EndHandshake must follow.
	BeginHandshake() bool
	// EndHandshake ends what BeginHandshake began.
	EndHandshake()
	// Record counts a finished handshake.
	Record(cs tls.ConnectionState, err error)
}

// tlsSock is the net.Conn a connection's tls.Conn runs over (a client's,
// or a backend's): during the handshake it blocks its goroutine (waiting
// for the loop's word that the socket is ready); after it, on the loop,
// it is the connection's own non-blocking reader and writer.
type tlsSock struct {
	fr       *fdReader
	fw       *fdWriter
	remote   netip.AddrPort
	fd       int
	p        netpoll.Poller
	blocking bool
	// ready wakes the handshake when the loop sees the socket ready.
	ready  chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
}

// errNotYet is the temporary error the socket gives crypto/tls when it has
// nothing more for now (errWouldBlock to the loop).
var errNotYet = &notYet{}

type notYet struct{}

func (*notYet) Error() string   { return "h1: nothing to read yet" }
func (*notYet) Timeout() bool   { return false }
func (*notYet) Temporary() bool { return true }

func (s *tlsSock) Read(b []byte) (int, error) {
	if !s.blocking {
		n, err := s.fr.Read(b)
		if err == errWouldBlock {
			return n, errNotYet
		}
		return n, err
	}
	for {
		n, err := netpoll.Read(s.fd, b)
		switch {
		case err == unix.EINTR:
		case err == unix.EAGAIN:
			s.p.Drained(s.fd)
			if err := s.wait(); err != nil {
				return 0, err
			}
		case err != nil:
			return 0, err
		case n == 0:
			return 0, io.EOF
		default:
			return n, nil
		}
	}
}

func (s *tlsSock) Write(b []byte) (int, error) {
	if !s.blocking {
		return s.fw.Write(b)
	}
	total := 0
	for total < len(b) {
		n, err := netpoll.Write(s.fd, b[total:])
		switch {
		case err == unix.EINTR:
		case err == unix.EAGAIN:
			s.p.Blocked(s.fd)
			if err := s.wait(); err != nil {
				return total, err
			}
		case err != nil:
			return total, err
		default:
			total += n
		}
	}
	return total, nil
}

// wait blocks the handshake until the loop reports the socket ready, or
// the handshake's time is up (or the connection is closing).
func (s *tlsSock) wait() error {
	select {
	case <-s.ready:
		return nil
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
}

func (s *tlsSock) Close() error                     { return nil } // the loop closes the socket
func (s *tlsSock) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (s *tlsSock) RemoteAddr() net.Addr             { return net.TCPAddrFromAddrPort(s.remote) }
func (s *tlsSock) SetDeadline(time.Time) error      { return nil }
func (s *tlsSock) SetReadDeadline(time.Time) error  { return nil }
func (s *tlsSock) SetWriteDeadline(time.Time) error { return nil }

// startHandshake begins a TLS connection's handshake on a goroutine, or
// closes the connection when the listener's cap on handshakes in progress
// is reached.
func (c *lconn) startHandshake(t TLS) {
	if !t.BeginHandshake() {
		t.Record(tls.ConnectionState{}, errTooManyHandshakes)
		c.close()
		return
	}
	ctx := c.l.eng.ctx
	var cancel context.CancelFunc
	if d := t.HandshakeTimeout(); d > 0 {
		ctx, cancel = context.WithTimeout(ctx, d)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	s := &tlsSock{fr: &c.fr, fw: &c.fw, remote: c.remote, fd: c.fd, p: c.l.poller, blocking: true, ready: make(chan struct{}, 1), ctx: ctx, cancel: cancel}
	c.sock = s
	c.state = lsHandshake
	tc := tls.Server(s, t.TLSConfig())
	inc := c.inc
	l := c.l
	l.handshakesWoken = true
	go func() {
		err := tc.HandshakeContext(ctx)
		cancel()
		if !l.post(func() { c.handshaken(inc, t, tc, err) }) {
			t.EndHandshake()
		}
	}()
}

// alpnACME is the ALPN protocol of TLS-ALPN-01 validations.
const alpnACME = "acme-tls/1"

// errTooManyHandshakes refuses a connection past the cap on handshakes in
// progress.
var errTooManyHandshakes = errors.New("too many TLS handshakes in progress")

// handshaken takes a finished handshake back on the loop.
func (c *lconn) handshaken(inc uint32, t TLS, tc *tls.Conn, err error) {
	t.EndHandshake()
	cs := tc.ConnectionState()
	t.Record(cs, err)
	if inc != c.inc {
		return
	}
	// A TLS-ALPN-01 validation (RFC 8737) only proves the name: the CA
	// closes after the handshake, and nothing else may be spoken on it.
	if c.state == lsClosing || err != nil || cs.NegotiatedProtocol == alpnACME {
		c.state = lsHandshake
		c.sock.blocking = false
		c.close()
		return
	}
	c.sock.blocking = false
	c.tls = tc
	c.tlsVer = tlsVersionName(cs.Version)
	if cs.NegotiatedProtocol == "h2" {
		c.startH2(nil)
		return
	}
	c.state = lsIdle
	c.setDeadline(dlIdle, c.opts.IdleTimeout)
	// The client may have sent its request behind its Finished; it is
	// in tc's buffers, with no event to come for it.
	c.serveInput()
}

// handshakeEvent tells the handshake that the socket is ready.
func (c *lconn) handshakeEvent() {
	c.sock.wake()
	c.l.handshakesWoken = true
}

// wake tells a handshake waiting for the socket that it is ready.
func (s *tlsSock) wake() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// tlsSource reads a TLS connection's plaintext for the loop.
type tlsSource struct{ c *lconn }

func (s tlsSource) Read(p []byte) (int, error) {
	n, err := s.c.tls.Read(p)
	if err == errNotYet {
		return n, errWouldBlock
	}
	return n, err
}

// tlsSink writes a TLS connection's plaintext for the loop: records go to
// the connection's fdWriter, which keeps what the socket does not take.
type tlsSink struct{ c *lconn }

func (s tlsSink) Write(p []byte) (int, error) { return s.c.tls.Write(p) }

// src returns what the connection's plaintext is read from.
func (c *lconn) src() io.Reader {
	if c.h2s != nil {
		return h2src{c}
	}
	if c.tls != nil {
		return tlsSource{c}
	}
	return &c.fr
}

// sink returns what the connection's plaintext is written to.
func (c *lconn) sink() io.Writer {
	if c.tls != nil {
		return tlsSink{c}
	}
	return &c.fw
}

// maybeMore reports whether input may be waiting although no event said
// so: bytes the socket may still hold, or plaintext a tls.Conn decrypted
// and holds.
func (c *lconn) maybeMore() bool {
	if c.h2s != nil {
		return c.h2s.inR < len(c.h2s.in)
	}
	return !c.fr.drained || c.tls != nil
}
