package hpack

import (
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/net/http2/hpack"
)

// tf is a field as tests compare it: strings, copied out of whatever
// the decoder pointed into.
type tf struct {
	name, value string
	sensitive   bool
}

func (f tf) String() string {
	if f.sensitive {
		return fmt.Sprintf("%q: %q (sensitive)", f.name, f.value)
	}
	return fmt.Sprintf("%q: %q", f.name, f.value)
}

// dehex decodes hex with spaces and newlines in it.
func dehex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// decode decodes block with d, gathering the fields while they are
// valid and copying them only after Decode returns (as a caller may).
func decode(d *Decoder, block []byte) ([]tf, error) {
	var fs []Field
	err := d.Decode(block, func(f Field) { fs = append(fs, f) })
	out := make([]tf, len(fs))
	for i, f := range fs {
		out[i] = tf{string(f.Name), string(f.Value), f.Sensitive}
	}
	return out, err
}

// xnetDecode decodes block with x/net's decoder.
func xnetDecode(d *hpack.Decoder, block []byte) ([]tf, error) {
	var out []tf
	d.SetEmitFunc(func(f hpack.HeaderField) { out = append(out, tf{f.Name, f.Value, f.Sensitive}) })
	if _, err := d.Write(block); err != nil {
		d.Close()
		return out, err
	}
	return out, d.Close()
}

// dynTable returns t's entries, newest first.
func dynTable(t *table) []tf {
	var out []tf
	for i := 1; i <= t.len(); i++ {
		e := t.at(i)
		na, nb := t.name(e)
		va, vb := t.value(e)
		out = append(out, tf{name: string(na) + string(nb), value: string(va) + string(vb)})
	}
	return out
}
