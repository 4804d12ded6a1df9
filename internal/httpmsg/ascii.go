package httpmsg

// EqualFold reports whether b equals the lower-case ASCII string s,
// ignoring ASCII case in b.
func EqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// EqualFoldBytes reports whether a and b are equal ignoring ASCII case
// in both.
func EqualFoldBytes[S ~string | ~[]byte](a []byte, b S) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// HasPrefixFold reports whether b starts with the lower-case ASCII
// string prefix, ignoring ASCII case in b.
func HasPrefixFold(b []byte, prefix string) bool {
	return len(b) >= len(prefix) && EqualFold(b[:len(prefix)], prefix)
}

// tokenTable marks the bytes allowed in an RFC 9110 token (header names,
// methods).
var tokenTable = [256]bool{
	'!': true, '#': true, '$': true, '%': true, '&': true, '\'': true, '*': true,
	'+': true, '-': true, '.': true, '^': true, '_': true, '`': true, '|': true, '~': true,
	'0': true, '1': true, '2': true, '3': true, '4': true, '5': true, '6': true, '7': true, '8': true, '9': true,
	'A': true, 'B': true, 'C': true, 'D': true, 'E': true, 'F': true, 'G': true, 'H': true, 'I': true,
	'J': true, 'K': true, 'L': true, 'M': true, 'N': true, 'O': true, 'P': true, 'Q': true, 'R': true,
	'S': true, 'T': true, 'U': true, 'V': true, 'W': true, 'X': true, 'Y': true, 'Z': true,
	'a': true, 'b': true, 'c': true, 'd': true, 'e': true, 'f': true, 'g': true, 'h': true, 'i': true,
	'j': true, 'k': true, 'l': true, 'm': true, 'n': true, 'o': true, 'p': true, 'q': true, 'r': true,
	's': true, 't': true, 'u': true, 'v': true, 'w': true, 'x': true, 'y': true, 'z': true,
}

// IsToken reports whether b is a non-empty RFC 9110 token (a field name
// or a method).
func IsToken[S ~string | ~[]byte](b S) bool {
	if len(b) == 0 {
		return false
	}
	for i := 0; i < len(b); i++ {
		if !tokenTable[b[i]] {
			return false
		}
	}
	return true
}

// ValidValue reports whether b may be a field value: no control
// characters other than horizontal tab (RFC 9110 §5.5). Rejecting NUL, CR
// and LF here is what keeps a value from smuggling a header line to the
// next hop.
func ValidValue[S ~string | ~[]byte](b S) bool {
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// TrimOWS trims optional white space (spaces and tabs) from both ends.
func TrimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// NextToken splits the first element off a comma-separated list value,
// trimmed of white space; the element may be empty.
func NextToken(v []byte) (tok, rest []byte) {
	i := 0
	for i < len(v) && v[i] != ',' {
		i++
	}
	tok = TrimOWS(v[:i])
	if i < len(v) {
		i++
	}
	return tok, v[i:]
}

// HasToken reports whether the comma-separated list value v has the
// element tok (ASCII case-insensitive; tok is lower case).
func HasToken(v []byte, tok string) bool {
	for len(v) > 0 {
		var t []byte
		t, v = NextToken(v)
		if EqualFold(t, tok) {
			return true
		}
	}
	return false
}
