package http1

import (
	"reflect"
	"testing"
	"unsafe"

	"github.com/helios-lb/helios/internal/httpmsg"
)

// TestRebaseMovesEverySlice fills every []byte of a Request (found by
// reflection, so a field added later is covered) and of its header fields
// with slices of one buffer, rebases, and wants every one in the new
// buffer with the same bytes; a slice outside the buffer stays put.
func TestRebaseMovesEverySlice(t *testing.T) {
	from := []byte("0123456789abcdefghijklmnopqrstuvwxyz")
	to := make([]byte, 64)
	copy(to, from)
	outside := []byte("https")
	var r Request
	r.Header.Fields = []httpmsg.Field{{Name: from[20:24], Value: from[25:30]}, {Name: from[30:32], Value: outside}}
	n := 0
	var fill func(v reflect.Value)
	fill = func(v reflect.Value) {
		for i := 0; i < v.NumField(); i++ {
			f := v.Field(i)
			switch {
			case f.Type() == reflect.TypeOf([]byte(nil)):
				f.SetBytes(from[n : n+2])
				n += 2
			case f.Kind() == reflect.Struct && f.Type() != reflect.TypeOf(httpmsg.Header{}):
				fill(f)
			}
		}
	}
	fill(reflect.ValueOf(&r).Elem())
	if n == 0 {
		t.Fatal("no []byte field found")
	}
	r.Rebase(from, to)
	in := func(s, b []byte) bool {
		p, base := uintptr(unsafe.Pointer(unsafe.SliceData(s))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		return p >= base && p < base+uintptr(len(b))
	}
	var check func(v reflect.Value, path string)
	check = func(v reflect.Value, path string) {
		for i := 0; i < v.NumField(); i++ {
			f, name := v.Field(i), path+v.Type().Field(i).Name
			switch {
			case f.Type() == reflect.TypeOf([]byte(nil)):
				if b := f.Bytes(); !in(b, to) {
					t.Errorf("%s = %q: not rebased into the new buffer", name, b)
				}
			case f.Kind() == reflect.Struct && f.Type() != reflect.TypeOf(httpmsg.Header{}):
				check(f, name+".")
			}
		}
	}
	check(reflect.ValueOf(&r).Elem(), "")
	f := r.Header.Fields
	if !in(f[0].Name, to) || !in(f[0].Value, to) || !in(f[1].Name, to) || string(f[0].Name) != "klmn" || string(f[0].Value) != "pqrst" {
		t.Errorf("header fields %q %q, %q: want them in the new buffer, same bytes", f[0].Name, f[0].Value, f[1].Name)
	}
	if !in(f[1].Value, outside) {
		t.Errorf("a value outside the buffer moved: %q", f[1].Value)
	}
}
