package hpack

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"golang.org/x/net/http2/hpack"
)

// randomHead returns a head of typical fields with some of its values
// changed, some fields new, and some sensitive.
func randomHead(r *rand.Rand) []tf {
	base := typicalHeads[r.IntN(len(typicalHeads))]
	var h []tf
	for _, f := range base {
		switch r.IntN(8) {
		case 0:
			f.value = fmt.Sprintf("%s-%d", f.value, r.IntN(50))
		case 1:
			continue
		case 2:
			f.sensitive = !f.sensitive
		}
		h = append(h, f)
	}
	for range r.IntN(3) {
		v := make([]byte, r.IntN(40))
		for i := range v {
			v[i] = byte(r.IntN(256)) // any octet: HPACK does not care
		}
		h = append(h, tf{fmt.Sprintf("x-custom-%d", r.IntN(20)), string(v), r.IntN(10) == 0})
	}
	if r.IntN(20) == 0 {
		// Larger than three quarters of the table: not indexed.
		h = append(h, tf{"x-large", string(bytes.Repeat([]byte("v"), 3500)), false})
	}
	return h
}

// TestEncoderAgainstXnet encodes sequences of heads, sharing the
// dynamic table, with table limit changes between some of them, and
// decodes them with x/net's decoder (and ours): the same fields,
// sensitive ones still sensitive.
func TestEncoderAgainstXnet(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for seq := range 50 {
		e := NewEncoder()
		x := hpack.NewDecoder(DefaultTableSize, nil)
		d := NewDecoder(DecoderConfig{})
		for blk := range 40 {
			if r.IntN(10) == 0 {
				limits := []uint32{0, 100, 256, 1000, 4096, 65536}
				for range 1 + r.IntN(2) {
					v := limits[r.IntN(len(limits))]
					e.SetMaxTableSizeLimit(v)
					x.SetAllowedMaxDynamicTableSize(v)
					d.SetMaxTableSizeLimit(v)
				}
			}
			head := randomHead(r)
			var block []byte
			for _, f := range head {
				block = e.Encode(block, []byte(f.name), []byte(f.value), f.sensitive)
			}
			got, err := xnetDecode(x, block)
			if err != nil || !slices.Equal(got, head) {
				t.Fatalf("sequence %d block %d: x/net decodes %v, %v; want %v", seq, blk, got, err, head)
			}
			got, err = decode(d, block)
			if err != nil || !slices.Equal(got, head) {
				t.Fatalf("sequence %d block %d: we decode %v, %v; want %v", seq, blk, got, err, head)
			}
		}
	}
}

// TestDecoderAgainstXnet decodes what x/net's encoder makes of
// sequences of heads, with table size changes (SetMaxDynamicTableSize,
// which signals the smallest and the final size) between some.
func TestDecoderAgainstXnet(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for seq := range 50 {
		var buf bytes.Buffer
		x := hpack.NewEncoder(&buf)
		x.SetMaxDynamicTableSizeLimit(65536)
		d := NewDecoder(DecoderConfig{})
		d.SetMaxTableSizeLimit(65536)
		for blk := range 40 {
			if r.IntN(10) == 0 {
				sizes := []uint32{0, 100, 256, 1000, 4096, 20000}
				for range 1 + r.IntN(2) {
					x.SetMaxDynamicTableSize(sizes[r.IntN(len(sizes))])
				}
			}
			head := randomHead(r)
			buf.Reset()
			for _, f := range head {
				if err := x.WriteField(hpack.HeaderField{Name: f.name, Value: f.value, Sensitive: f.sensitive}); err != nil {
					t.Fatal(err)
				}
			}
			got, err := decode(d, buf.Bytes())
			if err != nil || !slices.Equal(got, head) {
				t.Fatalf("sequence %d block %d: got %v, %v; want %v", seq, blk, got, err, head)
			}
			if d.t.max != uint64(x.MaxDynamicTableSize()) {
				t.Fatalf("sequence %d block %d: table size %d, x/net's encoder's %d", seq, blk, d.t.max, x.MaxDynamicTableSize())
			}
		}
	}
}

// TestStaticTableAgainstXnet: x/net's encoder sends each static entry
// as its index, which we decode to the entry; our encoder sends it as
// the same index.
func TestStaticTableAgainstXnet(t *testing.T) {
	var buf bytes.Buffer
	x := hpack.NewEncoder(&buf)
	e := NewEncoder()
	for i, s := range staticTable {
		buf.Reset()
		if err := x.WriteField(hpack.HeaderField{Name: s.name, Value: s.value}); err != nil {
			t.Fatal(err)
		}
		d := NewDecoder(DecoderConfig{})
		got, err := decode(d, buf.Bytes())
		if want := (tf{s.name, s.value, false}); err != nil || len(got) != 1 || got[0] != want {
			t.Errorf("index %d (%x): got %v, %v; want %v", i+1, buf.Bytes(), got, err, want)
		}
		if ours := e.Encode(nil, []byte(s.name), []byte(s.value), false); !bytes.Equal(ours, buf.Bytes()) {
			t.Errorf("index %d: we encode %x, x/net %x", i+1, ours, buf.Bytes())
		}
	}
}
