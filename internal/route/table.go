// Package route matches requests to routes by host and path. A Table is
// immutable once built and safe for concurrent use; a reload builds a new
// one.
package route

import (
	"fmt"
	"strings"
)

// Entry is one route as configured. Empty Host matches every host; "*"
// too; "*.example.com" matches any subdomain of example.com (not
// example.com itself); anything else matches exactly, ignoring case. Path
// matches exactly; PathPrefix matches a prefix; with neither, every path
// matches.
type Entry[T any] struct {
	Name       string
	Host       string
	Path       string
	PathPrefix string
	Value      T
}

type hostKind uint8

const (
	hostAny hostKind = iota
	hostExact
	hostSuffix
)

type compiled[T any] struct {
	hostKind hostKind
	host     string // lower case; for suffix, including the leading dot
	path     string
	prefix   bool
	anyPath  bool
	value    T
}

// Table is an ordered list of routes; the first that matches wins.
type Table[T any] struct {
	routes []compiled[T]
}

// New compiles entries in order. It rejects entries a validated config
// cannot produce (a path not starting with "/").
func New[T any](entries []Entry[T]) (*Table[T], error) {
	t := &Table[T]{routes: make([]compiled[T], 0, len(entries))}
	for _, e := range entries {
		c := compiled[T]{value: e.Value}
		h := strings.ToLower(e.Host)
		switch {
		case h == "" || h == "*":
			c.hostKind = hostAny
		case strings.HasPrefix(h, "*."):
			c.hostKind = hostSuffix
			c.host = h[1:]
		default:
			c.hostKind = hostExact
			c.host = h
		}
		switch {
		case e.Path != "":
			c.path = e.Path
		case e.PathPrefix != "":
			c.path = e.PathPrefix
			c.prefix = true
		default:
			c.anyPath = true
		}
		if !c.anyPath && !strings.HasPrefix(c.path, "/") {
			return nil, fmt.Errorf("route %q: path %q does not start with /", e.Name, c.path)
		}
		t.routes = append(t.routes, c)
	}
	return t, nil
}

// Match returns the value of the first route matching host (without port)
// and path, and whether one matched. Paths that could name the same
// resource two ways (percent-escapes, dot segments, doubled slashes) are
// matched in their normalised form, so a route cannot be bypassed by
// spelling a path differently.
func (t *Table[T]) Match(host, path []byte) (T, bool) {
	if needsNormalizing(path) {
		path = Normalize(path)
	}
	for i := range t.routes {
		r := &t.routes[i]
		if !r.matchHost(host) || !r.matchPath(path) {
			continue
		}
		return r.value, true
	}
	var zero T
	return zero, false
}

// Len returns the number of routes.
func (t *Table[T]) Len() int { return len(t.routes) }

func (r *compiled[T]) matchHost(h []byte) bool {
	switch r.hostKind {
	case hostAny:
		return true
	case hostExact:
		return equalFoldLower(h, r.host)
	default:
		return len(h) > len(r.host) && equalFoldLower(h[len(h)-len(r.host):], r.host)
	}
}

func (r *compiled[T]) matchPath(p []byte) bool {
	switch {
	case r.anyPath:
		return true
	case r.prefix:
		return len(p) >= len(r.path) && string(p[:len(r.path)]) == r.path
	default:
		return string(p) == r.path
	}
}

// equalFoldLower compares b with the lower-case s, ignoring ASCII case in b.
func equalFoldLower(b []byte, s string) bool {
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
