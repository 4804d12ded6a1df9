package hpack

import (
	"hash/maphash"
	"math"
)

// An Encoder encodes the header blocks of one direction of a connection
// (RFC 7541 §3): it holds that direction's dynamic table. Its methods
// must not be called concurrently. Once its table has grown to its
// size, encoding allocates nothing but what dst needs.
//
// What it indexes (adds to the dynamic table, so that a field sent
// again costs one byte): as x/net's encoder, every field not already in
// a table, but for three kinds: a sensitive one (sent never-indexed,
// RFC 7541 §7.1.3); one whose entry would take more than three
// quarters of the table (as nghttp2: it would evict nearly everything
// for a value likely sent once); and one whose name says its value is
// an identifier of the message, new every time (see uniqueName: the
// X-Request-Id Helios adds to every request it forwards would
// otherwise push a backend connection's useful entries out, one
// request at a time), which is indexed only while its name is in no
// table, so that the next ones send the name as an index. Fields that
// repeat per resource (:path, content-length, etag) are indexed: a
// proxy and a gRPC channel send the same ones again and again.
type Encoder struct {
	t    table
	seed maphash.Seed
	// links, beside t.ents (same length, same slots), chain each
	// entry to the next older one whose name, or name and value, hash
	// to the same bucket; nameHead and pairHead hold each bucket's
	// newest id plus one (0: none). Chains run newest first, so the
	// first match is the lowest index, and a walk stops at the first
	// evicted id: nothing is ever unlinked. A field is looked up in a
	// step or two whatever the table holds (x/net keeps two maps with
	// string keys, allocating as entries come and go).
	links    []link
	nameHead [buckets]uint64
	pairHead [buckets]uint64
	// minMax is the smallest table size since the last size update
	// was sent; pending means one is due (RFC 7541 §4.2).
	minMax  uint64
	pending bool
}

// buckets is the number of hash buckets of the encoder's index; a
// default table holds at most 128 entries, and typically a few dozen.
const buckets = 64

// link is an entry's place in the encoder's index: its hashes and the
// distance back to the next older entry of the same bucket (0: none;
// a distance past the table's oldest entry ends the chain too).
type link struct {
	nameHash, pairHash uint32
	nameNext, pairNext uint32
}

// NewEncoder returns an Encoder whose dynamic table has
// DefaultTableSize, the size a peer allows until it says otherwise.
func NewEncoder() *Encoder {
	e := &Encoder{seed: maphash.MakeSeed(), minMax: math.MaxUint64}
	e.t.max = DefaultTableSize
	return e
}

// SetMaxTableSizeLimit takes the peer's SETTINGS_HEADER_TABLE_SIZE, the
// largest table its decoder keeps: the encoder's table becomes the
// smaller of v and DefaultTableSize (a larger table than the default
// costs memory on every connection for little gain), evicting what no
// longer fits, and the change is signalled at the start of the next
// block (RFC 7541 §4.2; a size that fell and rose again is signalled
// as 0, then the final size).
func (e *Encoder) SetMaxTableSizeLimit(v uint32) {
	size := min(uint64(v), DefaultTableSize)
	if size == e.t.max {
		return
	}
	e.minMax = min(e.minMax, size)
	e.pending = true
	e.t.setMax(size)
}

// Encode appends the representation of the field name: value to dst
// and returns the extended slice; the fields of a block are encoded in
// turn, and the first of a block carries any table size update that is
// due (so the table limit must not change between the fields of one
// block). Encode neither retains nor modifies name and value: what the
// table keeps it copies. A sensitive field is sent as a never-indexed
// literal (RFC 7541 §6.2.3), even when it is in a table, so that no
// hop indexes it. Neither name nor value is checked: the caller sends
// lower-case names and valid values (RFC 9113 §8.2).
func (e *Encoder) Encode(dst, name, value []byte, sensitive bool) []byte {
	if e.pending {
		if e.minMax < e.t.max {
			// The size fell, then rose: RFC 7541 §4.2 wants the
			// smallest signalled first. We signal 0 (which empties
			// both tables, no more than the smallest size would
			// keep): x/net's decoder refuses a second size update
			// in a block unless its table is empty after the first.
			dst = appendInt(dst, 0x20, 5, 0)
			size := e.t.max
			e.t.setMax(0)
			e.t.max = size
		}
		dst = appendInt(dst, 0x20, 5, e.t.max)
		e.pending, e.minMax = false, math.MaxUint64
	}
	si, exact := staticSearch(name, value)
	if exact && !sensitive {
		return appendInt(dst, 0x80, 7, uint64(si))
	}
	size := uint64(len(name)) + uint64(len(value)) + entryOverhead
	mayIndex := !sensitive && size <= e.t.max*3/4
	var nameHash, pairHash uint32
	if mayIndex || e.t.len() > 0 {
		nameHash, pairHash = e.hashes(name, value)
	}
	if di := e.search(false, pairHash, name, value); di > 0 && !sensitive {
		return appendInt(dst, 0x80, 7, uint64(staticLen+di))
	}
	nameIndex := uint64(si)
	if si == 0 {
		if di := e.search(true, nameHash, name, nil); di > 0 {
			nameIndex = uint64(staticLen + di)
		}
	}
	// A field whose value is new every time is indexed only to put
	// its name in the table, for the next ones to refer to.
	indexing := mayIndex && (nameIndex == 0 || !uniqueName(name))
	switch {
	case indexing:
		dst = appendInt(dst, 0x40, 6, nameIndex)
	case sensitive:
		dst = appendInt(dst, 0x10, 4, nameIndex)
	default:
		dst = appendInt(dst, 0x00, 4, nameIndex)
	}
	if nameIndex == 0 {
		dst = appendString(dst, name)
	}
	dst = appendString(dst, value)
	if indexing {
		// After the representation: its name index counts the table
		// as it was (the decoder resolves it before inserting).
		e.index(name, value, nameHash, pairHash)
	}
	return dst
}

// hashes returns the hash of name and that of name and value.
func (e *Encoder) hashes(name, value []byte) (nameHash, pairHash uint32) {
	n := maphash.Bytes(e.seed, name)
	v := maphash.Bytes(e.seed, value)
	return uint32(n), uint32(n ^ (v*0x9e3779b97f4a7c15 + 1))
}

// search returns the lowest dynamic index of an entry whose name and
// value are name and value (byName: whose name is name) and whose hash
// is hash; 0 if none.
func (e *Encoder) search(byName bool, hash uint32, name, value []byte) int {
	head := e.pairHead[hash%buckets]
	if byName {
		head = e.nameHead[hash%buckets]
	}
	oldest := e.t.added - uint64(e.t.n)
	for h := head; h > oldest; {
		id := h - 1
		l := &e.links[e.t.slot(id)]
		lh, next := l.pairHash, l.pairNext
		if byName {
			lh, next = l.nameHash, l.nameNext
		}
		if lh == hash && e.matches(&e.t.ents[e.t.slot(id)], byName, name, value) {
			return int(e.t.added - id)
		}
		if next == 0 {
			break
		}
		h = id - uint64(next) + 1
	}
	return 0
}

// matches reports whether ent's name is name and, unless byName, its
// value is value.
func (e *Encoder) matches(ent *entry, byName bool, name, value []byte) bool {
	if int(ent.nameLen) != len(name) || !byName && int(ent.valueLen) != len(value) {
		return false
	}
	if na, nb := e.t.name(ent); !equal(na, nb, name) {
		return false
	}
	if byName {
		return true
	}
	va, vb := e.t.value(ent)
	return equal(va, vb, value)
}

// index adds name: value to the dynamic table and to the index.
func (e *Encoder) index(name, value []byte, nameHash, pairHash uint32) {
	if !e.t.add(name, value) {
		return
	}
	if len(e.links) != len(e.t.ents) {
		// The entry ring grew: the links follow it, slot by id.
		links := make([]link, len(e.t.ents))
		for id := e.t.added - uint64(e.t.n); id < e.t.added-1; id++ {
			links[id&uint64(len(links)-1)] = e.links[id&uint64(len(e.links)-1)]
		}
		e.links = links
	}
	id := e.t.added - 1
	e.links[e.t.slot(id)] = link{
		nameHash: nameHash, pairHash: pairHash,
		nameNext: distance(id, e.nameHead[nameHash%buckets]),
		pairNext: distance(id, e.pairHead[pairHash%buckets]),
	}
	e.nameHead[nameHash%buckets] = id + 1
	e.pairHead[pairHash%buckets] = id + 1
}

// distance returns how far back from id the entry of head (an id plus
// one; 0: none) is, 0 if none, and at most the largest uint32 (any
// entry that far back has been evicted).
func distance(id, head uint64) uint32 {
	if head == 0 {
		return 0
	}
	return uint32(min(id-(head-1), math.MaxUint32))
}

// appendString appends s as a string literal (RFC 7541 §5.2),
// Huffman-coded when that is shorter.
func appendString(dst, s []byte) []byte {
	if n := huffmanLength(s); n < len(s) {
		dst = appendInt(dst, 0x80, 7, uint64(n))
		return appendHuffman(dst, s)
	}
	dst = appendInt(dst, 0, 7, uint64(len(s)))
	return append(dst, s...)
}

// uniqueName reports whether name is that of a field whose value
// identifies one message (request and trace ids), so never repeats.
func uniqueName(name []byte) bool {
	switch string(name) {
	case "x-request-id", "x-correlation-id", "traceparent", "b3", "x-b3-traceid", "x-b3-spanid", "x-amzn-trace-id", "x-cloud-trace-context":
		return true
	}
	return false
}
