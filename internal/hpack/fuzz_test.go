package hpack

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"golang.org/x/net/http2/hpack"
)

// fuzzBlocks cuts a fuzz input into header blocks: each is a length
// byte and that many bytes (fewer at the end).
func fuzzBlocks(data []byte) [][]byte {
	var blocks [][]byte
	for len(data) > 0 {
		n := min(int(data[0]), len(data)-1)
		blocks = append(blocks, data[1:1+n])
		data = data[1+n:]
	}
	return blocks
}

// repKinds returns the kinds of a block's representations (RFC 7541
// §6), read only for their shape: 'i' indexed, 'l' literal, 'u' table
// size update; it stops at the first it cannot read.
func repKinds(block []byte) []byte {
	var kinds []byte
	for len(block) > 0 {
		c := block[0]
		var n uint8
		kind := byte('l')
		switch {
		case c&0x80 != 0:
			n, kind = 7, 'i'
		case c&0xc0 == 0x40:
			n = 6
		case c&0xe0 == 0x20:
			n, kind = 5, 'u'
		default:
			n = 4
		}
		v, k, err := readInt(block, n)
		if err != nil {
			return kinds
		}
		block = block[k:]
		if kind == 'l' {
			strings := 1
			if v == 0 {
				strings = 2
			}
			for range strings {
				l, k, err := readInt(block, 7)
				if err != nil || l > uint64(len(block)-k) {
					return kinds
				}
				block = block[k+int(l):]
			}
		}
		kinds = append(kinds, kind)
	}
	return kinds
}

// updateAfterField reports whether kinds (see repKinds) has a table size
// update after a field.
func updateAfterField(kinds []byte) bool {
	field := false
	for _, k := range kinds {
		if k != 'u' {
			field = true
		} else if field {
			return true
		}
	}
	return false
}

// FuzzDecode: whatever the blocks, the decoder does not panic and
// agrees with x/net's decoder, sharing a dynamic table across them, on
// whether each block is valid and on its fields. The two differ only
// where RFC 7541 §4.2 and x/net do (x/net takes a size update after a
// field while its table is empty, and refuses a second one at a
// block's start once its table is not): there the comparison stops. A
// third decoder with a header list limit emits the same fields up to
// the limit, then ErrHeaderListSize, and stays in step.
//
// The input's first byte sets the string limit (odd: its upper seven
// bits; even: none), the second the header list limit (times 4; 0:
// none); then come the blocks (see fuzzBlocks).
func FuzzDecode(f *testing.F) {
	seed := func(cfg0, cfg1 byte, blocks ...[]byte) {
		in := []byte{cfg0, cfg1}
		for _, b := range blocks {
			in = append(in, byte(len(b)))
			in = append(in, b...)
		}
		f.Add(in)
	}
	for _, c := range appendixC[:2] {
		var blocks [][]byte
		for _, b := range c.blocks {
			blocks = append(blocks, dehex(f, b.hex))
		}
		seed(0, 0, blocks...)
		seed(21, 30, blocks...)
	}
	for _, c := range appendixC[2:] {
		blocks := [][]byte{dehex(f, "20")}
		for _, b := range c.blocks {
			blocks = append(blocks, dehex(f, b.hex)[:min(255, len(dehex(f, b.hex)))])
		}
		seed(0, 0, blocks...)
	}
	e := NewEncoder()
	var blocks [][]byte
	for _, h := range typicalHeads {
		var b []byte
		for _, fl := range h {
			b = e.Encode(b, []byte(fl.name), []byte(fl.value), fl.sensitive)
		}
		blocks = append(blocks, b[:min(255, len(b))])
	}
	seed(0, 0, blocks...)
	seed(0, 40, blocks...)
	seed(0, 0, dehex(f, "4001 6101 62"), dehex(f, "be20"), dehex(f, "3fe1 1f3f e11f be"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 {
			return
		}
		maxStr := 0
		if data[0]&1 != 0 {
			maxStr = int(data[0] >> 1)
		}
		maxList := uint32(data[1]) * 4
		d := NewDecoder(DecoderConfig{MaxStringLength: maxStr})
		limited := NewDecoder(DecoderConfig{MaxStringLength: maxStr, MaxHeaderListSize: maxList})
		x := hpack.NewDecoder(DefaultTableSize, nil)
		x.SetMaxStringLength(maxStr)
		for i, block := range fuzzBlocks(data[2:]) {
			got, err := decode(d, block)
			want, xerr := xnetDecode(x, block)
			kinds := repKinds(block)
			switch {
			case err != nil && xerr == nil && errors.Is(err, ErrTableSizeUpdate) && updateAfterField(kinds):
				return // a size update after a field: x/net's table was empty
			case err == nil && xerr != nil && bytes.HasPrefix(kinds, []byte("uu")):
				return // two size updates: x/net's table was not empty after the first
			case (err != nil) != (xerr != nil):
				t.Fatalf("block %d %x: we say %v, x/net %v", i, block, err, xerr)
			case err == nil && !slices.Equal(got, want):
				t.Fatalf("block %d %x: got %v, x/net %v", i, block, got, want)
			}
			lgot, lerr := decode(limited, block)
			if err != nil {
				return // the connection would end here
			}
			size := uint64(0)
			n := 0
			for _, f := range got {
				size += uint64(len(f.name)+len(f.value)) + entryOverhead
				if maxList > 0 && size > uint64(maxList) {
					break
				}
				n++
			}
			wantErr := error(nil)
			if n < len(got) {
				wantErr = ErrHeaderListSize
			}
			if !errors.Is(lerr, wantErr) || lerr != nil && wantErr == nil || !slices.Equal(lgot, got[:n]) {
				t.Fatalf("block %d %x: limited to %d, got %v, %v; want %v, %v", i, block, maxList, lgot, lerr, got[:n], wantErr)
			}
		}
	})
}

// FuzzRoundTrip: fields (any bytes, common names, repeated ones,
// sensitive ones) encoded in blocks, with the peer's table limit
// changing between some, decode to the same fields with our decoder and
// with x/net's, and the encoder's dynamic table is the decoder's after
// every block (once a size change has been signalled).
//
// The input is a program: each op byte's low three bits say what to
// do, reading what it needs from the bytes that follow (see below).
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte("\x00\x05host\x0bexample.com\x05\x07\x00\x05"))
	f.Add([]byte("\x08\x03\x02ok\x08\x03\x02ok\x05\x06\x00\x10\x07\x01\x05\x0e\x00\x00\x05"))
	f.Add([]byte("\x10\x01a\x01b\x0f\x00\x01\x06\x00\x00\x06\x10\x00\x05\x07\x00\x05"))
	common := []string{":method", ":path", ":status", ":authority", "content-type", "content-length", "cookie", "user-agent", "x-custom", "date", "set-cookie", "grpc-status"}
	f.Fuzz(func(t *testing.T, data []byte) {
		next := func() byte {
			if len(data) == 0 {
				return 0
			}
			b := data[0]
			data = data[1:]
			return b
		}
		take := func(n int) []byte {
			n = min(n, len(data))
			b := data[:n]
			data = data[n:]
			return b
		}
		e := NewEncoder()
		d := NewDecoder(DecoderConfig{})
		x := hpack.NewDecoder(DefaultTableSize, nil)
		var sent []tf // every field so far, for repeats
		var block []byte
		var fields []tf
		end := func() {
			got, err := decode(d, block)
			if err != nil || !slices.Equal(got, fields) {
				t.Fatalf("%x: we decode %v, %v; want %v", block, got, err, fields)
			}
			xgot, err := xnetDecode(x, block)
			if err != nil || !slices.Equal(xgot, fields) {
				t.Fatalf("%x: x/net decodes %v, %v; want %v", block, xgot, err, fields)
			}
			// A size change waiting for the next field (this block had
			// none) is not yet the decoder's.
			if et, dt := dynTable(&e.t), dynTable(&d.t); !e.pending && (!slices.Equal(et, dt) || e.t.size != d.t.size || e.t.max != d.t.max) {
				t.Fatalf("encoder's table %v (%d of %d), decoder's %v (%d of %d)", et, e.t.size, e.t.max, dt, d.t.size, d.t.max)
			}
			block, fields = block[:0], fields[:0]
		}
		for len(data) > 0 {
			op := next()
			var fl tf
			switch op & 7 {
			case 0, 1, 2: // a field: name (bit 3: a common one, by the next byte; else a length byte and bytes), value (a length byte and bytes); bit 4: sensitive
				if op&8 != 0 {
					fl.name = common[int(next())%len(common)]
				} else {
					fl.name = string(take(int(next()) % 64))
				}
				fl.value = string(take(int(next())))
				fl.sensitive = op&16 != 0
			case 3, 4: // a field sent before (the next byte picks it)
				if len(sent) == 0 {
					continue
				}
				fl = sent[int(next())%len(sent)]
			case 5: // end of block
				end()
				continue
			case 6: // the peer's table limit: the next two bytes, times 2
				if len(block) > 0 {
					end() // only between blocks
				}
				v := (uint32(next())<<8 | uint32(next())) * 2
				e.SetMaxTableSizeLimit(v)
				d.SetMaxTableSizeLimit(v)
				x.SetAllowedMaxDynamicTableSize(v)
				continue
			case 7: // a long value (the next byte times 32 bytes)
				fl = tf{"x-long", string(bytes.Repeat([]byte{'v'}, int(next())*32)), false}
			}
			block = e.Encode(block, []byte(fl.name), []byte(fl.value), fl.sensitive)
			fields = append(fields, fl)
			sent = append(sent, fl)
		}
		end()
	})
}
