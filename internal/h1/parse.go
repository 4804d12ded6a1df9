package h1

import (
	"bytes"
)

// statusError is a request the engine refuses before any handler runs. The
// connection is closed after the answer, since framing may be lost.
type statusError struct {
	status int
	msg    string
}

func (e *statusError) Error() string { return e.msg }

func badRequest(msg string) error { return &statusError{400, msg} }

// request is a parsed request head. Slices point into the connection's
// read buffer (pinned until the exchange ends).
type request struct {
	method []byte
	target []byte // request-target as received
	uri    []byte // origin-form target to forward: path and query
	path   []byte // path of the target, without query
	minor  byte   // HTTP/1.minor
	hdr    header

	host      []byte // host for routing, without port
	authority []byte // host[:port] as the client named it
	// hostOverride is set when an absolute-form target named the host;
	// it replaces the Host header when forwarding (RFC 9112 §3.2.2).
	hostOverride bool
	// hasHost: the request had a Host field (HTTP/1.0 ones may not).
	hasHost bool

	contentLength int64 // -1 when absent
	chunked       bool
	keepAlive     bool
	upgrade       bool // Connection: upgrade with an Upgrade header
	expect100     bool
	hasXFF        bool

	// id is the request id the pipeline made, forwarded as X-Request-Id
	// in place of the client's when idLen > 0 (ForwardRequestID).
	id    [32]byte
	idLen int
}

func (r *request) reset() {
	hdr := r.hdr
	hdr.reset()
	*r = request{hdr: hdr, contentLength: -1}
}

// upgradeProtocols returns the Upgrade header's value when the request
// asks for an upgrade, nil otherwise.
func (r *request) upgradeProtocols() []byte {
	if !r.upgrade {
		return nil
	}
	v, _ := r.hdr.get("upgrade")
	return v
}

// hasBody reports whether the request carries a body.
func (r *request) hasBody() bool { return r.chunked || r.contentLength > 0 }

// findHeadEnd returns the length of the head (through the empty line) in
// b, or -1 when b does not yet hold a complete head. from is where a
// previous call stopped scanning, so slow clients cost linear time.
func findHeadEnd(b []byte, from int) (end int, scanned int) {
	i := from
	for {
		j := indexByte(b[i:], '\n')
		if j < 0 {
			// Resume at the last byte: it may be the '\r' before a '\n'.
			s := len(b) - 1
			if s < 0 {
				s = 0
			}
			return -1, s
		}
		i += j + 1
		if i < len(b) && b[i] == '\n' {
			return i + 1, i + 1
		}
		if i+1 < len(b) && b[i] == '\r' && b[i+1] == '\n' {
			return i + 2, i + 2
		}
		if i >= len(b) || (b[i] == '\r' && i+1 >= len(b)) {
			return -1, i - 1
		}
	}
}

// nextLine splits the first line (without CRLF or LF) off b.
func nextLine(b []byte) (line, rest []byte) {
	i := indexByte(b, '\n')
	if i < 0 {
		return b, nil
	}
	line = b[:i]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	return line, b[i+1:]
}

// limits bound a request head beyond its size, and say what happens to
// header names with underscores. The zero value gives the defaults.
type limits struct {
	// maxFields bounds the header fields; more get 431. 0: 100.
	maxFields int
	// maxMethod bounds the method's length; longer ones get 501. 0: 32.
	maxMethod int
	// underscores forwards header names with an underscore; otherwise
	// they are dropped (nginx's underscores_in_headers off): CGI, WSGI
	// and PHP read X_Forwarded_For as X-Forwarded-For.
	underscores bool
}

// Defaults of limits, and of the listener keys that set them.
const (
	defaultMaxHeaderCount = 100
	defaultMaxMethodBytes = 32
)

// parseRequest parses a complete request head with the default limits.
func parseRequest(head []byte, r *request) error { return parseRequestLimits(head, r, limits{}) }

// parseRequestLimits parses a complete request head (as found by
// findHeadEnd). It enforces the framing rules that keep a request from
// meaning two different things to Helios and the backend (RFC 9112 §6.3,
// §11.2), and the bounds of lim.
func parseRequestLimits(head []byte, r *request, lim limits) error {
	r.reset()
	maxFields, maxMethod := lim.maxFields, lim.maxMethod
	if maxFields <= 0 {
		maxFields = defaultMaxHeaderCount
	}
	if maxMethod <= 0 {
		maxMethod = defaultMaxMethodBytes
	}
	// RFC 9112 §2.2: ignore empty lines before the request line.
	for len(head) > 0 && (head[0] == '\r' || head[0] == '\n') {
		head = head[1:]
	}
	line, rest := nextLine(head)
	sp1 := indexByte(line, ' ')
	if sp1 <= 0 {
		return badRequest("malformed request line")
	}
	r.method = line[:sp1]
	if !isToken(r.method) {
		return badRequest("malformed method")
	}
	if len(r.method) > maxMethod {
		return &statusError{501, "method not implemented"}
	}
	if misspelledMethod(r.method) {
		return badRequest("method names are case-sensitive")
	}
	line = line[sp1+1:]
	sp2 := bytes.LastIndexByte(line, ' ')
	if sp2 <= 0 {
		return badRequest("malformed request line")
	}
	r.target = line[:sp2]
	version := line[sp2+1:]
	switch string(version) {
	case "HTTP/1.1":
		r.minor = 1
	case "HTTP/1.0":
		r.minor = 0
	default:
		if len(version) > 5 && string(version[:5]) == "HTTP/" {
			return &statusError{505, "HTTP version not supported"}
		}
		return badRequest("malformed HTTP version")
	}
	for _, c := range r.target {
		if c <= ' ' || c == 0x7f {
			return badRequest("malformed request target")
		}
	}
	if err := r.splitTarget(); err != nil {
		return err
	}

	var (
		hostSeen, clSeen, teSeen int
		connValues               [4][]byte
		nConn                    int
		teValue                  []byte
	)
	for len(rest) > 0 {
		line, rest = nextLine(rest)
		if len(line) == 0 {
			break
		}
		if line[0] == ' ' || line[0] == '\t' {
			// RFC 9112 §5.2: obsolete line folding is rejected.
			return badRequest("obsolete line folding")
		}
		colon := indexByte(line, ':')
		if colon <= 0 {
			return badRequest("malformed header line")
		}
		name := line[:colon]
		if !isToken(name) {
			// Includes whitespace before the colon (RFC 9112 §5.1).
			return badRequest("malformed header name")
		}
		value := trimOWS(line[colon+1:])
		if !validValue(value) {
			return badRequest("invalid character in header value")
		}
		if len(r.hdr.fields) == maxFields {
			return &statusError{431, "too many header fields"}
		}
		k := classify(name)
		r.hdr.fields = append(r.hdr.fields, field{name: name, value: value, kind: k,
			// No name Helios acts on has an underscore: such a field is
			// kOther, and dropping it only keeps it from the backend.
			drop: !lim.underscores && indexByte(name, '_') >= 0})
		switch k {
		case kHost:
			hostSeen++
			if !r.hostOverride {
				r.authority = value
			}
		case kContentLength:
			n, ok := parseContentLength(value)
			if !ok {
				return badRequest("invalid Content-Length")
			}
			if clSeen > 0 && n != r.contentLength {
				return badRequest("conflicting Content-Length headers")
			}
			clSeen++
			r.contentLength = n
		case kTransferEncoding:
			teSeen++
			teValue = value
		case kConnection:
			if nConn < len(connValues) {
				connValues[nConn] = value
				nConn++
			} else {
				return badRequest("too many Connection headers")
			}
		case kExpect:
			if !equalFold(value, "100-continue") {
				return &statusError{417, "unsupported expectation"}
			}
			// RFC 9110 §10.1.1: a server must ignore a 100-continue
			// expectation in an HTTP/1.0 request (the client cannot parse
			// an interim response).
			r.expect100 = r.minor == 1
		case kXForwardedFor:
			r.hasXFF = true
		}
	}

	if r.minor == 1 && hostSeen == 0 && !r.hostOverride {
		return badRequest("missing Host header")
	}
	if hostSeen > 1 {
		return badRequest("multiple Host headers")
	}
	r.hasHost = hostSeen == 1
	if r.hasHost && len(r.authority) == 0 {
		// RFC 9112 §3.2 allows an empty Host only for a target without
		// an authority, which a proxy has no use for: every route and
		// every backend wants a host.
		return badRequest("empty Host")
	}
	if !validHost(r.authority) {
		return badRequest("invalid Host")
	}
	r.host = stripPort(r.authority)

	if teSeen > 0 {
		if r.minor == 0 {
			return badRequest("Transfer-Encoding in an HTTP/1.0 request")
		}
		if clSeen > 0 {
			// RFC 9112 §6.1: a sender must not send both; a request with
			// both is the classic smuggling vector, so refuse it.
			return badRequest("both Content-Length and Transfer-Encoding")
		}
		if teSeen > 1 || !equalFold(teValue, "chunked") {
			return &statusError{501, "unsupported Transfer-Encoding"}
		}
		r.chunked = true
	}

	var closeTok, keepTok, upTok bool
	for i := 0; i < nConn; i++ {
		c, k, u := r.hdr.markConnectionOptions(connValues[i])
		closeTok, keepTok, upTok = closeTok || c, keepTok || k, upTok || u
	}
	r.keepAlive = !closeTok && (r.minor == 1 || keepTok)
	if upTok {
		if _, ok := r.hdr.get("upgrade"); ok && r.minor == 1 {
			r.upgrade = true
		}
	}
	return nil
}

// splitTarget derives uri, path and (for absolute-form) the host.
func (r *request) splitTarget() error {
	t := r.target
	switch {
	case len(t) > 0 && t[0] == '/':
		r.uri = t
	case len(t) == 1 && t[0] == '*':
		if !equalFold(r.method, "options") {
			return badRequest("asterisk target outside OPTIONS")
		}
		r.uri = t
		r.path = t
		return nil
	case hasPrefixFold(t, "http://") || hasPrefixFold(t, "https://"):
		rest := t[indexByte(t, ':')+3:]
		slash := indexByte(rest, '/')
		auth := rest
		r.uri = []byte("/")
		if slash >= 0 {
			auth = rest[:slash]
			r.uri = rest[slash:]
		} else if q := indexByte(rest, '?'); q >= 0 {
			return badRequest("malformed absolute target")
		}
		if len(auth) == 0 || indexByte(auth, '@') >= 0 {
			return badRequest("malformed absolute target")
		}
		r.authority = auth
		r.hostOverride = true
	default:
		if equalFold(r.method, "connect") {
			return &statusError{405, "CONNECT is not supported"}
		}
		return badRequest("malformed request target")
	}
	r.path = r.uri
	if q := indexByte(r.path, '?'); q >= 0 {
		r.path = r.path[:q]
	}
	if h := indexByte(r.path, '#'); h >= 0 {
		r.path = r.path[:h]
	}
	return nil
}

func hasPrefixFold(b []byte, prefix string) bool {
	return len(b) >= len(prefix) && equalFold(b[:len(prefix)], prefix)
}

// standardMethods are the methods of RFC 9110 §9 and PATCH (RFC 5789).
var standardMethods = [...]string{"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}

// misspelledMethod reports whether m is a standard method spelled in
// another case ("get", "Post"). Method names are case-sensitive (RFC 9110
// §9.1), so such a token is another, extension, method to Helios, which
// compares them exactly (TRACE and CONNECT are refused unless a route
// allows them, only idempotent methods are retried, HEAD answers have no
// body); a backend that folds case would take it for the standard one,
// and no client sends one but to probe that gap. Such a request gets 400,
// as nginx answers any lower-case method; other tokens (PROPFIND, PURGE,
// helloGET) are extension methods and are forwarded.
func misspelledMethod(m []byte) bool {
	lower := false
	for _, c := range m {
		lower = lower || 'a' <= c && c <= 'z'
	}
	if !lower {
		return false // the usual case: no standard method is misspelled in capitals
	}
	for _, s := range standardMethods {
		if len(m) == len(s) && bytes.EqualFold(m, []byte(s)) {
			return true
		}
	}
	return false
}

// parseContentLength accepts 1 to 18 decimal digits, nothing else (no
// sign, no spaces, no lists), so the value cannot overflow or be read two
// ways.
func parseContentLength(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// validHost accepts an RFC 3986 reg-name, IPv4 address or bracketed IP
// literal, with an optional port of digits (RFC 9110 §7.2); empty is
// allowed (HTTP/1.0 requests may omit Host), but a port or brackets with
// no host name (":80", "[]") are not. Percent-encoding, which RFC
// 3986 allows in a reg-name, is refused: no DNS name needs it, and
// net/http decodes it in an absolute-form target ("http://%80/" names the
// host "\x80") but not in a Host field, so a backend and Helios could
// disagree on the host a request was routed by.
func validHost(h []byte) bool {
	if len(h) > 0 && h[0] == '[' {
		end := indexByte(h, ']')
		if end < 2 {
			return false // no "]", or "[]": no address
		}
		for _, c := range h[1:end] {
			if !(c == ':' || c == '.' || '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
		return validPort(h[end+1:])
	}
	if i := indexByte(h, ':'); i >= 0 {
		if i == 0 || !validPort(h[i:]) {
			return false // ":80": a port with no host name
		}
		h = h[:i]
	}
	for _, c := range h {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '.', c == '-', c == '_', c == '~',
			c == '!', c == '$', c == '&', c == '\'', c == '(', c == ')', c == '*', c == '+', c == ',', c == ';', c == '=':
		default:
			return false
		}
	}
	return true
}

// validPort accepts what may follow a host: nothing, or ":" and up to
// five digits (RFC 3986 allows an empty port).
func validPort(p []byte) bool {
	if len(p) == 0 {
		return true
	}
	if p[0] != ':' || len(p) > 6 {
		return false
	}
	for _, c := range p[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// stripPort returns the host part of host[:port] or [v6]:port.
func stripPort(a []byte) []byte {
	if len(a) > 0 && a[0] == '[' {
		if i := indexByte(a, ']'); i > 0 {
			return a[:i+1]
		}
		return a
	}
	if i := bytes.LastIndexByte(a, ':'); i >= 0 {
		return a[:i]
	}
	return a
}

// response is a parsed backend response head.
type response struct {
	status int
	minor  byte
	reason []byte
	hdr    header

	contentLength int64 // -1 when absent
	chunked       bool
	// untilClose: the body runs until the backend closes (no framing).
	untilClose bool
	keepAlive  bool
	hasTrailer bool
	// streams: the answer says it is a stream whose parts must not be
	// held back (an event stream, gRPC, or X-Accel-Buffering: no), so
	// response buffering leaves it alone.
	streams bool
}

func (r *response) reset() {
	hdr := r.hdr
	hdr.reset()
	*r = response{hdr: hdr, contentLength: -1}
}

// parseResponse parses a complete response head. headRequest says whether
// it answers a HEAD request (no body whatever the headers say).
func parseResponse(head []byte, r *response, headRequest bool) error {
	r.reset()
	line, rest := nextLine(head)
	if len(line) < 12 || string(line[:7]) != "HTTP/1." || line[8] != ' ' {
		return errMalformedResponse
	}
	switch line[7] {
	case '0':
		r.minor = 0
	case '1':
		r.minor = 1
	default:
		return errMalformedResponse
	}
	d0, d1, d2 := line[9], line[10], line[11]
	if d0 < '1' || d0 > '5' || d1 < '0' || d1 > '9' || d2 < '0' || d2 > '9' {
		return errMalformedResponse
	}
	r.status = int(d0-'0')*100 + int(d1-'0')*10 + int(d2-'0')
	if len(line) > 12 {
		if line[12] != ' ' {
			return errMalformedResponse
		}
		r.reason = line[13:]
		// RFC 9112 §4: no controls but HTAB. The reason is relayed to the
		// client, and a bare CR in it could read as a line break there
		// (§2.2).
		if !validValue(r.reason) {
			return errMalformedResponse
		}
	}
	var (
		clSeen, teSeen int
		connValues     [4][]byte
		nConn          int
		teLast         []byte
	)
	for len(rest) > 0 {
		line, rest = nextLine(rest)
		if len(line) == 0 {
			break
		}
		if line[0] == ' ' || line[0] == '\t' {
			return errMalformedResponse
		}
		colon := indexByte(line, ':')
		if colon <= 0 {
			return errMalformedResponse
		}
		name := line[:colon]
		if !isToken(name) {
			return errMalformedResponse
		}
		value := trimOWS(line[colon+1:])
		if !validValue(value) {
			return errMalformedResponse
		}
		k := classify(name)
		r.hdr.fields = append(r.hdr.fields, field{name: name, value: value, kind: k})
		switch k {
		case kContentLength:
			n, ok := parseContentLength(value)
			if !ok || (clSeen > 0 && n != r.contentLength) {
				return errMalformedResponse
			}
			clSeen++
			r.contentLength = n
		case kTransferEncoding:
			teSeen++
			teLast = value
		case kConnection:
			if nConn == len(connValues) {
				return errMalformedResponse
			}
			connValues[nConn] = value
			nConn++
		case kTrailer:
			r.hasTrailer = true
		case kOther:
			r.streams = r.streams || streamField(name, value)
		}
	}
	var closeTok, keepTok bool
	for i := 0; i < nConn; i++ {
		c, k, _ := r.hdr.markConnectionOptions(connValues[i])
		closeTok, keepTok = closeTok || c, keepTok || k
	}
	r.keepAlive = !closeTok && (r.minor == 1 || keepTok)
	if teSeen > 0 && r.minor == 0 {
		// RFC 9112 §6.1: an HTTP/1.0 message with Transfer-Encoding has
		// faulty framing; close the connection after it.
		r.keepAlive = false
	}

	// RFC 9112 §6.3: message body length.
	switch {
	case headRequest || r.status < 200 || r.status == 204 || r.status == 304:
		r.contentLength = 0
		r.chunked = false
	case teSeen > 0:
		// Transfer-Encoding overrides Content-Length; a message with both
		// may be an attack, so the connection is not reused.
		if clSeen > 0 {
			r.keepAlive = false
		}
		r.contentLength = -1
		if lastCodingChunked(teLast) {
			r.chunked = true
		} else {
			r.untilClose = true
			r.keepAlive = false
		}
	case clSeen > 0:
	default:
		r.untilClose = true
		r.keepAlive = false
	}
	return nil
}

// streamField reports whether a response field marks the answer as a
// stream that response buffering must leave alone: a Content-Type of
// text/event-stream or application/grpc (and its +proto, +json...
// forms), or X-Accel-Buffering: no (nginx's way for a backend to ask).
func streamField(name, value []byte) bool {
	switch len(name) {
	case len("content-type"):
		return equalFold(name, "content-type") &&
			(hasPrefixFold(value, "text/event-stream") || hasPrefixFold(value, "application/grpc"))
	case len("x-accel-buffering"):
		return equalFold(name, "x-accel-buffering") && equalFold(value, "no")
	}
	return false
}

// lastCodingChunked reports whether the final transfer coding in a
// Transfer-Encoding value is chunked.
func lastCodingChunked(v []byte) bool {
	if i := bytes.LastIndexByte(v, ','); i >= 0 {
		v = v[i+1:]
	}
	return equalFold(trimOWS(v), "chunked")
}
