package static

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fixtureTime is when every fixture file was last modified.
var fixtureTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fixture fills a directory with the files the plan tests use.
func fixture(t testing.TB) string {
	t.Helper()
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"index.html":            "<h1>home</h1>",
		"data.txt":              "0123456789",
		"a b.txt":               "spaced",
		"sub/index.html":        "sub home",
		"noindex/other.txt":     "other",
		"idxdir/index.html/x":   "a directory named like the index",
		"noext":                 "<html><body>sniffed</body></html>",
		"blob.zzz-unknown":      "\x00\x01\x02binary",
		"empty.txt":             "",
		"deep/er/file.css":      "p{}",
		"sub/.hidden/index.txt": "dot directory",
	}, fixtureTime)
	outside := t.TempDir()
	writeFiles(t, outside, map[string]string{"secret": "secret"}, fixtureTime)
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("data.txt", filepath.Join(root, "inlink")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../..", filepath.Join(root, "up")); err != nil {
		t.Fatal(err)
	}
	return root
}

func etagOf(mtime time.Time, size int64) string {
	return fmt.Sprintf(`"%x-%x"`, mtime.Unix(), size)
}

func TestPlan(t *testing.T) {
	h := newHandler(t, fixture(t), "", "/static", Options{})
	etag := etagOf(fixtureTime, 10)
	lm := fixtureTime.Format(http.TimeFormat)
	text := "text/plain; charset=utf-8"
	type want = map[string]string
	tests := []planCase{
		{"file", get("/static/data.txt"), 200, "0123456789",
			want{"Content-Type": text, "Content-Length": "10", "ETag": etag, "Last-Modified": lm, "Accept-Ranges": "bytes", "Content-Range": ""}},
		{"HEAD has the head without the body", req{method: "HEAD", path: "/static/data.txt"}, 200, "",
			want{"Content-Type": text, "Content-Length": "10", "ETag": etag}},
		{"POST", req{method: "POST", path: "/static/data.txt"}, 405, "405 Method Not Allowed\n",
			want{"Allow": "GET, HEAD", "Content-Type": text, "Content-Length": "23", "ETag": ""}},
		{"methods are case-sensitive", req{method: "get", path: "/static/data.txt"}, 405, "405 Method Not Allowed\n", want{"Allow": "GET, HEAD"}},
		{"index", get("/static/"), 200, "<h1>home</h1>", want{"Content-Type": "text/html; charset=utf-8", "Content-Length": "13"}},
		{"directory without slash", get("/static/sub"), 301, `<a href="/static/sub/">Moved Permanently</a>.` + "\n\n",
			want{"Location": "/static/sub/", "Content-Type": "text/html; charset=utf-8", "Content-Length": "47"}},
		{"HEAD of a directory without slash", req{method: "HEAD", path: "/static/sub"}, 301, "", want{"Location": "/static/sub/", "Content-Length": "47"}},
		{"root without slash", get("/static"), 301, `<a href="/static/">Moved Permanently</a>.` + "\n\n", want{"Location": "/static/"}},
		{"redirect to the normalised path", get("/static//deep/./er"), 301, `<a href="/static/deep/er/">Moved Permanently</a>.` + "\n\n", want{"Location": "/static/deep/er/"}},
		{"subdirectory index", get("/static/sub/"), 200, "sub home", want{"Content-Length": "8"}},
		{"directory without index", get("/static/noindex/"), 404, "404 Not Found\n", want{"Content-Type": text, "X-Content-Type-Options": "nosniff"}},
		{"index that is a directory", get("/static/idxdir/"), 404, "404 Not Found\n", nil},
		{"missing", get("/static/nope"), 404, "404 Not Found\n", want{"Content-Length": "14", "ETag": ""}},
		{"HEAD of a missing file", req{method: "HEAD", path: "/static/nope"}, 404, "", want{"Content-Length": "14"}},
		{"below a file", get("/static/data.txt/x"), 404, "404 Not Found\n", nil},
		{"file with a trailing slash", get("/static/data.txt/"), 200, "0123456789", nil},
		{"symlink out of the root", get("/static/link"), 404, "404 Not Found\n", nil},
		{"symlink up and out", get("/static/up/etc/passwd"), 404, "404 Not Found\n", nil},
		{"symlink inside the root", get("/static/inlink"), 200, "0123456789", want{"ETag": etag}},
		{"dot segments stay inside", get("/static/../../../../etc/passwd"), 404, "404 Not Found\n", nil},
		{"hidden directory", get("/static/sub/.hidden/index.txt"), 200, "dot directory", nil},
		{"escaped name", get("/static/a%20b.txt"), 200, "spaced", nil},
		{"escaped slash", get("/static/sub%2Findex.html"), 404, "404 Not Found\n", nil},
		{"escaped NUL", get("/static/data.txt%00"), 404, "404 Not Found\n", nil},
		{"malformed escape", get("/static/%zz"), 400, "400 Bad Request\n", nil},
		{"extension type", get("/static/deep/er/file.css"), 200, "p{}", want{"Content-Type": "text/css; charset=utf-8"}},
		{"sniffed type", get("/static/noext"), 200, "<html><body>sniffed</body></html>", want{"Content-Type": "text/html; charset=utf-8"}},
		{"sniffed binary", get("/static/blob.zzz-unknown"), 200, "\x00\x01\x02binary", want{"Content-Type": "application/octet-stream"}},
		{"empty file", get("/static/empty.txt"), 200, "", want{"Content-Length": "0", "ETag": etagOf(fixtureTime, 0)}},

		{"range", get("/static/data.txt", "Range", "bytes=2-4"), 206, "234",
			want{"Content-Range": "bytes 2-4/10", "Content-Length": "3", "Content-Type": text, "ETag": etag, "Accept-Ranges": "bytes"}},
		{"HEAD of a range", req{method: "HEAD", path: "/static/data.txt", header: map[string]string{"range": "bytes=2-4"}}, 206, "",
			want{"Content-Range": "bytes 2-4/10", "Content-Length": "3"}},
		{"open-ended range", get("/static/data.txt", "Range", "bytes=7-"), 206, "789", want{"Content-Range": "bytes 7-9/10"}},
		{"suffix range", get("/static/data.txt", "Range", "bytes=-3"), 206, "789", want{"Content-Range": "bytes 7-9/10"}},
		{"suffix longer than the file", get("/static/data.txt", "Range", "bytes=-20"), 206, "0123456789", want{"Content-Range": "bytes 0-9/10"}},
		{"range past the end", get("/static/data.txt", "Range", "bytes=5-100"), 206, "56789", want{"Content-Range": "bytes 5-9/10"}},
		{"range with spaces", get("/static/data.txt", "Range", "bytes= 1 - 2 "), 206, "12", nil},
		{"one of two ranges overlaps", get("/static/data.txt", "Range", "bytes=20-30, 1-1"), 206, "1", want{"Content-Range": "bytes 1-1/10"}},
		{"range not overlapping", get("/static/data.txt", "Range", "bytes=10-"), 416, "invalid range: failed to overlap\n",
			want{"Content-Range": "bytes */10", "Content-Type": text, "ETag": "", "Last-Modified": "", "Accept-Ranges": ""}},
		{"empty suffix range", get("/static/data.txt", "Range", "bytes=-0"), 416, "invalid range: failed to overlap\n", want{"Content-Range": "bytes */10"}},
		{"malformed range", get("/static/data.txt", "Range", "bytes=abc"), 416, "invalid range\n", want{"Content-Range": ""}},
		{"backwards range", get("/static/data.txt", "Range", "bytes=5-2"), 416, "invalid range\n", nil},
		{"other unit", get("/static/data.txt", "Range", "lines=1-2"), 416, "invalid range\n", nil},
		{"several ranges are the whole file", get("/static/data.txt", "Range", "bytes=0-1,3-4"), 200, "0123456789",
			want{"Content-Range": "", "Content-Length": "10", "Content-Type": text}},
		{"a range and an empty suffix are several ranges", get("/static/data.txt", "Range", "bytes=0-,-0"), 200, "0123456789",
			want{"Content-Range": "", "Content-Length": "10"}},
		{"no overlap and an empty suffix", get("/static/data.txt", "Range", "bytes=100-,-0"), 416, "invalid range: failed to overlap\n",
			want{"Content-Range": "bytes */10"}},
		{"empty range list", get("/static/data.txt", "Range", "bytes="), 200, "0123456789", nil},
		{"range of an empty file", get("/static/empty.txt", "Range", "bytes=0-"), 200, "", want{"Content-Length": "0", "Content-Range": ""}},
		{"suffix of an empty file", get("/static/empty.txt", "Range", "bytes=-5"), 200, "", want{"Content-Length": "0"}},

		{"If-None-Match", get("/static/data.txt", "If-None-Match", etag), 304, "",
			want{"ETag": etag, "Last-Modified": "", "Content-Length": "", "Content-Type": ""}},
		{"If-None-Match weak", get("/static/data.txt", "If-None-Match", "W/"+etag), 304, "", nil},
		{"If-None-Match star", get("/static/data.txt", "If-None-Match", "*"), 304, "", nil},
		{"If-None-Match list", get("/static/data.txt", "If-None-Match", `"x", `+etag), 304, "", nil},
		{"If-None-Match other", get("/static/data.txt", "If-None-Match", `"x"`), 200, "0123456789", nil},
		{"If-None-Match malformed", get("/static/data.txt", "If-None-Match", `x, `+etag), 200, "0123456789", nil},
		{"If-None-Match before If-Modified-Since", get("/static/data.txt", "If-None-Match", `"x"`, "If-Modified-Since", lm), 200, "0123456789", nil},
		{"If-Modified-Since", get("/static/data.txt", "If-Modified-Since", lm), 304, "", want{"ETag": etag}},
		{"If-Modified-Since later", get("/static/data.txt", "If-Modified-Since", fixtureTime.Add(time.Hour).Format(http.TimeFormat)), 304, "", nil},
		{"If-Modified-Since earlier", get("/static/data.txt", "If-Modified-Since", fixtureTime.Add(-time.Second).Format(http.TimeFormat)), 200, "0123456789", nil},
		{"If-Modified-Since in RFC 850 form", get("/static/data.txt", "If-Modified-Since", fixtureTime.Format(time.RFC850)), 304, "", nil},
		{"If-Modified-Since malformed", get("/static/data.txt", "If-Modified-Since", "yesterday"), 200, "0123456789", nil},
		{"If-Match", get("/static/data.txt", "If-Match", etag), 200, "0123456789", nil},
		{"If-Match star", get("/static/data.txt", "If-Match", "*"), 200, "0123456789", nil},
		{"If-Match other", get("/static/data.txt", "If-Match", `"x"`), 412, "",
			want{"Content-Length": "0", "ETag": etag, "Last-Modified": lm, "Content-Type": ""}},
		{"If-Match weak is no match", get("/static/data.txt", "If-Match", "W/"+etag), 412, "", nil},
		{"If-Unmodified-Since earlier", get("/static/data.txt", "If-Unmodified-Since", fixtureTime.Add(-time.Second).Format(http.TimeFormat)), 412, "", nil},
		{"If-Unmodified-Since", get("/static/data.txt", "If-Unmodified-Since", lm), 200, "0123456789", nil},
		{"If-Match before If-Unmodified-Since", get("/static/data.txt", "If-Match", etag, "If-Unmodified-Since", fixtureTime.Add(-time.Hour).Format(http.TimeFormat)), 200, "0123456789", nil},
		{"If-Range", get("/static/data.txt", "Range", "bytes=1-2", "If-Range", etag), 206, "12", nil},
		{"If-Range other", get("/static/data.txt", "Range", "bytes=1-2", "If-Range", `"x"`), 200, "0123456789", nil},
		{"If-Range weak", get("/static/data.txt", "Range", "bytes=1-2", "If-Range", "W/"+etag), 200, "0123456789", nil},
		{"If-Range date", get("/static/data.txt", "Range", "bytes=1-2", "If-Range", lm), 206, "12", nil},
		{"If-Range other date", get("/static/data.txt", "Range", "bytes=1-2", "If-Range", fixtureTime.Add(time.Hour).Format(http.TimeFormat)), 200, "0123456789", nil},
		{"If-Range ignores a bad range", get("/static/data.txt", "Range", "bytes=x", "If-Range", `"x"`), 200, "0123456789", nil},
	}
	checkPlans(t, h, tests)
}

// planCase is a request and what its planned answer must be: the
// status, the body, and fields to check ("" means absent).
type planCase struct {
	name   string
	req    req
	status int
	body   string
	fields map[string]string
}

// checkPlans plans each case's request with h and checks the answer.
func checkPlans(t *testing.T, h *Handler, tests []planCase) {
	t.Helper()
	var a Answer
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h.Plan(tt.req, &a)
			got := send(t, &a)
			if got.status != tt.status || got.body != tt.body {
				t.Errorf("got %d %q, want %d %q", got.status, got.body, tt.status, tt.body)
			}
			for name, v := range tt.fields {
				if g := strings.Join(got.header.Values(name), ", "); g != v {
					t.Errorf("%s: got %q, want %q", name, g, v)
				}
			}
			checkHead(t, tt.req.method, got)
		})
	}
}

// checkHead checks what every answer's head must be: one of each
// field, none the caller adds, and a Content-Length that is the body's.
func checkHead(t *testing.T, method string, got result) {
	t.Helper()
	for name, vs := range got.header {
		if len(vs) > 1 {
			t.Errorf("%s: got %d fields, want 1", name, len(vs))
		}
	}
	for _, name := range []string{"Date", "Connection", "Transfer-Encoding", "Server"} {
		if got.header.Get(name) != "" {
			t.Errorf("%s: got %q, want none (the engine adds it)", name, got.header.Get(name))
		}
	}
	cl := got.header.Get("Content-Length")
	switch {
	case got.status == 304:
		if cl != "" {
			t.Errorf("Content-Length: got %q on a 304, want none", cl)
		}
	case cl == "":
		t.Errorf("Content-Length: got none, want one")
	case method == "HEAD":
		if got.body != "" {
			t.Errorf("got body %q for HEAD, want none", got.body)
		}
	case cl != strconv.Itoa(len(got.body)):
		t.Errorf("Content-Length: got %s, want %d (the body's)", cl, len(got.body))
	}
}

// TestPlanFIFO checks a FIFO is refused without waiting for a writer:
// opening one for reading blocks, which would stop an event loop.
func TestPlanFIFO(t *testing.T) {
	root := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	h := newHandler(t, root, "", "", Options{})
	done := make(chan int, 1)
	go func() {
		var a Answer
		h.Plan(get("/fifo"), &a)
		done <- a.Status
	}()
	select {
	case status := <-done:
		if status != 404 {
			t.Errorf("got %d, want 404", status)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Plan still waits on the FIFO after 10s, want an answer at once")
	}
}

// TestPlanForbidden checks an unreadable file is 403.
func TestPlanForbidden(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads every file; errStatus is covered by TestErrStatus")
	}
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"locked": "x"}, fixtureTime)
	if err := os.Chmod(filepath.Join(root, "locked"), 0); err != nil {
		t.Fatal(err)
	}
	h := newHandler(t, root, "", "", Options{})
	var a Answer
	h.Plan(get("/locked"), &a)
	if got := send(t, &a); got.status != 403 || got.body != "403 Forbidden\n" {
		t.Errorf("got %d %q, want 403 %q", got.status, got.body, "403 Forbidden\n")
	}
}

func TestErrStatus(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"not found", &fs.PathError{Op: "openat", Path: "x", Err: syscall.ENOENT}, 404},
		{"permission", &fs.PathError{Op: "openat", Path: "x", Err: syscall.EACCES}, 403},
		{"not a directory", &fs.PathError{Op: "openat", Path: "x/y", Err: syscall.ENOTDIR}, 404},
		{"escape", errors.New("path escapes from parent"), 404},
		{"closed", fmt.Errorf("openat x: %w", os.ErrClosed), 503},
		{"out of descriptors", &fs.PathError{Op: "openat", Path: "x", Err: syscall.EMFILE}, 503},
		{"system out of descriptors", &fs.PathError{Op: "openat", Path: "x", Err: syscall.ENFILE}, 503},
		{"I/O error", &fs.PathError{Op: "openat", Path: "x", Err: syscall.EIO}, 404},
	}
	for _, tt := range tests {
		if got := errStatus(tt.err); got != tt.want {
			t.Errorf("%s: got %d, want %d", tt.name, got, tt.want)
		}
	}
}

// TestPlanIndexName checks the configured index file is the one served.
func TestPlanIndexName(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"d/index.html": "html", "d/default.txt": "txt"}, fixtureTime)
	h := newHandler(t, root, "default.txt", "", Options{})
	var a Answer
	h.Plan(get("/d/"), &a)
	if got := send(t, &a); got.status != 200 || got.body != "txt" {
		t.Errorf("got %d %q, want 200 %q", got.status, got.body, "txt")
	}
	for _, bad := range []string{"a/b", "..", ".", "a\x00"} {
		if _, err := New(root, bad, "", Options{}); err == nil {
			t.Errorf("New with index %q: got no error, want one", bad)
		}
	}
}

// TestPlanAfterClose checks a closed handler answers 503 (a reload
// closed it under the request), not 404.
func TestPlanAfterClose(t *testing.T) {
	h, err := New(fixture(t), "", "", Options{})
	if err != nil {
		t.Fatal(err)
	}
	var a Answer
	h.Plan(get("/data.txt"), &a)
	send(t, &a)
	h.Close()
	h.Plan(get("/data.txt"), &a)
	if got := send(t, &a); got.status != 503 {
		t.Errorf("got %d, want 503", got.status)
	}
}
