package engine

import (
	"bytes"

	"github.com/helios-lb/helios/internal/httpmsg"
)

// statusError is a request the engine refuses before any handler runs. The
// connection is closed after the answer, since framing may be lost.
type statusError struct {
	status int
	msg    string
}

func (e *statusError) Error() string { return e.msg }

func badRequest(msg string) error { return &statusError{400, msg} }

// request is a parsed request head: the protocol-neutral head (whose
// ContentLength is -1 for a chunked body and 0 for none), and what only
// HTTP/1.1 has. Slices point into the connection's read buffer (pinned
// until the exchange ends). An HTTP/2 stream's request fills the neutral
// head and leaves the rest zero (h2conn.go).
type request struct {
	httpmsg.Request
	rawTarget []byte // request-target as received
	minor     byte   // HTTP/1.minor
	// hostOverride is set when an absolute-form target named the host;
	// it replaces the Host header when forwarding (RFC 9112 §3.2.2).
	hostOverride bool
	// hasHost: the request had a Host field (HTTP/1.0 ones may not).
	hasHost bool

	chunked   bool
	keepAlive bool
}

func (r *request) reset() {
	r.Request.Reset()
	r.rawTarget, r.minor, r.hostOverride, r.hasHost = nil, 0, false, false
	r.chunked, r.keepAlive = false, false
}

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
	r.Scheme = schemeHTTP
	// RFC 9112 §2.2: ignore empty lines before the request line.
	for len(head) > 0 && (head[0] == '\r' || head[0] == '\n') {
		head = head[1:]
	}
	line, rest := nextLine(head)
	sp1 := indexByte(line, ' ')
	if sp1 <= 0 {
		return badRequest("malformed request line")
	}
	r.Method = line[:sp1]
	if err := lim.checkMethod(r.Method); err != nil {
		return err
	}
	line = line[sp1+1:]
	sp2 := bytes.LastIndexByte(line, ' ')
	if sp2 <= 0 {
		return badRequest("malformed request line")
	}
	r.rawTarget = line[:sp2]
	version := line[sp2+1:]
	switch string(version) {
	case "HTTP/1.1":
		r.minor = 1
		r.Proto = httpmsg.HTTP11
	case "HTTP/1.0":
		r.minor = 0
		r.Proto = httpmsg.HTTP10
	default:
		if len(version) > 5 && string(version[:5]) == "HTTP/" {
			return &statusError{505, "HTTP version not supported"}
		}
		return badRequest("malformed HTTP version")
	}
	if err := checkTarget(r.rawTarget); err != nil {
		return err
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
		if !httpmsg.IsToken(name) {
			// Includes whitespace before the colon (RFC 9112 §5.1).
			return badRequest("malformed header name")
		}
		value := httpmsg.TrimOWS(line[colon+1:])
		k, err := r.addField(name, value, lim)
		if err != nil {
			return err
		}
		switch k {
		case httpmsg.KindHost:
			hostSeen++
			if !r.hostOverride {
				r.Authority = value
			}
		case httpmsg.KindContentLength:
			n, ok := parseContentLength(value)
			if !ok {
				return badRequest("invalid Content-Length")
			}
			if clSeen > 0 && n != r.ContentLength {
				return badRequest("conflicting Content-Length headers")
			}
			clSeen++
			r.ContentLength = n
		case httpmsg.KindTransferEncoding:
			teSeen++
			teValue = value
		case httpmsg.KindConnection:
			if nConn < len(connValues) {
				connValues[nConn] = value
				nConn++
			} else {
				return badRequest("too many Connection headers")
			}
		case httpmsg.KindExpect:
			if !httpmsg.EqualFold(value, "100-continue") {
				return &statusError{417, "unsupported expectation"}
			}
			// RFC 9110 §10.1.1: a server must ignore a 100-continue
			// expectation in an HTTP/1.0 request (the client cannot parse
			// an interim response).
			r.Expect100 = r.minor == 1
		}
	}

	if r.minor == 1 && hostSeen == 0 && !r.hostOverride {
		return badRequest("missing Host header")
	}
	if hostSeen > 1 {
		return badRequest("multiple Host headers")
	}
	r.hasHost = hostSeen == 1
	if r.hasHost && len(r.Authority) == 0 {
		// RFC 9112 §3.2 allows an empty Host only for a target without
		// an authority, which a proxy has no use for: every route and
		// every backend wants a host.
		return badRequest("empty Host")
	}
	if !validHost(r.Authority) {
		return badRequest("invalid Host")
	}
	r.Host = stripPort(r.Authority)

	if teSeen > 0 {
		if r.minor == 0 {
			return badRequest("Transfer-Encoding in an HTTP/1.0 request")
		}
		if clSeen > 0 {
			// RFC 9112 §6.1: a sender must not send both; a request with
			// both is the classic smuggling vector, so refuse it.
			return badRequest("both Content-Length and Transfer-Encoding")
		}
		if teSeen > 1 || !httpmsg.EqualFold(teValue, "chunked") {
			return &statusError{501, "unsupported Transfer-Encoding"}
		}
		r.chunked = true
		r.ContentLength = -1
	} else if clSeen == 0 {
		r.ContentLength = 0
	}

	var closeTok, keepTok, upTok bool
	for i := 0; i < nConn; i++ {
		c, k, u := r.Header.MarkConnectionOptions(connValues[i])
		closeTok, keepTok, upTok = closeTok || c, keepTok || k, upTok || u
	}
	r.keepAlive = !closeTok && (r.minor == 1 || keepTok)
	if upTok {
		if v, ok := r.Header.GetKind(httpmsg.KindUpgrade); ok && r.minor == 1 {
			r.Upgrade = v
		}
	}
	return nil
}

// splitTarget derives uri, path and (for absolute-form) the host.
func (r *request) splitTarget() error {
	t := r.rawTarget
	switch {
	case len(t) > 0 && t[0] == '/':
		r.Target = t
	case len(t) == 1 && t[0] == '*':
		if !httpmsg.EqualFold(r.Method, "options") {
			return badRequest("asterisk target outside OPTIONS")
		}
		r.Target = t
		r.Path = t
		return nil
	case httpmsg.HasPrefixFold(t, "http://") || httpmsg.HasPrefixFold(t, "https://"):
		rest := t[indexByte(t, ':')+3:]
		slash := indexByte(rest, '/')
		auth := rest
		r.Target = []byte("/")
		if slash >= 0 {
			auth = rest[:slash]
			r.Target = rest[slash:]
		} else if q := indexByte(rest, '?'); q >= 0 {
			return badRequest("malformed absolute target")
		}
		if len(auth) == 0 || indexByte(auth, '@') >= 0 {
			return badRequest("malformed absolute target")
		}
		r.Authority = auth
		r.hostOverride = true
	default:
		if httpmsg.EqualFold(r.Method, "connect") {
			return &statusError{405, "CONNECT is not supported"}
		}
		return badRequest("malformed request target")
	}
	r.Path = pathOf(r.Target)
	return nil
}

// pathOf returns the path of an origin-form target: without its query
// or fragment.
func pathOf(t []byte) []byte {
	if q := indexByte(t, '?'); q >= 0 {
		t = t[:q]
	}
	if h := indexByte(t, '#'); h >= 0 {
		t = t[:h]
	}
	return t
}

// The checks every request head passes, whatever protocol carried it
// (parseRequestLimits for HTTP/1.1, streamRequest for HTTP/2).

// checkMethod refuses a method that is no token (400) or longer than
// the listener allows (501).
func (lim limits) checkMethod(m []byte) error {
	if !httpmsg.IsToken(m) {
		return badRequest("malformed method")
	}
	max := lim.maxMethod
	if max <= 0 {
		max = defaultMaxMethodBytes
	}
	if len(m) > max {
		return &statusError{501, "method not implemented"}
	}
	if misspelledMethod(m) {
		return badRequest("method names are case-sensitive")
	}
	return nil
}

// checkTarget refuses a request target with white space or control
// characters.
func checkTarget(t []byte) error {
	for _, c := range t {
		if c <= ' ' || c == 0x7f {
			return badRequest("malformed request target")
		}
	}
	return nil
}

// addField appends a field to the request's head under lim: a value
// with control characters is refused (400), and so are fields past the
// listener's count (431); a name with an underscore is marked to drop
// unless the listener keeps them.
func (r *request) addField(name, value []byte, lim limits) (httpmsg.Kind, error) {
	if !httpmsg.ValidValue(value) {
		return 0, badRequest("invalid character in header value")
	}
	max := lim.maxFields
	if max <= 0 {
		max = defaultMaxHeaderCount
	}
	if len(r.Header.Fields) == max {
		return 0, &statusError{431, "too many header fields"}
	}
	k := httpmsg.Classify(name)
	r.Header.Fields = append(r.Header.Fields, httpmsg.Field{Name: name, Value: value, Kind: k,
		// No name Helios acts on has an underscore: such a field is
		// KindOther, and dropping it only keeps it from the backend.
		Drop: !lim.underscores && indexByte(name, '_') >= 0})
	return k, nil
}

var (
	schemeHTTP  = []byte("http")
	schemeHTTPS = []byte("https")
)

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

// response is a parsed backend response head: the protocol-neutral head
// (ContentLength -1 when the body's length is not declared), and what
// only HTTP/1.1 has. An HTTP/2 backend's answer fills the neutral head
// (h2upstream.go).
type response struct {
	httpmsg.Response
	minor   byte
	chunked bool
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
	r.Response.Reset()
	r.minor, r.chunked, r.untilClose, r.keepAlive, r.hasTrailer = 0, false, false, false, false
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
	r.Status = int(d0-'0')*100 + int(d1-'0')*10 + int(d2-'0')
	if len(line) > 12 {
		if line[12] != ' ' {
			return errMalformedResponse
		}
		r.Reason = line[13:]
		// RFC 9112 §4: no controls but HTAB. The reason is relayed to the
		// client, and a bare CR in it could read as a line break there
		// (§2.2).
		if !httpmsg.ValidValue(r.Reason) {
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
		if !httpmsg.IsToken(name) {
			return errMalformedResponse
		}
		value := httpmsg.TrimOWS(line[colon+1:])
		if !httpmsg.ValidValue(value) {
			return errMalformedResponse
		}
		k := httpmsg.Classify(name)
		r.Header.Fields = append(r.Header.Fields, httpmsg.Field{Name: name, Value: value, Kind: k})
		switch k {
		case httpmsg.KindContentLength:
			n, ok := parseContentLength(value)
			if !ok || (clSeen > 0 && n != r.ContentLength) {
				return errMalformedResponse
			}
			clSeen++
			r.ContentLength = n
		case httpmsg.KindTransferEncoding:
			teSeen++
			teLast = value
		case httpmsg.KindConnection:
			if nConn == len(connValues) {
				return errMalformedResponse
			}
			connValues[nConn] = value
			nConn++
		case httpmsg.KindTrailer:
			r.hasTrailer = true
		case httpmsg.KindContentType, httpmsg.KindOther:
			r.streams = r.streams || streamField(k, name, value)
		}
	}
	var closeTok, keepTok bool
	for i := 0; i < nConn; i++ {
		c, k, _ := r.Header.MarkConnectionOptions(connValues[i])
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
	case headRequest || r.Status < 200 || r.Status == 204 || r.Status == 304:
		r.ContentLength = 0
		r.chunked = false
	case teSeen > 0:
		// Transfer-Encoding overrides Content-Length; a message with both
		// may be an attack, so the connection is not reused.
		if clSeen > 0 {
			r.keepAlive = false
		}
		r.ContentLength = -1
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
func streamField(k httpmsg.Kind, name, value []byte) bool {
	if k == httpmsg.KindContentType {
		return httpmsg.HasPrefixFold(value, "text/event-stream") || httpmsg.HasPrefixFold(value, "application/grpc")
	}
	return len(name) == len("x-accel-buffering") && httpmsg.EqualFold(name, "x-accel-buffering") && httpmsg.EqualFold(value, "no")
}

// lastCodingChunked reports whether the final transfer coding in a
// Transfer-Encoding value is chunked.
func lastCodingChunked(v []byte) bool {
	if i := bytes.LastIndexByte(v, ','); i >= 0 {
		v = v[i+1:]
	}
	return httpmsg.EqualFold(httpmsg.TrimOWS(v), "chunked")
}
