package static

import (
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
)

// rawReq is a Request over byte slices that allocates nothing, as an
// engine's is.
type rawReq struct {
	method, path []byte
	fields       [][2][]byte // lower-case name, value
}

func (r *rawReq) Method() []byte { return r.method }
func (r *rawReq) Path() []byte   { return r.path }
func (r *rawReq) Header(name string) []byte {
	for _, f := range r.fields {
		if string(f[0]) == name {
			return f[1]
		}
	}
	return nil
}

func rawGet(method, path string, kv ...string) *rawReq {
	r := &rawReq{method: []byte(method), path: []byte(path)}
	for i := 0; i+1 < len(kv); i += 2 {
		r.fields = append(r.fields, [2][]byte{[]byte(strings.ToLower(kv[i])), []byte(kv[i+1])})
	}
	return r
}

// TestPlanAllocs checks that answers from a warm cache allocate nothing.
func TestPlanAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	h := newHandler(t, fixture(t), "", "/static", Options{Shards: 1})
	etag := etagOf(fixtureTime, 10)
	lm := fixtureTime.Format(http.TimeFormat)
	tests := []struct {
		name   string
		r      *rawReq
		status int
	}{
		{"GET", rawGet("GET", "/static/data.txt"), 200},
		{"HEAD", rawGet("HEAD", "/static/data.txt"), 200},
		{"index", rawGet("GET", "/static/sub/"), 200},
		{"escaped", rawGet("GET", "/static/a%20b.txt"), 200},
		{"range", rawGet("GET", "/static/data.txt", "Range", "bytes=2-"), 206},
		{"If-None-Match", rawGet("GET", "/static/data.txt", "If-None-Match", etag), 304},
		{"If-Modified-Since", rawGet("GET", "/static/data.txt", "If-Modified-Since", lm), 304},
		{"If-Range", rawGet("GET", "/static/data.txt", "Range", "bytes=2-", "If-Range", lm), 206},
		{"If-Match", rawGet("GET", "/static/data.txt", "If-Match", `"x"`), 412},
		{"unsatisfiable", rawGet("GET", "/static/data.txt", "Range", "bytes=20-"), 416},
		{"missing", rawGet("GET", "/static/nope"), 404},
		{"redirect", rawGet("GET", "/static/sub"), 301},
		{"method", rawGet("POST", "/static/data.txt"), 405},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var a Answer
			run := func() {
				h.Plan(tt.r, &a)
				if a.File != nil {
					a.File.Release()
				}
			}
			run() // warm the cache and a's buffers
			if a.Status != tt.status {
				t.Fatalf("got %d, want %d", a.Status, tt.status)
			}
			if n := testing.AllocsPerRun(100, run); n != 0 {
				t.Errorf("got %v allocations per Plan, want 0", n)
			}
		})
	}
}

// benchHandler is a handler on a directory holding a 4 KiB file.
func benchHandler(b *testing.B, shards int) *Handler {
	dir := b.TempDir()
	writeFiles(b, dir, map[string]string{"file.html": strings.Repeat("x", 4096)}, fixtureTime)
	h, err := New(dir, "", "/static", Options{Shards: shards})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close() })
	return h
}

// BenchmarkPlanCached plans a GET of a 4 KiB file from a warm cache.
func BenchmarkPlanCached(b *testing.B) {
	h := benchHandler(b, 1)
	r := rawGet("GET", "/static/file.html", "Accept", "*/*", "User-Agent", "wrk")
	var a Answer
	b.ReportAllocs()
	for b.Loop() {
		h.Plan(r, &a)
		a.File.Release()
	}
	if a.Status != 200 {
		b.Fatalf("got %d, want 200", a.Status)
	}
}

// BenchmarkPlanMiss plans the same GET with the cache off: open, fstat,
// close each time.
func BenchmarkPlanMiss(b *testing.B) {
	dir := b.TempDir()
	writeFiles(b, dir, map[string]string{"file.html": strings.Repeat("x", 4096)}, fixtureTime)
	h, err := New(dir, "", "/static", Options{CacheEntries: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	r := rawGet("GET", "/static/file.html")
	var a Answer
	b.ReportAllocs()
	for b.Loop() {
		h.Plan(r, &a)
		a.File.Release()
	}
}

// BenchmarkPlanParallel plans from every processor at once, all for
// the same file: through one shared shard, and through a shard each (as
// event loops use Shard).
func BenchmarkPlanParallel(b *testing.B) {
	for _, bc := range []struct {
		name   string
		shards int
	}{{"shared", 1}, {"sharded", runtime.GOMAXPROCS(0)}} {
		b.Run(bc.name, func(b *testing.B) {
			h := benchHandler(b, bc.shards)
			var next atomic.Int32
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				p := h.Shard(int(next.Add(1)))
				r := rawGet("GET", "/static/file.html")
				var a Answer
				for pb.Next() {
					p.Plan(r, &a)
					a.File.Release()
				}
			})
		})
	}
}
