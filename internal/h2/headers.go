package h2

import (
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// RequestHead is a request's head: the pseudo-header fields and the
// regular fields. A server passes one to OnRequest; a client gives one
// to OpenStream.
type RequestHead struct {
	// Method is :method, e.g. "GET".
	Method string
	// Scheme is :scheme, e.g. "https"; empty for CONNECT.
	Scheme string
	// Authority is :authority (host and port); a client that leaves it
	// empty sends the value of a "host" field instead.
	Authority string
	// Path is :path (path and query); empty for CONNECT.
	Path string
	// Protocol is :protocol of an extended CONNECT (RFC 8441), e.g.
	// "websocket"; empty otherwise.
	Protocol string
	// Fields are the regular fields, in order. Cookie may come as
	// several fields (RFC 9113 §8.2.3).
	Fields []Field
	// ContentLength is the value of content-length, -1 when absent
	// (set by a server; OpenStream ignores it).
	ContentLength int64
}

// ResponseHead is a response's head, passed to a client's OnResponse.
type ResponseHead struct {
	// Status is :status.
	Status int
	// Fields are the regular fields, in order.
	Fields []Field
	// ContentLength is the value of content-length, -1 when absent.
	ContentLength int64
}

// hbKind is what a header block being received is for.
type hbKind uint8

const (
	hbIgnore   hbKind = iota // decoded only to keep HPACK in step
	hbRequest                // opens a stream (server)
	hbResponse               // response head (client)
	hbTrailers               // ends a body
	hbClosed                 // for a stream whose peer side is over: STREAM_CLOSED
)

// Pseudo-header fields seen in a block.
const (
	pMethod uint8 = 1 << iota
	pScheme
	pAuthority
	pPath
	pProtocol
	pStatus
)

// headerBlock is the state of the header block being received; fields
// go to Conn.fields.
type headerBlock struct {
	active     bool  // CONTINUATION expected
	since      int64 // when the block began (its HEADERS frame), for HeaderTimeout
	stream     uint32
	s          *Stream
	kind       hbKind
	end        bool // END_STREAM
	selfDep    bool
	bytes      int
	frames     int
	size       int
	tooLarge   bool
	malformed  string
	sawRegular bool
	pseudo     uint8
	method     string
	scheme     string
	authority  string
	path       string
	protocol   string
	status     string
	host       string
	hasHost    bool
	cl         int64
}

func (c *Conn) headers(h frameHeader, p []byte) error {
	id := h.stream
	if id == 0 {
		return connErr(http2.ErrCodeProtocol, "HEADERS on stream 0")
	}
	frag, dep, hasDep, err := unpad(h, p, h.has(http2.FlagHeadersPriority))
	if err != nil {
		return err
	}
	c.hb = headerBlock{stream: id, end: h.has(http2.FlagHeadersEndStream), selfDep: hasDep && dep == id, cl: -1}
	c.fields = c.fields[:0]
	hb := &c.hb
	s := c.streams[id]
	switch {
	case s != nil:
		hb.s = s
		switch {
		case s.recvEnded:
			hb.kind = hbClosed
		case c.client && !s.gotFinal:
			hb.kind = hbResponse
		default:
			hb.kind = hbTrailers
		}
	case c.isIdle(id):
		if c.client {
			return connErr(http2.ErrCodeProtocol, "HEADERS on a stream the server may not open")
		}
		if id%2 == 0 {
			return connErr(http2.ErrCodeProtocol, "even stream id from a client")
		}
		c.maxPeerStream = id
		hb.kind = hbRequest
		if c.shutdownPhase == 2 && id > c.goAwayLast {
			hb.kind = hbIgnore // after our final GOAWAY (RFC 9113 §6.8)
		}
	case c.recentlyReset(id):
		hb.kind = hbIgnore
	default:
		return connErr(http2.ErrCodeStreamClosed, "HEADERS on a closed stream")
	}
	c.dec.SetEmitEnabled(hb.kind != hbIgnore && hb.kind != hbClosed)
	return c.fragment(frag, h.has(http2.FlagHeadersEndHeaders))
}

func (c *Conn) continuation(h frameHeader, p []byte) error {
	c.hb.frames++
	if m := c.set.maxContinuations; m > 0 && c.hb.frames > m {
		c.stats.HeaderFloodCloses.Add(1)
		return connErr(http2.ErrCodeEnhanceYourCalm, "too many CONTINUATION frames")
	}
	return c.fragment(p, h.has(http2.FlagContinuationEndHeaders))
}

// fragment takes one fragment of a header block. A block in one frame
// (the usual case) is decoded in place. One that goes on in CONTINUATION
// frames is kept, encoded, until its last fragment and decoded then:
// what an unfinished block holds is its encoded bytes, bounded by
// MaxHeaderBlockBytes and in time by HeaderTimeout, and never the decoded
// fields, which can cost far more (an indexed field of one byte, a slot
// of forty); the HPACK decoder then never holds a field cut between
// frames either.
func (c *Conn) fragment(frag []byte, endHeaders bool) error {
	hb := &c.hb
	hb.bytes += len(frag)
	if m := c.set.maxBlockBytes; m > 0 && hb.bytes > m {
		c.stats.HeaderFloodCloses.Add(1)
		return connErr(http2.ErrCodeEnhanceYourCalm, "header block too large")
	}
	if len(frag) == 0 && !endHeaders {
		if err := c.count(&c.win.empty, c.set.maxEmpty, &c.stats.EmptyFrameFloodCloses, "empty frames"); err != nil {
			return err
		}
	}
	if !endHeaders {
		if !hb.active {
			hb.active, hb.since = true, c.now
		}
		c.keepFragment(frag)
		return nil
	}
	hb.active = false
	block := frag
	if len(c.blockBuf) > 0 {
		c.keepFragment(frag)
		block = c.blockBuf
	}
	_, err := c.dec.Write(block)
	if err == nil {
		err = c.dec.Close()
	}
	c.dropBlock()
	if err != nil {
		return connErr(http2.ErrCodeCompression, err.Error())
	}
	c.dec.SetEmitEnabled(true)
	err = c.endBlock()
	// The fields were handed on (handlers keep strings, not the
	// slice): a connection keeps little between blocks.
	clear(c.fields)
	c.fields = c.fields[:0]
	if cap(c.fields) > keepFields {
		c.fields = nil
	}
	return err
}

// keepFields is the most field slots a connection keeps between blocks.
const keepFields = 64

// endBlock acts on a header block received whole and decoded.
func (c *Conn) endBlock() error {
	hb := &c.hb
	switch hb.kind {
	case hbIgnore:
		return nil
	case hbClosed:
		return c.streamError(hb.stream, http2.ErrCodeStreamClosed, "HEADERS on a half-closed stream")
	}
	if hb.selfDep {
		return c.streamError(hb.stream, http2.ErrCodeProtocol, "stream depends on itself")
	}
	switch hb.kind {
	case hbRequest:
		return c.request()
	case hbResponse:
		return c.response()
	}
	return c.trailers()
}

// keepFragment adds a fragment to the kept block, growing its buffer a
// frame at a time (never past MaxHeaderBlockBytes) rather than doubling
// it, so that what it holds stays close to what was received.
func (c *Conn) keepFragment(frag []byte) {
	need := len(c.blockBuf) + len(frag)
	if need > cap(c.blockBuf) {
		n := need + int(c.set.maxFrame)
		if m := c.set.maxBlockBytes; m > 0 {
			n = max(min(n, m), need)
		}
		b := make([]byte, len(c.blockBuf), n)
		copy(b, c.blockBuf)
		c.blockBuf = b
	}
	c.blockBuf = append(c.blockBuf, frag...)
}

// dropBlock lets go of a kept header block once it is decoded or the
// connection is over: a connection keeps little between blocks.
func (c *Conn) dropBlock() {
	c.blockBuf = c.blockBuf[:0]
	if cap(c.blockBuf) > keepBlockBuf {
		c.blockBuf = nil
	}
}

// keepBlockBuf is the largest kept-block buffer a connection holds on to
// between blocks.
const keepBlockBuf = 4 << 10

// HeaderBlockBytes returns the memory the connection holds for a header
// block that spans frames and has not ended yet (0 between blocks, and for
// a block in one frame): what a peer that sends HEADERS without
// END_HEADERS and then stalls costs, bounded by MaxHeaderBlockBytes and,
// in time, by HeaderTimeout.
func (c *Conn) HeaderBlockBytes() int {
	if !c.hb.active {
		return 0
	}
	return cap(c.blockBuf)
}

// onField receives each decoded field.
func (c *Conn) onField(f hpack.HeaderField) {
	hb := &c.hb
	hb.size += len(f.Name) + len(f.Value) + 32
	if hb.size > int(c.set.maxHeaderList) {
		// Keep decoding (the HPACK state must stay in step) without
		// emitting: an HPACK bomb costs its encoded size, not its
		// decoded one.
		hb.tooLarge = true
		c.dec.SetEmitEnabled(false)
		return
	}
	if hb.malformed != "" {
		return
	}
	if len(f.Name) > 0 && f.Name[0] == ':' {
		hb.malformed = c.pseudo(f)
		return
	}
	hb.sawRegular = true
	if hb.malformed = c.regular(f); hb.malformed == "" {
		c.fields = append(c.fields, f)
	}
}

// pseudo takes a pseudo-header field; it returns why the message is
// malformed, or "".
func (c *Conn) pseudo(f Field) string {
	hb := &c.hb
	if hb.sawRegular {
		return "pseudo-header field after a regular field"
	}
	if hb.kind == hbTrailers {
		return "pseudo-header field in trailers"
	}
	var bit uint8
	var dst *string
	switch f.Name {
	case ":method":
		bit, dst = pMethod, &hb.method
	case ":scheme":
		bit, dst = pScheme, &hb.scheme
	case ":authority":
		bit, dst = pAuthority, &hb.authority
	case ":path":
		bit, dst = pPath, &hb.path
	case ":protocol":
		bit, dst = pProtocol, &hb.protocol
	case ":status":
		bit, dst = pStatus, &hb.status
	default:
		return "unknown pseudo-header field"
	}
	switch {
	case c.client && bit != pStatus, !c.client && bit == pStatus:
		return "pseudo-header field of the other direction"
	case bit == pProtocol && !c.set.connectProtocol:
		return ":protocol without SETTINGS_ENABLE_CONNECT_PROTOCOL"
	case hb.pseudo&bit != 0:
		return "duplicate pseudo-header field"
	}
	hb.pseudo |= bit
	*dst = f.Value
	return ""
}

// regular checks a regular field (RFC 9113 §8.2); it returns why the
// message is malformed, or "".
func (c *Conn) regular(f Field) string {
	hb := &c.hb
	if !validName(f.Name) {
		return "invalid field name"
	}
	if !validValue(f.Value) {
		return "invalid field value"
	}
	switch f.Name {
	case "connection", "proxy-connection", "keep-alive", "transfer-encoding", "upgrade":
		return "connection-specific field"
	case "te":
		if f.Value != "trailers" {
			return "TE other than trailers"
		}
	case "content-length":
		if hb.kind == hbTrailers {
			break
		}
		n, ok := parseContentLength(f.Value)
		if !ok {
			return "invalid content-length"
		}
		if hb.cl >= 0 && hb.cl != n {
			return "conflicting content-length"
		}
		hb.cl = n
	case "host":
		if hb.kind != hbRequest {
			break
		}
		if hb.hasHost {
			return "more than one host"
		}
		hb.host, hb.hasHost = f.Value, true
	}
	return ""
}

// checkRequest checks the pseudo-header fields of a request (RFC 9113
// §8.3.1, RFC 8441 §4); it returns why it is malformed, or "". The
// values go on to an HTTP/1.1 request line, so they may hold neither
// spaces nor control characters.
func (c *Conn) checkRequest() string {
	hb := &c.hb
	if hb.pseudo&pMethod == 0 || !validToken(hb.method) {
		return "missing or invalid :method"
	}
	if hb.pseudo&pAuthority != 0 && (strings.IndexByte(hb.authority, '@') >= 0 || !validTarget(hb.authority)) {
		return "invalid :authority"
	}
	if hb.hasHost && hb.pseudo&pAuthority != 0 && hb.host != hb.authority {
		return "host differs from :authority"
	}
	if hb.end && hb.cl > 0 {
		return "content-length without a body"
	}
	if hb.method == "CONNECT" && hb.pseudo&pProtocol == 0 {
		if hb.pseudo&(pScheme|pPath) != 0 {
			return ":scheme or :path in CONNECT"
		}
		if hb.authority == "" {
			return "CONNECT without :authority"
		}
		return ""
	}
	if hb.pseudo&pProtocol != 0 && (hb.method != "CONNECT" || hb.protocol == "") {
		return ":protocol without CONNECT"
	}
	if hb.pseudo&pScheme == 0 || !validToken(hb.scheme) {
		return "missing or invalid :scheme"
	}
	if hb.path == "" || !validTarget(hb.path) {
		return "missing or invalid :path"
	}
	if hb.path[0] != '/' && (hb.path != "*" || hb.method != "OPTIONS") {
		return ":path neither absolute nor * for OPTIONS"
	}
	return ""
}

func (c *Conn) request() error {
	hb := &c.hb
	id := hb.stream
	if hb.tooLarge {
		c.stats.HeaderListTooLarge.Add(1)
		c.answerTooLarge(id, hb.end)
		return c.count(&c.win.streamErrors, c.set.maxStreamErrors, &c.stats.StreamErrorCloses, "stream errors")
	}
	if hb.malformed == "" {
		hb.malformed = c.checkRequest()
	}
	if hb.malformed != "" {
		return c.streamError(id, http2.ErrCodeProtocol, hb.malformed)
	}
	if uint32(len(c.streams)) >= c.set.maxStreams {
		return c.overStreamLimit(id)
	}
	s := c.newStream(id)
	s.recvEnded = hb.end
	s.declared = hb.cl
	r := &c.req
	r.Method, r.Scheme, r.Authority, r.Path, r.Protocol = hb.method, hb.scheme, hb.authority, hb.path, hb.protocol
	r.Fields, r.ContentLength = c.fields, hb.cl
	c.srv.OnRequest(s, r, hb.end)
	r.Fields = nil
	if hb.end {
		c.maybeClose(s)
	}
	return nil
}

// overStreamLimit answers a request that would pass
// SETTINGS_MAX_CONCURRENT_STREAMS with GOAWAY ENHANCE_YOUR_CALM, not with
// a reset of the stream alone: a client that keeps its count cannot pass
// the limit (it counts a stream open longer than we do), so one that
// does is broken or an attacker (rapid reset opens streams faster than
// it resets them), and refusing its streams one by one would only let
// it go on. A peer that has acknowledged our SETTINGS knows the limit:
// the connection ends at once. One that has not may have sent the
// stream before our SETTINGS reached it (RFC 9113 §5.1.2): its streams
// under way finish, and the GOAWAY names the last one taken, so what it
// sent beyond is unprocessed and safe to send again elsewhere (§6.8).
func (c *Conn) overStreamLimit(id uint32) error {
	c.stats.StreamsRefused.Add(1)
	c.stats.RefusedStreamCloses.Add(1)
	const reason = "streams over SETTINGS_MAX_CONCURRENT_STREAMS"
	if c.unackedSettings == 0 {
		return connErr(http2.ErrCodeEnhanceYourCalm, reason)
	}
	c.shutdownPhase = 2
	c.goAwayLast = id - 2
	c.writeGoAway(c.goAwayLast, http2.ErrCodeEnhanceYourCalm, reason)
	c.checkDone()
	return nil
}

// answerTooLarge answers a request whose head passed
// MaxHeaderListSize with 431, as Go's server does; the handler never
// sees it.
func (c *Conn) answerTooLarge(id uint32, ended bool) {
	c.encBuf.Reset()
	c.enc.WriteField(Field{Name: ":status", Value: "431"})
	c.writeHeaderBlock(id, true)
	if !ended {
		// Section 8.1: the answer is complete; the body is not wanted.
		c.writeRST(id, http2.ErrCodeNo)
	}
}

func (c *Conn) response() error {
	hb := &c.hb
	s := hb.s
	if hb.tooLarge {
		c.stats.HeaderListTooLarge.Add(1)
		return c.streamError(s.id, http2.ErrCodeProtocol, "response head too large")
	}
	if hb.malformed != "" {
		return c.streamError(s.id, http2.ErrCodeProtocol, hb.malformed)
	}
	status, ok := parseStatus(hb.status)
	if !ok || status == 101 {
		return c.streamError(s.id, http2.ErrCodeProtocol, "missing or invalid :status")
	}
	r := &c.resp
	r.Status, r.Fields, r.ContentLength = status, c.fields, hb.cl
	if status < 200 {
		if hb.end {
			return c.streamError(s.id, http2.ErrCodeProtocol, "informational response ends the stream")
		}
		c.cli.OnResponse(s, r, false)
		r.Fields = nil
		return nil
	}
	s.gotFinal = true
	if !s.isHead && status != 204 && status != 304 {
		s.declared = hb.cl
	}
	if hb.end && s.declared > 0 {
		return c.streamError(s.id, http2.ErrCodeProtocol, "content-length without a body")
	}
	s.recvEnded = hb.end
	c.cli.OnResponse(s, r, hb.end)
	r.Fields = nil
	if hb.end {
		c.maybeClose(s)
	}
	return nil
}

func (c *Conn) trailers() error {
	hb := &c.hb
	s := hb.s
	switch {
	case hb.tooLarge:
		c.stats.HeaderListTooLarge.Add(1)
		return c.streamError(s.id, http2.ErrCodeProtocol, "trailers too large")
	case !hb.end:
		return c.streamError(s.id, http2.ErrCodeProtocol, "trailers without END_STREAM")
	case hb.malformed != "":
		return c.streamError(s.id, http2.ErrCodeProtocol, hb.malformed)
	case s.declared >= 0 && s.recvBytes != s.declared:
		return c.streamError(s.id, http2.ErrCodeProtocol, "body length differs from content-length")
	}
	s.recvEnded = true
	c.sh.OnTrailers(s, c.fields)
	c.maybeClose(s)
	return nil
}

// encodeField adds f to the header block being encoded, lowercasing
// its name and leaving out what HTTP/2 forbids (connection-specific
// fields, pseudo-header fields, TE other than trailers), so that
// fields relayed from HTTP/1.1 make a well-formed message.
func (c *Conn) encodeField(f Field) {
	name := f.Name
	if name == "" || name[0] == ':' {
		return
	}
	if hasUpper(name) {
		name = strings.ToLower(name)
	}
	switch name {
	case "connection", "proxy-connection", "keep-alive", "transfer-encoding", "upgrade":
		return
	case "host":
		if c.client {
			return // sent as :authority
		}
	case "te":
		if !strings.EqualFold(f.Value, "trailers") {
			return
		}
		f.Value = "trailers"
	case "authorization", "proxy-authorization":
		// Never indexed (RFC 7541 §7.1.3): requests of different
		// clients share a backend connection's HPACK table.
		f.Sensitive = true
	case "cookie":
		if len(f.Value) < 20 {
			f.Sensitive = true
		}
	}
	f.Name = name
	c.enc.WriteField(f)
}

// writeHeaderBlock writes the encoded block as HEADERS and as many
// CONTINUATION frames as the peer's SETTINGS_MAX_FRAME_SIZE needs.
func (c *Conn) writeHeaderBlock(id uint32, end bool) {
	b := c.encBuf.Bytes()
	typ := http2.FrameHeaders
	for first := true; first || len(b) > 0; first = false {
		n := min(len(b), int(c.peerMaxFrame))
		var flags http2.Flags
		if first && end {
			flags |= http2.FlagHeadersEndStream
		}
		if n == len(b) {
			flags |= http2.FlagHeadersEndHeaders
		}
		c.wbuf = appendFrameHeader(c.wbuf, n, typ, flags, id)
		c.wbuf = append(c.wbuf, b[:n]...)
		b = b[n:]
		typ = http2.FrameContinuation
	}
	c.maybeFlush()
}

// statusText returns code as a string, without allocating for the
// common ones.
func statusText(code int) string {
	switch code {
	case 100:
		return "100"
	case 103:
		return "103"
	case 200:
		return "200"
	case 201:
		return "201"
	case 204:
		return "204"
	case 206:
		return "206"
	case 301:
		return "301"
	case 302:
		return "302"
	case 304:
		return "304"
	case 400:
		return "400"
	case 401:
		return "401"
	case 403:
		return "403"
	case 404:
		return "404"
	case 429:
		return "429"
	case 500:
		return "500"
	case 502:
		return "502"
	case 503:
		return "503"
	case 504:
		return "504"
	}
	return strconv.Itoa(code)
}

func parseStatus(s string) (int, bool) {
	if len(s) != 3 {
		return 0, false
	}
	n := 0
	for i := 0; i < 3; i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, n >= 100
}

func parseContentLength(s string) (int64, bool) {
	if s == "" || len(s) > 18 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int64(s[i]-'0')
	}
	return n, true
}

// tokenChars marks the bytes of an RFC 9110 token.
var tokenChars = func() (t [256]bool) {
	for _, b := range []byte("!#$%&'*+-.^_`|~") {
		t[b] = true
	}
	for b := '0'; b <= '9'; b++ {
		t[b] = true
	}
	for b := 'a'; b <= 'z'; b++ {
		t[b] = true
		t[b-'a'+'A'] = true
	}
	return t
}()

// validName reports whether s is a valid HTTP/2 field name: a token
// without uppercase letters (RFC 9113 §8.2.1).
func validName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if b := s[i]; !tokenChars[b] || 'A' <= b && b <= 'Z' {
			return false
		}
	}
	return true
}

func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !tokenChars[s[i]] {
			return false
		}
	}
	return true
}

// validValue reports whether s is a valid field value: no control
// characters but tab, no whitespace at either end (RFC 9113 §8.2.1).
func validValue(s string) bool {
	if s == "" {
		return true
	}
	if isSpace(s[0]) || isSpace(s[len(s)-1]) {
		return false
	}
	return httpguts.ValidHeaderFieldValue(s)
}

// validTarget reports whether s has neither spaces nor control
// characters (:path and :authority go into a request line).
func validTarget(s string) bool {
	for i := 0; i < len(s); i++ {
		if b := s[i]; b <= ' ' || b == 0x7f {
			return false
		}
	}
	return true
}

func isSpace(b byte) bool { return b == ' ' || b == '\t' }

func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return true
		}
	}
	return false
}
