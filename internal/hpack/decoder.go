package hpack

import (
	"errors"
	"fmt"
)

// DefaultTableSize is the dynamic table size both ends of a connection
// start with: SETTINGS_HEADER_TABLE_SIZE's initial value (RFC 9113
// §6.5.2).
const DefaultTableSize = 4096

// The errors of Decode. ErrHeaderListSize leaves the decoder in step
// with the peer's encoder: the block was decoded to its end, only the
// fields past the limit were not emitted, and the connection goes on
// (HTTP/2 answers the stream: 431, or RST_STREAM). Every other error is
// a COMPRESSION_ERROR (RFC 9113 §4.3): the decoder's state no longer
// matches the peer's and the connection must end. An error may be
// wrapped with detail; test it with errors.Is.
var (
	// ErrHeaderListSize: the block's fields add up to more than
	// DecoderConfig.MaxHeaderListSize.
	ErrHeaderListSize = errors.New("hpack: header list larger than the limit")
	// ErrStringLength: a name or value is longer than
	// DecoderConfig.MaxStringLength.
	ErrStringLength = errors.New("hpack: string longer than the limit")
	// ErrTruncated: the block ends inside a representation.
	ErrTruncated = errors.New("hpack: truncated header block")
	// ErrIntegerOverflow: an integer has more continuation bytes than
	// 63 bits take (RFC 7541 §5.1).
	ErrIntegerOverflow = errors.New("hpack: integer overflow")
	// ErrIndex: an index is 0 or past the end of the tables (RFC 7541
	// §2.3.3).
	ErrIndex = errors.New("hpack: invalid table index")
	// ErrHuffman: a Huffman-encoded string holds EOS, ends inside a
	// code, or is padded with more than 7 bits or with bits other than
	// ones (RFC 7541 §5.2).
	ErrHuffman = errors.New("hpack: invalid Huffman code")
	// ErrTableSizeUpdate: a dynamic table size update came after a
	// field, or above the limit, or did not come when the limit fell
	// below the table's size (RFC 7541 §4.2, §6.3).
	ErrTableSizeUpdate = errors.New("hpack: invalid dynamic table size update")
)

// Field is a header field. What its Name and Value point into, and for
// how long, is what Decoder.Decode says.
type Field struct {
	// Name is the field name, as the peer sent it (HPACK does not
	// check it is lower case or a token; HTTP/2 must).
	Name []byte
	// Value is the field value.
	Value []byte
	// Sensitive is true when the field came as a never-indexed literal
	// (RFC 7541 §6.2.3): the next hop must not index it either.
	Sensitive bool
}

// DecoderConfig holds a Decoder's limits; zero means no limit.
type DecoderConfig struct {
	// MaxHeaderListSize bounds a block's decoded size, counted as
	// SETTINGS_MAX_HEADER_LIST_SIZE is (RFC 9113 §6.5.2): each field's
	// name and value lengths plus 32. Past it, Decode emits no more
	// fields, decodes the rest of the block only to keep the dynamic
	// table in step (an HPACK bomb costs its encoded size, not its
	// decoded one) and returns ErrHeaderListSize. Zero: no limit, and
	// a block may then make Decode hold as many bytes as it expands to
	// (a one-byte index can stand for a whole table entry).
	MaxHeaderListSize uint32
	// MaxStringLength bounds every name and value, encoded and
	// decoded; past it is ErrStringLength. Zero: no limit.
	MaxStringLength int
}

// scratchKeep is the scratch buffer a Decoder keeps between blocks; a
// larger one (from an unusually large head) is dropped at the next
// Decode, so that one big head does not pin its memory to the
// connection.
const scratchKeep = 16 << 10

// A Decoder decodes the header blocks of one direction of a connection
// (RFC 7541 §3): it holds that direction's dynamic table. Its methods
// must not be called concurrently. Once its buffers have grown to the
// blocks a connection carries, decoding allocates nothing.
type Decoder struct {
	t       table
	limit   uint64 // the largest size a table size update may set
	expect  bool   // the next block must begin with a table size update
	maxList uint64
	maxStr  int
	// scratch holds the strings Decode makes for the block being
	// decoded (Huffman-decoded, or copied out of the dynamic table).
	scratch []byte
}

// NewDecoder returns a Decoder with cfg's limits and a dynamic table
// of DefaultTableSize, the size both ends start with. When this
// endpoint's SETTINGS_HEADER_TABLE_SIZE differs from the default, call
// SetMaxTableSizeLimit once the peer has acknowledged it.
func NewDecoder(cfg DecoderConfig) *Decoder {
	d := &Decoder{limit: DefaultTableSize, maxList: uint64(cfg.MaxHeaderListSize), maxStr: cfg.MaxStringLength}
	d.t.max = DefaultTableSize
	return d
}

// SetMaxTableSizeLimit sets the largest dynamic table the peer's
// encoder may use: this endpoint's SETTINGS_HEADER_TABLE_SIZE, to be
// called when the peer acknowledges the SETTINGS frame that carried it
// (the peer encodes against the old value until then). A limit below
// the table's current size obliges the peer to begin its next block
// with a table size update within it (RFC 7541 §4.2); a block that
// does not is ErrTableSizeUpdate. A higher limit lets the peer grow
// the table with a size update.
func (d *Decoder) SetMaxTableSizeLimit(v uint32) {
	d.limit = uint64(v)
	if d.limit < d.t.max {
		d.expect = true
	}
}

// blockState is what Decode tracks across one block.
type blockState struct {
	emit   func(Field)
	list   uint64 // the header list size so far
	over   bool   // list passed the limit
	fields bool   // a field has been decoded
}

// emitting reports whether fields still go to emit.
func (st *blockState) emitting() bool { return st.emit != nil && !st.over }

// Decode decodes block, a complete header block (the fragments of a
// HEADERS frame and its CONTINUATION frames, joined), and calls emit
// for each of its fields in order; emit nil decodes only to keep the
// dynamic table in step (for a block whose fields nobody will read),
// skipping the Huffman decoding of strings that are not indexed and
// the header list limit. The errors are described at
// ErrHeaderListSize. A zero-length block is valid and has no fields.
//
// The Name and Value emit receives point into block itself (strings
// sent without Huffman coding), into the static table (read-only, for
// every decoder: writing to them faults) or into the decoder's scratch
// buffer (Huffman-decoded strings and every string of the dynamic
// table, copied out of it: an entry may be evicted, and its bytes
// reused, later in the same block). So they stay valid until the next
// call of Decode on d and, for those in block, while block's bytes are
// unchanged: the fields of a whole block can be gathered and read
// after Decode returns. Whoever keeps one longer copies it. They are
// the decoder's, not the caller's: read them, do not write to them;
// each has its length as its capacity, so appending to one copies it
// and leaves the rest alone.
func (d *Decoder) Decode(block []byte, emit func(Field)) error {
	if cap(d.scratch) > scratchKeep {
		d.scratch = nil
	}
	d.scratch = d.scratch[:0]
	if len(block) == 0 {
		return nil
	}
	if d.expect && block[0]&0xe0 != 0x20 {
		return fmt.Errorf("%w: none after the limit fell below the table size", ErrTableSizeUpdate)
	}
	st := blockState{emit: emit}
	var err error
	for p := block; len(p) > 0 && err == nil; {
		c := p[0]
		switch {
		case c&0x80 != 0: // indexed (RFC 7541 §6.1)
			p, err = d.indexed(p, &st)
		case c&0xc0 == 0x40: // literal with incremental indexing (§6.2.1)
			p, err = d.literal(p, 6, true, false, &st)
		case c&0xe0 == 0x20: // dynamic table size update (§6.3)
			p, err = d.sizeUpdate(p, &st)
		default: // literal without indexing (§6.2.2), never indexed (§6.2.3)
			p, err = d.literal(p, 4, false, c&0x10 != 0, &st)
		}
	}
	if err == nil && st.over {
		err = ErrHeaderListSize
	}
	return err
}

// entryAt returns the static index (i itself) or the dynamic entry that
// index i names.
func (d *Decoder) entryAt(i uint64) (static int, e *entry, err error) {
	switch {
	case i == 0 || i > uint64(staticLen+d.t.len()):
		return 0, nil, fmt.Errorf("%w %d", ErrIndex, i)
	case i <= uint64(staticLen):
		return int(i), nil, nil
	}
	return 0, d.t.at(int(i) - staticLen), nil
}

func (d *Decoder) indexed(p []byte, st *blockState) ([]byte, error) {
	i, k, err := readInt(p, 7)
	if err != nil {
		return nil, err
	}
	si, e, err := d.entryAt(i)
	if err != nil {
		return nil, err
	}
	st.fields = true
	var name, value []byte
	var nameLen, valueLen int
	if e == nil {
		name, value = staticField(si)
		nameLen, valueLen = len(name), len(value)
	} else {
		nameLen, valueLen = int(e.nameLen), int(e.valueLen)
	}
	if d.maxStr > 0 && (nameLen > d.maxStr || valueLen > d.maxStr) {
		return nil, ErrStringLength
	}
	if !st.emitting() || !d.account(st, nameLen, valueLen) {
		return p[k:], nil
	}
	if e != nil {
		// Name and value are adjacent in the ring: one copy.
		nv := d.copyOut(d.t.pieces(e.off, e.nameLen+e.valueLen))
		name, value = nv[:nameLen:nameLen], nv[nameLen:]
	}
	st.emit(Field{Name: name, Value: value})
	return p[k:], nil
}

// literal decodes a literal field representation whose name index has
// an n-bit prefix (RFC 7541 §6.2).
func (d *Decoder) literal(p []byte, n uint8, indexing, sensitive bool, st *blockState) ([]byte, error) {
	ni, k, err := readInt(p, n)
	if err != nil {
		return nil, err
	}
	p = p[k:]
	si, e := 0, (*entry)(nil)
	var rawName, rawValue rawString
	if ni > 0 {
		if si, e, err = d.entryAt(ni); err != nil {
			return nil, err
		}
	} else if rawName, p, err = d.readString(p); err != nil {
		return nil, err
	}
	if rawValue, p, err = d.readString(p); err != nil {
		return nil, err
	}
	st.fields = true
	if !st.emitting() && !indexing {
		// Not wanted: as x/net's decoder, check only the length of an
		// indexed name.
		if e != nil && d.maxStr > 0 && int(e.nameLen) > d.maxStr {
			return nil, ErrStringLength
		}
		return p, nil
	}
	mark := len(d.scratch)
	var name, value []byte
	switch {
	case si > 0:
		name, _ = staticField(si)
	case e != nil:
		// Copied before the insertion below, which may evict e
		// (RFC 7541 §4.4).
		name = d.copyOut(d.t.name(e))
	default:
		if name, err = d.decodeString(rawName); err != nil {
			return nil, err
		}
	}
	if value, err = d.decodeString(rawValue); err != nil {
		return nil, err
	}
	if d.maxStr > 0 && (len(name) > d.maxStr || len(value) > d.maxStr) {
		return nil, ErrStringLength
	}
	if indexing {
		d.t.add(name, value)
	}
	if st.emitting() && d.account(st, len(name), len(value)) {
		st.emit(Field{Name: name, Value: value, Sensitive: sensitive})
	} else {
		d.scratch = d.scratch[:mark] // nobody sees these bytes
	}
	return p, nil
}

// account adds a field to the block's header list size; false means
// the list has passed the limit, and the field is not emitted.
func (d *Decoder) account(st *blockState, nameLen, valueLen int) bool {
	st.list += uint64(nameLen) + uint64(valueLen) + entryOverhead
	if d.maxList > 0 && st.list > d.maxList {
		st.over = true
		return false
	}
	return true
}

func (d *Decoder) sizeUpdate(p []byte, st *blockState) ([]byte, error) {
	if st.fields {
		return nil, fmt.Errorf("%w: after a field", ErrTableSizeUpdate)
	}
	v, k, err := readInt(p, 5)
	if err != nil {
		return nil, err
	}
	if v > d.limit {
		return nil, fmt.Errorf("%w: %d above the limit %d", ErrTableSizeUpdate, v, d.limit)
	}
	d.t.setMax(v)
	d.expect = false
	return p[k:], nil
}

// rawString is a string literal as it is in the block (RFC 7541 §5.2).
type rawString struct {
	b    []byte
	huff bool
}

// readString reads a string literal's length and bytes off p, without
// decoding it. As x/net's decoder, it checks the encoded length
// against the string limit before anything else.
func (d *Decoder) readString(p []byte) (rawString, []byte, error) {
	n, k, err := readInt(p, 7)
	if err != nil {
		return rawString{}, nil, err
	}
	if d.maxStr > 0 && n > uint64(d.maxStr) {
		return rawString{}, nil, ErrStringLength
	}
	if n > uint64(len(p)-k) {
		return rawString{}, nil, ErrTruncated
	}
	end := k + int(n)
	return rawString{b: p[k:end:end], huff: p[0]&0x80 != 0}, p[end:], nil
}

// decodeString returns s's bytes: s itself, or its Huffman decoding in
// the scratch buffer.
func (d *Decoder) decodeString(s rawString) ([]byte, error) {
	if !s.huff {
		return s.b, nil
	}
	n := len(d.scratch)
	var err error
	if d.scratch, err = appendHuffmanDecoded(d.scratch, s.b); err != nil {
		return nil, err
	}
	return d.scratch[n:len(d.scratch):len(d.scratch)], nil
}

// copyOut copies the pieces of a table string to the scratch buffer.
func (d *Decoder) copyOut(a, b []byte) []byte {
	n := len(d.scratch)
	d.scratch = append(append(d.scratch, a...), b...)
	return d.scratch[n:len(d.scratch):len(d.scratch)]
}
