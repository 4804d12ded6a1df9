package static

import (
	"errors"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// sniffLen is how much of a file http.DetectContentType looks at.
const sniffLen = 512

// lookUp finds what t names on disk: an open regular file (a
// directory's index when t ends in "/"), a directory to redirect to, or
// an error status. It blocks in open(2), fstat(2) and, for a file whose
// name gives no type, one pread(2) — what nginx does on a cache miss.
func (h *Handler) lookUp(t target) *entry {
	key := string(t.key)
	name := key[:len(t.name)]
	f, st, status := h.openStat(name)
	if status != 0 {
		return errorEntry(key, status)
	}
	if st.IsDir() {
		f.Close()
		if !t.slash {
			// Relative links in the index need the trailing slash.
			return &entry{key: key, kind: kindDir}
		}
		if f, st, status = h.openStat(path.Join(name, h.index)); status != 0 {
			return errorEntry(key, status)
		}
	}
	if !st.Mode().IsRegular() {
		// Directories as index files, devices, FIFOs, sockets.
		f.Close()
		return errorEntry(key, http.StatusNotFound)
	}
	e := newFileEntry(key, f, st, !t.sibling)
	h.inline(e.file, st.Size())
	return e
}

// Small files the cache keeps are held in memory as well as open, so
// that an answer from one is its head and its bytes in one write(2):
// for a file of a few KiB, sendfile(2) after the head costs more than
// the copy it saves. Up to inlineBudget bytes per route's cache are
// held; a file rewritten in place is served as it was read until the
// cache checks it again (static.cache_valid, as its length and
// validators are).
const (
	inlineMax    = 32 << 10
	inlineBudget = 32 << 20
)

// inline reads f, of size bytes, into memory when it is small, the cache
// is on and the budget has room. A short read (the file changed as it
// was read) keeps it on disk.
func (h *Handler) inline(f *File, size int64) {
	if h.valid <= 0 || size == 0 || size > inlineMax {
		return
	}
	if h.inlined.Add(size) > inlineBudget {
		h.inlined.Add(-size)
		return
	}
	data := make([]byte, size)
	if n, err := f.f.ReadAt(data, 0); n != len(data) || (err != nil && err != io.EOF) {
		h.inlined.Add(-size)
		return
	}
	f.data, f.held = data, &h.inlined
}

// errorEntry is the answer status for key. Only answers that stay true
// until something changes on disk (403, 404) are cached; a 503 is not.
func errorEntry(key string, status int) *entry {
	return &entry{key: key, kind: kindError, status: status, nocache: status == http.StatusServiceUnavailable}
}

// openStat opens name below the root and stats it. O_NONBLOCK keeps
// open(2) of a FIFO from waiting for a writer (it is refused as not a
// regular file); it changes nothing for regular files.
func (h *Handler) openStat(name string) (*os.File, fs.FileInfo, int) {
	f, err := h.root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, errStatus(err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, errStatus(err)
	}
	return f, st, 0
}

// errStatus is the status for a failed open or stat.
func errStatus(err error) int {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return http.StatusNotFound
	case errors.Is(err, fs.ErrPermission):
		return http.StatusForbidden
	case errors.Is(err, os.ErrClosed),
		errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE), errors.Is(err, syscall.ENOMEM):
		// The handler was closed under the request (a reload), or the
		// process is out of descriptors: try again later.
		return http.StatusServiceUnavailable
	default:
		// Escapes from the root (through symlinks or "..") land here,
		// and so do names the system refuses (ENOTDIR, ENAMETOOLONG).
		return http.StatusNotFound
	}
}

// newFileEntry renders what every answer from f repeats; typed: its
// Content-Type is its own (a precompressed sibling's is not).
func newFileEntry(key string, f *os.File, st fs.FileInfo, typed bool) *entry {
	e := &entry{key: key, kind: kindFile, size: st.Size(), mtime: st.ModTime()}
	e.zeroTime = e.mtime.IsZero() || e.mtime.Equal(time.Unix(0, 0))
	ctype := ""
	if typed {
		ctype = mime.TypeByExtension(filepath.Ext(st.Name()))
	}
	if ctype == "" && typed {
		var b [sniffLen]byte
		n, _ := f.ReadAt(b[:], 0)
		ctype = http.DetectContentType(b[:n])
	}
	m := make([]byte, 0, 64+len(ctype))
	m = append(m, ctype...)
	t := len(m)
	// A validator from modification time and size, as nginx makes it.
	m = append(m, '"')
	m = strconv.AppendInt(m, e.mtime.Unix(), 16)
	m = append(m, '-')
	m = strconv.AppendInt(m, e.size, 16)
	m = append(m, '"')
	te := len(m)
	if !e.zeroTime {
		m = e.mtime.UTC().AppendFormat(m, http.TimeFormat)
	}
	e.ctype = m[:t:t]
	e.etag = m[t:te:te]
	e.lastMod = m[te:]
	e.file = newFile(f)
	return e
}
