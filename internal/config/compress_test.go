package config

import (
	"slices"
	"strings"
	"testing"

	"github.com/helios-lb/helios/internal/compress"
)

// compressBase is a config whose route "app" (line 4) gets the compress
// block (or static keys) each case adds.
const compressBase = `listeners: [{name: web, address: ":8080"}]
upstreams: [{name: app, backends: [{address: "127.0.0.1:9001"}]}]
routes:
  - name: app
`

// TestCompressProblems checks the message, file and line of each
// problem a compress or precompressed key can have.
func TestCompressProblems(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{
			name: "on a fixed answer",
			yaml: `    respond: {body: hi}
    compress: {}
`,
			want: `t.yaml:6: routes[0].compress: set on a route with a fixed answer (fixed answers are sent as they are; compress the routes with an upstream or static files)`,
		},
		{
			name: "unknown coding",
			yaml: `    upstream: app
    compress:
      encodings: [gzip, deflate]
`,
			want: `t.yaml:7: routes[0].compress.encodings[1]: "deflate" is not a coding Helios has (gzip, zstd or br)`,
		},
		{
			name: "coding twice",
			yaml: `    upstream: app
    compress:
      encodings: [br, zstd, brotli]
`,
			want: `t.yaml:7: routes[0].compress.encodings[2]: "brotli" is already listed at routes[0].compress.encodings[0] (list each coding once)`,
		},
		{
			name: "no codings",
			yaml: `    upstream: app
    compress: {encodings: []}
`,
			want: `t.yaml:6: routes[0].compress.encodings: empty (at least one of gzip, zstd or br)`,
		},
		{
			name: "no types",
			yaml: `    upstream: app
    compress: {types: []}
`,
			want: `t.yaml:6: routes[0].compress.types: empty (at least one media type, such as text/html or text/*)`,
		},
		{
			name: "type with parameters",
			yaml: `    upstream: app
    compress:
      types:
        - text/html
        - "text/html; charset=utf-8"
`,
			want: `t.yaml:9: routes[0].compress.types[1]: "text/html; charset=utf-8" is not a media type to compress (type/subtype or type/*, without parameters, such as application/json)`,
		},
		{
			name: "every type",
			yaml: `    upstream: app
    compress: {types: ["*/*"]}
`,
			want: `t.yaml:6: routes[0].compress.types[0]: "*/*" is not a media type to compress (type/subtype or type/*, without parameters, such as application/json)`,
		},
		{
			name: "negative min_bytes",
			yaml: `    upstream: app
    compress: {min_bytes: -1}
`,
			want: `t.yaml:6: routes[0].compress.min_bytes: -1 is out of range (0 to compress every size, or more)`,
		},
		{
			name: "gzip level",
			yaml: `    upstream: app
    compress:
      level: 10
`,
			want: `t.yaml:7: routes[0].compress.level: 10 is out of range (1-9)`,
		},
		{
			name: "gzip level zero",
			yaml: `    upstream: app
    compress:
      level: 0
`,
			want: `t.yaml:7: routes[0].compress.level: 0 is out of range (1-9)`,
		},
		{
			name: "zstd level",
			yaml: `    upstream: app
    compress: {zstd_level: 23}
`,
			want: `t.yaml:6: routes[0].compress.zstd_level: 23 is out of range (1-22)`,
		},
		{
			name: "brotli level",
			yaml: `    upstream: app
    compress: {brotli_level: 0}
`,
			want: `t.yaml:6: routes[0].compress.brotli_level: 0 is out of range (1-11)`,
		},
		{
			name: "unknown key",
			yaml: `    upstream: app
    compress: {gzip_level: 5}
`,
			want: `t.yaml:6: routes[0].compress.gzip_level: unknown key`,
		},
		{
			name: "precompressed coding",
			yaml: `    static:
      root: $DIR
      precompressed: [br, xz]
`,
			want: `t.yaml:7: routes[0].static.precompressed[1]: "xz" is not a coding Helios has (gzip, zstd or br)`,
		},
		{
			name: "precompressed twice",
			yaml: `    static:
      root: $DIR
      precompressed: [gzip, gzip]
`,
			want: `t.yaml:7: routes[0].static.precompressed[1]: "gzip" is already listed at routes[0].static.precompressed[0] (list each coding once)`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := testEnv(t)
			_, ps := parseProblems(t, compressBase+strings.ReplaceAll(tt.yaml, "$DIR", env["DIR"]), env)
			if len(ps) != 1 {
				t.Fatalf("got %d problems:\n%v\nwant one: %s", len(ps), ps, tt.want)
			}
			if got := ps[0].String(); !strings.HasPrefix(got, tt.want) {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// TestCompressDefaults: compress: {} takes every default, and an
// explicit min_bytes: 0 stays 0 (every size compressed).
func TestCompressDefaults(t *testing.T) {
	env := testEnv(t)
	cfg := mustParse(t, compressBase+`    upstream: app
    compress: {}
  - name: files
    static: {root: `+env["DIR"]+`, precompressed: [br, gzip]}
    compress: {min_bytes: 0, encodings: [gzip]}
`, env)
	c := cfg.Routes[0].Compress
	if !slices.Equal(c.Encodings, []string{"zstd", "gzip"}) || !slices.Equal(c.Types, compress.DefaultTypes()) ||
		c.MinBytes != 1024 || c.Level != 5 || c.ZstdLevel != 3 || c.BrotliLevel != 4 {
		t.Errorf("got %+v, want the defaults", *c)
	}
	c = cfg.Routes[1].Compress
	if c.MinBytes != 0 || !slices.Equal(c.Encodings, []string{"gzip"}) {
		t.Errorf("got min_bytes %d and encodings %v, want 0 and [gzip]", c.MinBytes, c.Encodings)
	}
	if got := Codings(cfg.Routes[1].Static.Precompressed); !slices.Equal(got, []compress.Coding{compress.Brotli, compress.Gzip}) {
		t.Errorf("got precompressed %v, want [br gzip]", got)
	}
	if cfg.Routes[0].Static != nil || len(cfg.Routes[1].Static.Precompressed) != 2 {
		t.Errorf("got static %+v", cfg.Routes[1].Static)
	}
}
