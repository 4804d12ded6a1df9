package static

import (
	"net/http"
	"strconv"

	"github.com/helios-lb/helios/internal/compress"
)

// Plan fills a with the answer to r. It overwrites every field of a (a
// File from a previous answer must have been released or handed on
// first). It writes nothing; on a cache hit it makes no system call and
// does not allocate once a's buffers have grown; on a miss it opens and
// stats the file (see the package doc for what it blocks on).
func (p *Planner) Plan(r Request, a *Answer) {
	reset(a)
	m := r.Method()
	head := string(m) == http.MethodHead
	if !head && string(m) != http.MethodGet {
		text(a, http.StatusMethodNotAllowed, "", false, -1)
		return
	}
	if p.h.closed.Load() {
		text(a, http.StatusServiceUnavailable, "", head, -1)
		return
	}
	t := resolvePath(r.Path(), p.h.stripPrefix, a)
	if t.status != 0 {
		text(a, t.status, "", head, -1)
		return
	}
	e := p.get(t)
	switch e.kind {
	case kindError:
		text(a, e.status, "", head, -1)
	case kindDir:
		redirect(a, t.full, head)
	default:
		rep := representation{ctype: e.ctype, vary: len(p.h.precompressed) > 0}
		if rep.vary {
			if s, c := p.sibling(r, t, a); s != nil {
				// The sibling is sent in the original's place, as the
				// original's type.
				e.file.Release()
				e, rep.coding = s, c
			}
		}
		file(a, r, e, head, rep)
	}
}

// representation is what a file's answer says of the bytes it sends
// beyond the entry's own validators: their Content-Type (a precompressed
// sibling's is its original's), their coding (Identity: none), and
// whether the answer varies on Accept-Encoding (a route with
// precompressed siblings).
type representation struct {
	ctype  []byte
	coding compress.Coding
	vary   bool
}

// file plans the answer from a regular file, whose reference a now
// holds: handed on in a.File, or released here when nothing is sent.
func file(a *Answer, r Request, e *entry, head bool, rep representation) {
	// RFC 9110 section 13.2.2, in net/http's order.
	c := e.ifMatch(r.Header("if-match"))
	if c == condNone {
		c = not(e.modifiedSince(r.Header("if-unmodified-since")))
	}
	if c == condFalse {
		e.file.Release()
		a.Status = http.StatusPreconditionFailed
		field(a, nameContentLength, valueZero)
		validators(a, e)
		return
	}
	c = e.ifNoneMatch(r.Header("if-none-match"))
	if c == condNone {
		c = e.modifiedSince(r.Header("if-modified-since"))
	}
	if c == condFalse {
		// RFC 9110 section 15.4.5: the validators, no representation
		// metadata (and Last-Modified only without an ETag).
		e.file.Release()
		a.Status = http.StatusNotModified
		field(a, nameETag, e.etag)
		if rep.vary {
			// RFC 9110 §15.4.5: the Vary the 200 would have.
			field(a, nameVary, valueAcceptEncoding)
		}
		return
	}

	a.Status = http.StatusOK
	start, length := int64(0), e.size
	rng := r.Header("range")
	if len(rng) > 0 && e.ifRange(r.Header("if-range")) == condFalse {
		rng = nil
	}
	switch res, s, l := parseRange(rng, e.size); res {
	case rangeOne:
		a.Status = http.StatusPartialContent
		start, length = s, l
	case rangeInvalid:
		e.file.Release()
		text(a, http.StatusRequestedRangeNotSatisfiable, "invalid range\n", head, -1)
		return
	case rangeNoOverlap:
		if e.size > 0 {
			e.file.Release()
			text(a, http.StatusRequestedRangeNotSatisfiable, "invalid range: failed to overlap\n", head, e.size)
			return
		}
		// Some clients send Range with every request; an empty file
		// is answered whole rather than 416 (as net/http does).
	}
	buf := a.Scratch[scratchBuf]
	buf = strconv.AppendInt(buf, length, 10)
	cl := len(buf)
	if a.Status == http.StatusPartialContent {
		buf = append(buf, "bytes "...)
		buf = strconv.AppendInt(buf, start, 10)
		buf = append(buf, '-')
		buf = strconv.AppendInt(buf, start+length-1, 10)
		buf = append(buf, '/')
		buf = strconv.AppendInt(buf, e.size, 10)
	}
	a.Scratch[scratchBuf] = buf
	field(a, nameAcceptRanges, valueBytes)
	field(a, nameContentType, rep.ctype)
	validators(a, e)
	field(a, nameContentLength, buf[:cl:cl])
	if a.Status == http.StatusPartialContent {
		field(a, nameContentRange, buf[cl:])
	}
	if rep.coding != compress.Identity {
		field(a, nameContentEncoding, rep.coding.Token())
	}
	if rep.vary {
		field(a, nameVary, valueAcceptEncoding)
	}
	if head || length == 0 {
		e.file.Release()
		return
	}
	a.File, a.Offset, a.Length = e.file, start, length
}

// validators adds the entry's ETag and, when it has one, Last-Modified.
func validators(a *Answer, e *entry) {
	field(a, nameETag, e.etag)
	if len(e.lastMod) > 0 {
		field(a, nameLastModified, e.lastMod)
	}
}

// text plans a plain-text answer: body, or "<status> <reason>\n" when
// body is "". A 405 says what is allowed; a 416 for a file of size
// bytes (size >= 0) says its length (RFC 9110 section 14.4).
func text(a *Answer, status int, body string, head bool, size int64) {
	a.Status = status
	buf := a.Scratch[scratchBuf]
	b := len(buf)
	if body == "" {
		buf = strconv.AppendInt(buf, int64(status), 10)
		buf = append(buf, ' ')
		buf = append(buf, http.StatusText(status)...)
		buf = append(buf, '\n')
	} else {
		buf = append(buf, body...)
	}
	h := len(buf)
	if size >= 0 {
		buf = append(buf, "bytes */"...)
		buf = strconv.AppendInt(buf, size, 10)
	}
	r := len(buf)
	buf = strconv.AppendInt(buf, int64(h-b), 10)
	a.Scratch[scratchBuf] = buf
	if status == http.StatusMethodNotAllowed {
		field(a, nameAllow, valueAllow)
	}
	if size >= 0 {
		field(a, nameContentRange, buf[h:r:r])
	}
	field(a, nameContentType, valueText)
	field(a, nameNoSniff, valueNoSniff)
	field(a, nameContentLength, buf[r:])
	if !head {
		a.Body = buf[b:h:h]
	}
}

// redirect plans the 301 to full + "/", with net/http's short HTML body.
func redirect(a *Answer, full []byte, head bool) {
	a.Status = http.StatusMovedPermanently
	buf := a.Scratch[scratchBuf]
	b := len(buf)
	buf = append(buf, `<a href="`...)
	u := len(buf)
	buf = appendEscaped(buf, full)
	if full[len(full)-1] != '/' {
		buf = append(buf, '/')
	}
	ue := len(buf)
	buf = append(buf, "\">Moved Permanently</a>.\n\n"...)
	h := len(buf)
	buf = strconv.AppendInt(buf, int64(h-b), 10)
	a.Scratch[scratchBuf] = buf
	field(a, nameLocation, buf[u:ue:ue])
	field(a, nameContentType, valueHTML)
	field(a, nameContentLength, buf[h:])
	if !head {
		a.Body = buf[b:h:h]
	}
}

// appendEscaped appends the path p percent-encoded: every byte but
// letters, digits, "/" and -._~!$()*+,;=:@ escaped, so that the result
// is a valid URI path and safe inside an HTML attribute (no &, ', ").
func appendEscaped(b, p []byte) []byte {
	const hex = "0123456789ABCDEF"
	for _, c := range p {
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			b = append(b, c)
			continue
		}
		switch c {
		case '/', '-', '.', '_', '~', '!', '$', '(', ')', '*', '+', ',', ';', '=', ':', '@':
			b = append(b, c)
		default:
			b = append(b, '%', hex[c>>4], hex[c&15])
		}
	}
	return b
}
