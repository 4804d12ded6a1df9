package hpack

import (
	"slices"
	"testing"

	"golang.org/x/net/http2/hpack"
)

// rfcBlock is one header block of RFC 7541 Appendix C: its bytes, its
// fields, and the dynamic table after it, newest first.
type rfcBlock struct {
	hex    string
	fields []tf
	table  []tf
	size   uint64
}

var (
	c3Fields = [][]tf{
		{{":method", "GET", false}, {":scheme", "http", false}, {":path", "/", false}, {":authority", "www.example.com", false}},
		{{":method", "GET", false}, {":scheme", "http", false}, {":path", "/", false}, {":authority", "www.example.com", false}, {"cache-control", "no-cache", false}},
		{{":method", "GET", false}, {":scheme", "https", false}, {":path", "/index.html", false}, {":authority", "www.example.com", false}, {"custom-key", "custom-value", false}},
	}
	c3Tables = [][]tf{
		{{":authority", "www.example.com", false}},
		{{"cache-control", "no-cache", false}, {":authority", "www.example.com", false}},
		{{"custom-key", "custom-value", false}, {"cache-control", "no-cache", false}, {":authority", "www.example.com", false}},
	}
	c3Sizes = []uint64{57, 110, 164}

	c5Fields = [][]tf{
		{{":status", "302", false}, {"cache-control", "private", false}, {"date", "Mon, 21 Oct 2013 20:13:21 GMT", false}, {"location", "https://www.example.com", false}},
		{{":status", "307", false}, {"cache-control", "private", false}, {"date", "Mon, 21 Oct 2013 20:13:21 GMT", false}, {"location", "https://www.example.com", false}},
		{{":status", "200", false}, {"cache-control", "private", false}, {"date", "Mon, 21 Oct 2013 20:13:22 GMT", false}, {"location", "https://www.example.com", false},
			{"content-encoding", "gzip", false}, {"set-cookie", "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1", false}},
	}
	c5Tables = [][]tf{
		{{"location", "https://www.example.com", false}, {"date", "Mon, 21 Oct 2013 20:13:21 GMT", false}, {"cache-control", "private", false}, {":status", "302", false}},
		{{":status", "307", false}, {"location", "https://www.example.com", false}, {"date", "Mon, 21 Oct 2013 20:13:21 GMT", false}, {"cache-control", "private", false}},
		{{"set-cookie", "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1", false}, {"content-encoding", "gzip", false}, {"date", "Mon, 21 Oct 2013 20:13:22 GMT", false}},
	}
	c5Sizes = []uint64{222, 222, 215}
)

// appendixC is RFC 7541 Appendix C.3 to C.6: each a sequence of blocks
// sharing a dynamic table (C.5 and C.6 in one of 256 bytes, which
// evicts).
var appendixC = []struct {
	name      string
	tableSize uint32
	blocks    []rfcBlock
}{
	{"C.3 requests without Huffman", DefaultTableSize, []rfcBlock{
		{"8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d", c3Fields[0], c3Tables[0], c3Sizes[0]},
		{"8286 84be 5808 6e6f 2d63 6163 6865", c3Fields[1], c3Tables[1], c3Sizes[1]},
		{"8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65", c3Fields[2], c3Tables[2], c3Sizes[2]},
	}},
	{"C.4 requests with Huffman", DefaultTableSize, []rfcBlock{
		{"8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff", c3Fields[0], c3Tables[0], c3Sizes[0]},
		{"8286 84be 5886 a8eb 1064 9cbf", c3Fields[1], c3Tables[1], c3Sizes[1]},
		{"8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf", c3Fields[2], c3Tables[2], c3Sizes[2]},
	}},
	{"C.5 responses without Huffman", 256, []rfcBlock{
		{`4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133
		  2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70
		  6c65 2e63 6f6d`, c5Fields[0], c5Tables[0], c5Sizes[0]},
		{"4803 3330 37c1 c0bf", c5Fields[1], c5Tables[1], c5Sizes[1]},
		{`88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d
		  54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049
		  5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e
		  3d31`, c5Fields[2], c5Tables[2], c5Sizes[2]},
	}},
	{"C.6 responses with Huffman", 256, []rfcBlock{
		{`4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6
		  2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3`, c5Fields[0], c5Tables[0], c5Sizes[0]},
		{"4883 640e ffc1 c0bf", c5Fields[1], c5Tables[1], c5Sizes[1]},
		{`88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab
		  77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f
		  9587 3160 65c0 03ed 4ee5 b106 3d50 07`, c5Fields[2], c5Tables[2], c5Sizes[2]},
	}},
}

// sizeUpdate256 is a dynamic table size update to 256 (RFC 7541 §6.3):
// the C.5 and C.6 tables are 256 bytes, which the decoder learns as a
// peer would tell it.
const sizeUpdate256 = "3fe101"

// TestDecodeAppendixC decodes RFC 7541 Appendix C.3-C.6 and checks the
// fields and the dynamic table (entries, order, size) after each block;
// x/net's decoder decodes the same bytes to the same fields, which
// checks the test's own transcription of the RFC.
func TestDecodeAppendixC(t *testing.T) {
	for _, tt := range appendixC {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDecoder(DecoderConfig{})
			x := hpack.NewDecoder(tt.tableSize, nil)
			if tt.tableSize != DefaultTableSize {
				d.SetMaxTableSizeLimit(tt.tableSize)
			}
			for i, b := range tt.blocks {
				block := dehex(t, b.hex)
				if i == 0 && tt.tableSize != DefaultTableSize {
					block = append(dehex(t, sizeUpdate256), block...)
				}
				got, err := decode(d, block)
				if err != nil {
					t.Fatalf("block %d: %v", i+1, err)
				}
				if !slices.Equal(got, b.fields) {
					t.Errorf("block %d: got %v, want %v", i+1, got, b.fields)
				}
				if tab := dynTable(&d.t); !slices.Equal(tab, b.table) || d.t.size != b.size {
					t.Errorf("block %d: table %v (size %d), want %v (size %d)", i+1, tab, d.t.size, b.table, b.size)
				}
				xgot, err := xnetDecode(x, block)
				if err != nil || !slices.Equal(xgot, b.fields) {
					t.Errorf("block %d: x/net decodes %v, %v; want %v", i+1, xgot, err, b.fields)
				}
			}
		})
	}
}

// TestDecodeAppendixC2 decodes the single representations of RFC 7541
// Appendix C.2: literal with indexing, without, never indexed
// (sensitive), and indexed.
func TestDecodeAppendixC2(t *testing.T) {
	tests := []struct {
		name  string
		hex   string
		field tf
		table []tf
	}{
		{"C.2.1 literal with indexing", "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572",
			tf{"custom-key", "custom-header", false}, []tf{{"custom-key", "custom-header", false}}},
		{"C.2.2 literal without indexing", "040c 2f73 616d 706c 652f 7061 7468", tf{":path", "/sample/path", false}, nil},
		{"C.2.3 literal never indexed", "1008 7061 7373 776f 7264 0673 6563 7265 74", tf{"password", "secret", true}, nil},
		{"C.2.4 indexed", "82", tf{":method", "GET", false}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDecoder(DecoderConfig{})
			got, err := decode(d, dehex(t, tt.hex))
			if err != nil || len(got) != 1 || got[0] != tt.field {
				t.Fatalf("got %v, %v; want %v", got, err, tt.field)
			}
			if tab := dynTable(&d.t); !slices.Equal(tab, tt.table) {
				t.Errorf("table %v, want %v", tab, tt.table)
			}
		})
	}
}

// TestEncodeAppendixC4 encodes the requests of RFC 7541 Appendix C.4
// and gets the RFC's bytes and dynamic tables: the same choices of
// index, indexing and Huffman coding.
func TestEncodeAppendixC4(t *testing.T) {
	e := NewEncoder()
	for i, b := range appendixC[1].blocks {
		var got []byte
		for _, f := range b.fields {
			got = e.Encode(got, []byte(f.name), []byte(f.value), false)
		}
		if want := dehex(t, b.hex); string(got) != string(want) {
			t.Errorf("block %d: got %x, want %x", i+1, got, want)
		}
		if tab := dynTable(&e.t); !slices.Equal(tab, b.table) || e.t.size != b.size {
			t.Errorf("block %d: table %v (size %d), want %v (size %d)", i+1, tab, e.t.size, b.table, b.size)
		}
	}
}
