package httpmsg

import "bytes"

// The checks every request head passes, whatever protocol carried it: an
// HTTP/1.1 head (http1.ParseRequest) and an HTTP/2 stream's (the engine's
// streamRequest) are held to the same method, target, field and Host
// rules, and refused with the same statuses.

// StatusError is a request refused before any handler runs, with the
// status it is answered with. An HTTP/1.1 connection is closed after the
// answer, since framing may be lost.
type StatusError struct {
	Status int
	Msg    string
}

func (e *StatusError) Error() string { return e.Msg }

// NewStatusError returns a StatusError refusing a request with status.
func NewStatusError(status int, msg string) error { return &StatusError{status, msg} }

// BadRequest is a StatusError with status 400.
func BadRequest(msg string) error { return &StatusError{400, msg} }

// Limits bound a request head beyond its size, and say what happens to
// header names with underscores. The zero value gives the defaults.
type Limits struct {
	// MaxFields bounds the header fields; more get 431. 0: 100.
	MaxFields int
	// MaxMethod bounds the method's length; longer ones get 501. 0: 32.
	MaxMethod int
	// Underscores forwards header names with an underscore; otherwise
	// they are dropped (nginx's underscores_in_headers off): CGI, WSGI
	// and PHP read X_Forwarded_For as X-Forwarded-For.
	Underscores bool
}

// Defaults of Limits, and of the listener keys that set them.
const (
	DefaultMaxFields = 100
	DefaultMaxMethod = 32
)

// PathOf returns the path of an origin-form target: without its query
// or fragment.
func PathOf(t []byte) []byte {
	if q := bytes.IndexByte(t, '?'); q >= 0 {
		t = t[:q]
	}
	if h := bytes.IndexByte(t, '#'); h >= 0 {
		t = t[:h]
	}
	return t
}

// CheckMethod refuses a method that is no token (400) or longer than
// the listener allows (501).
func (lim Limits) CheckMethod(m []byte) error {
	if !IsToken(m) {
		return BadRequest("malformed method")
	}
	max := lim.MaxMethod
	if max <= 0 {
		max = DefaultMaxMethod
	}
	if len(m) > max {
		return &StatusError{501, "method not implemented"}
	}
	if misspelledMethod(m) {
		return BadRequest("method names are case-sensitive")
	}
	return nil
}

// CheckTarget refuses a request target with white space or control
// characters.
func CheckTarget(t []byte) error {
	for _, c := range t {
		if c <= ' ' || c == 0x7f {
			return BadRequest("malformed request target")
		}
	}
	return nil
}

// AddField appends a field to a request's head h under lim: a value
// with control characters is refused (400), and so are fields past the
// listener's count (431); a name with an underscore is marked to drop
// unless the listener keeps them.
func (lim Limits) AddField(h *Header, name, value []byte) (Kind, error) {
	if !ValidValue(value) {
		return 0, BadRequest("invalid character in header value")
	}
	max := lim.MaxFields
	if max <= 0 {
		max = DefaultMaxFields
	}
	if len(h.Fields) == max {
		return 0, &StatusError{431, "too many header fields"}
	}
	k := Classify(name)
	h.Fields = append(h.Fields, Field{Name: name, Value: value, Kind: k,
		// No name Helios acts on has an underscore: such a field is
		// KindOther, and dropping it only keeps it from the backend.
		Drop: !lim.Underscores && bytes.IndexByte(name, '_') >= 0})
	return k, nil
}

// The schemes a request head's Scheme holds.
var (
	SchemeHTTP  = []byte("http")
	SchemeHTTPS = []byte("https")
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

// ParseContentLength accepts 1 to 18 decimal digits, nothing else (no
// sign, no spaces, no lists), so the value cannot overflow or be read two
// ways.
func ParseContentLength(v []byte) (int64, bool) {
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

// ValidHost accepts an RFC 3986 reg-name, IPv4 address or bracketed IP
// literal, with an optional port of digits (RFC 9110 §7.2); empty is
// allowed (HTTP/1.0 requests may omit Host), but a port or brackets with
// no host name (":80", "[]") are not. Percent-encoding, which RFC
// 3986 allows in a reg-name, is refused: no DNS name needs it, and
// net/http decodes it in an absolute-form target ("http://%80/" names the
// host "\x80") but not in a Host field, so a backend and Helios could
// disagree on the host a request was routed by.
func ValidHost(h []byte) bool {
	if len(h) > 0 && h[0] == '[' {
		end := bytes.IndexByte(h, ']')
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
	if i := bytes.IndexByte(h, ':'); i >= 0 {
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

// StripPort returns the host part of host[:port] or [v6]:port.
func StripPort(a []byte) []byte {
	if len(a) > 0 && a[0] == '[' {
		if i := bytes.IndexByte(a, ']'); i > 0 {
			return a[:i+1]
		}
		return a
	}
	if i := bytes.LastIndexByte(a, ':'); i >= 0 {
		return a[:i]
	}
	return a
}
