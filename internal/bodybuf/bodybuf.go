// Package bodybuf holds message bodies in memory up to a size, then in an
// unlinked temporary file up to a cap: a request body while Helios reads
// it from the client before choosing a backend (request buffering,
// Buffer), and an answer between a backend and a client that reads it
// more slowly (response buffering, Spool), within what a process may hold
// (Budget). A slow client then costs a backend nothing, and a buffered
// request body can be sent again on a retry.
package bodybuf

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// ErrFull is returned by Write when p does not fit under the caps; nothing
// of p was kept.
var ErrFull = errors.New("bodybuf: body larger than the buffer")

// Buffer is one body, held in memory and then in a file. The zero value
// holds nothing; call Reset before use. Not safe for concurrent use.
type Buffer struct {
	mem    []byte
	memMax int
	// The file part: created on the first byte past memMax, unlinked at
	// once so that nothing is left behind by a crash.
	f       *os.File
	fileLen int64
	fileMax int64
	dir     string
}

// Reset empties b (closing its file) and sets its caps: memMax bytes in
// memory, then fileMax bytes in a file in dir ("" for os.TempDir). A
// zero fileMax keeps everything in memory.
func (b *Buffer) Reset(memMax int, fileMax int64, dir string) {
	b.Close()
	b.mem = b.mem[:0]
	b.memMax, b.fileMax, b.dir = memMax, fileMax, dir
}

// Mem returns the memory part of the body.
func (b *Buffer) Mem() []byte { return b.mem }

// File returns the file part: the open file (nil when there is none) and
// its length. The caller does not close it.
func (b *Buffer) File() (*os.File, int64) { return b.f, b.fileLen }

// MemRoom returns how many more bytes fit in memory; a Write of at most
// that many never touches the disk.
func (b *Buffer) MemRoom() int {
	if b.fileLen > 0 {
		return 0
	}
	return b.memMax - len(b.mem)
}

// Len returns the bytes held.
func (b *Buffer) Len() int64 { return int64(len(b.mem)) + b.fileLen }

// Cap returns how many bytes b holds at most, in memory and file.
func (b *Buffer) Cap() int64 { return int64(b.memMax) + b.fileMax }

// Room returns how many more bytes fit.
func (b *Buffer) Room() int64 { return int64(b.memMax) + b.fileMax - b.Len() }

// Write keeps p whole, or returns ErrFull and keeps none of it.
func (b *Buffer) Write(p []byte) (int, error) {
	if int64(len(p)) > b.Room() {
		return 0, ErrFull
	}
	n := 0
	if b.fileLen == 0 && len(b.mem) < b.memMax {
		n = min(len(p), b.memMax-len(b.mem))
		b.mem = append(b.mem, p[:n]...)
	}
	if n == len(p) {
		return n, nil
	}
	if b.f == nil {
		f, err := tempFile(b.dir)
		if err != nil {
			return n, fmt.Errorf("buffering a request body: %w", err)
		}
		b.f = f
	}
	m, err := b.f.Write(p[n:])
	b.fileLen += int64(m)
	if err != nil {
		return n + m, fmt.Errorf("buffering a request body: %w", err)
	}
	return len(p), nil
}

// WriteTo writes everything held to w, memory part first. It may be
// called again (a retry sends the body again).
func (b *Buffer) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(b.mem)
	total := int64(n)
	if err != nil || b.f == nil {
		return total, err
	}
	if _, err := b.f.Seek(0, io.SeekStart); err != nil {
		return total, err
	}
	// A *net.TCPConn takes a LimitedReader over a file with sendfile(2).
	m, err := io.Copy(w, &io.LimitedReader{R: b.f, N: b.fileLen})
	return total + m, err
}

// keepMem is the most memory a Buffer keeps for reuse once closed: a
// connection that buffered a large body must not hold on to it idle.
const keepMem = 16 << 10

// Close releases the file, if any, and memory beyond keepMem.
func (b *Buffer) Close() {
	if b.f != nil {
		b.f.Close()
		b.f = nil
	}
	b.fileLen = 0
	if cap(b.mem) > keepMem {
		b.mem = nil
	}
	b.mem = b.mem[:0]
}
