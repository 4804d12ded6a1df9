package route

// needsNormalizing reports whether path contains a percent-escape, a dot
// segment or an empty segment: the spellings Normalize rewrites.
func needsNormalizing(p []byte) bool {
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '%':
			return true
		case '/':
			if i+1 < len(p) && (p[i+1] == '/' || p[i+1] == '.') {
				return true
			}
		}
	}
	return false
}

// Normalize returns the form of path used for matching: percent-escapes
// decoded (an escaped "/" stays escaped, so it cannot create segments),
// "." and ".." segments resolved (never above the root), and runs of "/"
// merged. It allocates; Match calls it only for paths that need it.
func Normalize(p []byte) []byte {
	dec := make([]byte, 0, len(p))
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c == '%' && i+2 < len(p) && isHex(p[i+1]) && isHex(p[i+2]) {
			v := unhex(p[i+1])<<4 | unhex(p[i+2])
			if v != '/' && v != 0 {
				dec = append(dec, v)
				i += 2
				continue
			}
		}
		dec = append(dec, c)
	}
	out := make([]byte, 0, len(dec)+1)
	out = append(out, '/')
	i := 0
	for i < len(dec) {
		for i < len(dec) && dec[i] == '/' {
			i++
		}
		j := i
		for j < len(dec) && dec[j] != '/' {
			j++
		}
		seg := dec[i:j]
		switch string(seg) {
		case "", ".":
		case "..":
			// Drop the last segment of out.
			k := len(out) - 1
			if k > 0 && out[k] == '/' {
				k--
			}
			for k > 0 && out[k] != '/' {
				k--
			}
			out = out[:k+1]
		default:
			if out[len(out)-1] != '/' {
				out = append(out, '/')
			}
			out = append(out, seg...)
		}
		i = j
	}
	// Keep a trailing slash: "/static/" and "/static" differ for prefixes.
	if len(dec) > 0 && dec[len(dec)-1] == '/' && out[len(out)-1] != '/' {
		out = append(out, '/')
	}
	return out
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}
