package engine

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/helios-lb/helios/internal/http1"
)

// newTestBody returns a body of the given kind over src, read through a
// reader with a bufSize-byte buffer.
func newTestBody(src io.Reader, bufSize int, kind bodyKind, length int64) (*body, *reader) {
	rd := &reader{}
	rd.reset(src, make([]byte, bufSize))
	b := &body{}
	b.reset(rd, kind, length)
	return b, rd
}

// readAllNext drains b with next(). After errWouldBlock (a non-blocking
// source with nothing more yet) it calls again, as the event loop does when
// the connection is readable again.
func readAllNext(b *body) ([]byte, error) { return readAllPieces(b, 0) }

// readAllRead drains b with Read(p) using n-byte reads, calling again after
// errWouldBlock as readAllNext does.
func readAllRead(b *body, n int) ([]byte, error) {
	var out []byte
	p := make([]byte, n)
	for i := 0; ; i++ {
		if i > 1<<22 {
			return out, errors.New("no progress")
		}
		m, err := b.Read(p)
		if m > n || m < 0 {
			return out, errors.New("bad count")
		}
		out = append(out, p[:m]...)
		if err == io.EOF {
			return out, nil
		}
		if err == errWouldBlock && m == 0 {
			continue
		}
		if err != nil {
			return out, err
		}
	}
}

// bodyReaders are the ways a test drains a body, each with the reader
// buffer size and source shaping it runs under.
var bodyReaders = []struct {
	name    string
	bufSize int
	shape   func(io.Reader) io.Reader
	drain   func(*body) ([]byte, error)
}{
	{"next/4k", 4096, func(r io.Reader) io.Reader { return r }, readAllNext},
	{"next/onebyte/64", 64, iotest.OneByteReader, readAllNext},
	{"read3/4k", 4096, func(r io.Reader) io.Reader { return r }, func(b *body) ([]byte, error) { return readAllRead(b, 3) }},
	{"read3/halfreader/64", 64, iotest.HalfReader, func(b *body) ([]byte, error) { return readAllRead(b, 3) }},
	{"read64k/4k", 4096, func(r io.Reader) io.Reader { return r }, func(b *body) ([]byte, error) { return readAllRead(b, 64<<10) }},
	{"read64k/onebyte/64", 64, iotest.OneByteReader, func(b *body) ([]byte, error) { return readAllRead(b, 64<<10) }},
	{"piece32k/2k", 2048, func(r io.Reader) io.Reader { return r }, func(b *body) ([]byte, error) { return readAllPieces(b, 32<<10) }},
	{"piece5k/halfreader/64", 64, iotest.HalfReader, func(b *body) ([]byte, error) { return readAllPieces(b, 5000) }},
	{"lent/max5k/2k", 2048, func(r io.Reader) io.Reader { return r }, func(b *body) ([]byte, error) { return readAllLent(b, 5000) }},
	{"lent/max100/halfreader/64", 64, iotest.HalfReader, func(b *body) ([]byte, error) { return readAllLent(b, 100) }},
}

// readAllLent drains b with nextMax(n) as the event loop forwards a
// request body (lconn.reqPiece): the reader is lent a bodyBufSize buffer
// before each call (when it has a smaller one), reads at most n bytes at
// a time, and gives the buffer back after errWouldBlock and at the end,
// as the loop's pump does when it returns.
func readAllLent(b *body, n int) ([]byte, error) {
	return drainPieces(func() ([]byte, error) {
		if !b.src.lent() && len(b.src.buf) < bodyBufSize && !b.src.lend(make([]byte, bodyBufSize)) {
			return nil, errors.New("lend refused")
		}
		b.src.max = n
		p, err := b.nextMax(n)
		b.src.max = 0
		if len(p) > n {
			return nil, errors.New("piece over max")
		}
		if err != nil {
			b.src.reclaim()
		}
		return p, err
	})
}

// readAllPieces drains b with nextPiece and an n-byte buffer of its own
// (none: next alone), as the event loop forwards a body.
func readAllPieces(b *body, n int) ([]byte, error) {
	buf := make([]byte, n)
	return drainPieces(func() ([]byte, error) { return nextPiece(b, buf) })
}

// drainPieces collects the pieces next returns until io.EOF, calling
// again after errWouldBlock as the loop does when the connection is
// readable again.
func drainPieces(next func() ([]byte, error)) ([]byte, error) {
	var out []byte
	for i := 0; ; i++ {
		if i > 1<<22 {
			return out, errors.New("no progress")
		}
		p, err := next()
		out = append(out, p...)
		if err == io.EOF {
			return out, nil
		}
		if err == errWouldBlock && len(p) == 0 {
			continue
		}
		if err != nil {
			return out, err
		}
	}
}

// longChunk is the data of one large chunk in chunkedTests.
var longChunk = strings.Repeat("0123456789abcdef", 1000)

// chunkedTests are chunked bodies, decoded or refused; the fuzz targets
// start from them too.
var chunkedTests = []struct {
	name    string
	in      string
	want    string
	trailer string
	err     error // nil, or the error wanted (errors.Is)
}{
	{name: "one chunk", in: "5\r\nhello\r\n0\r\n\r\n", want: "hello"},
	{name: "two chunks", in: "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", want: "hello world"},
	{name: "hex lower", in: "a\r\n0123456789\r\n0\r\n\r\n", want: "0123456789"},
	{name: "hex upper", in: "A\r\n0123456789\r\n0\r\n\r\n", want: "0123456789"},
	{name: "leading zeros", in: "0005\r\nhello\r\n000\r\n\r\n", want: "hello"},
	// RFC 9112 §7.1: leading zeros are valid however many there are
	// (issue 9); only significant digits can overflow.
	{name: "leading zeros past 16 digits", in: "000000000000000000005\r\nhello\r\n00000000000000000000\r\n\r\n", want: "hello"},
	{name: "16 significant digits", in: "1000000000000000\r\nx", err: http1.ErrMalformedChunk},
	{name: "large chunk", in: strconv.FormatInt(int64(len(longChunk)), 16) + "\r\n" + longChunk + "\r\n0\r\n\r\n", want: longChunk},
	{name: "extensions", in: "5;name=value\r\nhello\r\n5 ; a=\"b;c\"\r\nworld\r\n0;last\r\n\r\n", want: "helloworld"},
	{name: "bare LF framing", in: "5\nhello\n0\n\n", want: "hello"},
	{name: "empty body", in: "0\r\n\r\n", want: ""},
	{
		name: "trailers kept", in: "5\r\nhello\r\n0\r\nX-Checksum: abc\r\nX-Other:  v \r\n\r\n",
		want: "hello", trailer: "X-Checksum: abc\r\nX-Other: v\r\n",
	},
	{
		name: "framing trailers dropped",
		in: "5\r\nhello\r\n0\r\nContent-Length: 10\r\nX-A: 1\r\nTransfer-Encoding: chunked\r\nHost: evil\r\n" +
			"Connection: close\r\nTE: trailers\r\nTrailer: X-A\r\nKeep-Alive: 1\r\nUpgrade: h2c\r\nX-B: 2\r\n\r\n",
		want: "hello", trailer: "X-A: 1\r\nX-B: 2\r\n",
	},
	{name: "size not hex", in: "g\r\nhello\r\n0\r\n\r\n", err: http1.ErrMalformedChunk},
	{name: "size empty", in: "\r\nhello\r\n0\r\n\r\n", err: http1.ErrMalformedChunk},
	{name: "size negative", in: "-5\r\nhello\r\n0\r\n\r\n", err: http1.ErrMalformedChunk},
	{name: "size 0x", in: "0x5\r\nhello\r\n0\r\n\r\n", err: http1.ErrMalformedChunk},
	{name: "size overflow", in: "1000000000000000\r\nhello\r\n0\r\n\r\n", err: http1.ErrMalformedChunk},
	{name: "size line too long", in: "5;" + strings.Repeat("x", 8000) + "\r\nhello\r\n0\r\n\r\n", err: http1.ErrMalformedChunk},
	{name: "data longer than size", in: "5\r\nhelloX\r\n0\r\n\r\n", err: http1.ErrMalformedChunk},
	{name: "data far longer than size", in: "5\r\nhello world, this is not a CRLF\r\n0\r\n\r\n", err: http1.ErrMalformedChunk},
	{name: "cr without lf after data", in: "5\r\nhello\r0\r\n\r\n", err: http1.ErrMalformedChunk},
	{name: "malformed trailer", in: "5\r\nhello\r\n0\r\nnot a field\r\n\r\n", err: http1.ErrMalformedChunk},
	{name: "folded trailer", in: "5\r\nhello\r\n0\r\nX-A: 1\r\n 2\r\n\r\n", err: http1.ErrMalformedChunk},
	{name: "nul in trailer", in: "5\r\nhello\r\n0\r\nX-A: 1\x002\r\n\r\n", err: http1.ErrMalformedChunk},
	{name: "truncated data", in: "5\r\nhel", err: io.ErrUnexpectedEOF},
	{name: "truncated before size", in: "5\r\nhello\r\n", err: io.ErrUnexpectedEOF},
	{name: "truncated in trailer", in: "5\r\nhello\r\n0\r\nX-A: 1\r\n", err: io.ErrUnexpectedEOF},
	{name: "huge size, short data", in: "fffffffffffffff\r\nabc", err: io.ErrUnexpectedEOF},
	{name: "oversize trailer line", in: "0\r\nX-A: " + strings.Repeat("v", http1.MaxTrailerBytes) + "\r\n\r\n", err: http1.ErrTrailerTooLarge},
	{name: "oversize trailer section", in: "0\r\n" + strings.Repeat("X-A: "+strings.Repeat("v", 1000)+"\r\n", 20) + "\r\n", err: http1.ErrTrailerTooLarge},
	{
		// Dropped fields still count: otherwise a client can stream an
		// endless trailer.
		name: "oversize trailer of dropped fields",
		in:   "0\r\n" + strings.Repeat("Host: "+strings.Repeat("v", 1000)+"\r\n", 20) + "\r\n", err: http1.ErrTrailerTooLarge,
	},
}

func TestChunkedBody(t *testing.T) {
	for _, tt := range chunkedTests {
		for _, br := range bodyReaders {
			t.Run(tt.name+"/"+br.name, func(t *testing.T) {
				b, _ := newTestBody(br.shape(strings.NewReader(tt.in)), br.bufSize, bodyChunked, 0)
				got, err := br.drain(b)
				if tt.err != nil {
					if !errors.Is(err, tt.err) {
						t.Fatalf("got error %v, want %v", err, tt.err)
					}
					return
				}
				if err != nil {
					t.Fatalf("got error %v, want none", err)
				}
				if string(got) != tt.want {
					t.Errorf("got body %q, want %q", trunc(got), trunc([]byte(tt.want)))
				}
				if string(b.trailers().lines()) != tt.trailer {
					t.Errorf("got trailer %q, want %q", b.trailers().lines(), tt.trailer)
				}
				if b.read != int64(len(tt.want)) {
					t.Errorf("got read %v, want %v", b.read, len(tt.want))
				}
			})
		}
	}
}

func trunc(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "..."
	}
	return string(b)
}

// TestChunkedBodyLeavesNextMessage checks the decoder stops exactly at the
// end of the body, so a pipelined message after it is intact.
func TestChunkedBodyLeavesNextMessage(t *testing.T) {
	const next = "GET /next HTTP/1.1\r\n\r\n"
	for _, br := range bodyReaders {
		t.Run(br.name, func(t *testing.T) {
			b, rd := newTestBody(br.shape(strings.NewReader("3\r\nabc\r\n0\r\nX: y\r\n\r\n"+next)), br.bufSize, bodyChunked, 0)
			if _, err := br.drain(b); err != nil {
				t.Fatal(err)
			}
			rest, _ := io.ReadAll(rd)
			if string(rest) != next {
				t.Errorf("got rest %q, want %q", rest, next)
			}
		})
	}
}

func TestFixedBody(t *testing.T) {
	long := strings.Repeat("x", 100<<10)
	tests := []struct {
		name   string
		in     string
		length int64
		want   string
		err    error
	}{
		{name: "exact", in: "hello", length: 5, want: "hello"},
		{name: "stops at length", in: "hello world", length: 5, want: "hello"},
		{name: "large", in: long + "tail", length: int64(len(long)), want: long},
		{name: "truncated", in: "hel", length: 5, err: io.ErrUnexpectedEOF},
		{name: "truncated large", in: long[:70000], length: int64(len(long)), err: io.ErrUnexpectedEOF},
		{name: "empty", in: "abc", length: 0, want: ""},
	}
	for _, tt := range tests {
		for _, br := range bodyReaders {
			t.Run(tt.name+"/"+br.name, func(t *testing.T) {
				b, rd := newTestBody(br.shape(strings.NewReader(tt.in)), br.bufSize, bodyFixed, tt.length)
				got, err := br.drain(b)
				if tt.err != nil {
					if !errors.Is(err, tt.err) {
						t.Fatalf("got error %v, want %v", err, tt.err)
					}
					return
				}
				if err != nil {
					t.Fatalf("got error %v, want none", err)
				}
				if string(got) != tt.want {
					t.Errorf("got body %q (%d bytes), want %q (%d bytes)", trunc(got), len(got), trunc([]byte(tt.want)), len(tt.want))
				}
				rest, _ := io.ReadAll(rd)
				if want := tt.in[len(tt.want):]; string(rest) != want {
					t.Errorf("got rest %q, want %q", trunc(rest), trunc([]byte(want)))
				}
			})
		}
	}
}

func TestUntilCloseBody(t *testing.T) {
	long := strings.Repeat("y", 50<<10)
	tests := []struct {
		name string
		in   string
	}{
		{"empty", ""},
		{"short", "hello"},
		{"long", long},
	}
	for _, tt := range tests {
		for _, br := range bodyReaders {
			t.Run(tt.name+"/"+br.name, func(t *testing.T) {
				b, _ := newTestBody(br.shape(strings.NewReader(tt.in)), br.bufSize, bodyUntilClose, 0)
				got, err := br.drain(b)
				if err != nil {
					t.Fatalf("got error %v, want none", err)
				}
				if string(got) != tt.in {
					t.Errorf("got %d bytes, want %d", len(got), len(tt.in))
				}
			})
		}
	}
	t.Run("reset is an error", func(t *testing.T) {
		errReset := errors.New("reset")
		b, _ := newTestBody(io.MultiReader(strings.NewReader("abc"), iotest.ErrReader(errReset)), 64, bodyUntilClose, 0)
		if _, err := readAllNext(b); !errors.Is(err, errReset) {
			t.Errorf("got %v, want %v", err, errReset)
		}
	})
}

// TestBodyFirstRead checks onFirstRead runs once, before the first byte is
// read, and not at all for a body that is never read.
func TestBodyFirstRead(t *testing.T) {
	for _, br := range bodyReaders {
		t.Run(br.name, func(t *testing.T) {
			calls := 0
			src := &countingReader{r: strings.NewReader("5\r\nhello\r\n0\r\n\r\n")}
			b, _ := newTestBody(src, br.bufSize, bodyChunked, 0)
			b.onFirstRead = func() {
				calls++
				if src.n != 0 {
					t.Errorf("onFirstRead after %v bytes read, want 0", src.n)
				}
			}
			if _, err := br.drain(b); err != nil {
				t.Fatal(err)
			}
			if calls != 1 {
				t.Errorf("got %v calls, want 1", calls)
			}
		})
	}
}

// countingReader counts the bytes read from it (n) and the reads (reads).
type countingReader struct {
	r     io.Reader
	n     int
	reads int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	c.reads++
	return n, err
}

// TestReaderPinnedFull checks a body can still be read when the pinned
// head fills the whole buffer.
func TestReaderPinnedFull(t *testing.T) {
	head := strings.Repeat("h", 64)
	rd := &reader{}
	rd.reset(strings.NewReader(head+"body!"), make([]byte, 64))
	if err := rd.fill(); err != nil {
		t.Fatal(err)
	}
	rd.pinHead(len(head))
	if got := string(rd.buf[:rd.pin]); got != head {
		t.Fatalf("pinned: got %q, want %q", got, head)
	}
	b := &body{}
	b.reset(rd, bodyFixed, 5)
	got, err := readAllNext(b)
	if err != nil || string(got) != "body!" {
		t.Errorf("got (%q, %v), want (%q, nil)", got, err, "body!")
	}
}

// chunkEncode renders data as canonical chunks of at most n bytes.
func chunkEncode(data []byte, n int, trailer []byte) []byte {
	var out bytes.Buffer
	for len(data) > 0 {
		m := min(n, len(data))
		out.WriteString(strconv.FormatInt(int64(m), 16) + "\r\n")
		out.Write(data[:m])
		out.WriteString("\r\n")
		data = data[m:]
	}
	out.WriteString("0\r\n")
	out.Write(trailer)
	out.WriteString("\r\n")
	return out.Bytes()
}
