package config

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// TestEveryKeyIsDocumented checks that the README's configuration
// reference names every YAML key, in backquotes: alone, or as a part of a
// path such as `retries.backoff.base` or `split[].weight`.
func TestEveryKeyIsDocumented(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(readme)
	seen := map[reflect.Type]bool{}
	var walk func(typ reflect.Type, path string)
	walk = func(typ reflect.Type, path string) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || typ == reflect.TypeFor[Duration]() || seen[typ] {
			return
		}
		seen[typ] = true
		for i := range typ.NumField() {
			f := typ.Field(i)
			tag := f.Tag.Get("yaml")
			if tag == "" || tag == "-" {
				continue
			}
			if !documented(doc, tag) {
				t.Errorf("key %s%s: not in the README", path, tag)
			}
			walk(f.Type, path+tag+".")
		}
	}
	walk(reflect.TypeFor[Config](), "")
}

// documented reports whether doc names key as a whole part of a
// backquoted key path.
func documented(doc, key string) bool {
	for _, before := range []string{"`", ".", "]."} {
		for _, after := range []string{"`", ".", "[", ":"} {
			if strings.Contains(doc, before+key+after) {
				return true
			}
		}
	}
	return false
}
