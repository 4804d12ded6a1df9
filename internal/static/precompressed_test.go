package static

import (
	"net/http"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/compress"
)

// siblingTime is when the siblings were written: after their originals,
// so that their validators differ.
var siblingTime = fixtureTime.Add(time.Hour)

// precompressedFixture is fixture with siblings for app.js (all three
// codings) and for the root index (gzip only), and a sibling named like
// a file that is a directory.
func precompressedFixture(t *testing.T) string {
	root := fixture(t)
	writeFiles(t, root, map[string]string{
		"app.js":        "console.log('original')",
		"index.html.gz": "GZ-INDEX",
		"dir.css":       "d{}",
		"dir.css.gz/x":  "a directory named like a sibling",
	}, fixtureTime)
	writeFiles(t, root, map[string]string{
		"app.js.gz":  "GZ",
		"app.js.zst": "ZSTD!",
		"app.js.br":  "BROTLI",
	}, siblingTime)
	return root
}

func TestPrecompressedSiblings(t *testing.T) {
	h := newHandler(t, precompressedFixture(t), "", "", Options{Precompressed: []compress.Coding{compress.Brotli, compress.Zstd, compress.Gzip}})
	js := "text/javascript; charset=utf-8"
	type want = map[string]string
	tests := []planCase{
		{"brotli preferred", get("/app.js", "Accept-Encoding", "gzip, deflate, br, zstd"), 200, "BROTLI",
			want{"Content-Encoding": "br", "Content-Type": js, "Content-Length": "6", "ETag": etagOf(siblingTime, 6), "Vary": "Accept-Encoding"}},
		{"q-values decide", get("/app.js", "Accept-Encoding", "br;q=0.5, gzip"), 200, "GZ",
			want{"Content-Encoding": "gzip", "Content-Type": js, "Content-Length": "2", "ETag": etagOf(siblingTime, 2)}},
		{"zstd", get("/app.js", "Accept-Encoding", "zstd"), 200, "ZSTD!", want{"Content-Encoding": "zstd", "Content-Length": "5"}},
		{"none accepted", get("/app.js"), 200, "console.log('original')",
			want{"Content-Encoding": "", "Content-Type": js, "ETag": etagOf(fixtureTime, 23), "Vary": "Accept-Encoding"}},
		{"refused by q=0", get("/app.js", "Accept-Encoding", "br;q=0, zstd;q=0, gzip;q=0"), 200, "console.log('original')", want{"Content-Encoding": ""}},
		{"no sibling: the next coding accepted", get("/", "Accept-Encoding", "br, gzip"), 200, "GZ-INDEX",
			want{"Content-Encoding": "gzip", "Content-Type": "text/html; charset=utf-8", "Content-Length": "8"}},
		{"no sibling at all", get("/data.txt", "Accept-Encoding", "br, gzip"), 200, "0123456789",
			want{"Content-Encoding": "", "Vary": "Accept-Encoding"}},
		{"a directory is no sibling", get("/dir.css", "Accept-Encoding", "gzip"), 200, "d{}", want{"Content-Encoding": ""}},
		{"HEAD", req{method: "HEAD", path: "/app.js", header: map[string]string{"accept-encoding": "br"}}, 200, "",
			want{"Content-Encoding": "br", "Content-Length": "6"}},
		{"range of the sibling", get("/app.js", "Accept-Encoding", "br", "Range", "bytes=1-2"), 206, "RO",
			want{"Content-Encoding": "br", "Content-Range": "bytes 1-2/6", "Vary": "Accept-Encoding"}},
		{"conditions hold for the sibling", get("/app.js", "Accept-Encoding", "br", "If-None-Match", etagOf(siblingTime, 6)), 304, "",
			want{"ETag": etagOf(siblingTime, 6), "Vary": "Accept-Encoding", "Content-Encoding": ""}},
		{"the original's validator is not the sibling's", get("/app.js", "Accept-Encoding", "br", "If-None-Match", etagOf(fixtureTime, 23)), 200, "BROTLI", nil},
		{"missing original: no sibling looked for", get("/gone.js", "Accept-Encoding", "gzip"), 404, "404 Not Found\n", want{"Vary": ""}},
		{"a sibling asked for by name is a file like any", get("/app.js.gz", "Accept-Encoding", "gzip"), 200, "GZ",
			want{"Content-Encoding": "", "Content-Type": "application/gzip"}},
	}
	// Twice: from the disk, then from the cache.
	checkPlans(t, h, tests)
	checkPlans(t, h, tests)
}

// TestPrecompressedNotConfigured: a route without precompressed codings
// never sends a sibling and never adds Vary.
func TestPrecompressedNotConfigured(t *testing.T) {
	h := newHandler(t, precompressedFixture(t), "", "", Options{})
	var a Answer
	h.Plan(get("/app.js", "Accept-Encoding", "br, gzip"), &a)
	res := send(t, &a)
	if res.body != "console.log('original')" || res.header.Get("Content-Encoding") != "" || res.header.Get("Vary") != "" {
		t.Errorf("got %q with head\n%s\nwant the original without Content-Encoding or Vary", res.body, res.head)
	}
}

// TestPrecompressedPlanAllocatesNothing: a warm cache answers with a
// sibling (or finds it missing) without allocating.
func TestPrecompressedPlanAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool and maps allocate")
	}
	h := newHandler(t, precompressedFixture(t), "", "", Options{Precompressed: []compress.Coding{compress.Brotli, compress.Gzip}, CacheValid: time.Hour, Shards: 1})
	for _, r := range []*rawReq{rawGet("GET", "/app.js", "Accept-Encoding", "br"), rawGet("GET", "/data.txt", "Accept-Encoding", "br, gzip")} {
		var a Answer
		plan := func() {
			h.Plan(r, &a)
			if a.Status != http.StatusOK {
				t.Fatalf("got %d, want 200", a.Status)
			}
			a.File.Release()
		}
		plan()
		if n := testing.AllocsPerRun(100, plan); n != 0 {
			t.Errorf("%s: got %v allocations, want 0", r.path, n)
		}
	}
}
