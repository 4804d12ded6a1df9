package static

// target is where a request path leads.
type target struct {
	// status is non-zero when the path is refused: 400 for a malformed
	// escape, 404 for an escaped "/" or a NUL.
	status int
	// full is the normalised path, from "/" (for Location).
	full []byte
	// key names the answer in the cache: the root-relative name ("." for
	// the root), with "/" appended when the request path ended in one.
	key []byte
	// name is key without that "/".
	name []byte
	// slash reports whether the request path ended in "/".
	slash bool
	// sibling marks a precompressed sibling's name (key is the name
	// and a NUL, which no request's key holds): its type is its
	// original's, never looked up or sniffed.
	sibling bool
}

// resolvePath turns the raw request path into a name below the root,
// using a's scratch buffers: percent-escapes decoded, "." and ".."
// resolved (never above "/"), runs of "/" merged — the route matcher's
// normalisation (internal/route/normalize.go) — then stripPrefix
// removed and the rest cleaned again. It does not allocate once the
// buffers have grown.
func resolvePath(raw []byte, stripPrefix string, a *Answer) target {
	dec := a.Scratch[scratchP1][:0]
	if len(raw) == 0 || raw[0] != '/' {
		dec = append(dec, '/')
	}
	// A malformed escape anywhere is 400, even after a refused byte.
	refused := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c == '%' {
			var hi, lo byte
			ok := i+2 < len(raw)
			if ok {
				hi, ok = hexVal(raw[i+1])
			}
			if ok {
				lo, ok = hexVal(raw[i+2])
			}
			if !ok {
				a.Scratch[scratchP1] = dec
				return target{status: 400}
			}
			c = hi<<4 | lo
			i += 2
			// An escaped slash is data inside a segment, and no file
			// name holds a "/": the route matcher kept it escaped, so
			// decoding it here would reach past what it matched.
			refused = refused || c == '/'
		}
		refused = refused || c == 0
		dec = append(dec, c)
	}
	a.Scratch[scratchP1] = dec
	if refused {
		return target{status: 404}
	}
	slash := dec[len(dec)-1] == '/'
	full := cleanInto(a.Scratch[scratchP2], dec)
	a.Scratch[scratchP2] = full
	rest := full
	if len(stripPrefix) > 0 && len(rest) >= len(stripPrefix) && string(rest[:len(stripPrefix)]) == stripPrefix {
		rest = rest[len(stripPrefix):]
	}
	// Cleaned again: what is left after the prefix may start with ".."
	// ("/static.." less "/static"). The decoded path is not needed any
	// more, so its buffer takes the name.
	b := cleanInto(dec, rest)
	if len(b) == 1 {
		b = append(b, '.')
	}
	n := len(b)
	if slash {
		b = append(b, '/')
	}
	a.Scratch[scratchP1] = b[:0]
	return target{full: full, key: b[1:], name: b[1:n], slash: slash}
}

// cleanInto appends to dst[:0] the clean form of the "/"-separated path
// p: "/" followed by its segments, without empty and "." segments, each
// ".." removing the segment before it (none at the top), and no "/" at
// the end unless it is "/" itself. dst and p must not overlap.
func cleanInto(dst, p []byte) []byte {
	out := append(dst[:0], '/')
	for i := 0; i < len(p); {
		for i < len(p) && p[i] == '/' {
			i++
		}
		j := i
		for j < len(p) && p[j] != '/' {
			j++
		}
		seg := p[i:j]
		i = j
		switch {
		case len(seg) == 0 || len(seg) == 1 && seg[0] == '.':
		case len(seg) == 2 && seg[0] == '.' && seg[1] == '.':
			k := len(out) - 1
			for k > 0 && out[k] != '/' {
				k--
			}
			out = out[:max(k, 1)]
		default:
			if len(out) > 1 {
				out = append(out, '/')
			}
			out = append(out, seg...)
		}
	}
	return out
}

// hexVal is the value of the hexadecimal digit c; ok is false when c
// is not one.
func hexVal(c byte) (v byte, ok bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
