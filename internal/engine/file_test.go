package engine

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/netpoll"
	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/route"
	"github.com/helios-lb/helios/internal/static"
)

// fileProxy is a loopProxy whose only route serves the files of a
// temporary directory natively (sendfile), with tls when set.
func fileProxy(t *testing.T, k netpoll.Kind, files map[string][]byte, tp *testTLS) *loopProxy {
	t.Helper()
	h := fileHandler(t, files)
	cfg := loopConfig{}
	if tp != nil {
		cfg.opts.TLS = tp
	}
	p := startLoopProxy(t, k, cfg)
	tab, err := route.New([]route.Entry[*proxy.Route]{{Name: "files", PathPrefix: "/files/",
		Value: &proxy.Route{Name: "files", Files: h}}})
	if err != nil {
		t.Fatal(err)
	}
	p.pipe.Swap(&proxy.Graph{Routes: tab, Recorder: p})
	return p
}

// fileHandler serves files, written to a temporary directory, under
// /files/ (internal/static's planner, which the loop serves itself).
func fileHandler(t *testing.T, files map[string][]byte) *static.Handler {
	t.Helper()
	dir := t.TempDir()
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h, err := static.New(dir, "", "/files", static.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// TestLoopFiles serves static files from the loop: whole, in ranges, HEAD,
// conditional, large ones to a slow reader, over TLS, and to a client
// that leaves midway.
func TestLoopFiles(t *testing.T) { run(t, testLoopFiles) }

func testLoopFiles(t *testing.T, k netpoll.Kind) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<18) // 4 MiB
	// huge.bin is for the client that leaves: larger than what loopback
	// sockets' buffers can hold (up to 4 MiB sending and 6 MiB
	// receiving by Linux's defaults), so the answer cannot be all sent,
	// and recorded as a success, before the client goes.
	huge := bytes.Repeat([]byte("0123456789abcdef"), 2<<20) // 32 MiB
	// mid.bin is small enough for the planner to hold in memory (its
	// head and bytes leave in one write) but larger than a writer's
	// buffer.
	mid := randomBody(30<<10, 7)
	files := map[string][]byte{"a.txt": []byte("hello, files\n"), "mid.bin": mid, "big.bin": big, "huge.bin": huge}
	for _, tlsOn := range []bool{false, true} {
		name := "cleartext"
		var tp *testTLS
		if tlsOn {
			name, tp = "tls", newTestTLS(t)
		}
		t.Run(name, func(t *testing.T) {
			p := fileProxy(t, k, files, tp)
			dial := func() *rawClient {
				if tp != nil {
					return dialTLS(t, p.addr, tp)
				}
				return dialRaw(t, p.addr)
			}
			c := dial()
			c.send("GET /files/a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
			r := c.read("GET")
			if r.status != 200 || r.body != "hello, files\n" || r.header.Get("ETag") == "" {
				t.Fatalf("whole: got (%d, %q, ETag %q)", r.status, r.body, r.header.Get("ETag"))
			}
			etag := r.header.Get("ETag")
			c.send("GET /files/a.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=7-\r\n\r\n")
			if r := c.read("GET"); r.status != 206 || r.body != "files\n" {
				t.Errorf("range: got (%d, %q), want (206, files)", r.status, r.body)
			}
			c.send("HEAD /files/a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
			if r := c.read("HEAD"); r.status != 200 || r.body != "" || r.header.Get("Content-Length") != "13" {
				t.Errorf("HEAD: got (%d, %q, length %q)", r.status, r.body, r.header.Get("Content-Length"))
			}
			c.send("GET /files/a.txt HTTP/1.1\r\nHost: x\r\nIf-None-Match: " + etag + "\r\n\r\n")
			if r := c.read("GET"); r.status != 304 {
				t.Errorf("conditional: got %d, want 304", r.status)
			}
			c.send("GET /files/missing HTTP/1.1\r\nHost: x\r\n\r\n")
			if r := c.read("GET"); r.status != 404 {
				t.Errorf("missing: got %d, want 404", r.status)
			}
			// Two pipelined requests for a file held in memory, whole and
			// a range: each answer whole, in order.
			c.send("GET /files/mid.bin HTTP/1.1\r\nHost: x\r\n\r\nGET /files/mid.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=100-20099\r\n\r\n")
			if r := c.read("GET"); r.status != 200 || r.body != string(mid) {
				t.Errorf("held in memory: got (%d, %d bytes), want (200, the %d bytes)", r.status, len(r.body), len(mid))
			}
			if r := c.read("GET"); r.status != 206 || r.body != string(mid[100:20100]) {
				t.Errorf("range held in memory: got (%d, %d bytes), want (206, 20000 bytes at 100)", r.status, len(r.body))
			}
			// A large file to a client that reads slowly: backpressure,
			// then the whole file, then the connection goes on.
			c.send("GET /files/big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
			time.Sleep(100 * time.Millisecond)
			if r := c.read("GET"); r.status != 200 || !bytes.Equal([]byte(r.body), big) {
				t.Fatalf("big: got (%d, %d bytes), want the 4 MiB file", r.status, len(r.body))
			}
			c.send("GET /files/a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
			if r := c.read("GET"); r.status != 200 {
				t.Errorf("after big: got %d", r.status)
			}
			// A client that leaves midway: the file goes back to the
			// cache (the proxy's stop checks nothing leaked).
			l := dial()
			l.send("GET /files/huge.bin HTTP/1.1\r\nHost: x\r\n\r\n")
			if head := l.readHead(); !strings.HasPrefix(head, "HTTP/1.1 200") {
				t.Fatalf("got %q", head)
			}
			l.nc.Close()
			for {
				rec := p.nextRec(t)
				if rec.Status == proxy.StatusClientClosed || rec.Err != nil {
					break
				}
			}
		})
	}
}
