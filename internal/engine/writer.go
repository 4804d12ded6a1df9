package engine

import (
	"bytes"
	"io"
	"strconv"
)

var indexByte = bytes.IndexByte

// vecWriter is a destination that can write several slices in one call
// (fdWriter, with writev(2); tlsSink, in one record).
type vecWriter interface {
	WriteVec(bufs [][]byte) (int, error)
}

// writer is a buffered writer over one connection. Responses to pipelined
// requests accumulate in it and leave in one write when the client has
// nothing more buffered.
type writer struct {
	dst io.Writer
	buf []byte
	n   int
	err error
	// vec holds the slices of one WriteVec call (a slice literal passed
	// through the interface would be allocated each time).
	vec [3][]byte
}

func (w *writer) reset(dst io.Writer, buf []byte) {
	w.dst = dst
	w.buf = buf
	w.n = 0
	w.err = nil
}

// buffered returns the number of bytes waiting to be written.
func (w *writer) buffered() int { return w.n }

// flush writes the buffered bytes. Errors are sticky.
func (w *writer) flush() error {
	if w.err != nil {
		return w.err
	}
	if w.n == 0 {
		return nil
	}
	_, err := w.dst.Write(w.buf[:w.n])
	w.n = 0
	if err != nil {
		w.err = err
	}
	return err
}

// Write buffers p, writing through when p does not fit.
func (w *writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if len(p) <= len(w.buf)-w.n {
		w.n += copy(w.buf[w.n:], p)
		return len(p), nil
	}
	if vw, ok := w.dst.(vecWriter); ok && w.n > 0 && len(p) >= len(w.buf)/2 {
		// The buffered bytes (a head, a chunk's size line) and a large
		// piece leave in one system call.
		w.vec[0], w.vec[1] = w.buf[:w.n], p
		_, err := vw.WriteVec(w.vec[:2])
		w.vec = [3][]byte{}
		w.n = 0
		if err != nil {
			w.err = err
			return 0, err
		}
		return len(p), nil
	}
	if err := w.flush(); err != nil {
		return 0, err
	}
	if len(p) >= len(w.buf)/2 {
		n, err := w.dst.Write(p)
		if err != nil {
			w.err = err
		}
		return n, err
	}
	w.n = copy(w.buf, p)
	return len(p), nil
}

// WriteThen writes p and then s, the short framing that ends what p
// belongs to (a chunk's end and the last chunk, http1.WriteFinalChunk),
// as Write and WriteString would; but where Write would send the
// buffered bytes and a large p at once, s goes with them, in the same
// system call, instead of waiting in the buffer for a flush of its own.
func (w *writer) WriteThen(p []byte, s string) {
	vw, ok := w.dst.(vecWriter)
	if !ok || w.err != nil || w.n == 0 || len(p) <= len(w.buf)-w.n || len(p) < len(w.buf)/2 || len(s) > len(w.buf)-w.n {
		w.Write(p)
		w.WriteString(s)
		return
	}
	m := w.n
	w.n += copy(w.buf[m:], s)
	w.vec = [3][]byte{w.buf[:m], p, w.buf[m:w.n]}
	_, err := vw.WriteVec(w.vec[:])
	w.vec = [3][]byte{}
	w.n = 0
	if err != nil {
		w.err = err
	}
}

// writeVecAfter writes the buffered bytes and then the slices of
// bufs[1:] (bufs[0] is the writer's to fill), in one system call when
// the destination gathers, else in order.
func (w *writer) writeVecAfter(bufs [][]byte) {
	if w.err != nil {
		return
	}
	bufs[0] = w.buf[:w.n]
	var err error
	if vw, ok := w.dst.(vecWriter); ok {
		_, err = vw.WriteVec(bufs)
	} else {
		for _, p := range bufs {
			if len(p) > 0 {
				if _, err = w.dst.Write(p); err != nil {
					break
				}
			}
		}
	}
	bufs[0] = nil
	w.n = 0
	if err != nil {
		w.err = err
	}
}

// WriteString buffers s.
func (w *writer) WriteString(s string) (int, error) {
	if len(s) <= len(w.buf)-w.n {
		w.n += copy(w.buf[w.n:], s)
		return len(s), nil
	}
	return w.Write([]byte(s))
}

// available returns free buffer space after making room for at least n
// bytes when it can (by flushing); callers use it to render small pieces
// in place.
func (w *writer) reserve(n int) bool {
	if len(w.buf)-w.n >= n {
		return true
	}
	if w.flush() != nil {
		return false
	}
	return len(w.buf) >= n
}

func (w *writer) WriteInt(v int64) {
	if !w.reserve(20) {
		return
	}
	w.n += len(strconv.AppendInt(w.buf[w.n:w.n], v, 10))
}

func (w *writer) WriteHex(v int64) {
	if !w.reserve(16) {
		return
	}
	w.n += len(strconv.AppendInt(w.buf[w.n:w.n], v, 16))
}

// field writes "name: value\r\n".
func (w *writer) Field(name, value []byte) {
	if w.reserve(len(name) + len(value) + 4) {
		w.n += copy(w.buf[w.n:], name)
		w.buf[w.n] = ':'
		w.buf[w.n+1] = ' '
		w.n += 2
		w.n += copy(w.buf[w.n:], value)
		w.buf[w.n] = '\r'
		w.buf[w.n+1] = '\n'
		w.n += 2
		return
	}
	w.Write(name)
	w.WriteString(": ")
	w.Write(value)
	w.WriteString("\r\n")
}
