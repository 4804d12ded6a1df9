package hpack

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"golang.org/x/net/http2/hpack"
)

// TestHuffmanEncodeAgainstXnet: every byte alone, and random strings,
// encode as x/net's AppendHuffmanString does, and to the length its
// HuffmanEncodeLength says; they decode back.
func TestHuffmanEncodeAgainstXnet(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	var inputs [][]byte
	for b := range 256 {
		inputs = append(inputs, []byte{byte(b)})
	}
	for range 2000 {
		s := make([]byte, r.IntN(100))
		for i := range s {
			if r.IntN(2) == 0 {
				s[i] = byte(r.IntN(256))
			} else {
				s[i] = "abcdefghijklmnopqrstuvwxyz0123456789-_./;= "[r.IntN(43)]
			}
		}
		inputs = append(inputs, s)
	}
	for _, s := range inputs {
		got := appendHuffman([]byte("prefix"), s)
		want := hpack.AppendHuffmanString([]byte("prefix"), string(s))
		if !bytes.Equal(got, want) {
			t.Fatalf("%q: got %x, want %x", s, got, want)
		}
		if n := huffmanLength(s); uint64(n) != hpack.HuffmanEncodeLength(string(s)) || n != len(got)-6 {
			t.Fatalf("%q: length %d, x/net %d, encoded %d", s, n, hpack.HuffmanEncodeLength(string(s)), len(got)-6)
		}
		back, err := appendHuffmanDecoded([]byte("x"), got[6:])
		if err != nil || !bytes.Equal(back[1:], s) || back[0] != 'x' {
			t.Fatalf("%q: decodes to %q, %v", s, back, err)
		}
	}
}

// TestHuffmanDecodeAgainstXnet: every input of one and two bytes, and
// random longer ones, decode as x/net's HuffmanDecode does: the same
// bytes, or both an error.
func TestHuffmanDecodeAgainstXnet(t *testing.T) {
	check := func(in []byte) {
		t.Helper()
		got, err := appendHuffmanDecoded(nil, in)
		want, xerr := hpack.HuffmanDecodeToString(in)
		if (err != nil) != (xerr != nil) || err == nil && string(got) != want {
			t.Fatalf("%x: got %q, %v; x/net %q, %v", in, got, err, want, xerr)
		}
		if err != nil && !errors.Is(err, ErrHuffman) {
			t.Fatalf("%x: %v, want ErrHuffman", in, err)
		}
	}
	for a := range 256 {
		check([]byte{byte(a)})
		for b := range 256 {
			check([]byte{byte(a), byte(b)})
		}
	}
	r := rand.New(rand.NewPCG(9, 10))
	for range 20000 {
		in := make([]byte, 3+r.IntN(20))
		for i := range in {
			in[i] = byte(r.IntN(256))
			if r.IntN(3) == 0 {
				in[i] |= 0xf0 // long codes, and EOS
			}
		}
		check(in)
	}
}

// FuzzHuffman: any input decodes as x/net's HuffmanDecode decodes it,
// and any string encodes as x/net encodes it and decodes back.
func FuzzHuffman(f *testing.F) {
	f.Add([]byte("www.example.com"))
	f.Add([]byte{0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := appendHuffmanDecoded(nil, in)
		want, xerr := hpack.HuffmanDecodeToString(in)
		if (err != nil) != (xerr != nil) || err == nil && string(got) != want {
			t.Fatalf("decoding %x: got %q, %v; x/net %q, %v", in, got, err, want, xerr)
		}
		enc := appendHuffman(nil, in)
		if xenc := hpack.AppendHuffmanString(nil, string(in)); !bytes.Equal(enc, xenc) {
			t.Fatalf("encoding %q: got %x, x/net %x", in, enc, xenc)
		}
		if back, err := appendHuffmanDecoded(nil, enc); err != nil || !bytes.Equal(back, in) {
			t.Fatalf("%q encodes to %x, which decodes to %q, %v", in, enc, back, err)
		}
	})
}
