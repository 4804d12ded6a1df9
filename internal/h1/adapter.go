package h1

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ServeHTTP answers the exchange with a net/http handler. It builds an
// *http.Request (allocating, so it is kept off the proxy path) and adapts
// the connection to http.ResponseWriter.
func (c *conn) ServeHTTP(h http.Handler) (int, int64) {
	r := c.httpRequest()
	aw := &httpWriter{c: c, h: make(http.Header), clen: -1}
	if r == nil {
		c.respondText(400, "malformed request target")
		return 400, 0
	}
	h.ServeHTTP(aw, r)
	aw.finish()
	return c.respStatus, aw.bytes
}

func (c *conn) httpRequest() *http.Request {
	u, err := url.ParseRequestURI(string(c.req.uri))
	if err != nil {
		return nil
	}
	hdr := make(http.Header, len(c.req.hdr.fields))
	for _, f := range c.req.hdr.fields {
		if f.kind == kHost {
			continue
		}
		k := http.CanonicalHeaderKey(string(f.name))
		hdr[k] = append(hdr[k], string(f.value))
	}
	r := &http.Request{
		Method:     string(c.req.method),
		URL:        u,
		RequestURI: string(c.req.target),
		Proto:      "HTTP/1." + strconv.Itoa(int(c.req.minor)),
		ProtoMajor: 1,
		ProtoMinor: int(c.req.minor),
		Header:     hdr,
		Host:       string(c.req.authority),
		RemoteAddr: c.remote.String(),
		Body:       http.NoBody,
	}
	if c.req.hasBody() {
		r.Body = io.NopCloser(&c.reqBody)
		r.ContentLength = c.req.contentLength
		if c.req.chunked {
			r.ContentLength = -1
			r.TransferEncoding = []string{"chunked"}
		}
	}
	return r
}

// httpWriter is an http.ResponseWriter over a client connection.
type httpWriter struct {
	c       *conn
	h       http.Header
	wrote   bool
	chunked bool
	noBody  bool
	bytes   int64
	// clen is the Content-Length the handler declared; -1 when none.
	clen int64
}

func (w *httpWriter) Header() http.Header { return w.h }

func (w *httpWriter) WriteHeader(status int) {
	if w.wrote || w.c.respStarted {
		return
	}
	if status < 100 || status > 599 {
		status = 500
	}
	if status < 200 {
		// Interim responses are not relayed by this adapter.
		return
	}
	w.wrote = true
	c := w.c
	c.respStarted = true
	c.respStatus = status
	c.ensureWriter()
	c.armWrite()
	wr := &c.wr
	wr.Write(c.srv.status.line(status))
	if _, ok := w.h["Date"]; !ok {
		wr.Write(c.srv.date.line(c.start))
	}
	w.noBody = equalFold(c.req.method, "head") || status == 204 || status == 304
	if vs := w.h["Content-Length"]; len(vs) > 0 {
		// One valid length is framing this writer enforces; anything else
		// is dropped like net/http drops it, and the body is chunked.
		if n, ok := parseContentLength([]byte(vs[0])); ok && len(vs) == 1 {
			w.clen = n
		} else {
			delete(w.h, "Content-Length")
		}
	}
	if w.clen < 0 && !w.noBody {
		if c.req.minor == 1 {
			w.chunked = true
		} else {
			c.closeAfter = true
		}
	}
	for k, vs := range w.h {
		switch k {
		case "Connection", "Transfer-Encoding", "Keep-Alive":
			continue
		}
		if !isToken([]byte(k)) {
			// A name with a space, colon or newline would forge fields;
			// net/http drops such names too.
			continue
		}
		for _, v := range vs {
			wr.WriteString(k)
			wr.WriteString(": ")
			// A CR or LF in a value would end the field and start a
			// forged one (response splitting): net/http turns them into
			// spaces, and so does this.
			wr.WriteString(headerValueClean.Replace(v))
			wr.WriteString("\r\n")
		}
	}
	if w.chunked {
		wr.WriteString("Transfer-Encoding: chunked\r\n")
	}
	c.writeConnectionHeader()
	wr.WriteString("\r\n")
}

func (w *httpWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		if _, ok := w.h["Content-Type"]; !ok && len(p) > 0 {
			w.h.Set("Content-Type", http.DetectContentType(p))
		}
		w.WriteHeader(http.StatusOK)
	}
	if w.noBody || len(p) == 0 {
		return len(p), nil
	}
	var tooLong error
	if w.clen >= 0 && w.bytes+int64(len(p)) > w.clen {
		// Bytes past the declared length would be read by the client as
		// the start of the next response.
		p = p[:w.clen-w.bytes]
		tooLong = http.ErrContentLength
	}
	c := w.c
	c.armWrite()
	if w.chunked {
		c.wr.writeHex(int64(len(p)))
		c.wr.WriteString("\r\n")
	}
	n, err := c.wr.Write(p)
	if w.chunked {
		c.wr.WriteString("\r\n")
	}
	w.bytes += int64(n)
	if err != nil {
		c.broken = true
		return n, wrapClientErr(err)
	}
	return n, tooLong
}

// Flush sends what has been written so far.
func (w *httpWriter) Flush() {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	w.c.wrFlush()
}

func (w *httpWriter) finish() {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if w.chunked {
		w.c.wr.WriteString("0\r\n\r\n")
	}
	w.c.respBytes = w.bytes
	if w.c.wr.err != nil {
		w.c.broken = true
	}
	if !w.noBody && w.clen > w.bytes {
		// A short body leaves the client waiting for the rest; closing
		// the connection tells it the response is cut off.
		w.c.broken = true
	}
}

// headerValueClean turns CR, LF and NUL in handler header values into
// spaces.
var headerValueClean = strings.NewReplacer("\r", " ", "\n", " ", "\x00", " ")

// Hijack hands the connection to the handler (WebSocket servers need it).
// Bytes the client already sent are served first by the returned reader.
func (w *httpWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c := w.c
	if w.wrote {
		return nil, nil, errors.New("h1: hijack after the response started")
	}
	c.wr.flush()
	c.respStarted = true
	c.respStatus = http.StatusSwitchingProtocols
	c.hijacked = true
	c.detached = true
	pending := append([]byte(nil), c.rd.buffered()...)
	c.rd.discard(len(pending))
	c.nc.SetDeadline(time.Time{})
	br := bufio.NewReader(io.MultiReader(bytes.NewReader(pending), c.nc))
	bw := bufio.NewWriter(c.nc)
	return c.nc, bufio.NewReadWriter(br, bw), nil
}
