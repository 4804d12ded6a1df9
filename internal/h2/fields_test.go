package h2

import "bytes"

// field is a Field of strings.
func field(name, value string) Field { return Field{Name: []byte(name), Value: []byte(value)} }

// fieldList returns the fields of name, value pairs.
func fieldList(kv ...string) []Field {
	var fs []Field
	for i := 0; i+1 < len(kv); i += 2 {
		fs = append(fs, field(kv[i], kv[i+1]))
	}
	return fs
}

// cloneFields copies fields a handler was given (valid only during its
// call) for the test to keep.
func cloneFields(fs []Field) []Field {
	out := make([]Field, len(fs))
	for i, f := range fs {
		out[i] = Field{Name: append([]byte(nil), f.Name...), Value: append([]byte(nil), f.Value...), Sensitive: f.Sensitive}
	}
	return out
}

// sameField reports whether a and b are the same field.
func sameField(a, b Field) bool {
	return bytes.Equal(a.Name, b.Name) && bytes.Equal(a.Value, b.Value) && a.Sensitive == b.Sensitive
}
