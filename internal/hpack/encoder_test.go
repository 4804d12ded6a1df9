package hpack

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestEncodeIndexing: which fields the encoder adds to its dynamic
// table, and what a field sent again then costs.
func TestEncodeIndexing(t *testing.T) {
	long := strings.Repeat("x", 3*DefaultTableSize/4) // entry over three quarters of the table
	tests := []struct {
		name      string
		field     tf
		indexed   bool // added to the dynamic table
		first     byte // the representation's first byte (its type)
		firstMask byte
	}{
		{"common field", tf{"user-agent", "curl/8.5.0", false}, true, 0x40, 0xc0},
		{"new name", tf{"x-custom", "1", false}, true, 0x40, 0xc0},
		{"sensitive", tf{"x-token", "secret", true}, false, 0x10, 0xf0},
		{"sensitive in the static table", tf{"authorization", "", true}, false, 0x10, 0xf0},
		{":path", tf{":path", "/helloworld.Greeter/SayHello", false}, true, 0x40, 0xc0},
		{"content-length", tf{"content-length", "1234", false}, true, 0x40, 0xc0},
		{"over three quarters of the table", tf{"x-long", long, false}, false, 0x00, 0xf0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := NewEncoder()
			b := e.Encode(nil, []byte(tt.field.name), []byte(tt.field.value), tt.field.sensitive)
			if b[0]&tt.firstMask != tt.first {
				t.Errorf("first byte %#x, want %#x under mask %#x", b[0], tt.first, tt.firstMask)
			}
			if got := e.t.len() == 1; got != tt.indexed {
				t.Errorf("indexed %v, want %v", got, tt.indexed)
			}
			again := e.Encode(nil, []byte(tt.field.name), []byte(tt.field.value), tt.field.sensitive)
			if tt.indexed && !bytes.Equal(again, []byte{0x80 | 62}) {
				t.Errorf("sent again as %x, want be", again)
			}
			d := NewDecoder(DecoderConfig{})
			got, err := decode(d, append(b, again...))
			if want := []tf{tt.field, tt.field}; err != nil || !slices.Equal(got, want) {
				t.Errorf("decodes to %v, %v; want %v", got, err, want)
			}
		})
	}
}

// TestEncodeKeepsNoCallerBytes: the encoder copies what it indexes: a
// caller reusing its buffers does not change the table.
func TestEncodeKeepsNoCallerBytes(t *testing.T) {
	e := NewEncoder()
	name, value := []byte("x-request-kind"), []byte("alpha")
	first := e.Encode(nil, name, value, false)
	copy(name, "X-REQUEST-KIND")
	copy(value, "omega")
	if got := e.Encode(nil, []byte("x-request-kind"), []byte("alpha"), false); !bytes.Equal(got, []byte{0x80 | 62}) {
		t.Errorf("the field sent again: %x, want be", got)
	}
	d := NewDecoder(DecoderConfig{})
	if got, err := decode(d, first); err != nil || got[0] != (tf{"x-request-kind", "alpha", false}) {
		t.Errorf("got %v, %v", got, err)
	}
}

// TestEncodeTableSizeUpdates: a change of the peer's
// SETTINGS_HEADER_TABLE_SIZE is signalled at the start of the next
// block, once; one that falls and rises before a block as 0 then the
// final size; a limit above the default keeps the default table.
func TestEncodeTableSizeUpdates(t *testing.T) {
	tests := []struct {
		name   string
		limits []uint32
		want   string // hex of the block "a: b"
		max    uint64
	}{
		{"no change", nil, "be", DefaultTableSize},
		{"larger limit: no change", []uint32{65536}, "be", DefaultTableSize},
		{"smaller", []uint32{256}, "3fe1 01be", 256},
		{"to zero: nothing indexed", []uint32{0}, "20 0001 6101 62", 0},
		{"fell and rose", []uint32{100, 4096}, "20 3fe1 1f 4001 6101 62", DefaultTableSize},
		{"fell, rose to less", []uint32{100, 1000}, "20 3fc9 07 4001 6101 62", 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := NewEncoder()
			d := NewDecoder(DecoderConfig{})
			prev := e.Encode(nil, []byte("a"), []byte("b"), false)
			if _, err := decode(d, prev); err != nil {
				t.Fatal(err)
			}
			for _, v := range tt.limits {
				e.SetMaxTableSizeLimit(v)
				d.SetMaxTableSizeLimit(v)
			}
			got := e.Encode(nil, []byte("a"), []byte("b"), false)
			if want := dehex(t, tt.want); !bytes.Equal(got, want) {
				t.Errorf("got %x, want %x", got, want)
			}
			if e.t.max != tt.max {
				t.Errorf("table size %d, want %d", e.t.max, tt.max)
			}
			if f, err := decode(d, got); err != nil || !slices.Equal(f, []tf{{"a", "b", false}}) {
				t.Errorf("decodes to %v, %v", f, err)
			}
			if next := e.Encode(nil, []byte(":method"), []byte("GET"), false); !bytes.Equal(next, []byte{0x82}) {
				t.Errorf("the next field carries %x, want 82 alone", next)
			}
		})
	}
}

// TestEncoderIndex: after every insertion (entries of repeated names
// and values, many more than the index has buckets, evicting, the
// table size changing), the index finds each live entry at the lowest
// index that holds its name and value, and each name at the lowest
// index that holds it: what a scan of the table finds.
func TestEncoderIndex(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	e := NewEncoder()
	for step := range 5000 {
		if r.IntN(200) == 0 {
			e.SetMaxTableSizeLimit(uint32(r.IntN(DefaultTableSize + 1)))
			e.Encode(nil, []byte(":method"), []byte("GET"), false) // sends the size update
		}
		name := fmt.Sprintf("n%d", r.IntN(40))
		value := strings.Repeat("v", r.IntN(3)) + fmt.Sprint(r.IntN(30))
		e.Encode(nil, []byte(name), []byte(value), false)
		tab := dynTable(&e.t)
		for i, f := range tab {
			nh, ph := e.hashes([]byte(f.name), []byte(f.value))
			wantPair, wantName := 0, 0
			for j, g := range tab {
				if g.name == f.name && wantName == 0 {
					wantName = j + 1
				}
				if g == f && wantPair == 0 {
					wantPair = j + 1
				}
			}
			if got := e.search(false, ph, []byte(f.name), []byte(f.value)); got != wantPair {
				t.Fatalf("step %d: entry %d %v found at %d, want %d", step, i+1, f, got, wantPair)
			}
			if got := e.search(true, nh, []byte(f.name), nil); got != wantName {
				t.Fatalf("step %d: name of entry %d %v found at %d, want %d", step, i+1, f, got, wantName)
			}
		}
	}
}

// TestEncodeUniqueNames: a field whose value is new every time (a
// request id) is indexed once, for its name; the next ones refer to
// the name and add nothing to the table.
func TestEncodeUniqueNames(t *testing.T) {
	e := NewEncoder()
	d := NewDecoder(DecoderConfig{})
	for i := range 5 {
		id := fmt.Sprintf("%016x", i*7919)
		b := e.Encode(nil, []byte("x-request-id"), []byte(id), false)
		switch {
		case i == 0 && b[0] != 0x40:
			t.Errorf("first: %x, want a literal with indexing and a new name (40)", b)
		case i > 0 && b[0] != 0x0f || i > 0 && b[1] != 62-15:
			t.Errorf("request %d: %x, want a literal without indexing of name index 62 (0f2f)", i, b)
		}
		if e.t.len() != 1 {
			t.Errorf("request %d: %d entries, want 1", i, e.t.len())
		}
		if got, err := decode(d, b); err != nil || !slices.Equal(got, []tf{{"x-request-id", id, false}}) {
			t.Errorf("request %d: decodes to %v, %v", i, got, err)
		}
	}
}
