// Package hpack is HTTP/2's header compression, HPACK (RFC 7541), with
// fields as byte slices and nothing allocated once a connection's
// buffers have grown, written for internal/h2.
//
// A Decoder turns a complete header block into fields whose names and
// values point into the block, the static table or the decoder's
// scratch buffer, valid until its next Decode (see Decoder.Decode). It
// enforces what x/net/http2/hpack's decoder does (integer overflow,
// table indexes, Huffman padding and EOS, string lengths) and RFC 7541
// §4.2 on table size updates, and bounds a block's header list (RFC
// 9113 §6.5.2) while keeping its table in step, so that a head that is
// too large costs one stream, not the connection. An Encoder appends
// fields to an output buffer, indexing in its dynamic table the ones
// likely to repeat, and Huffman-codes a string when that is shorter.
//
// Both dynamic tables keep their entries' bytes in a ring of the
// table's size (entries are offsets into it): an insertion copies the
// new entry's bytes and evicts by moving the ring's start, so neither
// side retains its caller's slices nor allocates per field. The static
// table and the Huffman code are immutable package data.
//
// Where the decoder parts from x/net's, it follows RFC 7541 §4.2 on
// dynamic table size updates: one after a field is an error even while
// the table is empty (x/net then takes it); two at a block's start are
// valid (the smallest size and the final one; x/net refuses the second
// unless its table is empty after the first); and once
// SetMaxTableSizeLimit has lowered the limit below the table's size,
// the next block must begin with one (as nghttp2 checks; x/net does
// not). So that x/net's decoder takes what the encoder sends, a size
// that fell and rose between two blocks is signalled as 0, then the
// final size.
//
// Why not golang.org/x/net/http2/hpack: its Decoder hands each field
// as a HeaderField of strings (an allocation per string, and per
// Huffman-decoded one a pooled buffer's copy), and its Encoder takes
// strings and keeps them, in maps, as its dynamic table. On HTTP/2's
// fixed-answer path HPACK was a tenth of the CPU, and the garbage it
// and the request head made put the Go runtime, mostly its collector,
// at 22% (docs/performance.md). The tests hold this package to x/net's
// behaviour both ways, on every fuzzed input.
package hpack
