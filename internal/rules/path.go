package rules

import (
	"bytes"
	"fmt"
	"net/http"
	"regexp"

	"github.com/helios-lb/helios/internal/httpmsg"
)

// Rewrite changes the path a request is forwarded with: a prefix
// stripped, then a prefix added, or a regular expression's replacement
// ($1, ${name} for its groups). The query goes on unchanged unless the
// replacement has one of its own ("?" in it): then it replaces the
// client's, unless KeepQuery.
type Rewrite struct {
	stripPrefix, addPrefix []byte
	re                     *regexp.Regexp
	replacement            []byte
	keepQuery              bool
}

// RewriteConfig is what a route's rewrite says.
type RewriteConfig struct {
	StripPrefix, AddPrefix string
	Regex, Replacement     string
	KeepQuery              bool
}

// CompileRewrite checks and compiles a rewrite.
func CompileRewrite(c RewriteConfig) (*Rewrite, error) {
	rw := &Rewrite{stripPrefix: []byte(c.StripPrefix), addPrefix: []byte(c.AddPrefix), keepQuery: c.KeepQuery}
	if c.StripPrefix != "" && c.StripPrefix[0] != '/' || c.AddPrefix != "" && c.AddPrefix[0] != '/' {
		return nil, fmt.Errorf("strip_prefix and add_prefix start with /")
	}
	if c.Regex != "" {
		if c.StripPrefix != "" || c.AddPrefix != "" {
			return nil, fmt.Errorf("regex cannot go with strip_prefix or add_prefix")
		}
		re, err := regexp.Compile(c.Regex)
		if err != nil {
			return nil, fmt.Errorf("regex: %w", err)
		}
		if c.Replacement == "" || c.Replacement[0] != '/' {
			return nil, fmt.Errorf("replacement: want a path starting with /")
		}
		rw.re, rw.replacement = re, []byte(c.Replacement)
	} else if c.Replacement != "" {
		return nil, fmt.Errorf("replacement needs regex")
	}
	return rw, nil
}

// Apply rewrites r's Target and Path. A prefix rewrite allocates nothing
// (it renders into memory from a); a regex one allocates its match.
func (rw *Rewrite) Apply(r *httpmsg.Request, a Allocator) {
	path, query := r.Path, r.Query()
	hasQuery := len(r.Target) > len(r.Path)
	var out []byte
	switch {
	case rw.re != nil:
		m := rw.re.FindSubmatchIndex(path)
		if m == nil {
			return
		}
		var exp []byte
		exp = rw.re.Expand(exp, rw.replacement, path, m)
		rest := path[m[1]:]
		newPath := append(append(path[:m[0]:m[0]], exp...), rest...)
		if q := bytes.IndexByte(newPath, '?'); q >= 0 {
			if rw.keepQuery && hasQuery {
				newPath = append(append(newPath, '&'), query...)
			}
			r.Target, r.Path = newPath, newPath[:q]
			return
		}
		out = newPath
	default:
		p := path
		lead := false // p needs a "/" in front
		if len(rw.stripPrefix) > 0 && bytes.HasPrefix(p, rw.stripPrefix) {
			p = p[len(rw.stripPrefix):]
			if len(p) == 0 || p[0] != '/' {
				// "/api" stripped from "/api/x" leaves "/x", from "/api"
				// the root; "/apix" has no segment "/api" to strip.
				if len(p) > 0 && rw.stripPrefix[len(rw.stripPrefix)-1] != '/' {
					return
				}
				lead = true
			}
		}
		pre := rw.addPrefix
		if len(pre) > 0 && pre[len(pre)-1] == '/' {
			if lead {
				lead = false
			} else if len(p) > 0 && p[0] == '/' {
				p = p[1:]
			}
		}
		n := len(pre) + len(p)
		if lead {
			n++
		}
		out = a.Alloc(n)[:0]
		out = append(out, pre...)
		if lead {
			out = append(out, '/')
		}
		out = append(out, p...)
	}
	if hasQuery {
		t := a.Alloc(len(out) + 1 + len(query))[:0]
		t = append(append(append(t, out...), '?'), query...)
		r.Target, r.Path = t, t[:len(out)]
		return
	}
	r.Target, r.Path = out, out
}

// Redirect answers with a redirect: Location rendered from a template.
type Redirect struct {
	to     *Template
	status int
}

// CompileRedirect checks and compiles a redirect: status 301, 302, 303,
// 307 or 308 (0: 308, which keeps the method and body).
func CompileRedirect(to string, status int) (*Redirect, error) {
	if status == 0 {
		status = http.StatusPermanentRedirect
	}
	switch status {
	case 301, 302, 303, 307, 308:
	default:
		return nil, fmt.Errorf("status %d: want 301, 302, 303, 307 or 308", status)
	}
	t, err := Compile(to)
	if err != nil {
		return nil, err
	}
	return &Redirect{to: t, status: status}, nil
}

// Status returns the redirect's status.
func (rd *Redirect) Status() int { return rd.status }

// Location renders the redirect's target.
func (rd *Redirect) Location(v *Vars, a Allocator) []byte { return rd.to.Render(v, a) }
