package config

import (
	"bytes"
	"strings"
)

// envAllowed is the "what is allowed" part of environment reference problems.
const envAllowed = "${NAME}, ${NAME:-default}, or $$ for a literal $; NAME is letters, digits and _"

// expandEnv replaces ${NAME} and ${NAME:-default} in data with values from
// lookup, and $$ with $. It works line by line so that a value can never move
// the lines after it: a value holding a line break is a problem. An unset NAME
// without a default expands to "", and ${NAME:-default} uses default when
// NAME is unset or empty, as in the shell. Malformed references are problems
// and are left in the text as written. empty maps the line of each reference
// that expanded to nothing to the reference's variable name (the first on
// its line), so that validation can tell a key set to "" from one whose
// variable was unset.
func expandEnv(data []byte, file string, lookup func(string) (string, bool)) (expanded []byte, empty map[int]string, problems Problems) {
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
			if hasDef && (!ok || v == "") {
				v = def
			}
			if v == "" {
				if empty == nil {
					empty = make(map[int]string)
				}
				if _, seen := empty[lineNo]; !seen {
					empty[lineNo] = name
				}
			}
			if strings.ContainsAny(v, "\r\n") {
				problems = append(problems, problemf(file, lineNo, "", "the value of %s has a line break (a value on one line)", name))
				continue
			}
			out.WriteString(v)
		}
	}
	return out.Bytes(), empty, problems
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
