// Package static answers requests from files: the `static` route action.
//
// It is a planner, not a writer. Plan decides the whole answer to a
// request — status, head lines, and which byte range of which open file
// to send — without writing anything and without allocating once its
// cache is warm, so that an event loop can render the status line, Date
// and Connection itself, write the head and sendfile(2) the range. An
// http.Handler adapter (ServeHTTP) runs on top of Plan for callers that
// still want one.
//
// Semantics, kept from the http.ServeContent handler this replaced:
//   - GET and HEAD only; anything else is 405 with Allow: GET, HEAD.
//   - Files are opened through os.Root: no path, dot segment or symlink
//     reaches outside the root. Percent-escapes are decoded; an escaped
//     "/" (%2F) or NUL (%00) is refused with 404 (no file name holds
//     either), a malformed escape is 400.
//   - A directory serves its index file; a directory asked for without
//     a trailing slash is 301 to the same path with one; there are no
//     listings. Missing is 404, unreadable is 403, anything that is not
//     a regular file is 404.
//   - ETag is "mtime-size" in hex, as nginx makes it; Last-Modified is
//     the modification time. If-Match and If-Unmodified-Since (412),
//     If-None-Match (weak comparison, "*") and If-Modified-Since (304)
//     follow RFC 9110 section 13.2.2, in net/http's order.
//   - One byte range (first-last, first- or -suffix) is 206 with
//     Content-Range; a range that does not overlap the file is 416 with
//     Content-Range: bytes */size; a malformed one is 416. If-Range takes
//     an ETag (strong comparison) or a date. Several ranges are answered
//     with the whole file, 200: RFC 9110 section 14.2 lets a server
//     ignore Range, and a multipart/byteranges body cannot go out as
//     one head and one sendfile.
//   - Content-Type comes from the file name's extension
//     (mime.TypeByExtension), or else from its first 512 bytes
//     (http.DetectContentType).
//   - With Options.Precompressed, a client that accepts one of its
//     codings gets the file's sibling compressed ahead of time (foo.js.br
//     for foo.js), with the original's Content-Type, Content-Encoding and
//     the sibling's own length and validators; every file answer then
//     has Vary: Accept-Encoding (precompressed.go).
//
// Where this differs from the old handler (each guarded by the
// differential test): an escaped "/" no longer reaches a subdirectory,
// and a NUL is refused even where ".." would have removed it; several
// ranges are 200 instead of a multipart 206; a range of no bytes
// (bytes=-0) is unsatisfiable, as RFC 9110 section 14.1.1 says, instead
// of an empty 206 (and an empty file ignores Range); the prefix is
// stripped from the normalised path the route matched, not from the raw
// one; Location is that normalised path, percent-encoded (the old one
// was the decoded raw path, which for "//host/.." pointed at another
// site); the method is checked before the path (POST of a malformed path
// is 405, not 400); a process out of descriptors gets 503, not 404.
//
// The open-file cache keeps recently used answers — open files with
// their rendered head lines, directories, and errors — for
// Options.CacheValid (like nginx's open_file_cache_valid), at most
// Options.CacheEntries of them, least recently used out first. A change
// on disk is seen at most CacheValid later. A file that leaves the cache
// while an answer still sends from it stays open until that answer's
// File.Release.
package static

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/helios-lb/helios/internal/compress"
	"github.com/helios-lb/helios/internal/wire"
)

// Defaults for zero Options fields.
const (
	// DefaultCacheEntries is the cache size when Options.CacheEntries is
	// 0: the descriptors a static route may keep open are counted
	// against RLIMIT_NOFILE, so it stays small; a miss costs an open(2)
	// and an fstat(2).
	DefaultCacheEntries = 256
	// DefaultCacheValid is the validity when Options.CacheValid is 0.
	DefaultCacheValid = time.Second
)

// Options tune a Handler's open-file cache. The zero value is ready to
// use: a cache of DefaultCacheEntries answers valid DefaultCacheValid,
// one shard per processor.
type Options struct {
	// CacheEntries bounds the cache: at most this many answers (open
	// files, directories and errors) are kept over all shards, so at most
	// this many descriptors are held while no answer is being sent. Zero
	// means DefaultCacheEntries; negative turns the cache off (every Plan
	// opens the file and the answer's Release closes it).
	CacheEntries int
	// CacheValid is how long a cached answer is used before the name is
	// looked up again: a file changed, replaced or deleted on disk is
	// seen at most this long afterwards. Zero means DefaultCacheValid;
	// negative turns the cache off.
	CacheValid time.Duration
	// Shards is how many planners Shard hands out, each with its own part
	// of the cache and its own lock, so that event loops planning at once
	// never wait for each other: no loop parks on a lock another CPU
	// holds, and neither the lock nor a hot file's reference count moves
	// between CPUs on every request (nginx's open_file_cache is per
	// worker too). The price is a descriptor per hot file per shard, and
	// CacheEntries split between the shards. Zero means
	// runtime.GOMAXPROCS(0); negative means 1 (one cache shared by all).
	Shards int
	// Now tells the time for cache validity (tests give a fake clock);
	// nil means the monotonic clock.
	Now func() time.Time
	// Precompressed are the codings of files compressed ahead of time
	// that are sent in the original's place to clients that accept them
	// (precompressed.go), in the order preferred among codings a client
	// accepts equally; nil looks for none.
	Precompressed []compress.Coding
}

// Handler answers requests for files below one root directory. Its
// methods are safe for concurrent use.
type Handler struct {
	root        *os.Root
	index       string
	stripPrefix string
	valid       time.Duration // <= 0: no cache
	// clock tells the time since New, for cache validity.
	clock  func() time.Duration
	shards []*Planner
	closed atomic.Bool
	// inlined is the bytes of small files held in memory (inline).
	inlined atomic.Int64
	// precompressed is Options.Precompressed.
	precompressed []compress.Coding
	// answers holds *Answer for ServeHTTP, so that their buffers are
	// reused.
	answers sync.Pool
}

// New opens root. index names the file served for a directory ("" means
// index.html); stripPrefix is removed from the normalised request path
// before it is looked up ("" removes nothing).
func New(root, index, stripPrefix string, o Options) (*Handler, error) {
	if index == "" {
		index = "index.html"
	}
	if !validIndex(index) {
		return nil, fmt.Errorf("static index %q: %w", index, errBadIndex)
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, fmt.Errorf("opening static root: %w", err)
	}
	if len(o.Precompressed) > maxPrecompressed {
		r.Close()
		return nil, fmt.Errorf("static: %d precompressed codings, at most %d", len(o.Precompressed), maxPrecompressed)
	}
	h := &Handler{root: r, index: index, stripPrefix: stripPrefix, valid: o.CacheValid,
		precompressed: append([]compress.Coding(nil), o.Precompressed...)}
	h.answers.New = func() any { return new(Answer) }
	if h.valid == 0 {
		h.valid = DefaultCacheValid
	}
	// time.Since reads only the monotonic clock: half the cost of
	// time.Now, which was a third of a cached Plan.
	start := time.Now()
	h.clock = func() time.Duration { return time.Since(start) }
	if o.Now != nil {
		start = o.Now()
		h.clock = func() time.Duration { return o.Now().Sub(start) }
	}
	entries := o.CacheEntries
	if entries == 0 {
		entries = DefaultCacheEntries
	}
	if entries < 0 {
		h.valid = -1
	}
	n := o.Shards
	if n == 0 {
		n = runtime.GOMAXPROCS(0)
	}
	if n < 1 {
		n = 1
	}
	if h.valid > 0 && n > entries {
		n = entries
	}
	h.shards = make([]*Planner, n)
	for i := range h.shards {
		// The entries are split so that the whole cache holds at most
		// CacheEntries descriptors.
		c := entries / n
		if i < entries%n {
			c++
		}
		h.shards[i] = newPlanner(h, c)
	}
	return h, nil
}

var errBadIndex = errors.New("must be a file name without /, NUL, . or ..")

func validIndex(s string) bool {
	if s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] == '/' || s[i] == 0 {
			return false
		}
	}
	return true
}

// Shard returns the planner for event loop i: loops that each use their
// own never contend for a lock. Any i is accepted (it is taken modulo
// the number of shards; a negative i means shard 0). Every planner is
// safe for concurrent use, so sharing one is correct, only slower.
func (h *Handler) Shard(i int) *Planner {
	if i < 0 {
		i = 0
	}
	return h.shards[i%len(h.shards)]
}

// Plan fills a with the answer to r, using shard 0; see Planner.Plan.
// It is for callers that are not event loops (ServeHTTP, a blocking
// driver): they share shard 0, whose lock is held only for a map lookup,
// so a loop planning on shard 0 at the same time waits at most that long.
func (h *Handler) Plan(r Request, a *Answer) { h.shards[0].Plan(r, a) }

// Close releases the root directory and the cached files. Answers being
// sent keep their files open until released; Plan after Close answers
// 503.
func (h *Handler) Close() error {
	h.closed.Store(true)
	for _, p := range h.shards {
		p.clear()
	}
	return h.root.Close()
}

// PlanFile plans the answer to ex with loop's planner (wire.Files: the
// engine sends what Plan planned itself).
func (h *Handler) PlanFile(loop int, ex wire.Exchange, a *wire.FileAnswer) { h.Shard(loop).Plan(ex, a) }
