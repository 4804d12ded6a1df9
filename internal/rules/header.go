package rules

import (
	"fmt"
	"sort"
	"strings"

	"github.com/helios-lb/helios/internal/httpmsg"
)

// HeaderRules edit the fields of a head: remove, then set (replacing
// every field of the name), then add (beside any there are). The zero
// value does nothing.
type HeaderRules struct {
	remove   [][]byte
	set, add []fieldRule
}

type fieldRule struct {
	name  []byte
	value *Template
}

// Empty reports whether the rules do nothing.
func (r *HeaderRules) Empty() bool {
	return r == nil || len(r.remove)+len(r.set)+len(r.add) == 0
}

// CompileHeaderRules compiles rules from configuration. Fields that only
// Helios may write are refused, saying why: hop-by-hop fields and framing
// (RFC 9110 §7.6.1, §8.6), which belong to each connection, and Host, the
// request's authority, which goes on as the client sent it.
func CompileHeaderRules(set, add map[string]string, remove []string) (*HeaderRules, error) {
	r := &HeaderRules{}
	for _, name := range remove {
		if err := checkName(name); err != nil {
			return nil, err
		}
		r.remove = append(r.remove, []byte(name))
	}
	for _, m := range []struct {
		src map[string]string
		dst *[]fieldRule
	}{{set, &r.set}, {add, &r.add}} {
		names := make([]string, 0, len(m.src))
		for name := range m.src {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			if err := checkName(name); err != nil {
				return nil, err
			}
			t, err := Compile(m.src[name])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			if t.Static() && !httpmsg.ValidValue(t.src) {
				return nil, fmt.Errorf("%s: the value has control characters", name)
			}
			*m.dst = append(*m.dst, fieldRule{name: []byte(name), value: t})
		}
	}
	return r, nil
}

// checkName refuses a field name no rule may write.
func checkName(name string) error {
	if !httpmsg.IsToken(name) {
		return fmt.Errorf("%q is not a header field name", name)
	}
	k := httpmsg.Classify([]byte(name))
	switch {
	case k.HopByHop() || k == httpmsg.KindKeepAlive:
		return fmt.Errorf("%s is hop-by-hop (RFC 9110 §7.6.1): it belongs to one connection, and Helios writes its own", canonical(name))
	case k == httpmsg.KindContentLength:
		return fmt.Errorf("%s is framing: Helios writes it for the body it sends", canonical(name))
	case k == httpmsg.KindHost:
		return fmt.Errorf("Host is the request's authority: it goes with the request as the client sent it")
	}
	return nil
}

// canonical spells a field name the usual way, for messages.
func canonical(name string) string {
	b := []byte(strings.ToLower(name))
	up := true
	for i, c := range b {
		if up && 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
		up = c == '-'
	}
	return string(b)
}

// Apply edits h. Values with variables are rendered from v into memory
// from a; static ones point at the rules' own memory. It allocates
// nothing once h's field array has grown to fit.
func (r *HeaderRules) Apply(h *httpmsg.Header, v *Vars, a Allocator) {
	if r == nil {
		return
	}
	for _, name := range r.remove {
		h.Del(name)
	}
	for i := range r.set {
		f := &r.set[i]
		h.Set(f.name, f.value.Render(v, a))
	}
	for i := range r.add {
		f := &r.add[i]
		h.Add(f.name, f.value.Render(v, a))
	}
}
