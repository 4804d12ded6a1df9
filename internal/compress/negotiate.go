// Package compress compresses answers for clients that ask for it:
// which coding a request accepts (Accept-Encoding, with q-values),
// which answers a route compresses and how their heads change (Policy),
// and streaming encoders for gzip, zstd and brotli, pooled.
package compress

import "github.com/helios-lb/helios/internal/httpmsg"

// Coding is a content coding Helios can apply.
type Coding uint8

// The codings, Identity meaning none.
const (
	Identity Coding = iota
	Gzip
	Zstd
	Brotli
)

// String returns the coding's token, as Content-Encoding writes it.
func (c Coding) String() string {
	switch c {
	case Gzip:
		return "gzip"
	case Zstd:
		return "zstd"
	case Brotli:
		return "br"
	}
	return "identity"
}

// Token returns the coding's token as Content-Encoding writes it
// (String's), as bytes shared by every caller: read them, never write
// them. Identity's is nil.
func (c Coding) Token() []byte {
	if int(c) >= nCodings {
		return nil
	}
	return tokens[c]
}

// ParseCoding returns the coding a configuration names ("gzip", "zstd",
// "br" or "brotli").
func ParseCoding(s string) (Coding, bool) {
	switch s {
	case "gzip":
		return Gzip, true
	case "zstd":
		return Zstd, true
	case "br", "brotli":
		return Brotli, true
	}
	return Identity, false
}

// Negotiate returns the coding to answer with, of those offered (in the
// server's order of preference), given the request's Accept-Encoding
// value (RFC 9110 §12.5.3): the one with the highest q-value, ties
// going to the server's order; "*" stands for every coding not named;
// a q of 0 refuses. No Accept-Encoding field (accept false) or no
// acceptable coding gives Identity. It allocates nothing.
func Negotiate(value []byte, accept bool, offered []Coding) Coding {
	if !accept {
		return Identity
	}
	best, bestQ := Identity, 0
	for _, c := range offered {
		q := qualityOf(value, c)
		if q > bestQ {
			best, bestQ = c, q
		}
	}
	return best
}

// qualityOf returns c's q-value in thousandths under an Accept-Encoding
// value: its own entry's, else "*"'s, else 0.
func qualityOf(v []byte, c Coding) int {
	name := c.String()
	star := -1
	for len(v) > 0 {
		var elem []byte
		elem, v = httpmsg.NextToken(v)
		coding, params := splitParam(elem)
		q := 1000
		if len(params) > 0 {
			var ok bool
			if q, ok = parseQ(params); !ok {
				continue // an element that cannot be read counts for nothing
			}
		}
		switch {
		case httpmsg.EqualFold(coding, name):
			return q
		case c == Brotli && httpmsg.EqualFold(coding, "brotli"):
			return q
		case len(coding) == 1 && coding[0] == '*':
			star = q
		}
	}
	return max(star, 0)
}

// splitParam splits "coding;params" at the first semicolon.
func splitParam(elem []byte) (coding, params []byte) {
	for i, b := range elem {
		if b == ';' {
			return httpmsg.TrimOWS(elem[:i]), elem[i+1:]
		}
	}
	return elem, nil
}

// parseQ reads "q=0.5" among a coding's parameters (other parameters
// are ignored), in thousandths: 0 to 1000, at most three decimals.
func parseQ(params []byte) (int, bool) {
	for len(params) > 0 {
		var p []byte
		i := 0
		for i < len(params) && params[i] != ';' {
			i++
		}
		p, params = httpmsg.TrimOWS(params[:i]), params[min(i+1, len(params)):]
		if len(p) < 2 || (p[0] != 'q' && p[0] != 'Q') || p[1] != '=' {
			continue
		}
		v := p[2:]
		if len(v) == 0 || len(v) > 5 || (v[0] != '0' && v[0] != '1') {
			return 0, false
		}
		q := int(v[0]-'0') * 1000
		if len(v) > 1 {
			if v[1] != '.' {
				return 0, false
			}
			scale := 100
			for _, d := range v[2:] {
				if d < '0' || d > '9' {
					return 0, false
				}
				q += int(d-'0') * scale
				scale /= 10
			}
		}
		if q > 1000 {
			return 0, false
		}
		return q, true
	}
	return 1000, true
}
