package engine

import (
	"errors"
	"io"

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
	c.client().serveFile(c, a)
}

// pumpFile sends the file range until it is done or the client has to be
// waited for (writable() resumes).
func (c *lconn) pumpFile() {
	c.client().pumpFile(c)
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
