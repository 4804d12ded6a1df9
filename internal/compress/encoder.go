package compress

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Encoder compresses one answer's body as it streams: bytes go in as
// they come from the backend, and what the coding has ready comes out,
// to be written in their place. It holds no more than the coding's own
// window and what has not been taken yet. Get one from a Pool; Put it
// back when the answer ends.
type Encoder struct {
	coding Coding
	level  int
	w      encoderWriter
	out    outBuf
	pool   *Pool
}

// encoderWriter is what the three codings' writers have in common.
type encoderWriter interface {
	io.Writer
	Flush() error
	Close() error
	Reset(io.Writer)
}

// outBuf is an io.Writer over a growing slice.
type outBuf struct{ b []byte }

func (o *outBuf) Write(p []byte) (int, error) {
	o.b = append(o.b, p...)
	return len(p), nil
}

// Coding returns the encoder's coding.
func (e *Encoder) Coding() Coding { return e.coding }

// Transform takes the next piece of the body and returns what the
// encoder has ready to send, valid until the next call: with flush, all
// it has (a flush of the coding: the client can decode what came so
// far, for answers that trickle); with end, the coding's end too. The
// result may be empty.
func (e *Encoder) Transform(p []byte, flush, end bool) ([]byte, error) {
	e.out.b = e.out.b[:0]
	if len(p) > 0 {
		if _, err := e.w.Write(p); err != nil {
			return nil, fmt.Errorf("compressing with %v: %w", e.coding, err)
		}
	}
	var err error
	switch {
	case end:
		err = e.w.Close()
	case flush:
		err = e.w.Flush()
	}
	if err != nil {
		return nil, fmt.Errorf("compressing with %v: %w", e.coding, err)
	}
	return e.out.b, nil
}

// Release gives the encoder back to the pool it came from; the encoder
// must not be used after. It implements wire.BodyTransform with
// Transform.
func (e *Encoder) Release() { e.pool.Put(e) }

// maxKeptOut bounds the output buffer an encoder keeps when it goes back
// to its pool.
const maxKeptOut = 64 << 10

// Pool keeps encoders of each coding at one level for reuse. It is safe
// for concurrent use.
type Pool struct {
	levels [nCodings]int
	pools  [nCodings]sync.Pool
	// inUse counts the encoders out of the pool (Get less Put).
	inUse atomic.Int64
}

// Levels of each coding when a Pool is given 0: gzip 5 (nginx's 1 is
// faster but a proxy's CPU is better spent once for many bytes), zstd
// 3 (its default), brotli 4 (a streaming level; 11 is for static
// assets compressed ahead of time).
const (
	DefaultGzipLevel   = 5
	DefaultZstdLevel   = 3
	DefaultBrotliLevel = 4
)

// NewPool returns a pool for the levels given (0: the default of each).
// Levels are gzip 1-9, zstd 1-22, brotli 0-11.
func NewPool(gzipLevel, zstdLevel, brotliLevel int) (*Pool, error) {
	if gzipLevel == 0 {
		gzipLevel = DefaultGzipLevel
	}
	if zstdLevel == 0 {
		zstdLevel = DefaultZstdLevel
	}
	if brotliLevel == 0 {
		brotliLevel = DefaultBrotliLevel
	}
	if gzipLevel < 1 || gzipLevel > 9 {
		return nil, fmt.Errorf("gzip level %d: want 1 to 9", gzipLevel)
	}
	if zstdLevel < 1 || zstdLevel > 22 {
		return nil, fmt.Errorf("zstd level %d: want 1 to 22", zstdLevel)
	}
	if brotliLevel < 0 || brotliLevel > 11 {
		return nil, fmt.Errorf("brotli level %d: want 0 to 11", brotliLevel)
	}
	p := &Pool{}
	p.levels[Gzip], p.levels[Zstd], p.levels[Brotli] = gzipLevel, zstdLevel, brotliLevel
	return p, nil
}

// window is the history zstd and brotli keep (their defaults are 8 and
// 4 MiB): an answer being compressed holds about 2 to 3 MiB with it,
// instead of about 10, for little less compression of web answers,
// which are mostly smaller than the window anyway. gzip's is 32 KiB,
// deflate's limit; its encoder holds about 1 MiB.
const (
	zstdWindow  = 256 << 10
	brotliLGWin = 18 // 2^18 bytes
)

// nCodings is the number of codings, Identity included.
const nCodings = int(Brotli) + 1

// Get returns an encoder for c, ready for a new body.
func (p *Pool) Get(c Coding) *Encoder {
	p.inUse.Add(1)
	if e, ok := p.pools[c].Get().(*Encoder); ok {
		e.w.Reset(&e.out)
		return e
	}
	e := &Encoder{coding: c, level: p.levels[c], pool: p}
	switch c {
	case Gzip:
		w, _ := gzip.NewWriterLevel(&e.out, e.level) // the level was checked
		e.w = w
	case Zstd:
		w, _ := zstd.NewWriter(&e.out, zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(e.level)),
			zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true), zstd.WithWindowSize(zstdWindow))
		e.w = zstdWriter{w}
	case Brotli:
		e.w = brotli.NewWriterOptions(&e.out, brotli.WriterOptions{Quality: e.level, LGWin: brotliLGWin})
	default:
		p.inUse.Add(-1)
		panic("compress: no encoder for identity")
	}
	return e
}

// Put gives an encoder back for reuse.
func (p *Pool) Put(e *Encoder) {
	if cap(e.out.b) > maxKeptOut {
		e.out.b = nil
	}
	e.out.b = e.out.b[:0]
	p.inUse.Add(-1)
	p.pools[e.coding].Put(e)
}

// InUse returns the number of encoders out of the pool: got and not yet
// put back (or released).
func (p *Pool) InUse() int64 { return p.inUse.Load() }

// zstdWriter adapts zstd.Encoder (whose Reset returns nothing useful to
// us and whose Flush and Close match).
type zstdWriter struct{ *zstd.Encoder }

func (z zstdWriter) Reset(w io.Writer) { z.Encoder.Reset(w) }
