package httpmsg

// Field is one header field. Name and Value are slices of a connection's
// buffer (or of memory the caller keeps alive for the message's life);
// nothing writes through them.
type Field struct {
	Name, Value []byte
	// Kind is Classify(Name), set when the field is read.
	Kind Kind
	// Drop marks a field not to forward: named by the Connection field
	// (hop-by-hop for this message only), removed by a rule, or refused
	// by a listener's policy (underscores in names).
	Drop bool
}

// Header is the list of fields of one head or trailer section, in the
// order received. Its backing array is reused from message to message.
type Header struct {
	Fields []Field
}

// Reset empties h, keeping its backing array.
func (h *Header) Reset() {
	clear(h.Fields)
	h.Fields = h.Fields[:0]
}

// Get returns the value of the first field named name (ASCII
// case-insensitive; name in lower case) that is not dropped, and whether
// there was one.
func (h *Header) Get(name string) ([]byte, bool) {
	for i := range h.Fields {
		f := &h.Fields[i]
		if !f.Drop && EqualFold(f.Name, name) {
			return f.Value, true
		}
	}
	return nil, false
}

// GetKind returns the value of the first field of kind k that is not
// dropped, and whether there was one.
func (h *Header) GetKind(k Kind) ([]byte, bool) {
	for i := range h.Fields {
		f := &h.Fields[i]
		if f.Kind == k && !f.Drop {
			return f.Value, true
		}
	}
	return nil, false
}

// HasKind reports whether h has a field of kind k that is not dropped.
func (h *Header) HasKind(k Kind) bool {
	_, ok := h.GetKind(k)
	return ok
}

// Add appends a field. name and value must stay unchanged for the
// message's life.
func (h *Header) Add(name, value []byte) {
	h.Fields = append(h.Fields, Field{Name: name, Value: value, Kind: Classify(name)})
}

// Del drops every field named name (ASCII case-insensitive), and reports
// how many it dropped.
func (h *Header) Del(name []byte) int {
	n := 0
	for i := range h.Fields {
		f := &h.Fields[i]
		if !f.Drop && EqualFoldBytes(f.Name, name) {
			f.Drop = true
			n++
		}
	}
	return n
}

// Set replaces every field named name with one field of value.
func (h *Header) Set(name, value []byte) {
	h.Del(name)
	h.Add(name, value)
}

// Len returns the number of fields that are not dropped.
func (h *Header) Len() int {
	n := 0
	for i := range h.Fields {
		if !h.Fields[i].Drop {
			n++
		}
	}
	return n
}

// MarkConnectionOptions marks the fields named in a Connection field
// value for dropping (RFC 9110 §7.6.1), and reports whether the value
// has the tokens "close", "keep-alive" and "upgrade". Fields Helios acts
// on (every kind but KindOther) are left to their own rules.
func (h *Header) MarkConnectionOptions(v []byte) (closeTok, keepAlive, upgrade bool) {
	for len(v) > 0 {
		var tok []byte
		tok, v = NextToken(v)
		if len(tok) == 0 {
			continue
		}
		switch {
		case EqualFold(tok, "close"):
			closeTok = true
		case EqualFold(tok, "keep-alive"):
			keepAlive = true
		case EqualFold(tok, "upgrade"):
			upgrade = true
		default:
			for i := range h.Fields {
				if h.Fields[i].Kind == KindOther && EqualFoldBytes(h.Fields[i].Name, tok) {
					h.Fields[i].Drop = true
				}
			}
		}
	}
	return
}

// HeaderOf returns a header of the given fields, name then value, each
// copied: for heads made once (configured answers) and kept. It panics
// on an odd number of strings.
func HeaderOf(pairs ...string) *Header {
	if len(pairs)%2 != 0 {
		panic("httpmsg: HeaderOf needs names and values in pairs")
	}
	h := &Header{Fields: make([]Field, 0, len(pairs)/2)}
	for i := 0; i < len(pairs); i += 2 {
		h.Add([]byte(pairs[i]), []byte(pairs[i+1]))
	}
	return h
}

// Emit passes every field that is not dropped to s, in order.
func (h *Header) Emit(s FieldSink) {
	for i := range h.Fields {
		if f := &h.Fields[i]; !f.Drop {
			s.Field(f.Name, f.Value)
		}
	}
}
