// Package accesslog writes one line per request: time, client, method,
// host, path, query, protocol, status, bytes, duration, route, upstream,
// backend, attempts, the last attempt's queue, connect and first-byte
// times, user agent, referer, request id, the trace and span ids when
// tracing is on, and the error when there was one. Every request is
// logged (no sampling).
//
// Three formats: JSON (one object per line), console (zap's console
// shape, tab-separated time, level, message and the JSON fields), and
// nginx's "combined" format, which log tools (GoAccess, AWStats, fail2ban)
// read as they are.
//
// Lines are encoded here, into a buffer, with no allocation: zap's
// general-purpose encoder cost 1.7 µs and five allocations per request, a
// seventh of the proxy's whole per-request budget.
//
// # Code on an event loop never blocks
//
// Record runs on an event loop, so it never writes: lines go into a 64
// KiB block under a short lock, and a full block is handed to a writer
// goroutine through a bounded queue (64 blocks, 4 MiB, made as they are
// first needed: an idle logger holds one). When the writer falls that far
// behind (a quarter of a second at 35,000 requests a second, which a
// writer goroutine waiting for a processor on a busy machine can be) — a disk stalled, a pipe nobody reads — the
// block just filled is dropped and its lines are counted (Dropped,
// helios_access_log_dropped_total): memory stays bounded and requests are
// never held up by the log, which is the trade nginx makes the other way
// round (its workers block on a full disk). Blocks are recycled, so
// logging allocates nothing once running. Blocks are also handed over at
// least once a second, and on Close, which waits for the writer.
package accesslog

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/wire"
)

// Format is the line encoding.
type Format int

// The formats, named like logging.access_format.
const (
	JSON     Format = iota // {"time":...,"client":...,...}: one object per line
	Console                // time<TAB>INFO<TAB>request<TAB>{...}
	Combined               // nginx's combined: client - - [time] "request" status bytes "referer" "user agent"
)

// ParseFormat returns the format named json, console or combined.
func ParseFormat(name string) (Format, error) {
	switch name {
	case "json":
		return JSON, nil
	case "console":
		return Console, nil
	case "combined":
		return Combined, nil
	}
	return 0, fmt.Errorf("%q is not an access log format (json, console, combined)", name)
}

const (
	// flushSize is how much a block holds before it is handed over.
	flushSize = 64 << 10
	// queueBlocks is how many full blocks may wait for the writer. 8
	// (half a second of a quiet machine's load) lost lines under a full
	// benchmark run, with the loops keeping both processors busy.
	queueBlocks = 64
	// flushEvery is the longest a line waits in a block.
	flushEvery = time.Second
)

// block is a buffer of whole lines.
type block struct {
	b     []byte
	lines int
}

// Logger is a proxy.Recorder that writes access log lines to w from a
// goroutine of its own. It is safe for concurrent use.
type Logger struct {
	format Format
	w      io.Writer

	mu       sync.Mutex
	cur      *block
	closed   bool
	timeSec  int64
	timeFmt  []byte // JSON and console: "2006-01-02T15:04:05." of timeSec, UTC
	localFmt []byte // combined: "02/Jan/2006:15:04:05 -0700" of timeSec, local time

	full    chan *block // to the writer
	free    chan *block // back from it
	dropped atomic.Uint64

	errMu sync.Mutex
	err   error

	stop       chan struct{}
	flushDone  chan struct{}
	writerDone chan struct{}
}

// New returns a logger writing to w in the given format and starts its
// writer and the goroutine that hands blocks over every second; Close
// stops them.
func New(w io.Writer, f Format) *Logger {
	l := &Logger{format: f, w: w,
		full:       make(chan *block, queueBlocks),
		free:       make(chan *block, queueBlocks+2),
		stop:       make(chan struct{}),
		flushDone:  make(chan struct{}),
		writerDone: make(chan struct{}),
	}
	// One block being filled, up to queueBlocks queued, one being
	// written: blocks are made when the free list is empty (handOff), at
	// most queueBlocks+2 of them, which the free list holds.
	l.cur = newBlock()
	go l.writeLoop()
	go l.flushLoop()
	return l
}

func newBlock() *block { return &block{b: make([]byte, 0, flushSize+4096)} }

// writeLoop writes the blocks handed over, in order, until Close.
func (l *Logger) writeLoop() {
	defer close(l.writerDone)
	for blk := range l.full {
		if _, err := l.w.Write(blk.b); err != nil {
			l.dropped.Add(uint64(blk.lines))
			l.errMu.Lock()
			if l.err == nil {
				l.err = err
			}
			l.errMu.Unlock()
		}
		blk.b, blk.lines = blk.b[:0], 0
		l.free <- blk
	}
}

// flushLoop hands over whatever has gathered, every second.
func (l *Logger) flushLoop() {
	defer close(l.flushDone)
	t := time.NewTicker(flushEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			l.mu.Lock()
			if len(l.cur.b) > 0 && !l.closed {
				l.handOff()
			}
			l.mu.Unlock()
		case <-l.stop:
			return
		}
	}
}

// handOff queues the current block for the writer and takes an empty
// one, or drops the block when the queue is full. It never blocks.
// Called with mu held.
func (l *Logger) handOff() {
	select {
	case l.full <- l.cur:
	default:
		l.dropped.Add(uint64(l.cur.lines))
		l.cur.b, l.cur.lines = l.cur.b[:0], 0
		return
	}
	select {
	case l.cur = <-l.free:
	default:
		l.cur = newBlock() // the queue took the block, so there are at most queueBlocks+2
	}
}

// Dropped returns how many lines were lost: dropped because the writer
// was too far behind, or not written because the write failed.
func (l *Logger) Dropped() uint64 { return l.dropped.Load() }

// Close hands over what is buffered, waits for the writer to write it,
// and stops the goroutines. Lines recorded after Close are dropped and
// counted. It returns the first write error seen, if any.
func (l *Logger) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return l.firstErr()
	}
	l.closed = true
	close(l.stop)
	if len(l.cur.b) > 0 {
		l.full <- l.cur // may wait for the writer: Close is not on a loop
		l.cur = newBlock()
	}
	close(l.full)
	l.mu.Unlock()
	<-l.flushDone
	<-l.writerDone
	return l.firstErr()
}

func (l *Logger) firstErr() error {
	l.errMu.Lock()
	defer l.errMu.Unlock()
	return l.err
}

// Record adds the line for one request. It never blocks on I/O.
func (l *Logger) Record(ex wire.Exchange, r proxy.Record) {
	end := r.Start.Add(r.Duration)
	// Most lines fit here; a longer one (a huge user agent) allocates.
	var scratch [2048]byte
	var line []byte
	if l.format == Combined {
		line = appendCombined(scratch[:0], ex, &r)
	} else {
		line = appendFields(scratch[:0], ex, &r)
	}

	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		l.dropped.Add(1)
		return
	}
	b := l.appendPrefix(l.cur.b, ex, end)
	b = append(b, line...)
	if l.format != Combined {
		b = append(b, '}')
	}
	l.cur.b = append(b, '\n')
	l.cur.lines++
	if len(l.cur.b) >= flushSize {
		l.handOff()
	}
	l.mu.Unlock()
}

// appendPrefix writes the line's start, which holds the time (cached per
// second, so it is written under mu). Called with mu held.
func (l *Logger) appendPrefix(b []byte, ex wire.Exchange, t time.Time) []byte {
	if sec := t.Unix(); sec != l.timeSec || l.timeFmt == nil {
		l.timeSec = sec
		l.timeFmt = t.UTC().AppendFormat(l.timeFmt[:0], "2006-01-02T15:04:05.")
		l.localFmt = t.Local().AppendFormat(l.localFmt[:0], "02/Jan/2006:15:04:05 -0700")
	}
	switch l.format {
	case Combined:
		b = ex.ClientAddr().AppendTo(b)
		b = append(b, " - - ["...)
		b = append(b, l.localFmt...)
		return append(b, "] "...)
	case Console:
		b = append(b, l.timeFmt...)
		b = append3(b, t.Nanosecond()/1e6)
		return append(b, "Z\tINFO\trequest\t{"...)
	}
	b = append(b, `{"time":"`...)
	b = append(b, l.timeFmt...)
	b = append3(b, t.Nanosecond()/1e6)
	return append(b, `Z",`...)
}

// append3 writes n (0-999) as three digits.
func append3(b []byte, n int) []byte {
	return append(b, byte('0'+n/100), byte('0'+n/10%10), byte('0'+n%10))
}
