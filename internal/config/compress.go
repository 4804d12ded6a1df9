package config

import (
	"strings"

	"github.com/helios-lb/helios/internal/compress"
)

// Compress compresses a route's answers (from its upstream, or its
// static files) for clients that accept it (Accept-Encoding), streamed
// as they come: never answers already encoded, partial (206), marked
// Cache-Control: no-transform, without a body (204, 304, HEAD), to
// HTTP/1.0 clients, of a type not listed or smaller than MinBytes. An
// answer that would be compressed for another client gets Vary:
// Accept-Encoding. The zero Compress (compress: {}) gets the defaults
// documented on its fields.
type Compress struct {
	// Encodings are the codings offered: gzip, zstd, br (brotli), in the
	// order preferred when a client accepts several equally. Default
	// [zstd, gzip] (brotli costs several times their CPU per answer for
	// about their ratio at the levels answers made per request afford).
	Encodings []string `yaml:"encodings"`
	// Types are the media types compressed: type/subtype or type/*,
	// without parameters. Default text/*, application/json,
	// application/javascript, application/xml, application/xhtml+xml,
	// application/rss+xml, application/atom+xml,
	// application/manifest+json, application/ld+json, application/wasm
	// and image/svg+xml.
	Types []string `yaml:"types"`
	// MinBytes leaves answers whose length is known and smaller as they
	// are; 0 compresses every size. Default 1024.
	MinBytes int64 `yaml:"min_bytes"`
	// Level is gzip's level, 1 (fastest) to 9 (smallest), as nginx's
	// gzip_comp_level. Default 5.
	Level int `yaml:"level"`
	// ZstdLevel is zstd's level, 1-22; Helios's encoder has four
	// speeds, for levels 1-2, 3-5, 6-9 and 10-22. Default 3.
	ZstdLevel int `yaml:"zstd_level"`
	// BrotliLevel is brotli's level, 1-11; the levels above 5 cost far
	// more CPU than they save bytes on answers made per request (11 is
	// for files compressed ahead of time: Static.Precompressed). Default 4.
	BrotliLevel int `yaml:"brotli_level"`
}

// codingsAllowed is the "what is allowed" part of coding messages.
const codingsAllowed = "gzip, zstd or br"

// setCompressDefaults fills the absent keys of a route's compress block
// at path p.
func setCompressDefaults(m *meta, c *Compress, p string) {
	if absent(m, p+".encodings", c.Encodings == nil) {
		for _, cd := range compress.DefaultCodings() {
			c.Encodings = append(c.Encodings, cd.String())
		}
	}
	if absent(m, p+".types", c.Types == nil) {
		c.Types = compress.DefaultTypes()
	}
	setDefault(m, p+".min_bytes", &c.MinBytes, compress.DefaultMinBytes)
	setDefault(m, p+".level", &c.Level, compress.DefaultGzipLevel)
	setDefault(m, p+".zstd_level", &c.ZstdLevel, compress.DefaultZstdLevel)
	setDefault(m, p+".brotli_level", &c.BrotliLevel, compress.DefaultBrotliLevel)
}

// compress checks a route's compress block: on a route whose answers it
// can compress, with codings, types and levels Helios has.
func (v *validator) compress(r *Route, p string) {
	c := r.Compress
	if c == nil {
		return
	}
	p += ".compress"
	if r.Respond != nil {
		v.addf(p, "set on a route with a fixed answer (fixed answers are sent as they are; compress the routes with an upstream or static files)")
	}
	v.codings(p+".encodings", c.Encodings)
	if len(c.Types) == 0 {
		v.addf(p+".types", "empty (at least one media type, such as text/html or text/*)")
	}
	for j, t := range c.Types {
		if compress.CheckMediaRange(t) != nil {
			v.addf(indexPath(p+".types", j), "%q is not a media type to compress (type/subtype or type/*, without parameters, such as application/json)", t)
		}
	}
	if c.MinBytes < 0 {
		v.addf(p+".min_bytes", "%d is out of range (0 to compress every size, or more)", c.MinBytes)
	}
	v.intRange(p+".level", c.Level, 1, 9)
	v.intRange(p+".zstd_level", c.ZstdLevel, 1, 22)
	v.intRange(p+".brotli_level", c.BrotliLevel, 1, 11)
}

// codings checks a list of coding names (compress.encodings,
// static.precompressed): each one Helios has, each once, at least one.
func (v *validator) codings(p string, names []string) {
	if len(names) == 0 {
		v.addf(p, "empty (at least one of %s)", codingsAllowed)
	}
	seen := make(map[compress.Coding]string)
	for j, n := range names {
		jp := indexPath(p, j)
		c, ok := compress.ParseCoding(strings.ToLower(n))
		switch {
		case !ok:
			v.addf(jp, "%q is not a coding Helios has (%s)", n, codingsAllowed)
		case seen[c] != "":
			v.addf(jp, "%q is already listed at %s (list each coding once)", n, seen[c])
		default:
			seen[c] = jp
		}
	}
}

// precompressed checks a static route's precompressed codings; unlike
// encodings it may be absent or empty (no siblings are looked for).
func (v *validator) precompressed(s *Static, p string) {
	if len(s.Precompressed) > 0 {
		v.codings(p+".precompressed", s.Precompressed)
	}
}

// Codings returns the codings of a list of names as validated
// (Compress.Encodings, Static.Precompressed); names Helios does not
// have are left out.
func Codings(names []string) []compress.Coding {
	var cs []compress.Coding
	for _, n := range names {
		if c, ok := compress.ParseCoding(strings.ToLower(n)); ok {
			cs = append(cs, c)
		}
	}
	return cs
}
