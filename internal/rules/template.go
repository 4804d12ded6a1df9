// Package rules is the edge policy that edits the neutral message: value
// templates with request variables, header rules for requests and
// answers, path rewrites and redirects. Rules are compiled once from
// configuration and applied on the event loop without allocating: values
// are rendered into memory the exchange lends (Allocator).
package rules

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/helios-lb/helios/internal/httpmsg"
)

// Allocator lends memory that lives as long as the exchange
// (wire.Exchange implements it).
type Allocator interface {
	Alloc(n int) []byte
}

// Vars are the values a template may name.
type Vars struct {
	// ClientIP is the client's address as the listener's policy found it.
	ClientIP netip.Addr
	// Host (without port), Path (without query), Query (without "?"),
	// Scheme ("http", "https") and RequestID are the request's.
	Host, Path, Query, Scheme, RequestID []byte
	// Header is the request's head, for {header.NAME}.
	Header *httpmsg.Header
}

// varKind is what a template part renders.
type varKind uint8

const (
	varLiteral varKind = iota
	varClientIP
	varHost
	varPath
	varQuery
	varQueryMark // "?" and the query, or nothing when it is empty
	varScheme
	varRequestID
	varHeader
)

// VarNames lists the variables a template may use, for messages.
const VarNames = "{client_ip}, {host}, {path}, {query}, {?query} (\"?\" and the query when there is one), {scheme}, {request_id}, {header.NAME}"

type part struct {
	kind varKind
	lit  []byte // the literal, or the header's name (lower case)
}

// Template is a value with variables in braces, compiled: "https://{host}{path}".
// A literal brace is written twice ("{{", "}}").
type Template struct {
	parts []part
	// src is the template as written.
	src string
}

// String returns the template as written.
func (t *Template) String() string { return t.src }

// Static reports whether the template has no variable.
func (t *Template) Static() bool {
	for _, p := range t.parts {
		if p.kind != varLiteral {
			return false
		}
	}
	return true
}

// Compile parses a template; the error says which variable is unknown or
// which brace is unclosed.
func Compile(s string) (*Template, error) {
	t := &Template{src: s}
	var lit []byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '{' && i+1 < len(s) && s[i+1] == '{', c == '}' && i+1 < len(s) && s[i+1] == '}':
			lit = append(lit, c)
			i++
		case c == '}':
			return nil, fmt.Errorf("%q: a lone } at %d (write }} for a brace)", s, i)
		case c == '{':
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return nil, fmt.Errorf("%q: { at %d is not closed", s, i)
			}
			name := s[i+1 : i+end]
			p, err := variable(name)
			if err != nil {
				return nil, fmt.Errorf("%q: %w", s, err)
			}
			if len(lit) > 0 {
				t.parts = append(t.parts, part{lit: lit})
				lit = nil
			}
			t.parts = append(t.parts, p)
			i += end
		default:
			lit = append(lit, c)
		}
	}
	if len(lit) > 0 {
		t.parts = append(t.parts, part{lit: lit})
	}
	return t, nil
}

// variable compiles the name between braces.
func variable(name string) (part, error) {
	switch name {
	case "client_ip":
		return part{kind: varClientIP}, nil
	case "host":
		return part{kind: varHost}, nil
	case "path":
		return part{kind: varPath}, nil
	case "query":
		return part{kind: varQuery}, nil
	case "?query":
		return part{kind: varQueryMark}, nil
	case "scheme":
		return part{kind: varScheme}, nil
	case "request_id":
		return part{kind: varRequestID}, nil
	}
	if h, ok := strings.CutPrefix(name, "header."); ok {
		if !httpmsg.IsToken(h) {
			return part{}, fmt.Errorf("{%s}: %q is not a header name", name, h)
		}
		return part{kind: varHeader, lit: []byte(strings.ToLower(h))}, nil
	}
	return part{}, fmt.Errorf("unknown variable {%s}; the variables are %s", name, VarNames)
}

// value returns what p renders to.
func (p *part) value(v *Vars, ip *[64]byte) []byte {
	if p.kind == varQueryMark {
		// Rendered by Render, which can put two slices together.
		return nil
	}
	switch p.kind {
	case varLiteral:
		return p.lit
	case varClientIP:
		if !v.ClientIP.IsValid() {
			return nil
		}
		return v.ClientIP.AppendTo(ip[:0])
	case varHost:
		return v.Host
	case varPath:
		return v.Path
	case varQuery:
		return v.Query
	case varScheme:
		return v.Scheme
	case varRequestID:
		return v.RequestID
	case varHeader:
		if v.Header == nil {
			return nil
		}
		b, _ := v.Header.Get(unsafeString(p.lit))
		return b
	}
	return nil
}

// Render returns the template's value: its literal when it has no
// variable, else rendered into memory from a.
func (t *Template) Render(v *Vars, a Allocator) []byte {
	if len(t.parts) == 1 && t.parts[0].kind == varLiteral {
		return t.parts[0].lit
	}
	var ip [64]byte
	n := 0
	for i := range t.parts {
		if t.parts[i].kind == varQueryMark && len(v.Query) > 0 {
			n += 1 + len(v.Query)
		}
		n += len(t.parts[i].value(v, &ip))
	}
	out := a.Alloc(n)[:0]
	for i := range t.parts {
		if t.parts[i].kind == varQueryMark && len(v.Query) > 0 {
			out = append(append(out, '?'), v.Query...)
		}
		out = append(out, t.parts[i].value(v, &ip)...)
	}
	return out
}
