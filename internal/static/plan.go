package static

import (
	"net/http"
	"strconv"
)

// Head lines that do not depend on the request.
const (
	allowLine     = "Allow: GET, HEAD\r\n"
	textLines     = "Content-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\n"
	htmlLine      = "Content-Type: text/html; charset=utf-8\r\n"
	rangesLine    = "Accept-Ranges: bytes\r\n"
	noContentLine = "Content-Length: 0\r\n"
)

// Plan fills a with the answer to r. It overwrites every field of a (a
// File from a previous answer must have been released or handed on
// first). It writes nothing; on a cache hit it makes no system call and
// does not allocate once a's buffers have grown; on a miss it opens and
// stats the file (see the package doc for what it blocks on).
func (p *Planner) Plan(r Request, a *Answer) {
	a.reset()
	m := r.Method()
	head := string(m) == http.MethodHead
	if !head && string(m) != http.MethodGet {
		a.text(http.StatusMethodNotAllowed, "", false, -1)
		return
	}
	if p.h.closed.Load() {
		a.text(http.StatusServiceUnavailable, "", head, -1)
		return
	}
	t := resolvePath(r.Path(), p.h.stripPrefix, a)
	if t.status != 0 {
		a.text(t.status, "", head, -1)
		return
	}
	e := p.get(t)
	switch e.kind {
	case kindError:
		a.text(e.status, "", head, -1)
	case kindDir:
		a.redirect(t.full, head)
	default:
		a.file(r, e, head)
	}
}

// file plans the answer from a regular file, whose reference a now
// holds: handed on in a.File, or released here when nothing is sent.
func (a *Answer) file(r Request, e *entry, head bool) {
	// RFC 9110 section 13.2.2, in net/http's order.
	c := e.ifMatch(r.Header("if-match"))
	if c == condNone {
		c = not(e.modifiedSince(r.Header("if-unmodified-since")))
	}
	if c == condFalse {
		e.file.Release()
		a.Status = http.StatusPreconditionFailed
		a.buf = append(a.buf, noContentLine...)
		a.buf = append(a.buf, e.validators...)
		a.Header = a.buf
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
		a.buf = append(a.buf, e.etagLine...)
		a.Header = a.buf
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
		a.text(http.StatusRequestedRangeNotSatisfiable, "invalid range\n", head, -1)
		return
	case rangeNoOverlap:
		if e.size > 0 {
			e.file.Release()
			a.text(http.StatusRequestedRangeNotSatisfiable, "invalid range: failed to overlap\n", head, e.size)
			return
		}
		// Some clients send Range with every request; an empty file
		// is answered whole rather than 416 (as net/http does).
	}
	a.buf = append(a.buf, rangesLine...)
	a.buf = append(a.buf, e.meta...)
	a.buf = append(a.buf, "Content-Length: "...)
	a.buf = strconv.AppendInt(a.buf, length, 10)
	a.buf = append(a.buf, "\r\n"...)
	if a.Status == http.StatusPartialContent {
		a.buf = append(a.buf, "Content-Range: bytes "...)
		a.buf = strconv.AppendInt(a.buf, start, 10)
		a.buf = append(a.buf, '-')
		a.buf = strconv.AppendInt(a.buf, start+length-1, 10)
		a.buf = append(a.buf, '/')
		a.buf = strconv.AppendInt(a.buf, e.size, 10)
		a.buf = append(a.buf, "\r\n"...)
	}
	a.Header = a.buf
	if head || length == 0 {
		e.file.Release()
		return
	}
	a.File, a.Offset, a.Length = e.file, start, length
}

// text plans a plain-text answer: body, or "<status> <reason>\n" when
// body is "". A 405 says what is allowed; a 416 for a file of size
// bytes (size >= 0) says its length (RFC 9110 section 14.4).
func (a *Answer) text(status int, body string, head bool, size int64) {
	a.Status = status
	b := len(a.buf)
	if body == "" {
		a.buf = strconv.AppendInt(a.buf, int64(status), 10)
		a.buf = append(a.buf, ' ')
		a.buf = append(a.buf, http.StatusText(status)...)
		a.buf = append(a.buf, '\n')
	} else {
		a.buf = append(a.buf, body...)
	}
	h := len(a.buf)
	if status == http.StatusMethodNotAllowed {
		a.buf = append(a.buf, allowLine...)
	}
	if size >= 0 {
		a.buf = append(a.buf, "Content-Range: bytes */"...)
		a.buf = strconv.AppendInt(a.buf, size, 10)
		a.buf = append(a.buf, "\r\n"...)
	}
	a.buf = append(a.buf, textLines...)
	a.finish(b, h, head)
}

// redirect plans the 301 to full + "/", with net/http's short HTML body.
func (a *Answer) redirect(full []byte, head bool) {
	a.Status = http.StatusMovedPermanently
	b := len(a.buf)
	a.buf = append(a.buf, `<a href="`...)
	u := len(a.buf)
	a.buf = appendEscaped(a.buf, full)
	if full[len(full)-1] != '/' {
		a.buf = append(a.buf, '/')
	}
	ue := len(a.buf)
	a.buf = append(a.buf, "\">Moved Permanently</a>.\n\n"...)
	h := len(a.buf)
	a.buf = append(a.buf, "Location: "...)
	a.buf = append(a.buf, a.buf[u:ue]...)
	a.buf = append(a.buf, "\r\n"...)
	a.buf = append(a.buf, htmlLine...)
	a.finish(b, h, head)
}

// finish ends a fixed answer whose body is a.buf[b:h] and whose head
// lines follow it: Content-Length is added, Body set unless for HEAD.
func (a *Answer) finish(b, h int, head bool) {
	a.buf = append(a.buf, "Content-Length: "...)
	a.buf = strconv.AppendInt(a.buf, int64(h-b), 10)
	a.buf = append(a.buf, "\r\n"...)
	a.Header = a.buf[h:]
	if !head {
		a.Body = a.buf[b:h]
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
