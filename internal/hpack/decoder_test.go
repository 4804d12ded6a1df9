package hpack

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/net/http2/hpack"
)

// TestDecodeErrors: each malformed block gets its own error, as x/net's
// decoder rejects it (where RFC 7541 and x/net agree).
func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name   string
		cfg    DecoderConfig
		limit  uint32 // SetMaxTableSizeLimit, when not 0
		before string // a block decoded first
		hex    string
		want   error
		xnet   bool // x/net's decoder rejects it too
	}{
		{name: "index 0", hex: "80", want: ErrIndex, xnet: true},
		{name: "index past the static table", hex: "be", want: ErrIndex, xnet: true},
		{name: "index past the dynamic table", before: "4001610162", hex: "bf", want: ErrIndex, xnet: true},
		{name: "name index past the tables", hex: "7f00 0161", want: ErrIndex, xnet: true},
		{name: "integer of more than 63 bits", hex: "ff 8080 8080 8080 8080 80", want: ErrIntegerOverflow, xnet: true},
		{name: "integer of 57 bits is an index", hex: "ff 8080 8080 8080 8001", want: ErrIndex, xnet: true},
		{name: "truncated integer", hex: "ff80", want: ErrTruncated, xnet: true},
		{name: "truncated name", hex: "0003 6162", want: ErrTruncated, xnet: true},
		{name: "truncated value", hex: "0001 6105 6162", want: ErrTruncated, xnet: true},
		{name: "missing value", hex: "0001 61", want: ErrTruncated, xnet: true},
		{name: "Huffman EOS", hex: "0001 6184 ffff ffff", want: ErrHuffman, xnet: true},
		{name: "Huffman padding of 8 bits", hex: "0001 6181 ff", want: ErrHuffman, xnet: true},
		{name: "Huffman padding not ones", hex: "0001 6181 18", want: ErrHuffman, xnet: true},
		{name: "Huffman incomplete code", hex: "0001 6181 fe", want: ErrHuffman, xnet: true},
		{name: "Huffman name", hex: "0081 ff01 61", want: ErrHuffman, xnet: true},
		// x/net's decoder takes a size update anywhere while its table
		// is empty.
		{name: "size update after a field", hex: "8220", want: ErrTableSizeUpdate},
		{name: "size update after a field, table in use", before: "4001610162", hex: "be20", want: ErrTableSizeUpdate, xnet: true},
		{name: "size update above the limit", hex: "3fe2 1f", want: ErrTableSizeUpdate, xnet: true},
		{name: "size update above a lowered limit", limit: 100, hex: "3f46", want: ErrTableSizeUpdate},
		{name: "no size update after the limit fell", limit: 100, hex: "82", want: ErrTableSizeUpdate},
		{name: "name longer than the limit", cfg: DecoderConfig{MaxStringLength: 3}, hex: "0004 6161 6161 00", want: ErrStringLength, xnet: true},
		{name: "value longer than the limit", cfg: DecoderConfig{MaxStringLength: 3}, hex: "0001 6104 6161 6161", want: ErrStringLength, xnet: true},
		{name: "Huffman value longer than the limit decoded", cfg: DecoderConfig{MaxStringLength: 3}, hex: "0001 6183 18c6 3f", want: ErrStringLength, xnet: true},
		{name: "indexed name longer than the limit", cfg: DecoderConfig{MaxStringLength: 3}, hex: "0f0d 00", want: ErrStringLength, xnet: true},
		{name: "indexed field longer than the limit", cfg: DecoderConfig{MaxStringLength: 3}, hex: "82", want: ErrStringLength, xnet: true},
		{name: "header list", cfg: DecoderConfig{MaxHeaderListSize: 40}, hex: "8282", want: ErrHeaderListSize},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDecoder(tt.cfg)
			x := hpack.NewDecoder(DefaultTableSize, nil)
			x.SetMaxStringLength(tt.cfg.MaxStringLength)
			if tt.before != "" {
				if _, err := decode(d, dehex(t, tt.before)); err != nil {
					t.Fatal(err)
				}
				if _, err := xnetDecode(x, dehex(t, tt.before)); err != nil {
					t.Fatal(err)
				}
			}
			if tt.limit != 0 {
				d.SetMaxTableSizeLimit(tt.limit)
			}
			block := dehex(t, tt.hex)
			if _, err := decode(d, block); !errors.Is(err, tt.want) {
				t.Errorf("got %v, want %v", err, tt.want)
			}
			if _, err := xnetDecode(x, block); tt.xnet && err == nil {
				t.Errorf("x/net's decoder accepts it")
			}
		})
	}
}

// TestDecodeValid: blocks RFC 7541 allows that are on the edges of the
// rules above.
func TestDecodeValid(t *testing.T) {
	tests := []struct {
		name   string
		limit  uint32
		before string
		hex    string
		want   []tf
	}{
		{name: "empty block", hex: "", want: nil},
		{name: "Huffman padding of 7 ones", hex: "0001 6181 1f", want: []tf{{"a", "a", false}}},
		{name: "Huffman empty string", hex: "0001 6180", want: []tf{{"a", "", false}}},
		{name: "integer with redundant continuation bytes", hex: "0fae 8000 00", want: []tf{{"www-authenticate", "", false}}},
		{name: "size update at the limit", hex: "3fe1 1f82", want: []tf{{":method", "GET", false}}},
		// RFC 7541 §4.2 allows two (the smallest, then the final);
		// x/net's decoder refuses the second when its table is not
		// empty after the first.
		{name: "two size updates", before: "4001610162", hex: "3fe1 1f3f e11f be", want: []tf{{"a", "b", false}}},
		{name: "size update to 0 evicts", before: "4001610162", hex: "203f e11f 82", want: []tf{{":method", "GET", false}}},
		{name: "size update within a lowered limit", limit: 100, hex: "3f45 82", want: []tf{{":method", "GET", false}}},
		{name: "limit raised: no size update needed", limit: 8192, hex: "82", want: []tf{{":method", "GET", false}}},
		{name: "size update up to a raised limit", limit: 8192, hex: "3fe1 3f82", want: []tf{{":method", "GET", false}}},
		{name: "name and value of any octets", hex: "0002 00ff 030d 0a00", want: []tf{{"\x00\xff", "\r\n\x00", false}}},
		{name: "literal with a dynamic name, evicting it", before: "3f05 4001 6101 62", hex: "3f05 7e01 63", want: []tf{{"a", "c", false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDecoder(DecoderConfig{})
			if tt.before != "" {
				if _, err := decode(d, dehex(t, tt.before)); err != nil {
					t.Fatal(err)
				}
			}
			if tt.limit != 0 {
				d.SetMaxTableSizeLimit(tt.limit)
			}
			got, err := decode(d, dehex(t, tt.hex))
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

// within reports whether b lies inside buf.
func within(b, buf []byte) bool {
	if len(b) == 0 || len(buf) == 0 {
		return false
	}
	p, start := uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	return p >= start && p+uintptr(len(b)) <= start+uintptr(len(buf))
}

// TestDecodeWhereFieldsPoint: a string sent without Huffman coding is a
// slice of the block, not a copy; a static one is the static table's;
// Huffman-decoded and dynamic-table strings are in the scratch buffer;
// every one has its length as its capacity.
func TestDecodeWhereFieldsPoint(t *testing.T) {
	d := NewDecoder(DecoderConfig{})
	d.scratch = make([]byte, 0, 256) // so that it does not move while the block is decoded
	// :method GET (static); literal with indexing "custom-key:
	// custom-header" (raw); :authority www.example.com (Huffman
	// value); custom-key: custom-header again (dynamic index 63).
	block := dehex(t, `82 400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572
		418c f1e3 c2e5 f23a 6ba0 ab90 f4ff bf`)
	var fs []Field
	if err := d.Decode(block, func(f Field) { fs = append(fs, f) }); err != nil {
		t.Fatal(err)
	}
	if len(fs) != 4 {
		t.Fatalf("got %d fields, want 4", len(fs))
	}
	static := view(staticTable[1].name)
	checks := []struct {
		what   string
		b      []byte
		in     []byte
		inWhat string
	}{
		{":method", fs[0].Name, static, "the static table"},
		{"custom-key", fs[1].Name, block, "the block"},
		{"custom-header", fs[1].Value, block, "the block"},
		{"www.example.com", fs[2].Value, d.scratch, "the scratch buffer"},
		{"custom-key again", fs[3].Name, d.scratch, "the scratch buffer"},
		{"custom-header again", fs[3].Value, d.scratch, "the scratch buffer"},
	}
	for _, c := range checks {
		if !within(c.b, c.in) {
			t.Errorf("%s is not in %s", c.what, c.inWhat)
		}
		if cap(c.b) != len(c.b) {
			t.Errorf("%s: capacity %d, length %d", c.what, cap(c.b), len(c.b))
		}
	}
	if string(fs[0].Name) != ":method" || string(fs[0].Value) != "GET" {
		t.Errorf("got %q: %q", fs[0].Name, fs[0].Value)
	}
}

// TestDecodeFieldsOutliveEvictions: a field emitted from the dynamic
// table keeps its bytes when later representations of the same block
// evict its entry and the ring reuses them (entries here wrap around
// the ring's end).
func TestDecodeFieldsOutliveEvictions(t *testing.T) {
	d := NewDecoder(DecoderConfig{})
	// A table of 100 bytes: each entry (name "k", a 40-byte value:
	// size 73) evicts the one before, and the ring of 100 bytes wraps.
	var block []byte
	block = append(block, dehex(t, "3f45")...)
	var want []tf
	for i := range 6 {
		v := strings.Repeat(string(rune('a'+i)), 40)
		block = append(block, 0x40, 1, 'k', 40)
		block = append(block, v...)
		block = append(block, 0x80|62) // the entry just added
		want = append(want, tf{"k", v, false}, tf{"k", v, false})
	}
	got, err := decode(d, block)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("got %v, %v; want %v", got, err, want)
	}
	if d.t.len() != 1 || len(d.t.buf) != 100 {
		t.Errorf("table of %d entries in a ring of %d bytes, want 1 in 100", d.t.len(), len(d.t.buf))
	}
}

// TestDecodeHeaderListSize: past MaxHeaderListSize the block is decoded
// to its end without emitting, the table stays in step (the next block
// refers to an entry added after the limit), and the error is
// ErrHeaderListSize, not a compression error.
func TestDecodeHeaderListSize(t *testing.T) {
	d := NewDecoder(DecoderConfig{MaxHeaderListSize: 100})
	// :method GET (42), custom-key: custom-header with indexing (55:
	// 97 so far), :path / (38: 135, past 100), then a: b with indexing.
	block := dehex(t, `82 400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572
		84 4001 6101 62`)
	got, err := decode(d, block)
	if !errors.Is(err, ErrHeaderListSize) {
		t.Fatalf("got %v, want ErrHeaderListSize", err)
	}
	want := []tf{{":method", "GET", false}, {"custom-key", "custom-header", false}}
	if !slices.Equal(got, want) {
		t.Errorf("emitted %v, want %v", got, want)
	}
	got, err = decode(d, dehex(t, "be bf"))
	want = []tf{{"a", "b", false}, {"custom-key", "custom-header", false}}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("next block: got %v, %v; want %v", got, err, want)
	}
}

// TestDecodeWithoutEmit: a block decoded with emit nil (nobody reads
// its fields) keeps the table in step.
func TestDecodeWithoutEmit(t *testing.T) {
	d := NewDecoder(DecoderConfig{})
	if err := d.Decode(dehex(t, "4001 6181 1f 0001 6281 ff"), nil); err != nil {
		t.Fatal(err) // the second field's bad Huffman is not decoded, as x/net
	}
	got, err := decode(d, dehex(t, "be"))
	if want := []tf{{"a", "a", false}}; err != nil || !slices.Equal(got, want) {
		t.Errorf("got %v, %v; want %v", got, err, want)
	}
}
