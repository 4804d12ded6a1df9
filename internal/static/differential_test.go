package static

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path"
	"strings"
	"testing"
	"time"
)

// The differential tests send the same requests to the planner, to its
// ServeHTTP adapter and to legacyHandler (http.ServeContent), and hold
// the planner to ServeContent's answers except where the package doc
// says it differs — and there, to what the doc says instead.

// diffFixture is fixture plus files for the cases only ranges and
// dates reach.
func diffFixture(t testing.TB) string {
	t.Helper()
	root := fixture(t)
	writeFiles(t, root, map[string]string{"big.bin": strings.Repeat("0123456789abcdef", 4500)}, fixtureTime)
	// Without a known modification time there is no Last-Modified and
	// dates in preconditions are ignored.
	writeFiles(t, root, map[string]string{"epoch.txt": "old"}, time.Unix(0, 0))
	return root
}

// differ holds the three sides of the comparison.
type differ struct {
	legacy *legacyHandler
	h      *Handler
	a      Answer
}

func newDiffer(t testing.TB, root string) *differ {
	t.Helper()
	r, err := os.OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(root, "", "/static", Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.Close()
		h.Close()
	})
	return &differ{legacy: &legacyHandler{root: r, index: "index.html", stripPrefix: "/static"}, h: h}
}

// legacyAnswer is what the old handler answered, as the engine called
// it: a target url.ParseRequestURI refuses never reached it (400).
func (d *differ) legacyAnswer(method, raw string, hdr http.Header) (*httptest.ResponseRecorder, bool) {
	u, err := url.ParseRequestURI(raw)
	if err != nil {
		return nil, false
	}
	rec := httptest.NewRecorder()
	d.legacy.ServeHTTP(rec, &http.Request{Method: method, URL: u, RequestURI: raw, Header: hdr})
	return rec, true
}

// check sends one request to all three and reports what disagrees.
// kv are header fields as name, value pairs.
func (d *differ) check(t *testing.T, method, raw string, kv ...string) {
	t.Helper()
	hdr := http.Header{}
	r := req{method: method, path: raw, header: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		hdr.Add(kv[i], kv[i+1])
		if _, ok := r.header[strings.ToLower(kv[i])]; !ok {
			r.header[strings.ToLower(kv[i])] = kv[i+1]
		}
	}
	d.h.Plan(r, &d.a)
	got := send(t, &d.a)
	checkHead(t, method, got)
	d.checkAdapter(t, method, raw, hdr, got)

	// Requests where the planner answers differently, by design. The
	// method is checked first: 405 whatever the path.
	t0 := resolvePath([]byte(raw), "/static", &d.a)
	if method != "GET" && method != "HEAD" {
		if got.status != 405 {
			t.Errorf("%s: got %d, want 405", method, got.status)
		}
		if _, ok := d.legacyAnswer(method, raw, hdr); !ok {
			return // the engine answered 400 before the old handler
		}
	} else if lower := strings.ToLower(raw); t0.status == 404 && (strings.Contains(lower, "%2f") || strings.Contains(lower, "%00")) {
		// Refused wherever they are, even where ".." would have
		// removed them.
		if got.status != 404 {
			t.Errorf("escaped slash or NUL: got %d, want 404", got.status)
		}
		return
	}
	if t0.status == 0 {
		// The prefix is stripped from the path the route matched (the
		// normalised one): compare with the old handler given that.
		norm := string(t0.full)
		if t0.slash && norm != "/" {
			norm += "/"
		}
		if u, err := url.ParseRequestURI(raw); err == nil && legacyName(u.Path) != legacyName(norm) {
			raw = (&url.URL{Path: norm}).EscapedPath()
		}
	}
	rec, ok := d.legacyAnswer(method, raw, hdr)
	if !ok {
		if got.status != 400 {
			t.Errorf("malformed target: got %d, want 400", got.status)
		}
		return
	}
	want := rec.Result()
	wantBody := rec.Body.String()
	switch {
	case want.StatusCode == 206 && strings.HasPrefix(want.Header.Get("Content-Type"), "multipart/byteranges"):
		// Several ranges: the whole file, 200.
		whole, _ := d.legacyAnswer("GET", raw, http.Header{})
		if got.status != 200 || (method == "GET" && got.body != whole.Body.String()) || got.header.Get("Content-Range") != "" {
			t.Errorf("several ranges: got %d (%d bytes, Content-Range %q), want 200 with the whole file", got.status, len(got.body), got.header.Get("Content-Range"))
		}
		return
	case want.StatusCode == 206 && want.Header.Get("Content-Length") == "0":
		// An empty range: unsatisfiable, or the whole of an empty file.
		size := want.Header.Get("Content-Range")[strings.LastIndexByte(want.Header.Get("Content-Range"), '/')+1:]
		if size == "0" && got.status != 200 || size != "0" && (got.status != 416 || got.header.Get("Content-Range") != "bytes */"+size) {
			t.Errorf("empty range of %s bytes: got %d %q, want 416 bytes */%s (200 for an empty file)", size, got.status, got.header.Get("Content-Range"), size)
		}
		return
	}
	if got.status != want.StatusCode {
		t.Fatalf("got %d, want %d (ServeContent; body %q)", got.status, want.StatusCode, wantBody)
	}
	for _, name := range []string{"Content-Type", "ETag", "Last-Modified", "Accept-Ranges", "Content-Range", "Allow", "X-Content-Type-Options"} {
		if g, w := got.header.Get(name), want.Header.Get(name); g != w {
			t.Errorf("%s: got %q, want %q", name, g, w)
		}
	}
	if w := want.Header.Get("Content-Length"); w != "" && got.header.Get("Content-Length") != w {
		t.Errorf("Content-Length: got %q, want %q", got.header.Get("Content-Length"), w)
	}
	if want.StatusCode == 301 {
		// Location is the normalised path, percent-encoded; the old one
		// was the raw path decoded, which for "//host/.." was
		// protocol-relative: a redirect to another site.
		loc := got.header.Get("Location")
		dec, err := url.PathUnescape(loc)
		wantLoc := strings.TrimSuffix(string(t0.full), "/") + "/"
		if err != nil || dec != wantLoc || strings.HasPrefix(loc, "//") {
			t.Errorf("Location: got %q (%q unescaped), want %q", loc, dec, wantLoc)
		}
		// The old one was left uncleaned when url.Parse refused it
		// (control bytes, "%"), and then did not match either.
		if old := want.Header.Get("Location"); old == strings.TrimSuffix(path.Clean(old), "/")+"/" && old != dec {
			t.Errorf("Location: got %q unescaped, want %q (ServeContent)", dec, old)
		}
		return
	}
	if method == "GET" && got.body != wantBody {
		t.Errorf("body: got %q, want %q", clip(got.body), clip(wantBody))
	}
}

// legacyName is the name the old handler looked up for a decoded path.
func legacyName(p string) string {
	return path.Clean("/" + strings.TrimPrefix(p, "/static"))
}

// checkAdapter checks ServeHTTP says what Plan said.
func (d *differ) checkAdapter(t *testing.T, method, raw string, hdr http.Header, plan result) {
	t.Helper()
	u, err := url.ParseRequestURI(raw)
	if err != nil {
		return
	}
	rec := httptest.NewRecorder()
	d.h.ServeHTTP(rec, &http.Request{Method: method, URL: u, RequestURI: raw, Header: hdr})
	if rec.Code != plan.status {
		t.Errorf("ServeHTTP: got %d, want %d (Plan)", rec.Code, plan.status)
	}
	for name := range plan.header {
		if g, w := rec.Header().Get(name), plan.header.Get(name); g != w {
			t.Errorf("ServeHTTP %s: got %q, want %q (Plan)", name, g, w)
		}
	}
	if rec.Body.String() != plan.body {
		t.Errorf("ServeHTTP body: got %q, want %q (Plan)", clip(rec.Body.String()), clip(plan.body))
	}
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// diffPaths are the request paths the differential test tries.
var diffPaths = []string{
	"/static/data.txt", "/static/", "/static/index.html", "/static/sub", "/static/sub/",
	"/static/noindex/", "/static/idxdir/", "/static/nope", "/static/link", "/static/inlink",
	"/static/../../etc/passwd", "/static/a%20b.txt", "/static/noext", "/static/blob.zzz-unknown",
	"/static/empty.txt", "/static/epoch.txt", "/static/deep/er/file.css", "/static/deep/er",
	"/static/data.txt/", "/static/sub%2Findex.html", "/static/%zz", "/static/big.bin",
	"/static/%64ata.txt", "/static//sub/./index.html", "/static/x/../data.txt",
	"/static/../static/data.txt", "/static", "/static/sub/.",
}

// diffHeaders are the header sets tried on each path; {etag} and {lm}
// stand for the file's ETag and Last-Modified, {lm-1h} and {lm+1h} for
// an hour before and after.
var diffHeaders = [][]string{
	{},
	{"Range", "bytes=0-0"}, {"Range", "bytes=2-5"}, {"Range", "bytes=5-"}, {"Range", "bytes=-4"},
	{"Range", "bytes=-0"}, {"Range", "bytes=100-"}, {"Range", "bytes=0-1,3-4"}, {"Range", "bytes=0-1,100-200"},
	{"Range", "bytes=x"}, {"Range", "bytes=3-1"}, {"Range", "bytes="}, {"Range", "bytes=0-0,-1"}, {"Range", "bytes=0-,-0"}, {"Range", "bytes=100-,-0"},
	{"Range", "bytes=+1-2"}, {"Range", "Bytes=0-1"}, {"Range", "bytes=0-99999999999999999999"},
	{"Range", "bytes=1-2"}, {"Range", "bytes=70000-"}, {"Range", "bytes=-100000"},
	{"If-None-Match", "{etag}"}, {"If-None-Match", "W/{etag}"}, {"If-None-Match", "*"},
	{"If-None-Match", `"x"`}, {"If-None-Match", `"x", {etag}`}, {"If-None-Match", `x, {etag}`},
	{"If-Modified-Since", "{lm}"}, {"If-Modified-Since", "{lm-1h}"}, {"If-Modified-Since", "{lm+1h}"},
	{"If-Modified-Since", "garbage"},
	{"If-Match", "{etag}"}, {"If-Match", `"x"`}, {"If-Match", "*"}, {"If-Match", "W/{etag}"},
	{"If-Unmodified-Since", "{lm}"}, {"If-Unmodified-Since", "{lm-1h}"},
	{"Range", "bytes=1-3", "If-Range", "{etag}"}, {"Range", "bytes=1-3", "If-Range", `"x"`},
	{"Range", "bytes=1-3", "If-Range", "{lm}"}, {"Range", "bytes=1-3", "If-Range", "{lm+1h}"},
	{"Range", "bytes=1-3", "If-Range", "W/{etag}"}, {"Range", "bytes=1-3", "If-Range", "junk"},
	{"If-None-Match", `"x"`, "If-Modified-Since", "{lm}"}, {"If-Match", "{etag}", "If-None-Match", "{etag}"},
	{"If-Match", `"x"`, "Range", "bytes=0-1"}, {"If-Match", "{etag}", "If-Unmodified-Since", "{lm-1h}"},
	{"If-None-Match", "{etag}", "Range", "bytes=0-1"},
}

func TestDifferential(t *testing.T) {
	d := newDiffer(t, diffFixture(t))
	for _, method := range []string{"POST", "DELETE", "OPTIONS", "PUT"} {
		for _, p := range diffPaths {
			t.Run(method+" "+p, func(t *testing.T) { d.check(t, method, p) })
		}
	}
	for _, p := range diffPaths {
		// The validators of what p leads to, from a plain GET.
		etag, lm := `"none"`, fixtureTime
		if rec, ok := d.legacyAnswer("GET", p, http.Header{}); ok {
			if v := rec.Header().Get("ETag"); v != "" {
				etag = v
			}
			if v, err := http.ParseTime(rec.Header().Get("Last-Modified")); err == nil {
				lm = v
			}
		}
		fill := strings.NewReplacer("{etag}", etag, "{lm}", lm.Format(http.TimeFormat),
			"{lm-1h}", lm.Add(-time.Hour).Format(http.TimeFormat), "{lm+1h}", lm.Add(time.Hour).Format(http.TimeFormat))
		for _, method := range []string{"GET", "HEAD"} {
			for _, hs := range diffHeaders {
				kv := make([]string, len(hs))
				for i, s := range hs {
					kv[i] = fill.Replace(s)
				}
				t.Run(method+" "+p+" "+strings.Join(kv, ": "), func(t *testing.T) { d.check(t, method, p, kv...) })
			}
		}
	}
}

// FuzzDifferential runs the differential check on fuzzed paths and
// header values. `go test` runs the seeds; `go test -fuzz
// FuzzDifferential -fuzztime 30s ./internal/static` explores.
func FuzzDifferential(f *testing.F) {
	etag := etagOf(fixtureTime, 10)
	lm := fixtureTime.Format(http.TimeFormat)
	f.Add("/static/data.txt", "bytes=1-2", "", "", "", "")
	f.Add("/static/data.txt", "bytes=-5", etag, "", "", "")
	f.Add("/static/data.txt", "", "", lm, "", "")
	f.Add("/static/big.bin", "bytes=1-2,5-", "", "", "", etag)
	f.Add("/static/sub", "", "", "", "", "")
	f.Add("/static/a%20b.txt", "bytes=0-", `W/"x", `+etag, "", `"y"`, lm)
	f.Add("/static/%2e%2e/static/data.txt", "bytes= 2 - ", "*", "", etag, "")
	root := diffFixture(f)
	d := newDiffer(f, root)
	f.Fuzz(func(t *testing.T, p, rng, inm, ims, im, ifRange string) {
		if !validTarget(p) {
			t.Skip()
		}
		var kv []string
		for _, f := range [][2]string{{"Range", rng}, {"If-None-Match", inm}, {"If-Modified-Since", ims}, {"If-Match", im}, {"If-Range", ifRange}} {
			if f[1] == "" {
				continue
			}
			if !validValue(f[1]) {
				t.Skip()
			}
			kv = append(kv, f[0], f[1])
		}
		d.check(t, "GET", p, kv...)
	})
}

// validTarget reports whether an engine would pass p on as a path: it
// starts with "/", and holds visible ASCII other than "?" and "#".
func validTarget(p string) bool {
	if !strings.HasPrefix(p, "/") {
		return false
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; c <= ' ' || c >= 0x7f || c == '?' || c == '#' {
			return false
		}
	}
	return true
}

// validValue reports whether an engine would pass v on as a field value.
func validValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return strings.TrimSpace(v) == v
}
