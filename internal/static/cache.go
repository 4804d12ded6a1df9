package static

import (
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// File is an open file that answers send from. It stays open while the
// cache holds it or any answer still sends from it: each holds a
// reference, and the last Release closes it.
//
// A file rewritten in place may be shorter than when its answer was
// planned: when sendfile(2) or ReadAt reaches the end of the file before
// Length bytes, the head has promised more than there is, and the
// connection must be closed.
type File struct {
	f    *os.File
	fd   int
	refs atomic.Int32
	// data is the whole file when it is small enough to keep in memory
	// (Handler.inline), nil otherwise; held charges the bytes to the
	// handler's budget until the last Release.
	data []byte
	held *atomic.Int64
}

// newFile wraps f with one reference, its opener's.
func newFile(f *os.File) *File {
	x := &File{f: f, fd: int(f.Fd())}
	x.refs.Store(1)
	return x
}

// Fd returns the file's descriptor, for sendfile(2) or pread(2). It is
// valid until the caller's Release.
func (f *File) Fd() int { return f.fd }

// ReadAt reads len(p) bytes from the file at off (pread, or a copy when
// the file is in memory), for callers that copy instead of using
// sendfile; it follows io.ReaderAt.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	if f.data == nil {
		return f.f.ReadAt(p, off)
	}
	if off >= int64(len(f.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Bytes returns the whole file when it is held in memory (a small file
// the cache keeps, read when it was opened), nil otherwise.
func (f *File) Bytes() []byte { return f.data }

// Release gives back the reference an Answer carried. Call it exactly
// once per Answer whose File was set, from any goroutine, when sending
// has finished or has been abandoned. The descriptor is closed when no
// answer and no cache entry holds the file any more.
func (f *File) Release() {
	switch n := f.refs.Add(-1); {
	case n == 0:
		f.f.Close()
		if f.data != nil {
			f.held.Add(-int64(len(f.data)))
		}
	case n < 0:
		panic("static: File released more times than it was handed out")
	}
}

// acquire takes one more reference; only while one is already held.
func (f *File) acquire() { f.refs.Add(1) }

// kind is what a name turned out to be.
type kind uint8

const (
	// kindFile: a regular file (or a directory's index), sent from file.
	kindFile kind = iota
	// kindDir: a directory asked for without a trailing slash (301).
	kindDir
	// kindError: an answer with status only (403, 404, 503).
	kindError
)

// entry is one name's answer, as the cache keeps it. Everything but the
// list links and the file's references is set before the entry is
// shared and never changes: a stale entry is replaced, not updated, so
// planners read it without the lock.
type entry struct {
	key     string
	kind    kind
	status  int           // kindError
	expires time.Duration // on Handler.clock
	// nocache marks an answer not to keep (a passing error).
	nocache bool

	// For kindFile:
	file *File
	size int64
	// mtime is the modification time; zeroTime reports it unknown
	// (zero or the Unix epoch), in which case there is no Last-Modified
	// and dates in conditional requests are ignored, as net/http does.
	mtime    time.Time
	zeroTime bool
	// ctype is the Content-Type value, etag the ETag value (with its
	// quotes) and lastMod the Last-Modified value (empty for a file
	// without a modification time), the fields of every answer from
	// the file.
	ctype, etag, lastMod []byte

	prev, next *entry // LRU list, most recent after Planner.lru
}

// Planner plans answers with its own part of the open-file cache. Its
// methods are safe for concurrent use; an event loop that has a Planner
// of its own (Handler.Shard) never waits for another loop.
type Planner struct {
	h   *Handler
	max int // entries kept; 0 when the cache is off

	mu sync.Mutex
	m  map[string]*entry
	// lru is the sentinel of a circular list: lru.next is the most
	// recently used entry, lru.prev the least.
	lru entry
}

func newPlanner(h *Handler, max int) *Planner {
	p := &Planner{h: h, m: make(map[string]*entry)}
	if h.valid > 0 {
		p.max = max
	}
	p.lru.next, p.lru.prev = &p.lru, &p.lru
	return p
}

// get returns the answer for t, from the cache when it holds a fresh
// one, else from the file system. When the entry has a file, one
// reference is taken for the caller.
func (p *Planner) get(t target) *entry {
	now := p.h.clock()
	if p.max > 0 {
		var stale *entry
		p.mu.Lock()
		e := p.m[string(t.key)]
		if e != nil {
			if now < e.expires {
				if p.lru.next != e {
					p.unlink(e)
					p.pushFront(e)
				}
				if e.file != nil {
					e.file.acquire()
				}
				p.mu.Unlock()
				return e
			}
			p.remove(e)
			stale = e
		}
		p.mu.Unlock()
		stale.drop()
	}
	e := p.h.lookUp(t)
	if p.max <= 0 || e.nocache {
		return e // the opener's reference, if any, is the caller's
	}
	e.expires = now + p.h.valid
	var old, evicted *entry
	p.mu.Lock()
	if p.h.closed.Load() {
		p.mu.Unlock()
		return e
	}
	if old = p.m[e.key]; old != nil {
		p.remove(old) // planned at the same time by another caller
	}
	p.m[e.key] = e
	p.pushFront(e)
	if len(p.m) > p.max {
		evicted = p.lru.prev
		p.remove(evicted)
	}
	if e.file != nil {
		e.file.acquire() // the caller's; the opener's stays with the cache
	}
	p.mu.Unlock()
	old.drop()
	evicted.drop()
	return e
}

// clear empties the cache; files being sent stay open until released.
func (p *Planner) clear() {
	p.mu.Lock()
	var all []*entry
	for _, e := range p.m {
		all = append(all, e)
	}
	for _, e := range all {
		p.remove(e)
	}
	p.mu.Unlock()
	for _, e := range all {
		e.drop()
	}
}

// Len returns how many answers the planner's cache holds.
func (p *Planner) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.m)
}

// remove takes e out of the map and the list; p.mu is held.
func (p *Planner) remove(e *entry) {
	delete(p.m, e.key)
	p.unlink(e)
}

func (p *Planner) unlink(e *entry) {
	e.prev.next = e.next
	e.next.prev = e.prev
	e.prev, e.next = nil, nil
}

func (p *Planner) pushFront(e *entry) {
	e.prev = &p.lru
	e.next = p.lru.next
	e.next.prev = e
	p.lru.next = e
}

// drop gives back the cache's reference to a removed entry's file.
// Outside p.mu: it may close the file. A nil e does nothing.
func (e *entry) drop() {
	if e != nil && e.file != nil {
		e.file.Release()
	}
}
