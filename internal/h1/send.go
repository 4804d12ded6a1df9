package h1

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/helios-lb/helios/internal/wire"
)

// Send streams the backend's response to the client.
func (u *upExchange) Send() (int64, error) {
	c := u.c
	r := &u.resp
	if c.respStarted {
		u.finish(false)
		return 0, errors.New("h1: response already started")
	}
	if r.status == 101 {
		return u.tunnel()
	}
	c.respStarted = true
	c.respStatus = r.status
	c.ensureWriter()
	c.armWrite() // large heads are written through, before copyBody arms
	w := &c.wr

	bodyOut, chunkOut, closeAfter := framing(&c.req, r)
	if closeAfter {
		c.closeAfter = true
	}
	writeResponseHead(w, r, chunkOut)
	c.writeConnectionHeader()
	w.WriteString("\r\n")

	var (
		n    int64
		err  error
		done bool
	)
	if bodyOut {
		n, err = u.copyBody(chunkOut)
		done = err == nil
	} else {
		done = true
		u.body.done = true
	}
	c.respBytes = n
	intact, perr := u.waitPump()
	if perr != nil && err == nil {
		// The response made it but the request body did not; the client
		// connection is already marked broken by waitPump if needed.
		if errors.Is(perr, wire.ErrClientGone) || errors.Is(perr, wire.ErrBadRequest) {
			c.broken = true
		}
	}
	if w.err != nil && err == nil {
		err = fmt.Errorf("%w: %w", wire.ErrClientGone, w.err)
	}
	if err != nil {
		c.broken = true
	}
	// A backend connection whose request body was cut short (and which
	// the pump may have closed) must not go back to the pool.
	u.finish(done && intact && r.keepAlive && u.body.done)
	return n, err
}

// framing chooses how a response goes to the client that sent req:
// whether it has a body, whether that body is chunked by us, and whether
// the connection must close after it (an HTTP/1.0 client cannot take
// chunks, so an unframed body runs to the close).
func framing(req *request, r *response) (bodyOut, chunkOut, closeAfter bool) {
	bodyOut = !(equalFold(req.method, "head") || r.status < 200 || r.status == 204 || r.status == 304)
	if bodyOut && (r.chunked || r.untilClose) {
		if req.minor == 1 {
			chunkOut = true
		} else {
			closeAfter = true
		}
	}
	return
}

// writeResponseHead renders a backend's response head for the client,
// without the Connection field and the final empty line: status line,
// end-to-end fields (hop-by-hop dropped), and our own framing.
func writeResponseHead(w *writer, r *response, chunkOut bool) {
	w.WriteString("HTTP/1.1 ")
	if w.reserve(4) {
		w.buf[w.n] = byte('0' + r.status/100)
		w.buf[w.n+1] = byte('0' + r.status/10%10)
		w.buf[w.n+2] = byte('0' + r.status%10)
		w.buf[w.n+3] = ' '
		w.n += 4
	}
	w.Write(r.reason)
	w.WriteString("\r\n")
	for i := range r.hdr.fields {
		f := &r.hdr.fields[i]
		if f.drop {
			continue
		}
		switch f.kind {
		case kConnection, kKeepAlive, kProxy, kTE, kUpgrade, kTransferEncoding:
			continue
		case kTrailer:
			if !chunkOut {
				continue
			}
		case kContentLength:
			if r.chunked || r.untilClose {
				// Transfer-Encoding won (a length comes with an until-close
				// body only next to one); the length is not to be trusted,
				// and must not go out next to our own chunked encoding.
				continue
			}
		}
		w.field(f.name, f.value)
	}
	if chunkOut {
		w.WriteString("Transfer-Encoding: chunked\r\n")
	}
}

// copyBody copies the response body to the client, re-chunking it when
// chunkOut is set.
func (u *upExchange) copyBody(chunkOut bool) (int64, error) {
	c := u.c
	w := &c.wr
	var n int64
	for {
		if u.body.kind == bodyFixed && u.body.remaining >= spliceThreshold && len(u.uc.rd.buffered()) == 0 {
			m, err := u.spliceRest()
			return n + m, err
		}
		p, err := u.body.next()
		if len(p) > 0 {
			n += int64(len(p))
			c.armWrite()
			if chunkOut {
				w.writeHex(int64(len(p)))
				w.WriteString("\r\n")
			}
			w.Write(p)
			if chunkOut {
				w.WriteString("\r\n")
			}
			if w.err != nil {
				return n, fmt.Errorf("%w: %w", wire.ErrClientGone, w.err)
			}
			// Stream: a response that is still arriving leaves the
			// buffer when the backend pauses, not at the end.
			if !u.body.done && len(u.uc.rd.buffered()) == 0 && w.buffered() > 0 {
				if !c.wrFlush() {
					return n, fmt.Errorf("%w: %w", wire.ErrClientGone, w.err)
				}
			}
		}
		if err == io.EOF {
			if chunkOut {
				w.WriteString("0\r\n")
				w.Write(u.body.trailer)
				w.WriteString("\r\n")
			}
			return n, nil
		}
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return n, fmt.Errorf("%w: reading response body: %w", wire.ErrTimeout, err)
			}
			return n, fmt.Errorf("%w: reading response body: %w", wire.ErrBackend, err)
		}
	}
}

// wrFlush flushes the client writer, keeping the write deadline armed.
func (c *conn) wrFlush() bool {
	c.armWrite()
	return c.wr.flush() == nil
}

// spliceRest moves the rest of a large fixed-length body from the backend
// socket to the client socket. On Linux, TCPConn.ReadFrom uses splice(2)
// for a LimitedReader over a TCPConn, so the bytes never enter user space
// and memory stays flat for any size.
func (u *upExchange) spliceRest() (int64, error) {
	c := u.c
	if !c.wrFlush() {
		return 0, fmt.Errorf("%w: %w", wire.ErrClientGone, c.wr.err)
	}
	dst, ok1 := c.nc.(*net.TCPConn)
	src, ok2 := u.uc.nc.(*net.TCPConn)
	rem := u.body.remaining
	var (
		n   int64
		err error
	)
	if ok1 && ok2 {
		// Deadlines are re-armed per step, and a step must be small: a
		// deadline armed at its start covers the whole step, waits for
		// the client included (once passed, it fails even reads that
		// would not block). With 4 MiB steps a client slower than 4 MiB
		// per ReadTimeout lost its download to a "backend timeout".
		for rem > 0 && err == nil {
			step := min(rem, spliceStep)
			if u.body.touch != nil {
				u.body.touch()
			}
			c.armWrite()
			var m int64
			m, err = dst.ReadFrom(&io.LimitedReader{R: src, N: step})
			n += m
			rem -= m
			if m == 0 && err == nil {
				err = io.ErrUnexpectedEOF
			}
		}
	} else {
		bp := c.srv.writeBufs.Get().(*[]byte)
		n, err = io.CopyBuffer(writerOnly{c.nc}, &io.LimitedReader{R: u.uc.nc, N: rem}, *bp)
		c.srv.writeBufs.Put(bp)
		rem -= n
		if err == nil && rem > 0 {
			err = io.ErrUnexpectedEOF
		}
	}
	u.body.remaining = rem
	u.body.read += n
	if rem == 0 {
		u.body.done = true
	}
	if err != nil {
		// Which side failed? A write error is the client's, a read error
		// the backend's; ReadFrom does not say, so ask the sockets.
		if isClientSide(err) {
			return n, fmt.Errorf("%w: %w", wire.ErrClientGone, err)
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return n, fmt.Errorf("%w: reading response body: %w", wire.ErrTimeout, err)
		}
		return n, fmt.Errorf("%w: reading response body: %w", wire.ErrBackend, err)
	}
	return n, nil
}

// spliceStep is how much spliceRest moves between deadline updates: a
// client must take it within ReadTimeout and WriteTimeout (at 256 KiB and
// the 60 s defaults, about 4 KB/s).
const spliceStep = 256 << 10

// isClientSide reports errors that come from writing to the client.
func isClientSide(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) {
		return op.Op == "write" || op.Op == "readfrom" && (errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET))
	}
	return errors.Is(err, syscall.EPIPE)
}

func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// writerOnly hides ReadFrom so io.CopyBuffer uses the buffer.
type writerOnly struct{ io.Writer }

// tunnel completes a protocol switch (WebSocket and other upgrades): the
// 101 goes to the client, then bytes flow both ways until either side
// closes. The client connection is not used for HTTP again.
func (u *upExchange) tunnel() (int64, error) {
	c := u.c
	r := &u.resp
	if !c.req.upgrade {
		u.finish(false)
		return 0, fmt.Errorf("%w: 101 Switching Protocols to a request without Upgrade", wire.ErrBackend)
	}
	c.respStarted = true
	c.respStatus = 101
	c.hijacked = true
	c.ensureWriter()
	w := &c.wr
	w.WriteString("HTTP/1.1 101 Switching Protocols\r\n")
	for i := range r.hdr.fields {
		f := &r.hdr.fields[i]
		if f.drop {
			continue
		}
		switch f.kind {
		case kConnection, kKeepAlive, kProxy, kTE, kTransferEncoding, kContentLength:
			continue
		}
		w.field(f.name, f.value)
	}
	w.WriteString("Connection: Upgrade\r\n\r\n")
	uc := u.uc
	u.uc = nil
	c.armWrite()
	if err := w.flush(); err != nil {
		uc.close()
		return 0, fmt.Errorf("%w: %w", wire.ErrClientGone, err)
	}
	// Upgraded connections may idle for long: no deadlines, TCP keep-alive
	// notices dead peers.
	c.nc.SetDeadline(time.Time{})
	uc.nc.SetDeadline(time.Time{})

	var wg sync.WaitGroup
	var down int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Backend to client: first what is already buffered.
		if b := uc.rd.buffered(); len(b) > 0 {
			m, err := c.nc.Write(b)
			down += int64(m)
			uc.rd.discard(len(b))
			if err != nil {
				closeWrite(uc.nc)
				return
			}
		}
		m, _ := io.Copy(c.nc, uc.nc)
		down += m
		closeWrite(c.nc)
		// The backend is done; give the client a while to finish its side.
		c.nc.SetReadDeadline(time.Now().Add(tunnelLinger))
	}()
	// Client to backend, on this goroutine.
	if b := c.rd.buffered(); len(b) > 0 {
		uc.nc.Write(b)
		c.rd.discard(len(b))
	}
	io.Copy(uc.nc, c.nc)
	closeWrite(uc.nc)
	uc.nc.SetReadDeadline(time.Now().Add(tunnelLinger))
	wg.Wait()
	uc.close()
	c.respBytes = down
	return down, nil
}

// tunnelLinger is how long one direction of a tunnel may go on after the
// other has closed.
const tunnelLinger = 30 * time.Second

func closeWrite(nc net.Conn) {
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.CloseWrite()
		return
	}
	nc.Close()
}

// writeFixedHead renders the head of an answer with a fixed body: status
// line, Date, the caller's header lines and Content-Length. RFC 9110
// §8.6: no Content-Length in a 1xx or 204 answer; in a 304 it would
// describe the representation, not this body. The caller adds its
// Connection header and the blank line.
func writeFixedHead(w *writer, statusLine, dateLine, header []byte, status, bodyLen int) {
	w.Write(statusLine)
	w.Write(dateLine)
	w.Write(header)
	if fixedBodyAllowed(status) {
		w.WriteString("Content-Length: ")
		w.writeInt(int64(bodyLen))
		w.WriteString("\r\n")
	}
}

// writeFixedBody writes body unless the status or a HEAD request has
// none, and returns the bytes it wrote.
func writeFixedBody(w *writer, status int, method, body []byte) int64 {
	if !fixedBodyAllowed(status) || equalFold(method, "head") {
		return 0
	}
	w.Write(body)
	return int64(len(body))
}

func fixedBodyAllowed(status int) bool { return status >= 200 && status != 204 && status != 304 }
