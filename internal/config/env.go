package config

import (
	"bytes"
	"slices"
	"strings"
)

// envAllowed is the "what is allowed" part of environment reference problems.
const envAllowed = "${NAME}, ${NAME:-default}, or $$ for a literal $; NAME is letters, digits and _"

// expandEnv replaces ${NAME} and ${NAME:-default} in data with values from
// lookup, and $$ with $. It works line by line so that a value can never move
// the lines after it: a value holding a line break is a problem. An unset NAME
// without a default expands to "", and ${NAME:-default} uses default when
// NAME is unset or empty, as in the shell. Malformed references are problems
// and are left in the text as written. refs maps each line that held
// references to them, in order, so that validation can tell a key set to ""
// from one whose variable was unset, and name the variable in a problem
// about a value that came from it.
func expandEnv(data []byte, file string, lookup func(string) (string, bool)) (expanded []byte, refs map[int][]envRef, problems Problems) {
	if bytes.IndexByte(data, '$') < 0 {
		return data, nil, nil
	}
	var out bytes.Buffer
	out.Grow(len(data))
	for n, line := range strings.SplitAfter(string(data), "\n") {
		lineNo := n + 1
		for {
			i := strings.IndexByte(line, '$')
			if i < 0 || i == len(line)-1 {
				out.WriteString(line)
				break
			}
			out.WriteString(line[:i])
			switch line[i+1] {
			case '$':
				out.WriteByte('$')
				line = line[i+2:]
				continue
			case '{':
			default:
				out.WriteByte('$')
				line = line[i+1:]
				continue
			}
			end := strings.IndexByte(line[i:], '}')
			if end < 0 {
				problems = append(problems, problemf(file, lineNo, "", `unclosed "${" (%s)`, envAllowed))
				out.WriteString(line[i:])
				break
			}
			ref := line[i : i+end+1]
			line = line[i+end+1:]
			name, def, hasDef := strings.Cut(ref[2:len(ref)-1], ":-")
			if !isEnvName(name) {
				problems = append(problems, problemf(file, lineNo, "", "%q is not a variable reference (%s)", ref, envAllowed))
				out.WriteString(ref)
				continue
			}
			v, ok := lookup(name)
			r := envRef{text: ref, name: name, set: ok, empty: v == ""}
			if hasDef && (!ok || v == "") {
				v, r.usedDefault = def, true
			}
			r.value = v
			if refs == nil {
				refs = make(map[int][]envRef)
			}
			refs[lineNo] = append(refs[lineNo], r)
			if strings.ContainsAny(v, "\r\n") {
				problems = append(problems, problemf(file, lineNo, "", "the value of %s has a line break (a value on one line)", name))
				continue
			}
			out.WriteString(v)
		}
	}
	return out.Bytes(), refs, problems
}

// envRef is one ${NAME} or ${NAME:-default} reference in a config file.
type envRef struct {
	text        string // as written, ${...} included
	name        string // the variable
	set         bool   // the variable is set, possibly to ""
	empty       bool   // the variable is unset or set to ""
	usedDefault bool   // the value is the reference's default
	value       string // what the reference expanded to
}

// unsetNote says, for a problem about a value that came from refs, which
// of them had an unset or empty variable: "(from ${BACKEND}, which is not
// set)". It is "" when every variable was set to something.
func unsetNote(refs []envRef) string {
	var parts []string
	for _, r := range refs {
		var what string
		switch {
		case !r.empty:
			continue
		case r.set:
			what = "which is empty"
		default:
			what = "which is not set"
		}
		if r.usedDefault {
			what = r.name + " " + strings.TrimPrefix(what, "which ") + ", so its default"
		}
		if part := "from " + r.text + ", " + what; !slices.Contains(parts, part) {
			parts = append(parts, part)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "(" + strings.Join(parts, "; ") + ")"
}

// isEnvName reports whether s is a shell variable name: a letter or _, then
// letters, digits and _.
func isEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
