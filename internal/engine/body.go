package engine

import (
	"errors"
	"io"
	"math"

	"github.com/helios-lb/helios/internal/http1"
)

// errBodyTooLarge is a body past the bound a route or listener sets.
var errBodyTooLarge = errors.New("h1: body larger than allowed")

type bodyKind uint8

const (
	bodyNone bodyKind = iota
	bodyFixed
	bodyChunked
	bodyUntilClose
)

// body decodes one message body from a reader: fixed length, chunked
// (RFC 9112 §7.1) or delimited by the connection closing. It hands out
// views into the reader's buffer so small bodies are copied once, into the
// outgoing buffer.
type body struct {
	src *reader
	// remaining: bytes left for a fixed body, or in the current chunk.
	remaining int64
	// kind sits with the flags, in one word (every connection carries a
	// body: see TestIdleConnectionMemory).
	kind bodyKind
	// needCRLF: a chunk's data has been read and its CRLF has not.
	needCRLF bool
	// inTrailer: the last chunk has been read and the trailer section is
	// being read (into trailer, which counts its bytes). Kept here, not in
	// locals, so a non-blocking source can stop and resume anywhere.
	inTrailer bool
	done      bool
	// read counts decoded bytes handed out so far.
	read int64
	// limit, when positive, bounds read: more is errBodyTooLarge.
	limit int64
	// trailer holds the trailer section of a chunked body, copied out of
	// the buffer because later reads reuse it (of a stream's body, the
	// stream keeps its own: streamBuf); nil until a body has one (few
	// do, and every connection carries a body), then kept for reuse.
	trailer *trailerSection
	// onFirstRead runs once before the first byte is read (sending
	// "100 Continue" to a client that asked for it).
	onFirstRead func()
	// touch runs before every read that may block (deadline upkeep).
	touch func()
}

func (b *body) reset(src *reader, kind bodyKind, length int64) {
	tr := b.trailer
	if tr != nil {
		tr.reset()
	}
	*b = body{src: src, kind: kind, remaining: length, trailer: tr}
	if kind == bodyNone || (kind == bodyFixed && length == 0) {
		b.done = true
	}
}

// next returns the next piece of the decoded body as a view into the
// reader's buffer, valid until the next call. It returns io.EOF after the
// last piece (and after the trailer of a chunked body has been read).
func (b *body) next() ([]byte, error) { return b.nextMax(math.MaxInt) }

// nextMax is next with pieces of at most max bytes (max > 0).
func (b *body) nextMax(max int) ([]byte, error) {
	if b.done {
		return nil, io.EOF
	}
	if b.onFirstRead != nil {
		f := b.onFirstRead
		b.onFirstRead = nil
		f()
	}
	switch b.kind {
	case bodyFixed:
		return b.nextData(max)
	case bodyChunked:
		if b.remaining == 0 {
			if err := b.nextChunk(); err != nil {
				return nil, err
			}
			if b.done {
				return nil, io.EOF
			}
		}
		p, err := b.nextData(max)
		if err == nil && b.remaining == 0 {
			b.needCRLF = true
		}
		return p, err
	case bodyUntilClose:
		if len(b.src.buffered()) == 0 {
			if b.touch != nil {
				b.touch()
			}
			if err := b.src.fill(); err != nil {
				if err == io.EOF {
					b.done = true
				}
				return nil, err
			}
		}
		p := b.src.buffered()
		if len(p) > max {
			p = p[:max]
		}
		b.src.discard(len(p))
		b.read += int64(len(p))
		return p, nil
	}
	return nil, io.EOF
}

// nextData returns up to remaining bytes of data from the buffer, and
// at most max.
func (b *body) nextData(max int) ([]byte, error) {
	if len(b.src.buffered()) == 0 {
		if b.touch != nil {
			b.touch()
		}
		if err := b.src.fill(); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	p := b.src.buffered()
	if int64(len(p)) > b.remaining {
		p = p[:b.remaining]
	}
	if len(p) > max {
		p = p[:max]
	}
	b.src.discard(len(p))
	b.remaining -= int64(len(p))
	b.read += int64(len(p))
	if b.limit > 0 && b.read > b.limit {
		return nil, errBodyTooLarge
	}
	if b.kind == bodyFixed && b.remaining == 0 {
		b.done = true
	}
	return p, nil
}

// nextChunk reads a chunk-size line (after the previous chunk's CRLF); a
// zero size ends the body and reads the trailer section.
func (b *body) nextChunk() error {
	if b.touch != nil {
		b.touch()
	}
	if !b.inTrailer {
		if b.needCRLF {
			line, err := b.src.readLine(2)
			if err != nil {
				if err == errLineTooLong {
					// Data ran past the chunk size.
					return http1.ErrMalformedChunk
				}
				return eofUnexpected(err)
			}
			if len(line) != 0 {
				return http1.ErrMalformedChunk
			}
			b.needCRLF = false
		}
		line, err := b.src.readLine(http1.MaxChunkLine)
		if err != nil {
			if err == errLineTooLong {
				return http1.ErrMalformedChunk
			}
			return eofUnexpected(err)
		}
		size, ok := http1.ParseChunkSize(line)
		if !ok {
			return http1.ErrMalformedChunk
		}
		if size > 0 {
			b.remaining = size
			return nil
		}
		b.inTrailer = true
	}
	for {
		line, err := b.src.readLine(http1.MaxTrailerBytes)
		if err != nil {
			if err == errLineTooLong {
				return http1.ErrTrailerTooLarge
			}
			return eofUnexpected(err)
		}
		if len(line) == 0 {
			b.done = true
			if b.trailer != nil {
				b.trailer.done()
			}
			return nil
		}
		name, value, ok := http1.ParseTrailerLine(line)
		if !ok {
			return http1.ErrMalformedChunk
		}
		if b.trailer == nil {
			b.trailer = &trailerSection{}
		}
		b.trailer.size += len(line) + 2
		if b.trailer.size > http1.MaxTrailerBytes {
			return http1.ErrTrailerTooLarge
		}
		// Kept whole: what may not travel in a trailer (RFC 9110 §6.5.1)
		// is dropped where the section is passed on
		// (httpmsg.TrailerFields).
		b.trailer.add(name, value)
	}
}

func eofUnexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Read implements io.Reader over the decoded body, for handlers that want
// a plain reader (net/http adapters).
func (b *body) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if b.direct(len(p)) {
		// Large reads of a fixed body or a chunk's data go straight to
		// the source.
		if b.onFirstRead != nil {
			f := b.onFirstRead
			b.onFirstRead = nil
			f()
		}
		if b.touch != nil {
			b.touch()
		}
		if int64(len(p)) > b.remaining {
			p = p[:b.remaining]
		}
		n, err := b.src.Read(p)
		b.remaining -= int64(n)
		b.read += int64(n)
		if b.limit > 0 && b.read > b.limit {
			return 0, errBodyTooLarge
		}
		if b.remaining == 0 {
			if b.kind == bodyFixed {
				b.done = true
			} else {
				b.needCRLF = true
			}
		}
		if err == io.EOF && !b.done {
			err = io.ErrUnexpectedEOF
		} else if err == io.EOF {
			err = nil
		}
		return n, err
	}
	// Serve from the buffer without handing out more than len(p): pieces
	// larger than p stay buffered for the next call.
	if b.done {
		return 0, io.EOF
	}
	if b.kind == bodyChunked && b.remaining == 0 || len(b.src.buffered()) == 0 {
		piece, err := b.peekPiece()
		if err != nil {
			return 0, err
		}
		if piece == 0 {
			return 0, io.EOF
		}
	}
	avail := b.src.buffered()
	n := len(avail)
	if b.kind != bodyUntilClose && int64(n) > b.remaining {
		n = int(b.remaining)
	}
	if n > len(p) {
		n = len(p)
	}
	copy(p, avail[:n])
	b.src.discard(n)
	b.read += int64(n)
	if b.limit > 0 && b.read > b.limit {
		return 0, errBodyTooLarge
	}
	if b.kind != bodyUntilClose {
		b.remaining -= int64(n)
		if b.remaining == 0 {
			if b.kind == bodyFixed {
				b.done = true
			} else {
				b.needCRLF = true
			}
		}
	}
	return n, nil
}

// nextPiece is next for a caller with a buffer of its own: data not yet
// in the reader's buffer (a small one, sized for heads) is read straight
// into buf, up to len(buf) at once, so a large body costs a few reads of
// tens of KiB rather than one per reader buffer. The piece returned is in
// buf or in the reader's buffer, valid until the next call.
func nextPiece(b *body, buf []byte) ([]byte, error) {
	if !b.direct(len(buf)) {
		if !b.behindBuffered(len(buf)) {
			return b.next()
		}
		// The reader's buffer holds the start of the data (read with a
		// head or a chunk's size line): copy it out and read what
		// follows of the same chunk (or fixed body) straight behind it,
		// so that it leaves in one piece, not two.
		n, err := b.Read(buf)
		if n == 0 || err != nil {
			return buf[:n], err
		}
		if b.direct(len(buf) - n) {
			m, err := b.Read(buf[n:])
			if err != nil && err != errWouldBlock {
				return nil, err // the exchange fails: its piece goes nowhere
			}
			n += m
		}
		return buf[:n], nil
	}
	n, err := b.Read(buf)
	if n > 0 {
		return buf[:n], nil // an error comes again on the next call
	}
	if err == nil && b.done {
		err = io.EOF
	}
	return nil, err
}

// behindBuffered reports whether the reader's buffer holds data of a
// fixed body or of a chunk that goes on past it, and the caller's buffer
// (n bytes) is large enough to take more behind it (nextPiece).
func (b *body) behindBuffered(n int) bool {
	if n < 4096 || b.done || !(b.kind == bodyFixed || b.kind == bodyChunked && b.remaining > 0) {
		return false
	}
	k := len(b.src.buffered())
	return k > 0 && k < n && int64(k) < b.remaining
}

// direct reports whether a read of n bytes goes straight from the source
// into the caller's buffer: nothing is buffered, the read is large, and
// it is data (of a fixed body, or inside a chunk), not framing.
func (b *body) direct(n int) bool {
	return n >= 4096 && !b.done && len(b.src.buffered()) == 0 &&
		(b.kind == bodyFixed || b.kind == bodyChunked && b.remaining > 0)
}

// peekPiece makes body bytes available in the buffer without consuming
// them; it returns 0 at the end of the body.
func (b *body) peekPiece() (int, error) {
	if b.onFirstRead != nil {
		f := b.onFirstRead
		b.onFirstRead = nil
		f()
	}
	if b.kind == bodyChunked && b.remaining == 0 {
		if err := b.nextChunk(); err != nil {
			return 0, err
		}
		if b.done {
			return 0, nil
		}
	}
	if len(b.src.buffered()) == 0 {
		if b.touch != nil {
			b.touch()
		}
		if err := b.src.fill(); err != nil {
			if err == io.EOF {
				if b.kind == bodyUntilClose {
					b.done = true
					return 0, nil
				}
				return 0, io.ErrUnexpectedEOF
			}
			return 0, err
		}
	}
	return len(b.src.buffered()), nil
}

// fullyBuffered returns the whole remaining body of a fixed-length message
// when it is already in the buffer, without consuming it.
func (b *body) fullyBuffered() ([]byte, bool) {
	if b.kind != bodyFixed || b.done || b.read != 0 {
		return nil, b.done
	}
	buf := b.src.buffered()
	if int64(len(buf)) < b.remaining {
		return nil, false
	}
	return buf[:b.remaining], true
}

// consumeBuffered marks a body returned by fullyBuffered as read.
func (b *body) consumeBuffered() {
	b.src.discard(int(b.remaining))
	b.read += b.remaining
	b.remaining = 0
	b.done = true
}

// trailers returns the body's trailer section (empty when it had none).
func (b *body) trailers() *trailerSection {
	if b.trailer == nil {
		return &noTrailer
	}
	return b.trailer
}

// noTrailer is the trailer section of the bodies that have none; it is
// only read.
var noTrailer trailerSection
