package static

import (
	"net/http"
	"time"
)

// cond is the outcome of one precondition (RFC 9110 section 13.1).
type cond uint8

const (
	condNone cond = iota // absent, or to be ignored
	condTrue
	condFalse
)

// The checks below follow net/http's (fs.go) line for line, on byte
// slices, so that the answers stay those of http.ServeContent.

// ifMatch: true when v lists the current ETag (strong comparison) or
// is "*".
func (e *entry) ifMatch(v []byte) cond {
	if len(v) == 0 {
		return condNone
	}
	if e.listed(v, strongMatch) {
		return condTrue
	}
	return condFalse
}

// ifNoneMatch: false when v lists the current ETag (weak comparison) or
// is "*".
func (e *entry) ifNoneMatch(v []byte) cond {
	if len(v) == 0 {
		return condNone
	}
	if e.listed(v, weakMatch) {
		return condFalse
	}
	return condTrue
}

// listed reports whether the entity-tag list v holds "*" or a tag that
// matches e's. A malformed tag ends the list, as in net/http.
func (e *entry) listed(v []byte, match func(a, b []byte) bool) bool {
	for {
		v = trimSpace(v)
		switch {
		case len(v) == 0:
			return false
		case v[0] == ',':
			v = v[1:]
			continue
		case v[0] == '*':
			return true
		}
		etag, rest := scanETag(v)
		if etag == nil {
			return false
		}
		if match(etag, e.etag) {
			return true
		}
		v = rest
	}
}

// modifiedSince compares the modification time, at the resolution of
// Last-Modified (whole seconds), with the date v: condTrue when the file
// changed after it, condFalse when not, condNone when v is absent or not
// a date or the time is unknown. If-Modified-Since and (inverted)
// If-Unmodified-Since ask this.
func (e *entry) modifiedSince(v []byte) cond {
	if len(v) == 0 || e.zeroTime {
		return condNone
	}
	t, ok := e.parseTime(v)
	if !ok {
		return condNone
	}
	if e.mtime.Truncate(time.Second).Compare(t) <= 0 {
		return condFalse
	}
	return condTrue
}

// not inverts c; condNone stays.
func not(c cond) cond {
	switch c {
	case condTrue:
		return condFalse
	case condFalse:
		return condTrue
	}
	return condNone
}

// ifRange reports whether a Range may be honoured: If-Range holds the
// current ETag (strong comparison) or the modification time to the
// second.
func (e *entry) ifRange(v []byte) cond {
	if len(v) == 0 {
		return condNone
	}
	if etag, _ := scanETag(v); etag != nil {
		if strongMatch(etag, e.etag) {
			return condTrue
		}
		return condFalse
	}
	if e.mtime.IsZero() {
		return condFalse
	}
	t, ok := e.parseTime(v)
	if ok && t.Unix() == e.mtime.Unix() {
		return condTrue
	}
	return condFalse
}

// parseTime parses an HTTP date. The usual value, our own Last-Modified
// sent back, is recognised without parsing (or allocating).
func (e *entry) parseTime(v []byte) (time.Time, bool) {
	if len(e.lastMod) > 0 && string(v) == string(e.lastMod) {
		return e.mtime.Truncate(time.Second), true
	}
	t, err := http.ParseTime(string(v))
	return t, err == nil
}

// scanETag returns the entity tag (W/"..." or "...") at the start of v
// after optional white space, and what follows it; nil when there is
// none.
func scanETag(v []byte) (etag, rest []byte) {
	v = trimSpace(v)
	start := 0
	if len(v) >= 2 && v[0] == 'W' && v[1] == '/' {
		start = 2
	}
	if len(v[start:]) < 2 || v[start] != '"' {
		return nil, nil
	}
	for i := start + 1; i < len(v); i++ {
		switch c := v[i]; {
		case c == 0x21 || c >= 0x23 && c <= 0x7E || c >= 0x80:
		case c == '"':
			return v[:i+1], v[i+1:]
		default:
			return nil, nil
		}
	}
	return nil, nil
}

// strongMatch compares entity tags as RFC 9110 section 8.8.3.2 says:
// equal and not weak.
func strongMatch(a, b []byte) bool {
	return len(a) > 0 && a[0] == '"' && string(a) == string(b)
}

// weakMatch compares entity tags ignoring a W/ prefix.
func weakMatch(a, b []byte) bool {
	return string(trimWeak(a)) == string(trimWeak(b))
}

func trimWeak(b []byte) []byte {
	if len(b) >= 2 && b[0] == 'W' && b[1] == '/' {
		return b[2:]
	}
	return b
}

// trimSpace trims what textproto.TrimString trims: ASCII space, tab,
// CR and LF.
func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// rangeResult is what a Range header asks for.
type rangeResult uint8

const (
	rangeNone      rangeResult = iota // no Range: the whole file
	rangeOne                          // one satisfiable range
	rangeMany                         // several: answered with the whole file
	rangeInvalid                      // malformed: 416
	rangeNoOverlap                    // nothing overlaps the file: 416 */size
)

// parseRange reads a Range header for a file of size bytes, as net/http
// does, except that a lone range of no bytes (bytes=-0, or any suffix of
// an empty file) does not overlap (RFC 9110 section 14.1.1: a suffix
// range must be non-zero to be satisfiable), where net/http answered an
// empty 206. Among several ranges it still counts, so the set is served
// as several ranges are. For rangeOne it returns the range.
func parseRange(v []byte, size int64) (res rangeResult, start, length int64) {
	if len(v) == 0 {
		return rangeNone, 0, 0
	}
	const unit = "bytes="
	if len(v) < len(unit) || string(v[:len(unit)]) != unit {
		return rangeInvalid, 0, 0
	}
	v = v[len(unit):]
	n := 0
	noOverlap := false
	for more := true; more; {
		var ra []byte
		ra, v, more = cutOK(v, ',')
		ra = trimSpace(ra)
		if len(ra) == 0 {
			continue
		}
		first, last, ok := cutOK(ra, '-')
		if !ok {
			return rangeInvalid, 0, 0
		}
		first, last = trimSpace(first), trimSpace(last)
		var s, l int64
		if len(first) == 0 {
			// A suffix: the last so many bytes.
			if len(last) == 0 || last[0] == '-' {
				return rangeInvalid, 0, 0
			}
			i, ok := parseInt(last)
			if !ok || i < 0 {
				return rangeInvalid, 0, 0
			}
			i = min(i, size)
			s, l = size-i, i
		} else {
			i, ok := parseInt(first)
			if !ok || i < 0 {
				return rangeInvalid, 0, 0
			}
			if i >= size {
				noOverlap = true
				continue
			}
			s = i
			if len(last) == 0 {
				l = size - s
			} else {
				j, ok := parseInt(last)
				if !ok || s > j {
					return rangeInvalid, 0, 0
				}
				l = min(j, size-1) - s + 1
			}
		}
		// An empty range (a suffix of 0 bytes, or any suffix of an empty
		// file) still counts as one of several: "bytes=0-,-0" is served
		// like every other set of several ranges.
		n++
		if n == 1 {
			start, length = s, l
		}
	}
	switch {
	case n == 1 && length == 0:
		return rangeNoOverlap, 0, 0
	case n == 1:
		return rangeOne, start, length
	case n > 1:
		return rangeMany, 0, 0
	case noOverlap:
		return rangeNoOverlap, 0, 0
	}
	return rangeNone, 0, 0
}

// cutOK splits b around the first sep, if there is one.
func cutOK(b []byte, sep byte) (before, after []byte, found bool) {
	for i, c := range b {
		if c == sep {
			return b[:i], b[i+1:], true
		}
	}
	return b, nil, false
}

// parseInt parses what strconv.ParseInt(s, 10, 64) accepts: an optional
// sign and decimal digits, without overflow.
func parseInt(b []byte) (int64, bool) {
	neg := false
	if len(b) > 0 && (b[0] == '+' || b[0] == '-') {
		neg = b[0] == '-'
		b = b[1:]
	}
	if len(b) == 0 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		if n > 1<<63/10 {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
		if n > 1<<63 {
			return 0, false
		}
	}
	if !neg && n > 1<<63-1 {
		return 0, false
	}
	if neg {
		return -int64(n), true
	}
	return int64(n), true
}
