package config

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// decode parses data as one YAML document and fills a Config from it by
// walking the node tree, so that every value's key path has a line. Unknown
// keys, duplicate keys and values of the wrong type are problems; decoding
// goes on past them so that all are reported. A syntax error stops decoding:
// the returned Config is nil.
func decode(data []byte, file string) (*Config, Problems) {
	cfg := &Config{File: file, meta: newMeta()}
	var problems Problems
	if !decodeDocument(data, file, cfg.meta, reflect.ValueOf(cfg).Elem(), &problems) {
		return nil, problems
	}
	return cfg, problems
}

// decodeDocument parses data as one YAML document and decodes it into v,
// recording lines in m and appending problems to *problems. An empty
// document leaves v alone. It reports false on a syntax error, which stops
// decoding.
func decodeDocument(data []byte, file string, m *meta, v reflect.Value, problems *Problems) bool {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			m.lines[""] = 1 // an empty file is an empty mapping
			return true
		}
		*problems = Problems{syntaxProblem(file, data, err)}
		return false
	}
	d := decoder{file: file, meta: m}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		*problems = Problems{syntaxProblem(file, data, err)}
		return false
	default:
		d.problems = append(d.problems, problemf(file, extra.Line, "", "a second YAML document (one document per file)"))
	}
	if len(doc.Content) == 0 || isNull(doc.Content[0]) {
		m.lines[""] = 1
		*problems = append(*problems, d.problems...)
		return true
	}
	root := doc.Content[0]
	d.value(root, "", root.Line, v)
	*problems = append(*problems, d.problems...)
	return true
}

// yamlLineRE matches the line yaml.v3 puts in most syntax errors.
var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntaxProblem turns a yaml.v3 parse error into a Problem on the line where
// the text stops being valid YAML.
//
// yaml.v3's own line is not that line: parser errors give the 0-based line
// where the enclosing construct starts, and errors on the first line or about
// undefined anchors give none. It is still never after the real line, so
// syntaxProblem parses longer and longer prefixes of data from there on and
// reports the first line at which the same error appears. This costs a parse
// per line searched, paid only for a file that does not parse.
func syntaxProblem(file string, data []byte, err error) Problem {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	from := 1
	if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
		from, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	line := from
	for k := max(from, 1); k <= len(lines); k++ {
		if sameError(parseAll(bytes.Join(lines[:k], nil)), msg) {
			line = k
			break
		}
	}
	return problemf(file, line, "", "%s (YAML syntax)", msg)
}

// sameError reports whether err is a yaml.v3 error with message msg,
// whatever line it names.
func sameError(err error, msg string) bool {
	if err == nil {
		return false
	}
	if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
		return m[2] == msg
	}
	return strings.TrimPrefix(err.Error(), "yaml: ") == msg
}

// parseAll parses every YAML document in data and returns the first error.
func parseAll(data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// decoder walks a yaml.Node tree into Go values, recording in meta where
// each value was and which were of the wrong type.
type decoder struct {
	file     string
	meta     *meta
	problems Problems
}

var durationType = reflect.TypeFor[Duration]()

// value decodes n into v. path is n's key path and line the line of its key.
// A null value leaves v alone and is not recorded as present.
func (d *decoder) value(n *yaml.Node, path string, line int, v reflect.Value) {
	if n.Kind == yaml.AliasNode {
		// An alias may point to a node that contains it (yaml.v3 allows
		// that), but following it cannot loop: each step goes one level
		// down the Go types, which are not recursive.
		n = n.Alias
	}
	if isNull(n) {
		d.meta.nulls[path] = line
		return
	}
	ok := true
	switch {
	case v.Type() == durationType:
		ok = d.duration(n, path, line, v)
	case v.Kind() == reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		d.value(n, path, line, p.Elem())
		if !d.meta.bad[path] {
			v.Set(p)
		}
		return // the element recorded path
	case v.Kind() == reflect.Struct:
		ok = d.mapping(n, path, line, v)
	case v.Kind() == reflect.Slice:
		ok = d.list(n, path, line, v)
	case v.Kind() == reflect.Map:
		ok = d.stringMap(n, path, line, v)
	default:
		ok = d.scalar(n, path, line, v)
	}
	if ok {
		d.meta.lines[path] = line
	}
}

// mapping decodes a YAML mapping into the struct v, field by yaml tag.
func (d *decoder) mapping(n *yaml.Node, path string, line int, v reflect.Value) bool {
	fields := yamlFields(v.Type())
	if n.Kind != yaml.MappingNode {
		d.typeError(path, line, "%s is not a mapping (keys: %s)", describe(n), keyList(fields))
		return false
	}
	d.pairs(n, path, func(key, kp string, line int, val *yaml.Node) {
		for _, f := range fields {
			if f.name == key {
				d.value(val, kp, line, v.Field(f.index))
				return
			}
		}
		d.problems = append(d.problems, problemf(d.file, line, kp, "unknown key (allowed: %s)", keyList(fields)))
	})
	return true
}

// stringMap decodes a YAML mapping into the map v, whose keys are strings.
func (d *decoder) stringMap(n *yaml.Node, path string, line int, v reflect.Value) bool {
	if n.Kind != yaml.MappingNode {
		d.typeError(path, line, "%s is not a mapping (name: value pairs)", describe(n))
		return false
	}
	m := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
	d.pairs(n, path, func(key, kp string, line int, val *yaml.Node) {
		elem := reflect.New(v.Type().Elem()).Elem()
		d.value(val, kp, line, elem)
		if !d.meta.bad[kp] {
			m.SetMapIndex(reflect.ValueOf(key), elem)
		}
	})
	v.Set(m)
	return true
}

// pairs calls f for each key of the mapping n, reporting keys that are not
// scalars and keys that repeat (whose values are skipped).
func (d *decoder) pairs(n *yaml.Node, path string, f func(key, keyPath string, line int, val *yaml.Node)) {
	seen := make(map[string]int, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.problems = append(d.problems, problemf(d.file, k.Line, path, "%s is not a key (a plain name)", describe(k)))
			continue
		}
		kp := childPath(path, k.Value)
		if first, dup := seen[k.Value]; dup {
			d.problems = append(d.problems, problemf(d.file, k.Line, kp, "duplicate key (first set on line %d; set each key once)", first))
			continue
		}
		seen[k.Value] = k.Line
		f(k.Value, kp, k.Line, val)
	}
}

// list decodes a YAML sequence into the slice v.
func (d *decoder) list(n *yaml.Node, path string, line int, v reflect.Value) bool {
	if n.Kind != yaml.SequenceNode {
		d.typeError(path, line, "%s is not a list (a sequence of \"- \" items)", describe(n))
		return false
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		d.value(item, indexPath(path, i), item.Line, s.Index(i))
	}
	v.Set(s)
	return true
}

// scalar decodes a YAML scalar into a string, int, float64 or bool. YAML's
// own tags decide: "2" in quotes is not an integer and yes is not a boolean.
func (d *decoder) scalar(n *yaml.Node, path string, line int, v reflect.Value) bool {
	tag := n.ShortTag()
	scalar := n.Kind == yaml.ScalarNode
	switch v.Kind() {
	case reflect.String:
		if !scalar {
			d.typeError(path, line, "%s is not a string (a single value)", describe(n))
			return false
		}
		v.SetString(n.Value)
	case reflect.Int, reflect.Int64:
		var i int64
		if !scalar || tag != "!!int" || n.Decode(&i) != nil || v.OverflowInt(i) {
			d.typeError(path, line, "%s is not an integer (a whole number)", describe(n))
			return false
		}
		v.SetInt(i)
	case reflect.Float64:
		var f float64
		if !scalar || (tag != "!!int" && tag != "!!float") || n.Decode(&f) != nil {
			d.typeError(path, line, "%s is not a number (such as 0.5)", describe(n))
			return false
		}
		v.SetFloat(f)
	case reflect.Bool:
		var b bool
		if !scalar || tag != "!!bool" || n.Decode(&b) != nil {
			d.typeError(path, line, "%s is not a boolean (true or false)", describe(n))
			return false
		}
		v.SetBool(b)
	default:
		// Only reachable if types.go gains a field of a kind decode does
		// not know, which the tests of a full config would catch.
		panic("config: cannot decode into " + v.Type().String())
	}
	return true
}

// duration decodes a Go duration string ("2s"); a bare 0 is also accepted.
func (d *decoder) duration(n *yaml.Node, path string, line int, v reflect.Value) bool {
	var dur time.Duration
	var err error
	if n.Kind == yaml.ScalarNode {
		dur, err = time.ParseDuration(n.Value)
	}
	if n.Kind != yaml.ScalarNode || err != nil {
		d.typeError(path, line, "%s is not a duration (a Go duration such as 500ms, 2s or 1m)", describe(n))
		return false
	}
	v.SetInt(int64(dur))
	return true
}

// typeError reports a value of the wrong type and marks path bad.
func (d *decoder) typeError(path string, line int, format string, args ...any) {
	d.meta.bad[path] = true
	d.problems = append(d.problems, problemf(d.file, line, path, format, args...))
}

// describe names a node in a message: a scalar as its quoted value, others by
// their kind.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return strconv.Quote(n.Value)
}

// isNull reports whether n is a YAML null (~, null, or nothing at all).
func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// yamlField is a struct field that has a YAML key.
type yamlField struct {
	name  string
	index int
}

// yamlFields lists the fields of struct type t that have a YAML key, in
// declaration order (the order of "allowed:" lists in messages).
func yamlFields(t reflect.Type) []yamlField {
	fields := make([]yamlField, 0, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || name == "" || name == "-" {
			continue
		}
		fields = append(fields, yamlField{name: name, index: i})
	}
	return fields
}

// keyList joins the keys of fields for a message.
func keyList(fields []yamlField) string {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.name
	}
	return strings.Join(names, ", ")
}
