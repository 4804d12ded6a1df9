package route

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/helios-lb/helios/internal/httpmsg"
)

// valueKind is how a header field's or query parameter's value is
// compared.
type valueKind uint8

const (
	valueExact   valueKind = iota
	valuePresent           // "*"
	valueRegexp            // "~re"
)

// valueMatch is a compiled Pair.
type valueMatch struct {
	name  []byte // lower case for a header field, as written for a query parameter
	kind  valueKind
	value []byte
	re    *regexp.Regexp
	// scratch holds buffers a query parameter's value is decoded into
	// for re (a buffer on the stack would escape into the regexp's
	// machine); nil for the other conditions.
	scratch *sync.Pool
}

// compileValues compiles pairs; header names are compared without case.
func compileValues(pairs []Pair, header bool) ([]valueMatch, error) {
	var out []valueMatch
	for _, p := range pairs {
		v := valueMatch{name: []byte(p.Name)}
		if header {
			v.name = []byte(strings.ToLower(p.Name))
		}
		switch {
		case p.Value == "*":
			v.kind = valuePresent
		case strings.HasPrefix(p.Value, "~"):
			re, err := regexp.Compile(p.Value[1:])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p.Name, err)
			}
			v.kind, v.re = valueRegexp, re
			if !header {
				v.scratch = &sync.Pool{New: func() any { return new([maxDecodedQuery]byte) }}
			}
		default:
			v.value = []byte(p.Value)
		}
		out = append(out, v)
	}
	return out, nil
}

// matches reports whether value b satisfies v.
func (v *valueMatch) matches(b []byte) bool {
	switch v.kind {
	case valuePresent:
		return true
	case valueRegexp:
		return v.re.Match(b)
	}
	return string(b) == string(v.value)
}

// matchesQuery reports whether a query parameter's value b, decoded,
// satisfies v.
func (v *valueMatch) matchesQuery(b []byte) bool {
	switch v.kind {
	case valuePresent:
		return true
	case valueRegexp:
		if !needsUnescape(b) || len(b) > maxDecodedQuery {
			return v.re.Match(b)
		}
		buf := v.scratch.Get().(*[maxDecodedQuery]byte)
		ok := v.re.Match(queryUnescape(b, buf))
		v.scratch.Put(buf)
		return ok
	}
	var buf [maxDecodedQuery]byte
	return string(queryUnescape(b, &buf)) == string(v.value)
}

// matchHeader reports whether h has a field named v.name whose value
// matches.
func (v *valueMatch) matchHeader(h *httpmsg.Header) bool {
	name := unsafeString(v.name)
	for i := range h.Fields {
		f := &h.Fields[i]
		if !f.Drop && httpmsg.EqualFold(f.Name, name) && v.matches(f.Value) {
			return true
		}
	}
	return false
}

// maxDecodedQuery bounds a query parameter's value decoded for a
// comparison; a longer value is compared as it was sent.
const maxDecodedQuery = 512

// matchQuery reports whether query (without "?") has a parameter named
// v.name whose value, percent-decoded, matches.
func (v *valueMatch) matchQuery(q []byte) bool {
	for len(q) > 0 {
		i := 0
		for i < len(q) && q[i] != '&' && q[i] != ';' {
			i++
		}
		param := q[:i]
		if i < len(q) {
			i++
		}
		q = q[i:]
		name, value := param, []byte(nil)
		for j := range param {
			if param[j] == '=' {
				name, value = param[:j], param[j+1:]
				break
			}
		}
		if string(name) != string(v.name) {
			continue
		}
		if v.matchesQuery(value) {
			return true
		}
	}
	return false
}

// queryUnescape decodes percent-escapes and '+' in b into buf; b itself
// when there is nothing to decode, or when it does not fit.
func queryUnescape(b []byte, buf *[maxDecodedQuery]byte) []byte {
	if !needsUnescape(b) || len(b) > len(buf) {
		return b
	}
	n := 0
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '+':
			c = ' '
		case c == '%' && i+2 < len(b) && isHex(b[i+1]) && isHex(b[i+2]):
			c = unhex(b[i+1])<<4 | unhex(b[i+2])
			i += 2
		}
		buf[n] = c
		n++
	}
	return buf[:n]
}

// needsUnescape reports whether b has a percent-escape or a '+'.
func needsUnescape(b []byte) bool {
	for _, c := range b {
		if c == '%' || c == '+' {
			return true
		}
	}
	return false
}
