package static_test

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/helios-lb/helios/internal/static"
)

// request is what an engine would implement over its parsed head.
type request struct{ method, path, rng []byte }

func (r request) Method() []byte { return r.method }
func (r request) Path() []byte   { return r.path }
func (r request) Header(name string) []byte {
	if name == "range" {
		return r.rng
	}
	return nil
}

// An event loop plans with its own shard, writes the head, sends the
// range (with sendfile(2) on a.File.Fd(); ReadAt here) and releases the
// file.
func Example() {
	dir, _ := os.MkdirTemp("", "static-example")
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hello, world\n"), 0o644)
	mtime := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	os.Chtimes(filepath.Join(dir, "hello.txt"), mtime, mtime)

	h, err := static.New(dir, "", "/static", static.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Close()
	var a static.Answer // one per connection, reused
	loop := 0
	h.Shard(loop).Plan(request{[]byte("GET"), []byte("/static/hello.txt"), []byte("bytes=7-")}, &a)

	fmt.Printf("HTTP/1.1 %d\n", a.Status) // and Date, Connection
	for _, f := range a.Header.Fields {
		fmt.Printf("%s: %s\n", f.Name, f.Value)
	}
	fmt.Println()
	fmt.Printf("%s", a.Body)
	if a.File != nil {
		b := make([]byte, a.Length)
		a.File.ReadAt(b, a.Offset)
		fmt.Printf("%s", b)
		a.File.Release()
	}
	// Output:
	// HTTP/1.1 206
	// Accept-Ranges: bytes
	// Content-Type: text/plain; charset=utf-8
	// ETag: "695735a5-d"
	// Last-Modified: Fri, 02 Jan 2026 03:04:05 GMT
	// Content-Length: 6
	// Content-Range: bytes 7-12/13
	//
	// world
}
