package compress

import (
	"strings"
	"testing"

	"github.com/helios-lb/helios/internal/httpmsg"
)

// heap is an Allocator that makes what it lends.
type heap struct{}

func (heap) Alloc(n int) []byte { return make([]byte, n) }

// head returns a header of name/value pairs.
func head(pairs ...string) *httpmsg.Header {
	if len(pairs) == 0 {
		return &httpmsg.Header{}
	}
	return httpmsg.HeaderOf(pairs...)
}

func request(method string, proto httpmsg.Proto, ae ...string) *httpmsg.Request {
	r := &httpmsg.Request{Method: []byte(method), Proto: proto}
	for _, v := range ae {
		r.Header.Add([]byte("Accept-Encoding"), []byte(v))
	}
	return r
}

func TestChoose(t *testing.T) {
	p, err := NewPolicy(Options{Codings: []Coding{Zstd, Brotli, Gzip}, Types: []string{"text/*", "Application/JSON"}, MinBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	json := []string{"Content-Type", "application/json; charset=utf-8"}
	with := func(extra ...string) []string { return append(append([]string(nil), json...), extra...) }
	get := request("GET", httpmsg.HTTP11, "gzip, br")
	tests := []struct {
		name     string
		req      *httpmsg.Request
		status   int
		fields   []string
		length   int64
		want     Coding
		wantVary bool
	}{
		{name: "json", req: get, status: 200, fields: json, length: 5000, want: Brotli, wantVary: true},
		{name: "unknown length", req: get, status: 200, fields: json, length: -1, want: Brotli, wantVary: true},
		{name: "wildcard type, any case", req: get, status: 404, fields: []string{"content-type", "TEXT/HTML"}, length: 500, want: Brotli, wantVary: true},
		{name: "h2 client", req: request("GET", httpmsg.HTTP2, "gzip"), status: 200, fields: json, length: 500, want: Gzip, wantVary: true},
		{name: "no accept-encoding", req: request("GET", httpmsg.HTTP11), status: 200, fields: json, length: 500, want: Identity, wantVary: true},
		{name: "nothing acceptable", req: request("GET", httpmsg.HTTP11, "deflate, gzip;q=0"), status: 200, fields: json, length: 500, want: Identity, wantVary: true},
		{name: "HEAD", req: request("HEAD", httpmsg.HTTP11, "gzip"), status: 200, fields: json, length: 500, want: Identity, wantVary: true},
		{name: "HTTP/1.0", req: request("GET", httpmsg.HTTP10, "gzip"), status: 200, fields: json, length: 500, want: Identity, wantVary: true},
		{name: "type not listed", req: get, status: 200, fields: []string{"Content-Type", "image/png"}, length: 5000},
		{name: "type prefix is not a type", req: get, status: 200, fields: []string{"Content-Type", "text/"}, length: 5000},
		{name: "no type", req: get, status: 200, length: 5000},
		{name: "small", req: get, status: 200, fields: json, length: 99},
		{name: "empty", req: get, status: 200, fields: json, length: 0},
		{name: "encoded already", req: get, status: 200, fields: with("Content-Encoding", "gzip"), length: 5000},
		{name: "identity is not an encoding", req: get, status: 200, fields: with("Content-Encoding", "identity"), length: 5000, want: Brotli, wantVary: true},
		{name: "no-transform", req: get, status: 200, fields: with("Cache-Control", "public, no-transform"), length: 5000},
		{name: "other cache-control", req: get, status: 200, fields: with("Cache-Control", "max-age=60"), length: 5000, want: Brotli, wantVary: true},
		{name: "partial", req: get, status: 206, fields: with("Content-Range", "bytes 0-99/5000"), length: 100},
		{name: "content-range on 200", req: get, status: 200, fields: with("Content-Range", "bytes 0-4999/5000"), length: 5000},
		{name: "204", req: get, status: 204, fields: json, length: -1},
		{name: "304", req: get, status: 304, fields: json, length: -1},
		{name: "101", req: get, status: 101, fields: json, length: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, vary := p.Choose(tt.req, tt.status, head(tt.fields...), tt.length)
			if c != tt.want || vary != tt.wantVary {
				t.Errorf("got (%v, vary %v), want (%v, vary %v)", c, vary, tt.want, tt.wantVary)
			}
		})
	}
}

// emit renders the fields of h that are not dropped, one per line.
func emit(h *httpmsg.Header) string {
	var b strings.Builder
	for _, f := range h.Fields {
		if !f.Drop {
			b.WriteString(string(f.Name) + ": " + string(f.Value) + "\n")
		}
	}
	return b.String()
}

func TestMark(t *testing.T) {
	tests := []struct {
		name   string
		fields []string
		c      Coding
		vary   bool
		want   string
	}{
		{
			name:   "compressed",
			fields: []string{"Content-Type", "text/html", "Content-Length", "5000", "ETag", `"abc"`},
			c:      Gzip, vary: true,
			want: "Content-Type: text/html\nETag: W/\"abc\"\nVary: Accept-Encoding\nContent-Encoding: gzip\n",
		},
		{
			name:   "weak etag stays, vary joins another",
			fields: []string{"ETag", `W/"abc"`, "Vary", "Cookie", "Content-Encoding", "identity"},
			c:      Zstd, vary: true,
			want: "ETag: W/\"abc\"\nVary: Cookie\nVary: Accept-Encoding\nContent-Encoding: zstd\n",
		},
		{
			name:   "vary there already",
			fields: []string{"vary", "Origin, accept-encoding", "Content-Length", "5000"},
			c:      Brotli, vary: true,
			want: "vary: Origin, accept-encoding\nContent-Encoding: br\n",
		},
		{
			name:   "vary star",
			fields: []string{"Vary", "*"},
			c:      Identity, vary: true,
			want: "Vary: *\n",
		},
		{
			name:   "not compressed, varies",
			fields: []string{"Content-Length", "5000", "ETag", `"abc"`},
			c:      Identity, vary: true,
			want: "Content-Length: 5000\nETag: \"abc\"\nVary: Accept-Encoding\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := head(tt.fields...)
			Mark(h, tt.c, tt.vary, heap{})
			if got := emit(h); got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// TestApply: an answer compressed gets an encoder from the policy's pool
// and its head marked; one that is not gets none, and nothing is
// allocated deciding so.
func TestApply(t *testing.T) {
	p, err := NewPolicy(Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := head("Content-Type", "application/json", "Content-Length", "4096")
	e := p.Apply(request("GET", httpmsg.HTTP11, "gzip"), 200, h, 4096, heap{})
	if e == nil || e.Coding() != Gzip {
		t.Fatalf("got encoder %v, want a gzip one", e)
	}
	if got := p.Pool().InUse(); got != 1 {
		t.Errorf("got %d encoders in use, want 1", got)
	}
	e.Release()
	if v, _ := h.Get("content-encoding"); string(v) != "gzip" {
		t.Errorf("Content-Encoding: got %q, want gzip", v)
	}

	small := head("Content-Type", "application/json")
	img := head("Content-Type", "image/png")
	req := request("GET", httpmsg.HTTP11, "gzip, br, zstd")
	mem := heap{}
	allocs := testing.AllocsPerRun(100, func() {
		if p.Apply(req, 200, small, 10, mem) != nil || p.Apply(req, 200, img, 1<<20, mem) != nil {
			t.Fatal("got an encoder, want none")
		}
	})
	if allocs != 0 {
		t.Errorf("got %v allocations deciding not to compress, want 0", allocs)
	}
}

func TestNewPolicyRefuses(t *testing.T) {
	for _, o := range []Options{
		{Codings: []Coding{Gzip, Gzip}},
		{Codings: []Coding{Identity}},
		{Types: []string{"text"}},
		{Types: []string{"*/*"}},
		{Types: []string{"text/html; charset=utf-8"}},
		{GzipLevel: 10},
	} {
		if _, err := NewPolicy(o); err == nil {
			t.Errorf("%+v: got no error, want one", o)
		}
	}
}
