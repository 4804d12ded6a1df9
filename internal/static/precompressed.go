package static

import (
	"github.com/helios-lb/helios/internal/compress"
)

// Precompressed siblings. A route with Options.Precompressed answers a
// client that accepts one of its codings with the file compressed ahead
// of time beside the original (foo.js.br, foo.js.zst, foo.js.gz next to
// foo.js), as nginx's gzip_static and Caddy's precompressed do: sent
// with sendfile like any file, with the original's Content-Type, the
// coding as Content-Encoding, and the sibling's own length, ETag and
// Last-Modified, so conditions and ranges hold for the bytes sent. A
// sibling is looked for only when the original is a regular file, and
// through the open-file cache (a missing sibling is cached as such, as
// any 404). Every answer from a file of such a route varies on
// Accept-Encoding.

// maxPrecompressed bounds Options.Precompressed: each coding at most
// once.
const maxPrecompressed = 3

// siblingExt are the siblings' file name extensions, by coding.
var siblingExt = [...]string{compress.Gzip: ".gz", compress.Zstd: ".zst", compress.Brotli: ".br"}

// sibling returns the entry of the precompressed sibling that r should
// get in place of the regular file t names, with its coding; nil when
// the client accepts none of the route's codings or no sibling it
// accepts exists. The entry returned carries a reference for the
// caller.
func (p *Planner) sibling(r Request, t target, a *Answer) (*entry, compress.Coding) {
	ae := r.Header("accept-encoding")
	if len(ae) == 0 {
		return nil, compress.Identity
	}
	var left [maxPrecompressed]compress.Coding
	n := copy(left[:], p.h.precompressed)
	for n > 0 {
		c := compress.Negotiate(ae, true, left[:n])
		if c == compress.Identity {
			return nil, c
		}
		if e := p.get(p.siblingTarget(t, c, a)); e.kind == kindFile {
			return e, c
		}
		// Not there (or not a file): the next coding the client takes.
		for i := range left[:n] {
			if left[i] == c {
				copy(left[i:], left[i+1:n])
				n--
				break
			}
		}
	}
	return nil, compress.Identity
}

// siblingTarget names c's sibling of the file t names (a directory's
// index, when t ends in "/"), in a's scratch for the path: the
// normalised path is not needed any more once a file was found.
func (p *Planner) siblingTarget(t target, c compress.Coding, a *Answer) target {
	b := a.Scratch[scratchP2][:0]
	if !t.slash || string(t.name) != "." {
		b = append(b, t.name...)
	}
	if t.slash {
		if len(b) > 0 {
			b = append(b, '/')
		}
		b = append(b, p.h.index...)
	}
	b = append(b, siblingExt[c]...)
	n := len(b)
	b = append(b, 0)
	a.Scratch[scratchP2] = b
	return target{key: b, name: b[:n], sibling: true}
}
