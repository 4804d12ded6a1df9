package engine

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"github.com/helios-lb/helios/internal/netpoll"
	"github.com/helios-lb/helios/internal/tlsconf"
)

// TLS on the loop. A TLS listener's connection first waits on the loop
// for its client's first record, the ClientHello, read whole (and no
// further) into the connection's tlsSock: until then it costs a
// descriptor and a few bytes, holds no place among the listener's
// handshakes in progress, and is closed at the client hello timeout. Then
// the handshake runs on a goroutine of its own (a handshake is the most
// CPU a connection ever costs at once, and runs in parallel with the
// loops), reading the ClientHello from the tlsSock, then the socket
// directly, waiting for the loop to say it is ready again; the loop does
// nothing else with the connection meanwhile. The provider admits it
// (BeginHandshake), shedding the oldest handshake that waits for its
// client when its cap is reached. Then the connection serves HTTP like
// any other, the loop reading and writing through the tls.Conn: crypto/tls
// keeps a partial record when its socket has nothing more (the error is a
// temporary net.Error, which it does not remember), so its reads fit the
// loop's non-blocking ones.

// TLS is what a TLS listener's provider gives the engine
// (tlsconf.Provider implements it).
type TLS interface {
	// TLSConfig returns the configuration handshakes run with.
	TLSConfig() *tls.Config
	// ClientHelloTimeout bounds the wait for a client's ClientHello,
	// from the connection's accept; 0: HandshakeTimeout does.
	ClientHelloTimeout() time.Duration
	// HandshakeTimeout bounds a handshake, from the connection's accept;
	// 0 means none.
	HandshakeTimeout() time.Duration
	// BeginHandshake admits the handshake of a client whose ClientHello
	// has arrived; stop ends it early if it is shed to make room for
	// another. Nil: refused (counted); the connection is closed. Else
	// the Handshake's End must follow, however it ends.
	BeginHandshake(stop func()) *tlsconf.Handshake
	// NoHello counts a connection closed before its ClientHello arrived.
	NoHello()
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
	// hello is what the loop read of a client's ClientHello
	// (readHello), read first by the handshake.
	hello []byte
	// hs is a client's handshake in the provider's count (nil for a
	// backend's), told when it waits for its client.
	hs *tlsconf.Handshake
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
	if len(s.hello) > 0 {
		n := copy(b, s.hello)
		if s.hello = s.hello[n:]; len(s.hello) == 0 {
			s.hello = nil
		}
		return n, nil
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
			s.progress()
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
			s.progress()
			total += n
		}
	}
	return total, nil
}

// wait blocks the handshake until the loop reports the socket ready, or
// the handshake's time is up (or the connection is closing). A client's
// handshake counts as waiting for its client, and may be shed, from then
// until the socket moves bytes again (progress): a wake-up that finds
// nothing to read does not make a stalled handshake look busy.
func (s *tlsSock) wait() error {
	if s.hs != nil {
		s.hs.Waiting(true)
	}
	select {
	case <-s.ready:
		return nil
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
}

// progress says the socket moved bytes: the client's handshake is not
// waiting for its client.
func (s *tlsSock) progress() {
	if s.hs != nil {
		s.hs.Waiting(false)
	}
}

func (s *tlsSock) Close() error                     { return nil } // the loop closes the socket
func (s *tlsSock) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (s *tlsSock) RemoteAddr() net.Addr             { return net.TCPAddrFromAddrPort(s.remote) }
func (s *tlsSock) SetDeadline(time.Time) error      { return nil }
func (s *tlsSock) SetReadDeadline(time.Time) error  { return nil }
func (s *tlsSock) SetWriteDeadline(time.Time) error { return nil }

// awaitHello makes a newly accepted connection of a TLS listener wait for
// its client's ClientHello (readHello, at the connection's events).
func (c *lconn) awaitHello(t TLS) {
	c.sock = &tlsSock{fr: &c.fr, fw: &c.fw, remote: c.remote, fd: c.fd, p: c.l.poller}
	c.state = lsHello
	d, hd := t.ClientHelloTimeout(), t.HandshakeTimeout()
	if d <= 0 || hd > 0 && hd < d {
		d = hd
	}
	c.setDeadline(dlHello, d)
}

// TLS record framing (RFC 8446, section 5.1): a ClientHello comes in
// handshake records, whose body is at most 2^14 bytes.
const (
	recordHeaderLen     = 5
	recordTypeHandshake = 22
	maxRecordBody       = 1 << 14
)

// readHello reads a client's first TLS record, which holds its
// ClientHello, up to the record's end and no further, and starts the
// handshake once it is whole. Bytes that are no TLS handshake record
// start it at once: crypto/tls refuses them as it would anyway.
func (c *lconn) readHello() {
	s := c.sock
	for {
		need := recordHeaderLen
		if len(s.hello) >= recordHeaderLen {
			need += int(binary.BigEndian.Uint16(s.hello[3:5]))
		}
		if len(s.hello) > 0 && s.hello[0] != recordTypeHandshake || need > recordHeaderLen+maxRecordBody || len(s.hello) == need {
			c.startHandshake(c.opts.TLS)
			return
		}
		buf := c.l.scratch()[:need-len(s.hello)]
		n, err := netpoll.Read(c.fd, buf)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			c.l.poller.Drained(c.fd)
			return
		case err != nil || n == 0:
			c.noHello()
			return
		}
		s.hello = append(s.hello, buf[:n]...)
	}
}

// noHello closes a connection whose ClientHello did not come.
func (c *lconn) noHello() {
	c.opts.TLS.NoHello()
	c.close()
}

// closeWaitingIfDue closes, for a drain, a new connection that has
// waited freshGrace in vain for what it must send first (a ClientHello,
// a PROXY header): read takes what may have come since the last event,
// drop closes the connection (counted as its wait says); it reports
// whether c is closed.
func (c *lconn) closeWaitingIfDue(read, drop func()) bool {
	waiting := c.state
	read()
	if c.state == waiting && c.l.now-c.fresh >= int64(freshGrace) {
		drop()
	}
	return c.state == lsClosed
}

// startHandshake begins the handshake of a connection whose ClientHello
// has arrived, on a goroutine, or closes the connection when the provider
// refuses it.
func (c *lconn) startHandshake(t TLS) {
	ctx := c.l.eng.ctx
	var cancel context.CancelFunc
	if d := t.HandshakeTimeout(); d > 0 {
		ctx, cancel = context.WithDeadline(ctx, time.Unix(0, c.fresh+int64(d)))
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	h := t.BeginHandshake(cancel)
	if h == nil {
		cancel()
		c.close()
		return
	}
	s := c.sock
	s.hs, s.blocking, s.ready, s.ctx, s.cancel = h, true, make(chan struct{}, 1), ctx, cancel
	c.state = lsHandshake
	c.setDeadline(dlNone, 0) // ctx bounds the handshake
	tc := tls.Server(s, t.TLSConfig())
	inc := c.inc
	l := c.l
	l.handshakesWoken = true
	go func() {
		err := tc.HandshakeContext(ctx)
		cancel()
		if !l.post(func() { c.handshaken(inc, h, tc, err) }) {
			h.End(tc.ConnectionState(), err)
		}
	}()
}

// alpnACME is the ALPN protocol of TLS-ALPN-01 validations.
const alpnACME = "acme-tls/1"

// handshaken takes a finished handshake back on the loop.
func (c *lconn) handshaken(inc uint32, h *tlsconf.Handshake, tc *tls.Conn, err error) {
	cs := tc.ConnectionState()
	h.End(cs, err)
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
	c.sock.hs = nil
	c.tls = tc
	c.tlsVer = cs.Version
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

func (s tlsSink) Write(p []byte) (int, error) { return s.c.l.tlsWrite(s.c.tls, &s.c.fw, p) }

// tlsWrite writes p through tc, whose records go to fw. A plaintext of
// more than one record leaves in one system call, not one a record
// (crypto/tls writes each record to its conn on its own: a bulk
// download's 64 KiB of HTTP/2 frames left in five writes, four full
// records and a small one).
func (l *loop) tlsWrite(tc *tls.Conn, fw *fdWriter, p []byte) (int, error) {
	if len(p) <= tlsGatherSize {
		return tc.Write(p)
	}
	fw.gather(&l.tlsRecords)
	n, err := tc.Write(p)
	return n, endGather(fw, err)
}

// endGather sends what fw gathered since fw.gather; it returns err, or
// the send's error.
func endGather(fw *fdWriter, err error) error {
	if gerr := fw.endGather(); err == nil {
		return gerr
	}
	return err
}

// tlsGatherSize bounds what WriteVec gathers: one TLS record's
// plaintext.
const tlsGatherSize = 16 << 10

// WriteVec writes the slices of bufs in order (a head, a piece behind it
// and the framing that ends it) as one plaintext when they fit a record
// together, so that they leave in one record and one system call, not
// two or three (writer.Write, writer.WriteThen). The loop's gather
// buffer is used only here, during the call.
func (s tlsSink) WriteVec(bufs [][]byte) (int, error) {
	total := 0
	for _, p := range bufs {
		total += len(p)
	}
	if total <= tlsGatherSize {
		return writeTLSVec(s.c.tls.Write, &s.c.l.tlsGather, bufs)
	}
	s.c.fw.gather(&s.c.l.tlsRecords)
	n, err := writeTLSVec(s.c.tls.Write, &s.c.l.tlsGather, bufs)
	return n, endGather(&s.c.fw, err)
}

// writeTLSVec writes bufs through write (a tls.Conn's), gathered into
// one plaintext in *gather (made on first use) when they fit a record.
func writeTLSVec(write func([]byte) (int, error), gather *[]byte, bufs [][]byte) (int, error) {
	total := 0
	for _, p := range bufs {
		total += len(p)
	}
	if total > tlsGatherSize {
		for _, p := range bufs {
			if len(p) == 0 {
				continue
			}
			if _, err := write(p); err != nil {
				return 0, err
			}
		}
		return total, nil
	}
	if *gather == nil {
		*gather = make([]byte, tlsGatherSize)
	}
	g := *gather
	n := 0
	for _, p := range bufs {
		n += copy(g[n:], p)
	}
	if _, err := write(g[:n]); err != nil {
		return 0, err
	}
	return total, nil
}

// src returns what the connection's plaintext is read from.
func (c *lconn) src() io.Reader {
	return c.client().src(c)
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
	return c.client().maybeMore(c)
}
