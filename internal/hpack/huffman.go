package hpack

import (
	"encoding/binary"
	"slices"
)

// Huffman decoding runs a finite automaton over the input four bits at
// a time (as nghttp2 does): its states are the 256 inner nodes of the
// code tree, and a nibble leads from one to the next, emitting the one
// symbol it may complete (no code is shorter than five bits). Two table
// lookups a byte, no branches on the tree's shape, nothing allocated.
// x/net's decoder walks a tree of pointers and writes through a pooled
// bytes.Buffer whose contents its callers then copy: this one appends
// to the caller's slice.

// huffStep is one transition of the decoding automaton.
type huffStep struct {
	next  uint8 // the state (inner node) after the nibble
	sym   uint8 // the symbol emitted, when flags has huffEmit
	flags uint8
}

const (
	huffEmit   = 1 << iota // the nibble completed sym
	huffFail               // the nibble completed EOS: an error (RFC 7541 §5.2)
	huffAccept             // the string may end here: the bits since the last symbol are fewer than 8 and all ones
)

// huffDecode is the automaton: huffDecode[state][nibble].
var huffDecode = buildHuffDecode()

func buildHuffDecode() *[256][16]huffStep {
	// The code tree: node 0 is the root; a child below 0 is the leaf
	// of symbol -child-1.
	type node struct {
		child [2]int
		depth uint8
		ones  bool // the path from the root is all ones
	}
	nodes := make([]node, 1, 256)
	nodes[0].ones = true
	for sym, c := range huffmanCodes {
		n := 0
		for i := int(c.bits) - 1; i >= 0; i-- {
			bit := c.code >> uint(i) & 1
			if i == 0 {
				nodes[n].child[bit] = -sym - 1
				break
			}
			if nodes[n].child[bit] == 0 {
				nodes = append(nodes, node{depth: nodes[n].depth + 1, ones: nodes[n].ones && bit == 1})
				nodes[n].child[bit] = len(nodes) - 1
			}
			n = nodes[n].child[bit]
		}
	}
	if len(nodes) != 256 {
		panic("hpack: the Huffman code is not a full tree of 257 symbols")
	}
	t := new([256][16]huffStep)
	for s := range nodes {
		for nib := range 16 {
			st := huffStep{}
			n := s
			for i := 3; i >= 0; i-- {
				c := nodes[n].child[nib>>uint(i)&1]
				if c > 0 {
					n = c
					continue
				}
				if sym := -c - 1; sym == 256 {
					st.flags |= huffFail
				} else {
					st.flags |= huffEmit
					st.sym = uint8(sym)
				}
				n = 0
			}
			st.next = uint8(n)
			if nodes[n].ones && nodes[n].depth < 8 {
				st.flags |= huffAccept
			}
			t[s][nib] = st
		}
	}
	return t
}

// appendHuffmanDecoded appends the Huffman decoding of src to dst. A
// string with EOS in it, an incomplete code at its end or padding that
// is longer than 7 bits or not all ones is ErrHuffman (RFC 7541 §5.2).
func appendHuffmanDecoded(dst, src []byte) ([]byte, error) {
	n := len(dst)
	dst = slices.Grow(dst, len(src)*8/5)
	out := dst[n : n+len(src)*8/5]
	j := 0
	state, flags := uint8(0), uint8(huffAccept)
	for _, b := range src {
		st := &huffDecode[state][b>>4]
		if st.flags&huffEmit != 0 {
			out[j] = st.sym
			j++
		}
		fail := st.flags
		st = &huffDecode[st.next][b&0xf]
		if st.flags&huffEmit != 0 {
			out[j] = st.sym
			j++
		}
		state, flags = st.next, st.flags
		if (fail|flags)&huffFail != 0 {
			return dst[:n], ErrHuffman
		}
	}
	if flags&huffAccept == 0 {
		return dst[:n], ErrHuffman
	}
	return dst[:n+j], nil
}

// huffmanLength returns the length of the Huffman encoding of s.
func huffmanLength(s []byte) int {
	bits := 0
	for _, c := range s {
		bits += int(huffmanCodes[c].bits)
	}
	return (bits + 7) / 8
}

// appendHuffman appends the Huffman encoding of s to dst, padded with
// the most significant bits of EOS (ones).
func appendHuffman(dst, s []byte) []byte {
	var acc uint64 // the pending bits are its low n bits
	var n uint
	for _, c := range s {
		h := huffmanCodes[c]
		acc = acc<<h.bits | uint64(h.code)
		n += uint(h.bits)
		if n >= 32 {
			n -= 32
			dst = binary.BigEndian.AppendUint32(dst, uint32(acc>>n))
		}
	}
	for n >= 8 {
		n -= 8
		dst = append(dst, byte(acc>>n))
	}
	if n > 0 {
		dst = append(dst, byte(acc<<(8-n))|byte(0xff>>n))
	}
	return dst
}
