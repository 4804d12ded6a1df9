package config

import (
	"os"
	"slices"
	"strconv"
	"strings"
)

// meta is what decoding learned about a file beyond the values themselves:
// which key paths were present, on which lines, and which held values of the
// wrong type. Defaults fill only absent keys, and validation uses the lines.
// A nil *meta (a Config built in code) knows nothing: every zero value counts
// as absent and every line is 0.
type meta struct {
	// lookupEnv is the environment Parse read ${VAR} from; nil means
	// os.LookupEnv.
	lookupEnv func(string) (string, bool)
	// lines maps the path of every decoded, non-null value to the line of
	// its key (of its "-" for a list item). The root mapping is "".
	lines map[string]int
	// bad holds the paths of values that could not be decoded; decoding has
	// reported them, so validation says nothing more about them.
	bad map[string]bool
	// nulls maps the path of every null value (key: with nothing after it,
	// as when its ${VAR} expanded to nothing) to the line of its key.
	nulls map[string]int
	// env maps lines to the ${VAR} references on them.
	env map[int][]envRef
}

func newMeta() *meta {
	return &meta{lines: make(map[string]int), bad: make(map[string]bool), nulls: make(map[string]int)}
}

// emptyRef returns the variable whose ${VAR} reference made the value at
// path empty or null, and the line of its key; "" when there was none.
func (m *meta) emptyRef(path string) (name string, line int) {
	line, ok := m.keyLine(path)
	if !ok {
		return "", 0
	}
	for _, r := range m.env[line] {
		if r.value == "" {
			return r.name, line
		}
	}
	return "", line
}

// keyLine returns the line of the key at path when the file held it, with
// a value or null.
func (m *meta) keyLine(path string) (int, bool) {
	if m == nil {
		return 0, false
	}
	if line, ok := m.lines[path]; ok {
		return line, true
	}
	line, ok := m.nulls[path]
	return line, ok
}

// noteEnv adds to each problem about a value that came from a ${VAR}
// whose variable was unset or empty which variable that was (issue 18
// item 2: "missing" and "/helios.pem does not exist" left the reader to
// guess). A problem about a key that is null because its reference
// expanded to nothing moves to the key's line. Problems that name the
// variable already, or are about the file as a whole, are left alone.
func (m *meta) noteEnv(ps Problems) {
	if m == nil || len(m.env) == 0 {
		return
	}
	for i := range ps {
		p := &ps[i]
		if p.Path == "" {
			continue
		}
		line := p.Line
		if l, ok := m.keyLine(p.Path); ok {
			line = l
		}
		// And the keys under it left null by a reference ("no address"
		// about a list item whose address: ${BACKEND} was unset).
		refs := m.env[line]
		var lines []int
		for path, l := range m.nulls {
			if parent, _ := parentPath(path); parent == p.Path && l != line {
				lines = append(lines, l)
			}
		}
		slices.Sort(lines)
		for _, l := range lines {
			refs = append(refs, m.env[l]...)
		}
		note := unsetNote(refs)
		if note == "" || strings.Contains(p.Msg, "${") {
			continue
		}
		p.Line = line
		p.Msg += " " + note
	}
}

// lookup returns the environment Parse read ${VAR} from, for the
// *_password_env keys: os.LookupEnv when m is nil or Parse had none.
func (m *meta) lookup() func(string) (string, bool) {
	if m == nil || m.lookupEnv == nil {
		return os.LookupEnv
	}
	return m.lookupEnv
}

// present reports whether the YAML set path to a non-null value that decoded.
func (m *meta) present(path string) bool {
	if m == nil {
		return false
	}
	_, ok := m.lines[path]
	return ok
}

// line returns the line of path or, for a key that is absent, of the nearest
// enclosing mapping or list that is present. It is 0 when m is nil.
func (m *meta) line(path string) int {
	if m == nil {
		return 0
	}
	for {
		if l, ok := m.lines[path]; ok {
			return l
		}
		parent, ok := parentPath(path)
		if !ok {
			return 0
		}
		path = parent
	}
}

// isBad reports whether path, or a mapping or list enclosing it, held a value
// of the wrong type.
func (m *meta) isBad(path string) bool {
	if m == nil || len(m.bad) == 0 {
		return false
	}
	for {
		if m.bad[path] {
			return true
		}
		parent, ok := parentPath(path)
		if !ok {
			return false
		}
		path = parent
	}
}

// childPath returns the path of key within the mapping at parent:
// parent.key, or parent["key"] when key is not a plain name.
func childPath(parent, key string) string {
	if !isPlainKey(key) {
		return parent + "[" + strconv.Quote(key) + "]"
	}
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// indexPath returns the path of item i of the list at parent.
func indexPath(parent string, i int) string {
	return parent + "[" + strconv.Itoa(i) + "]"
}

// parentPath returns the path enclosing path, and false for the root "".
func parentPath(path string) (string, bool) {
	if path == "" {
		return "", false
	}
	if strings.HasSuffix(path, "]") {
		return path[:strings.LastIndexByte(path, '[')], true
	}
	i := strings.LastIndexByte(path, '.')
	if i < 0 {
		return "", true
	}
	return path[:i], true
}

// isPlainKey reports whether key can be written after a dot in a path.
func isPlainKey(key string) bool {
	if key == "" {
		return false
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
