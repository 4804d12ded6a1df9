package hpack

// entryOverhead is what RFC 7541 §4.1 adds to an entry's name and
// value lengths to make its size.
const entryOverhead = 32

// entry is one dynamic table entry: its name starts at off in the
// table's byte ring and its value follows (either may wrap around the
// ring's end).
type entry struct {
	off      uint32
	nameLen  uint32
	valueLen uint32
}

// table is a dynamic table (RFC 7541 §2.3.2, §4): the names and values
// of its entries in a byte ring, oldest first, and the entries in a
// ring of their own. The rings grow, by doubling, to what the table's
// maximum size needs and no further (the bytes never exceed the
// maximum size, each entry costing at least 32 of it), so once they
// have grown an insertion allocates nothing and copies only the new
// entry's bytes; eviction just moves the start.
//
// Entries have ids, counted from 0 in the order they were added; entry
// id lives at ents[id&(len(ents)-1)], so an id keeps naming its entry
// when the ring grows (the encoder's index relies on it).
type table struct {
	buf   []byte  // the byte ring
	start int     // where the oldest entry's name starts in buf
	used  int     // bytes in use from start, wrapping
	ents  []entry // the entry ring; its length is a power of two
	added uint64  // entries ever added: the newest one's id is added-1
	n     int     // entries
	size  uint64  // RFC 7541 §4.1 size: lengths plus 32 an entry
	max   uint64  // maximum size
}

// len returns the number of entries.
func (t *table) len() int { return t.n }

// slot returns where entry id lives in t.ents.
func (t *table) slot(id uint64) int { return int(id & uint64(len(t.ents)-1)) }

// at returns entry i, 1 being the newest (RFC 7541 §2.3.3).
func (t *table) at(i int) *entry { return &t.ents[t.slot(t.added-uint64(i))] }

// setMax sets the maximum size, evicting what no longer fits (RFC 7541
// §4.3).
func (t *table) setMax(v uint64) {
	t.max = v
	for t.size > t.max {
		t.evict()
	}
}

// evict removes the oldest entry.
func (t *table) evict() {
	e := t.at(t.n)
	n := int(e.nameLen + e.valueLen)
	t.size -= uint64(n) + entryOverhead
	t.n--
	if t.n == 0 {
		t.start, t.used = 0, 0
		return
	}
	if n > 0 {
		t.start = (t.start + n) % len(t.buf)
		t.used -= n
	}
}

// add inserts a new entry, evicting old ones to make room (RFC 7541
// §4.4), and reports whether it did: one larger than the maximum size
// empties the table instead. name and value are copied; they must not
// be bytes of the table itself.
func (t *table) add(name, value []byte) bool {
	n := len(name) + len(value)
	if uint64(n)+entryOverhead > t.max {
		for t.n > 0 {
			t.evict()
		}
		return false
	}
	for t.size+uint64(n)+entryOverhead > t.max {
		t.evict()
	}
	if t.used+n > len(t.buf) {
		t.growBytes(t.used + n)
	}
	if t.n == len(t.ents) {
		t.growEntries()
	}
	off := 0
	if len(t.buf) > 0 {
		off = (t.start + t.used) % len(t.buf)
	}
	t.put(off, name)
	t.put((off+len(name))%max(len(t.buf), 1), value)
	t.used += n
	t.size += uint64(n) + entryOverhead
	t.ents[t.slot(t.added)] = entry{off: uint32(off), nameLen: uint32(len(name)), valueLen: uint32(len(value))}
	t.added++
	t.n++
	return true
}

// put copies b into the ring at off, wrapping.
func (t *table) put(off int, b []byte) {
	k := copy(t.buf[off:], b)
	copy(t.buf, b[k:])
}

// growBytes gives the byte ring room for need bytes, at least doubling
// it but never past the maximum size, and lays the entries out from 0.
func (t *table) growBytes(need int) {
	c := max(2*len(t.buf), need, 256)
	if uint64(c) > t.max {
		c = max(int(t.max), need)
	}
	buf := make([]byte, c)
	if t.used > 0 {
		k := copy(buf, t.buf[t.start:min(t.start+t.used, len(t.buf))])
		copy(buf[k:t.used], t.buf)
		for i := 1; i <= t.n; i++ {
			e := t.at(i)
			e.off = uint32((int(e.off) - t.start + len(t.buf)) % len(t.buf))
		}
	}
	t.buf, t.start = buf, 0
}

// growEntries doubles the entry ring.
func (t *table) growEntries() {
	ents := make([]entry, max(2*len(t.ents), 16))
	for id := t.added - uint64(t.n); id < t.added; id++ {
		ents[id&uint64(len(ents)-1)] = t.ents[t.slot(id)]
	}
	t.ents = ents
}

// pieces returns the n bytes at off in the ring: a, then b when they
// wrap around its end.
func (t *table) pieces(off, n uint32) (a, b []byte) {
	end := int(off) + int(n)
	if end <= len(t.buf) {
		return t.buf[off:end:end], nil
	}
	return t.buf[off:], t.buf[:end-len(t.buf)]
}

// name returns the pieces of e's name.
func (t *table) name(e *entry) (a, b []byte) { return t.pieces(e.off, e.nameLen) }

// value returns the pieces of e's value.
func (t *table) value(e *entry) (a, b []byte) {
	if len(t.buf) == 0 {
		return nil, nil
	}
	return t.pieces(uint32((int(e.off)+int(e.nameLen))%len(t.buf)), e.valueLen)
}

// equal reports whether the pieces a and b, one after the other, are s.
func equal(a, b, s []byte) bool {
	return len(a)+len(b) == len(s) && string(a) == string(s[:len(a)]) && string(b) == string(s[len(a):])
}
