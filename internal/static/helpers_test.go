package static

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/httpmsg"
)

// req is a Request for tests.
type req struct {
	method, path string
	header       map[string]string // lower-case names
}

func (r req) Method() []byte { return []byte(r.method) }
func (r req) Path() []byte   { return []byte(r.path) }
func (r req) Header(name string) []byte {
	v, ok := r.header[name]
	if !ok {
		return nil
	}
	return []byte(v)
}

// get is a GET for path with header fields given as name, value pairs.
func get(path string, kv ...string) req {
	r := req{method: "GET", path: path, header: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		r.header[strings.ToLower(kv[i])] = kv[i+1]
	}
	return r
}

// result is an Answer as the client would see it.
type result struct {
	status int
	header http.Header
	body   string
	// head is the answer's Header as is, for checks on its form.
	head string
}

// send plays the answer: its head fields parsed, its body and file range
// read, the file released.
func send(t *testing.T, a *Answer) result {
	t.Helper()
	res := result{status: a.Status, header: http.Header{}}
	for _, f := range a.Header.Fields {
		if f.Kind != httpmsg.Classify(f.Name) {
			t.Fatalf("field %q: got kind %v, want %v", f.Name, f.Kind, httpmsg.Classify(f.Name))
		}
		res.head += string(f.Name) + ": " + string(f.Value) + "\r\n"
		res.header.Add(string(f.Name), string(f.Value))
	}
	res.body = string(a.Body)
	if a.File != nil {
		if a.Body != nil {
			t.Errorf("got both Body %q and File, want one", a.Body)
		}
		b := make([]byte, a.Length)
		if n, err := a.File.ReadAt(b, a.Offset); int64(n) != a.Length {
			t.Errorf("read %d of %d bytes at %d: %v", n, a.Length, a.Offset, err)
		}
		res.body = string(b)
		a.File.Release()
	} else if a.Offset != 0 || a.Length != 0 {
		t.Errorf("got Offset %d, Length %d without a File, want 0, 0", a.Offset, a.Length)
	}
	return res
}

// writeFiles creates files (name -> content) below dir, with
// directories as needed, all modified at mtime.
func writeFiles(t testing.TB, dir string, files map[string]string, mtime time.Time) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
}

// newHandler opens a handler on dir and closes it when the test ends.
func newHandler(t *testing.T, dir, index, strip string, o Options) *Handler {
	t.Helper()
	h, err := New(dir, index, strip, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}
