package engine

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/helios-lb/helios/internal/http1"
	"github.com/helios-lb/helios/internal/wire"
)

// Static files on the loop. A route's file planner (wire.Files,
// internal/static's) plans the whole answer — status, fields, and which
// byte range of which open file — from its open-file cache, without
// writing anything;
// the loop writes the head and sends the range with sendfile(2), so the
// file's bytes never enter user space (over TLS, and for an answer that
// goes through a transform such as compression, they must: they are read
// with pread and go through the tls.Conn or the transform, with the same
// backpressure as any answer).

// serveFile answers from a file planner (ActServeFile).
func (c *lconn) serveFile(fs wire.Files) {
	if c.file == nil {
		c.file = new(fileSend) // kept: its buffers serve the connection's next files
	}
	a := &c.file.FileAnswer
	fs.PlanFile(c.l.id, c, a)
	c.answerHeader(&a.Header, false)
	c.respStarted = true
	c.respStatus = a.Status
	if a.File == nil {
		c.releaseTransform() // no file's bytes to transform
	}
	if c.h2s != nil {
		c.h2serveFile(a)
		return
	}
	c.ensureWriter()
	w := &c.wr
	w.Write(c.l.eng.status.Line(a.Status))
	w.Write(c.l.eng.date.line(time.Unix(0, c.l.now)))
	a.Header.Emit(w)
	c.fileFraming()
	c.endHead()
	if a.File == nil {
		w.Write(a.Body)
		c.respBytes = int64(len(a.Body))
		c.fileDone(nil)
		return
	}
	if b := a.File.Bytes(); b != nil && !c.transforming() {
		// A small file the planner holds in memory: its range leaves
		// with the head, in one write.
		w.Write(b[a.Offset : a.Offset+a.Length])
		c.respBytes = a.Length
		c.fileDone(nil)
		return
	}
	c.state = lsFile
	c.file.off, c.file.end = a.Offset, a.Offset+a.Length
	if c.tls == nil && !c.transforming() {
		// The head goes first (the writer's buffer, then pending), the
		// range behind it, in one segment when it fits (MSG_MORE, as
		// nginx's tcp_nopush).
		c.fw.more = true
		c.flushOut()
		c.fw.more = false
		if c.wr.err != nil {
			c.fileDone(fmt.Errorf("%w: %w", wire.ErrClientGone, c.wr.err))
			return
		}
		c.fw.queueFile(a.File.Fd(), c.file.off, c.file.end)
	}
	c.pumpFile()
}

// pumpFile sends the file range until it is done or the client has to be
// waited for (writable() resumes).
func (c *lconn) pumpFile() {
	if c.h2s != nil {
		c.h2pumpFile()
		return
	}
	if c.tls == nil && !c.transforming() {
		done, err := c.fw.flushPending()
		switch {
		case err != nil:
			c.fileDone(fmt.Errorf("%w: %w", wire.ErrClientGone, err))
		case done:
			c.respBytes = c.file.end - c.file.Offset
			c.fileDone(nil)
		default:
			c.respBytes = c.fw.fileOff - c.file.Offset
			c.setDeadline(dlWrite, c.opts.WriteTimeout)
		}
		return
	}
	buf := c.l.scratch()
	for c.file.off < c.file.end {
		if len(c.fw.pending) > c.opts.outputLimit() {
			c.flushOut()
			if c.wr.err != nil {
				c.fileDone(fmt.Errorf("%w: %w", wire.ErrClientGone, c.wr.err))
				return
			}
			if c.fw.busy() {
				// The socket is full: writable() resumes.
				c.setDeadline(dlWrite, c.opts.WriteTimeout)
				return
			}
		}
		p, ok, err := c.filePiece(buf)
		if !ok {
			return
		}
		if len(p) > 0 { // an empty chunk would end the body
			c.writeChunk(p)
		}
		if c.wr.err != nil {
			c.fileDone(fmt.Errorf("%w: %w", wire.ErrClientGone, c.wr.err))
			return
		}
		if err != nil && c.file.off < c.file.end {
			c.fileDone(fmt.Errorf("reading %w", errFileShort(err)))
			return
		}
	}
	if c.chunkOut {
		http1.WriteLastChunk(&c.wr, nil)
	}
	c.fileDone(nil)
}

// errFileShort is the error of a file that turned out shorter than
// planned (rewritten meanwhile).
func errFileShort(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// fileDone ends a file answer: the file goes back to the planner's cache,
// and a range cut short closes the connection (the client was promised
// the rest).
func (c *lconn) fileDone(err error) {
	if c.file != nil && c.file.File != nil {
		c.file.File.Release()
		c.file.File = nil
	}
	c.fw.file = -1
	if err != nil {
		c.broken = true
	}
	if c.state == lsFile {
		c.state = lsSend
	}
	c.flow.Sent(c.respStatus, c.respBytes, err)
	c.finish()
}

// fileSend is a static answer being sent: the planned answer, and what is
// left of its range, off to end (over TLS and HTTP/2; in the clear over
// HTTP/1.1, the writer keeps it). A connection makes it for its first
// file and keeps it.
type fileSend struct {
	wire.FileAnswer
	off, end int64
}
