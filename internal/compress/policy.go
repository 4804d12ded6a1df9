package compress

import (
	"errors"
	"fmt"
	"strings"

	"github.com/helios-lb/helios/internal/httpmsg"
)

// A Policy says which answers a route compresses and with what: the
// rules every answer goes by, whoever made it (a backend, an in-process
// handler, a static file), in one place. Answers are compressed when
// all of these hold, and Choose says so:
//
//   - the status has a body worth coding: not 1xx, 204, 304, nor 206
//     (nor any answer with Content-Range: a part of a representation
//     cannot be coded on its own);
//   - the answer is not coded already (Content-Encoding other than
//     identity) and does not forbid it (Cache-Control: no-transform);
//   - its Content-Type is one of the policy's types;
//   - its length, when known, is at least MinBytes (and not 0);
//   - the request is not HEAD, not HTTP/1.0 (its clients cannot take a
//     body of unknown length but by a connection's close, which would
//     cost keep-alive), and its Accept-Encoding accepts one of the
//     policy's codings (Negotiate).
//
// An answer that would be compressed but for the last rule still
// varies on Accept-Encoding, so it gets Vary: Accept-Encoding as a
// compressed one does (nginx's gzip_vary), so that a cache does not
// serve one client's coding to another.
type Policy struct {
	codings  []Coding
	types    []mediaRange
	minBytes int64
	pool     *Pool
}

// mediaRange is a media type a policy compresses: "type/subtype", or
// "type/*" (prefix set, s holding "type/").
type mediaRange struct {
	s      string
	prefix bool
}

// DefaultMinBytes is the MinBytes of a Policy when Options leave it 0:
// below about a kilobyte, a coding's own framing and the CPU it costs
// gain little.
const DefaultMinBytes = 1024

// DefaultCodings returns the codings offered when Options name none, in
// the server's order of preference: zstd, then gzip (which every client
// has). Brotli is left to those who list it: at the levels an answer
// made per request can afford, it costs two to five times gzip's CPU
// for about gzip's ratio (BenchmarkEncoders); its gain is at the high
// levels of files compressed ahead of time.
func DefaultCodings() []Coding { return []Coding{Zstd, Gzip} }

// DefaultTypes returns the media types compressed when Options name
// none: text, and the structured and script types that are text in
// all but name. Images, video, archives and fonts (woff2 is brotli
// already) gain nothing.
func DefaultTypes() []string {
	return []string{
		"text/*",
		"application/json",
		"application/javascript",
		"application/xml",
		"application/xhtml+xml",
		"application/rss+xml",
		"application/atom+xml",
		"application/manifest+json",
		"application/ld+json",
		"application/wasm",
		"image/svg+xml",
	}
}

// Options configure a Policy. The zero value compresses DefaultTypes of
// DefaultMinBytes or more with DefaultCodings at each coding's default
// level.
type Options struct {
	// Codings are the codings offered, in the server's order of
	// preference (a client that accepts several with the same q-value
	// gets the first). Empty: DefaultCodings.
	Codings []Coding
	// Types are the media types compressed: "type/subtype" or "type/*",
	// any case, without parameters. Empty: DefaultTypes.
	Types []string
	// MinBytes leaves answers whose length is known and smaller as they
	// are. 0: DefaultMinBytes; negative: no minimum.
	MinBytes int64
	// GzipLevel (1-9), ZstdLevel (1-22) and BrotliLevel (1-11) are the
	// codings' levels; 0: the default of each (NewPool).
	GzipLevel, ZstdLevel, BrotliLevel int
}

// NewPolicy returns a policy for o, with a pool of encoders of its own.
func NewPolicy(o Options) (*Policy, error) {
	p := &Policy{codings: o.Codings, minBytes: o.MinBytes}
	if len(p.codings) == 0 {
		p.codings = DefaultCodings()
	}
	for i, c := range p.codings {
		if c == Identity || int(c) >= nCodings {
			return nil, fmt.Errorf("coding %d: %v is not a coding to compress with", i, c)
		}
		for _, d := range p.codings[:i] {
			if d == c {
				return nil, fmt.Errorf("coding %v is offered twice", c)
			}
		}
	}
	types := o.Types
	if len(types) == 0 {
		types = DefaultTypes()
	}
	for _, t := range types {
		if err := CheckMediaRange(t); err != nil {
			return nil, err
		}
		t = strings.ToLower(t)
		if s, ok := strings.CutSuffix(t, "*"); ok {
			p.types = append(p.types, mediaRange{s: s, prefix: true})
		} else {
			p.types = append(p.types, mediaRange{s: t})
		}
	}
	switch {
	case p.minBytes == 0:
		p.minBytes = DefaultMinBytes
	case p.minBytes < 0:
		p.minBytes = 0
	}
	var err error
	if p.pool, err = NewPool(o.GzipLevel, o.ZstdLevel, o.BrotliLevel); err != nil {
		return nil, err
	}
	return p, nil
}

// errMediaRange is why a media type cannot be compressed by name.
var errMediaRange = errors.New("want type/subtype or type/*, without parameters")

// CheckMediaRange checks a media type as Options.Types takes it:
// "type/subtype" or "type/*", tokens, no parameters.
func CheckMediaRange(s string) error {
	typ, sub, ok := strings.Cut(s, "/")
	if !ok || !httpmsg.IsToken(typ) || typ == "*" || sub != "*" && !httpmsg.IsToken(sub) {
		return fmt.Errorf("media type %q: %w", s, errMediaRange)
	}
	return nil
}

// Pool returns the policy's encoders.
func (p *Policy) Pool() *Pool { return p.pool }

// Choose decides how an answer to req goes out: status, its head's
// fields h and the length of its body (-1 when unknown) are as the
// answer would go without coding. It returns the coding to apply
// (Identity: none) and whether the answer varies on Accept-Encoding (it
// gets Vary: Accept-Encoding). It allocates nothing.
func (p *Policy) Choose(req *httpmsg.Request, status int, h *httpmsg.Header, length int64) (c Coding, vary bool) {
	if status < 200 || status == 204 || status == 304 || status == 206 ||
		length == 0 || length > 0 && length < p.minBytes {
		return Identity, false
	}
	var ctype []byte
	typed := false
	for i := range h.Fields {
		f := &h.Fields[i]
		if f.Drop {
			continue
		}
		switch f.Kind {
		case httpmsg.KindContentEncoding:
			if v := httpmsg.TrimOWS(f.Value); len(v) > 0 && !httpmsg.EqualFold(v, "identity") {
				return Identity, false
			}
		case httpmsg.KindContentType:
			if !typed {
				ctype, typed = f.Value, true
			}
		case httpmsg.KindOther:
			// Both names have 13 letters: one length check for the
			// common field that is neither.
			if len(f.Name) == len("cache-control") &&
				(httpmsg.EqualFold(f.Name, "content-range") ||
					httpmsg.EqualFold(f.Name, "cache-control") && httpmsg.HasToken(f.Value, "no-transform")) {
				return Identity, false
			}
		}
	}
	if !typed || !p.compresses(ctype) {
		return Identity, false
	}
	if req.Proto == httpmsg.HTTP10 || httpmsg.EqualFold(req.Method, "head") {
		return Identity, true
	}
	ae, ok := req.Header.GetKind(httpmsg.KindAcceptEncoding)
	return Negotiate(ae, ok, p.codings), true
}

// compresses reports whether the Content-Type value ct is one of the
// policy's types.
func (p *Policy) compresses(ct []byte) bool {
	for i, b := range ct {
		if b == ';' {
			ct = ct[:i]
			break
		}
	}
	ct = httpmsg.TrimOWS(ct)
	for _, t := range p.types {
		if t.prefix && httpmsg.HasPrefixFold(ct, t.s) && len(ct) > len(t.s) || !t.prefix && httpmsg.EqualFold(ct, t.s) {
			return true
		}
	}
	return false
}

// Allocator lends memory that lives as long as the head it goes into
// (wire.Exchange implements it).
type Allocator interface {
	Alloc(n int) []byte
}

// Mark edits a head for an answer sent with coding c (Identity: as it
// is) and, when vary, that varies on Accept-Encoding: Content-Encoding
// set and Content-Length dropped (the coded length is not known until
// the end; the sender frames the body), a strong ETag made weak (the
// coded bytes are not the ones it validated, but they mean the same:
// RFC 9110 §8.8.1; W/ as nginx does, which backends that compare
// If-None-Match weakly still recognise), and Vary: Accept-Encoding
// added unless a Vary field says it already (or says *). The weak
// ETag's memory comes from mem.
func Mark(h *httpmsg.Header, c Coding, vary bool, mem Allocator) {
	varies := false
	for i := range h.Fields {
		f := &h.Fields[i]
		if f.Drop {
			continue
		}
		switch {
		case c != Identity && (f.Kind == httpmsg.KindContentLength || f.Kind == httpmsg.KindContentEncoding):
			f.Drop = true
		case c != Identity && f.Kind == httpmsg.KindOther && httpmsg.EqualFold(f.Name, "etag"):
			if v := f.Value; len(v) > 0 && v[0] == '"' {
				w := mem.Alloc(len(v) + 2)
				w[0], w[1] = 'W', '/'
				copy(w[2:], v)
				f.Value = w
			}
		case vary && f.Kind == httpmsg.KindOther && httpmsg.EqualFold(f.Name, "vary"):
			varies = varies || httpmsg.HasToken(f.Value, "accept-encoding") || httpmsg.HasToken(f.Value, "*")
		}
	}
	if vary && !varies {
		h.Fields = append(h.Fields, httpmsg.Field{Name: varyName, Value: acceptEncoding})
	}
	if c != Identity {
		h.Fields = append(h.Fields, httpmsg.Field{Name: contentEncoding, Value: c.Token(), Kind: httpmsg.KindContentEncoding})
	}
}

// Apply decides with Choose, edits h with Mark, and returns the encoder
// to send the body through, or nil when the answer goes as it is.
func (p *Policy) Apply(req *httpmsg.Request, status int, h *httpmsg.Header, length int64, mem Allocator) *Encoder {
	c, vary := p.Choose(req, status, h, length)
	if c == Identity && !vary {
		return nil
	}
	Mark(h, c, vary, mem)
	if c == Identity {
		return nil
	}
	return p.pool.Get(c)
}

var (
	varyName        = []byte("Vary")
	acceptEncoding  = []byte("Accept-Encoding")
	contentEncoding = []byte("Content-Encoding")
	tokens          = [nCodings][]byte{nil, []byte("gzip"), []byte("zstd"), []byte("br")}
)
