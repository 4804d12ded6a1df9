package engine

import (
	"fmt"
	"io"
	"time"

	"github.com/helios-lb/helios/internal/http1"
	"github.com/helios-lb/helios/internal/httpmsg"

	"github.com/helios-lb/helios/internal/h2"
	"github.com/helios-lb/helios/internal/wire"
)

// Answers on an HTTP/2 stream: what lconn's Respond, startSend, pump and
// serveFile do for an HTTP/1.1 client, as HEADERS, DATA and trailers.
// DATA is written as the stream's and the connection's send windows allow
// (h2.Stream.SendWindow); OnWritable resumes the answer. A write cut
// short by the connection's output backlog keeps its rest in the stream's
// carry, which goes first when the stream may write again.

// h2respond sends a fixed answer on the stream (Respond).
func (c *lconn) h2respond(status int, header *httpmsg.Header, body []byte) error {
	st := c.h2s
	c.respStarted = true
	c.respStatus = status
	out := c.h2fixedFields(header)
	withBody := http1.FixedBodyAllowed(status)
	if withBody {
		out.number(h2ContentLengthName, int64(len(body)))
	}
	if !withBody || httpmsg.EqualFold(c.req.Method, "head") {
		body = nil
	}
	if err := c.h2head(status, out.fs, len(body) == 0); err != nil {
		return err
	}
	c.respBytes = int64(len(body))
	if len(body) > 0 {
		c.h2data(body, true)
		if st.s == nil {
			c.broken = true
			return errStreamGone
		}
	}
	return nil
}

// h2fixedFields gathers the fields of an answer the proxy makes itself
// in the stream's sink: the Date, and header's (nil: none).
func (c *lconn) h2fixedFields(header *httpmsg.Header) *h2fields {
	out := &c.h2s.out
	out.reset()
	out.fs = append(out.fs, h2.Field{Name: h2DateName, Value: c.l.eng.date.value(time.Unix(0, c.l.now))})
	if header != nil {
		header.Emit(out)
	}
	return out
}

// errStreamGone is the error of an answer whose stream was reset, or
// whose connection ended, while it was being written.
var errStreamGone = fmt.Errorf("%w: stream reset", wire.ErrClientGone)

// h2head writes the answer's head; an error means the stream is gone.
func (c *lconn) h2head(status int, fs []h2.Field, end bool) error {
	st := c.h2s
	if st.s == nil {
		c.broken = true
		return errStreamGone
	}
	st.calling++
	err := st.s.WriteHeaders(status, fs, end)
	st.calling--
	if err != nil || st.s == nil {
		c.broken = true
		return errStreamGone
	}
	return nil
}

// h2data writes body bytes (end: and the end of the stream); what the
// windows or the output backlog do not take now is carried.
func (c *lconn) h2data(p []byte, end bool) {
	st := c.h2s
	if st.s == nil {
		return
	}
	st.calling++
	n, err := st.s.WriteData(p, end)
	st.calling--
	if err != nil || n == len(p) || st.s == nil {
		return
	}
	st.carry = append(st.carry[:0], p[n:]...)
	st.carryEnd = end
}

// h2flushCarry writes what a short write left; it reports whether
// nothing is left.
func (c *lconn) h2flushCarry() bool {
	st := c.h2s
	if len(st.carry) == 0 {
		return true
	}
	if st.s == nil {
		st.carry = st.carry[:0]
		return true
	}
	st.calling++
	n, err := st.s.WriteData(st.carry, st.carryEnd)
	st.calling--
	if err != nil || st.s == nil {
		st.carry = st.carry[:0]
		return true
	}
	st.carry = st.carry[:copy(st.carry, st.carry[n:])]
	return len(st.carry) == 0
}

// h2startSend writes the backend's answer's head as HEADERS and starts
// its body (startSend).
func (c *lconn) h2startSend() {
	u := c.up
	r := &u.resp
	st := c.h2s
	c.state = lsSend
	c.respStarted = true
	c.respStatus = r.Status
	out := &st.out
	out.reset()
	httpmsg.ResponseFields(out, &r.Response, true)
	bodyOut, _, _ := http1.Framing(c.req.Method, c.req.Minor, &r.Response)
	// An HTTP/2 backend's answer that ended with its head stays one
	// HEADERS frame (gRPC's trailers-only answers must).
	noBody := !bodyOut || u.h2 != nil && u.h2.headersOnly
	u.rd.unpin()
	if err := c.h2head(r.Status, out.fs, noBody); err != nil {
		c.sendDone(err)
		return
	}
	if noBody {
		u.body.done = true
		c.sendDone(nil)
		return
	}
	c.pump()
}

// h2pump moves the answer's body from the backend to the stream until one
// of them has to wait (pump).
func (c *lconn) h2pump() {
	st := c.h2s
	if st.pumping {
		return
	}
	st.pumping = true
	defer func() { st.pumping = false }()
	u := c.up
	for {
		if !c.h2flushCarry() {
			c.deadline, c.dkind = 0, dlNone
			c.startSpool()
			return // OnWritable resumes
		}
		if st.s == nil {
			c.sendDone(fmt.Errorf("%w: stream reset", wire.ErrClientGone))
			return
		}
		if st.eof {
			if us := u.h2; us != nil {
				// An HTTP/2 backend's answer: its trailers (gRPC's
				// status) may still be on their way.
				if !us.ended {
					c.deadline, c.dkind = 0, dlNone
					return // its end resumes the pump
				}
				if us.err != nil {
					c.sendDone(us.err)
					return
				}
			}
			c.h2endBody(u.respTrailer())
			return
		}
		room := st.s.SendWindow()
		if room == 0 {
			// The client's windows bound this wait (the connection's
			// stall timeout), not the backend's read timeout.
			st.s.WaitWritable()
			c.deadline, c.dkind = 0, dlNone
			c.startSpool()
			return
		}
		p, ok, err := c.bodyOut(room)
		if !ok {
			return
		}
		if len(p) > 0 {
			c.respBytes += int64(len(p))
			c.h2data(p, false)
		}
		switch {
		case err == nil:
		case err == io.EOF:
			st.eof = true
		case err == errWouldBlock:
			c.setDeadline(dlUpBody, c.tr.Settings.ReadTimeout)
			return
		default:
			c.sendDone(fmt.Errorf("%w: reading response body: %w", wire.ErrBackend, err))
			return
		}
	}
}

// h2endBody ends an answer whose body is all written: with its trailer
// section, tr (gRPC's grpc-status), or an empty DATA frame.
func (c *lconn) h2endBody(tr *trailerSection) {
	st := c.h2s
	var err error
	st.calling++
	if !tr.empty() {
		out := &st.out
		out.reset()
		httpmsg.TrailerFields(out, &tr.hdr)
		err = st.s.WriteTrailers(out.fs)
	} else {
		_, err = st.s.WriteData(nil, true)
	}
	st.calling--
	if err != nil || st.s == nil {
		c.broken = true
		err = errStreamGone
	}
	c.sendDone(err)
}

// h2serveFile answers from a file planner on the stream (serveFile):
// the file's bytes are read with pread, as over TLS, and go out as the
// windows allow.
func (c *lconn) h2serveFile(a *wire.FileAnswer) {
	out := c.h2fixedFields(&a.Header)
	noBody := a.File == nil && len(a.Body) == 0 || a.File != nil && a.Length == 0 || httpmsg.EqualFold(c.req.Method, "head")
	if err := c.h2head(a.Status, out.fs, noBody); err != nil || noBody {
		c.fileDone(err)
		return
	}
	if a.File == nil {
		c.respBytes = int64(len(a.Body))
		c.h2data(a.Body, true)
		c.fileDone(nil)
		return
	}
	c.state = lsFile
	c.file.off, c.file.end = a.Offset, a.Offset+a.Length
	c.pumpFile()
}

// h2pumpFile sends the file range until it is done or the stream has to
// wait (pumpFile).
func (c *lconn) h2pumpFile() {
	st := c.h2s
	buf := c.l.scratch()
	for {
		if !c.h2flushCarry() {
			return
		}
		if st.s == nil {
			c.fileDone(fmt.Errorf("%w: stream reset", wire.ErrClientGone))
			return
		}
		if c.file.off >= c.file.end {
			c.fileDone(nil)
			return
		}
		room := st.s.SendWindow()
		if room == 0 {
			// The client's windows bound this wait (the connection's
			// stall timeout), not the backend's read timeout.
			st.s.WaitWritable()
			c.deadline, c.dkind = 0, dlNone
			return
		}
		p, ok, err := c.filePiece(buf[:min(len(buf), room)])
		if !ok {
			return
		}
		// Only this read can have reached the end (checked above).
		if end := c.file.off >= c.file.end; len(p) > 0 || end {
			c.h2data(p, end)
			if end && len(st.carry) == 0 {
				c.fileDone(nil)
				return
			}
		}
		if err != nil && c.file.off < c.file.end {
			c.fileDone(fmt.Errorf("reading %w", errFileShort(err)))
			return
		}
	}
}
