package engine

import (
	"errors"
	"io"
)

// errBufferFull is returned by fill when the buffer has no room left; the
// caller grows it or rejects the message.
var errBufferFull = errors.New("h1: buffer full")

// reader is a buffered reader over one connection. Unlike bufio.Reader it
// can pin a prefix of its buffer: while a request's header slices point
// into buf[:pin], refills compact live data down to pin instead of to 0, so
// those slices stay valid while the body streams.
type reader struct {
	src  io.Reader
	buf  []byte
	r, w int
	pin  int
	err  error
	// beforeFill, when set, runs before the reader reads more or moves
	// its unread bytes: a request body's pump that keeps views into the
	// buffer (the chunk gather, set while a buffer is lent) writes them
	// out first.
	beforeFill func()
	// home is the connection's own buffer while a large one is lent
	// (lend): it keeps the pinned head, homePin long, and buf holds only
	// body bytes, so that a body streams through the large buffer in
	// reads of tens of KiB, framing and data together.
	home    []byte
	homePin int
	// max, when positive, bounds what one fill reads: a lent buffer is
	// filled with what the destination has room for, not all it holds.
	max int
}

func (b *reader) reset(src io.Reader, buf []byte) {
	b.src = src
	b.buf = buf
	b.r, b.w, b.pin = 0, 0, 0
	b.home, b.homePin, b.max = nil, 0, 0
	b.beforeFill = nil
	b.err = nil
}

// buffered returns the unread bytes in the buffer.
func (b *reader) buffered() []byte { return b.buf[b.r:b.w] }

// discard consumes n buffered bytes.
func (b *reader) discard(n int) { b.r += n }

// unpin releases the pinned prefix once the message it held is done.
func (b *reader) unpin() {
	b.homePin = 0
	b.pin = 0
	if b.r == b.w {
		b.r, b.w = 0, 0
	}
}

// lend moves the unread bytes into big, which the reader then reads
// into, and keeps its own buffer (with the pinned head) aside until
// reclaim. It reports false, and changes nothing, when a buffer is lent
// already, or the unread bytes do not fit.
func (b *reader) lend(big []byte) bool {
	n := b.w - b.r
	if b.home != nil || b.buf == nil || n > len(big) || len(big) <= len(b.buf) {
		return false
	}
	copy(big, b.buf[b.r:b.w])
	b.home, b.homePin = b.buf, b.pin
	b.buf, b.r, b.w, b.pin = big, 0, n, 0
	return true
}

// lent reports whether a buffer is lent (lend).
func (b *reader) lent() bool { return b.home != nil }

// reclaim ends a lend and returns the buffer the reader no longer
// uses (nil when nothing is lent). The unread bytes go back behind the
// pinned head in the reader's own buffer, and the lent one is returned.
// When they do not fit there and a head is pinned, the reader's buffer
// grows as grow does (the head's slices keep the old array), so that
// a client that stops in the middle of a chunk-size or trailer line
// holds what the line needs, not the lent buffer. When nothing is
// pinned, the lent buffer stays the reader's and its own is returned.
func (b *reader) reclaim() []byte {
	b.beforeFill = nil
	if b.home == nil {
		return nil
	}
	n := b.w - b.r
	big := b.buf
	switch {
	case n <= len(b.home)-b.homePin:
		copy(b.home[b.homePin:], b.buf[b.r:b.w])
	case b.homePin > 0:
		nb := make([]byte, max(2*len(b.home), b.homePin+n))
		copy(nb, b.home[:b.homePin])
		copy(nb[b.homePin:], b.buf[b.r:b.w])
		b.home = nb
	default:
		own := b.home
		b.home = nil
		return own
	}
	b.buf, b.r, b.w, b.pin = b.home, b.homePin, b.homePin+n, b.homePin
	b.home, b.homePin = nil, 0
	return big
}

// fill reads more bytes into the buffer, making room by compaction. It
// returns errBufferFull when the unread bytes already fill the buffer.
func (b *reader) fill() error {
	if b.beforeFill != nil {
		b.beforeFill()
	}
	if b.err != nil {
		return b.err
	}
	if b.r == b.w {
		b.r, b.w = b.pin, b.pin
	}
	if b.w == len(b.buf) {
		if b.r <= b.pin {
			return errBufferFull
		}
		n := copy(b.buf[b.pin:], b.buf[b.r:b.w])
		b.r, b.w = b.pin, b.pin+n
	}
	end := len(b.buf)
	if b.max > 0 && b.max < end-b.w {
		end = b.w + b.max
	}
	n, err := b.src.Read(b.buf[b.w:end])
	b.w += n
	if err == errWouldBlock {
		// A non-blocking source with nothing more yet (the event-loop
		// engine): not an error to remember; try again when readable.
		if n > 0 {
			return nil
		}
		return err
	}
	if err != nil {
		if n > 0 {
			// Keep the bytes; report the error on the next fill.
			b.err = err
			return nil
		}
		b.err = err
		return err
	}
	if n == 0 {
		return io.ErrNoProgress
	}
	return nil
}

// minBodyRoom is the free space kept after a pinned head, so the body
// behind it is not read a few bytes at a time, or not at all when the head
// fills the buffer.
const minBodyRoom = 1024

// pinHead consumes a complete head of n buffered bytes and pins it. When
// less than minBodyRoom would be left after it, the unread bytes move to
// the front of the buffer and, if that is not enough, the buffer grows.
// Slices into the buffer taken before the call may be invalid after it.
func (b *reader) pinHead(n int) {
	if len(b.buf)-(b.r+n) < minBodyRoom {
		if b.r > 0 {
			m := copy(b.buf, b.buf[b.r:b.w])
			b.r, b.w = 0, m
		}
		if len(b.buf)-n < minBodyRoom {
			b.grow(n + readBufSize)
		}
	}
	b.r += n
	b.pin = b.r
}

// grow enlarges the buffer to at least size bytes, keeping its contents
// (pinned prefix included). The old array is left to the garbage collector
// because pinned slices may still point into it.
func (b *reader) grow(size int) {
	if size <= len(b.buf) {
		return
	}
	nb := make([]byte, size)
	copy(nb, b.buf[:b.w])
	b.buf = nb
}

// Read reads body bytes: buffered ones first, then straight from the
// source when the caller's buffer is large, so big bodies skip a copy.
func (b *reader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if b.r == b.w {
		if b.err != nil {
			return 0, b.err
		}
		if len(p) >= len(b.buf)-b.pin {
			if b.beforeFill != nil {
				b.beforeFill()
			}
			n, err := b.src.Read(p)
			if err != nil && err != errWouldBlock {
				// A non-blocking source with nothing yet is not an
				// error to remember (as in fill).
				b.err = err
			}
			return n, err
		}
		if err := b.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, b.buf[b.r:b.w])
	b.r += n
	return n, nil
}

// readLine returns the next line without its line ending (CRLF or LF),
// reading more as needed. The slice is valid until the next read. Lines
// longer than max are an error.
func (b *reader) readLine(max int) ([]byte, error) {
	scanned := 0
	for {
		if i := indexByte(b.buf[b.r+scanned:b.w], '\n'); i >= 0 {
			end := b.r + scanned + i
			if end-b.r > max {
				// Long lines that arrive in one read are as bad as ones
				// that arrive slowly.
				return nil, errLineTooLong
			}
			line := b.buf[b.r:end]
			b.r = end + 1
			if len(line) > 0 && line[len(line)-1] == '\r' {
				line = line[:len(line)-1]
			}
			return line, nil
		}
		scanned = b.w - b.r
		if scanned > max {
			return nil, errLineTooLong
		}
		if err := b.fill(); err != nil {
			if err == errBufferFull {
				b.grow(2 * len(b.buf))
				continue
			}
			return nil, err
		}
	}
}

var errLineTooLong = errors.New("h1: line too long")
