// Package route matches requests to routes: by host and path, and by
// method, header fields, query parameters and client address, with a
// negated match besides. A Table is immutable once built and safe for
// concurrent use; a reload builds a new one. Matching allocates nothing.
package route

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/helios-lb/helios/internal/httpmsg"
)

// Entry is one route as configured. Empty Host matches every host; "*"
// too; "*.example.com" matches any subdomain of example.com (not
// example.com itself); anything else matches exactly, ignoring case. Path
// matches exactly; PathPrefix matches a prefix; with neither, every path
// matches. Cond adds the other conditions (nil: none).
type Entry[T any] struct {
	Name       string
	Host       string
	Path       string
	PathPrefix string
	Cond       *Cond
	Value      T
}

// Cond is what a route asks of a request beyond its host and path; every
// condition that is set must hold.
type Cond struct {
	// Methods lists the methods that match, compared exactly (methods
	// are case-sensitive); nil matches every method.
	Methods []string
	// Headers are request header fields that must be there: a field of
	// the name (any case) whose value matches (see Value).
	Headers []Pair
	// Query are query parameters that must be there, their values
	// compared after percent-decoding ('+' is a space).
	Query []Pair
	// ClientCIDRs lists the client addresses that match (the address the
	// listener's policy found); nil matches every client.
	ClientCIDRs []netip.Prefix
	// Not is a match that must fail: when its host, path and conditions
	// all hold, the route does not match. Nil: none.
	Not *Not
}

// Not is a negated match: host, path and conditions as an Entry's.
type Not struct {
	Host, Path, PathPrefix string
	Cond                   Cond
}

// Pair is a header field or query parameter condition. Value is what
// its value must be: "*" (present, whatever its value), "~" and a
// regular expression (RE2 syntax, searched for anywhere in the value:
// anchor it with ^ and $), or the exact value.
type Pair struct {
	Name, Value string
}

type hostKind uint8

const (
	hostAny hostKind = iota
	hostExact
	hostSuffix
)

// matcher is a compiled Entry (or Not).
type matcher struct {
	hostKind hostKind
	host     string // lower case; for suffix, including the leading dot
	path     string
	prefix   bool
	anyPath  bool
	methods  [][]byte
	headers  []valueMatch
	query    []valueMatch
	cidrs    []netip.Prefix
	not      *matcher
}

type compiled[T any] struct {
	matcher
	value T
}

// Table is an ordered list of routes; the first that matches wins.
type Table[T any] struct {
	routes []compiled[T]
}

// New compiles entries in order. It rejects entries a validated config
// cannot produce (a path not starting with "/", a regular expression that
// does not compile).
func New[T any](entries []Entry[T]) (*Table[T], error) {
	t := &Table[T]{routes: make([]compiled[T], 0, len(entries))}
	for _, e := range entries {
		c := compiled[T]{value: e.Value}
		if err := c.compile(e.Host, e.Path, e.PathPrefix, e.Cond); err != nil {
			return nil, fmt.Errorf("route %q: %w", e.Name, err)
		}
		t.routes = append(t.routes, c)
	}
	return t, nil
}

func (m *matcher) compile(host, path, pathPrefix string, cond *Cond) error {
	h := strings.ToLower(host)
	switch {
	case h == "" || h == "*":
		m.hostKind = hostAny
	case strings.HasPrefix(h, "*."):
		m.hostKind = hostSuffix
		m.host = h[1:]
	default:
		m.hostKind = hostExact
		m.host = h
	}
	switch {
	case path != "":
		m.path = path
	case pathPrefix != "":
		m.path = pathPrefix
		m.prefix = true
	default:
		m.anyPath = true
	}
	if !m.anyPath && !strings.HasPrefix(m.path, "/") {
		return fmt.Errorf("path %q does not start with /", m.path)
	}
	if cond == nil {
		return nil
	}
	for _, meth := range cond.Methods {
		m.methods = append(m.methods, []byte(meth))
	}
	var err error
	if m.headers, err = compileValues(cond.Headers, true); err != nil {
		return fmt.Errorf("headers: %w", err)
	}
	if m.query, err = compileValues(cond.Query, false); err != nil {
		return fmt.Errorf("query: %w", err)
	}
	for _, p := range cond.ClientCIDRs {
		m.cidrs = append(m.cidrs, p.Masked())
	}
	if n := cond.Not; n != nil {
		m.not = &matcher{}
		if err := m.not.compile(n.Host, n.Path, n.PathPrefix, &n.Cond); err != nil {
			return fmt.Errorf("not: %w", err)
		}
	}
	return nil
}

// MatchRequest returns the value of the first route matching r, which
// came from client (the address the listener's policy found), and
// whether one matched. Paths that could name the same resource two ways
// (percent-escapes, dot segments, doubled slashes) are matched in their
// normalised form, so a route cannot be bypassed by spelling a path
// differently.
func (t *Table[T]) MatchRequest(r *httpmsg.Request, client netip.Addr) (T, bool) {
	path := r.Path
	if needsNormalizing(path) {
		path = Normalize(path)
	}
	client = client.Unmap()
	for i := range t.routes {
		c := &t.routes[i]
		if c.match(r, path, client) {
			return c.value, true
		}
	}
	var zero T
	return zero, false
}

// Len returns the number of routes.
func (t *Table[T]) Len() int { return len(t.routes) }

// match reports whether r (its path normalised) from client matches.
func (m *matcher) match(r *httpmsg.Request, path []byte, client netip.Addr) bool {
	if !m.matchHost(r.Host) || !m.matchPath(path) {
		return false
	}
	if len(m.methods) > 0 && !m.matchMethod(r.Method) {
		return false
	}
	for i := range m.headers {
		if !m.headers[i].matchHeader(&r.Header) {
			return false
		}
	}
	for i := range m.query {
		if !m.query[i].matchQuery(r.Query()) {
			return false
		}
	}
	if len(m.cidrs) > 0 && !m.matchClient(client) {
		return false
	}
	return m.not == nil || !m.not.match(r, path, client)
}

func (m *matcher) matchHost(h []byte) bool {
	switch m.hostKind {
	case hostAny:
		return true
	case hostExact:
		return httpmsg.EqualFold(h, m.host)
	default:
		return len(h) > len(m.host) && httpmsg.EqualFold(h[len(h)-len(m.host):], m.host)
	}
}

func (m *matcher) matchPath(p []byte) bool {
	switch {
	case m.anyPath:
		return true
	case m.prefix:
		return len(p) >= len(m.path) && string(p[:len(m.path)]) == m.path
	default:
		return string(p) == m.path
	}
}

func (m *matcher) matchMethod(meth []byte) bool {
	for _, x := range m.methods {
		if string(x) == string(meth) {
			return true
		}
	}
	return false
}

func (m *matcher) matchClient(a netip.Addr) bool {
	for _, p := range m.cidrs {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
