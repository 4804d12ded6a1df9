package server

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/websocket"
)

func TestRoundRobinDistribution(t *testing.T) {
	bs := startBackends(t, 3)
	_, url := startServer(t, yamlConfig(t, threeBackends, bs), Options{})
	counts := map[string]int{}
	c := &http.Client{}
	for i := 0; i < 300; i++ {
		status, _, name := get(t, c, url+"/")
		if status != 200 {
			t.Fatalf("request %d: got status %d, want 200", i, status)
		}
		counts[name]++
	}
	for _, name := range []string{"b1", "b2", "b3"} {
		if counts[name] != 100 {
			t.Errorf("backend %s: got %d requests, want 100 (all: %v)", name, counts[name], counts)
		}
	}
}

func TestBackendConnectionsAreReused(t *testing.T) {
	bs := startBackends(t, 3)
	_, url := startServer(t, yamlConfig(t, threeBackends, bs), Options{})
	c := &http.Client{}
	for i := 0; i < 300; i++ {
		if status, _, _ := get(t, c, url+"/"); status != 200 {
			t.Fatalf("got status %d, want 200", status)
		}
	}
	// Sequential requests need one connection per backend; allow one
	// spare each for timing.
	for _, b := range bs {
		if n := b.Connections(); n < 1 || n > 2 {
			t.Errorf("backend %s: got %d connections for 100 requests, want 1 or 2", b.Name(), n)
		}
		if n := b.Requests(); n != 100 {
			t.Errorf("backend %s: got %d requests, want 100", b.Name(), n)
		}
	}
}

func TestHopByHopAndForwardedHeaders(t *testing.T) {
	bs := startBackends(t, 1)
	cfg := yamlConfig(t, `
listeners: [{name: web, address: "127.0.0.1:1"}]
routes: [{name: app, match: {path_prefix: /}, upstream: app}]
upstreams: [{name: app, backends: [{address: "{{B1}}"}]}]
admin: {address: "off"}
`, bs)
	s, _ := startServer(t, cfg, Options{})
	req := "GET /echo HTTP/1.1\r\n" +
		"Host: example.test:8080\r\n" +
		"Connection: close, X-Secret\r\n" +
		"X-Secret: 1\r\n" +
		"Keep-Alive: timeout=5\r\n" +
		"Proxy-Authorization: Basic eA==\r\n" +
		"Proxy-Connection: keep-alive\r\n" +
		"Proxy: http://evil.test\r\n" +
		"TE: trailers\r\n" +
		"Upgrade: h2c\r\n" +
		"X-Forwarded-For: 10.0.0.1\r\n" +
		"X-Forwarded-Proto: https\r\n" +
		"X-Forwarded-Host: spoofed.test\r\n" +
		"X-Kept: yes\r\n\r\n"
	out := rawExchange(t, s.Addr("web").String(), req)
	_, echoed, ok := strings.Cut(out, "\r\n\r\n")
	if !ok || !strings.HasPrefix(out, "HTTP/1.1 200") {
		t.Fatalf("got %q, want a 200 response", out)
	}
	for _, gone := range []string{"X-Secret", "Keep-Alive", "Proxy-Authorization", "Proxy-Connection", "Proxy:", "Te:", "Upgrade", "Connection"} {
		if strings.Contains(echoed, "\r\n"+gone) {
			t.Errorf("backend received %q, want it stripped; request as received:\n%s", gone, echoed)
		}
	}
	for _, want := range []string{
		"\r\nHost: example.test:8080\r\n",
		// The client is no trusted proxy: its X-Forwarded-For is
		// replaced, never appended to (issue 20).
		"\r\nX-Forwarded-For: 127.0.0.1\r\n",
		"\r\nX-Forwarded-Proto: http\r\n",
		"\r\nX-Forwarded-Host: example.test:8080\r\n",
		"\r\nX-Kept: yes\r\n",
	} {
		if !strings.Contains(echoed, want) {
			t.Errorf("backend did not receive %q; request as received:\n%s", strings.TrimSpace(want), echoed)
		}
	}
	if !strings.Contains(out, "\r\nConnection: close\r\n") {
		t.Errorf("got response head %q, want Connection: close (the client asked for it)", out)
	}
}

// rawBackend answers every request on every connection with resp.
func rawBackend(t *testing.T, resp string) string {
	return scriptedBackend(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			if _, err := readHead(br); err != nil {
				return
			}
			if _, err := io.WriteString(c, resp); err != nil {
				return
			}
		}
	})
}

// scriptedBackend listens on loopback and runs serve on each accepted
// connection, which it closes afterwards; it returns the address.
func scriptedBackend(t *testing.T, serve func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c)
			}()
		}
	}()
	return ln.Addr().String()
}

func TestResponseHopByHopHeadersStripped(t *testing.T) {
	addr := rawBackend(t, "HTTP/1.1 200 OK\r\n"+
		"Connection: X-Internal\r\n"+
		"X-Internal: secret\r\n"+
		"Keep-Alive: timeout=5\r\n"+
		"Proxy-Authenticate: Basic\r\n"+
		"Upgrade: h2c\r\n"+
		"X-Public: yes\r\n"+
		"Content-Length: 2\r\n\r\nok")
	cfg := yamlConfig(t, `
listeners: [{name: web, address: "127.0.0.1:1"}]
routes: [{name: app, match: {path_prefix: /}, upstream: app}]
upstreams: [{name: app, backends: [{address: "`+addr+`"}]}]
admin: {address: "off"}
`, nil)
	_, url := startServer(t, cfg, Options{})
	resp, err := http.Get(url + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != "ok" {
		t.Fatalf("got %d %q, want 200 \"ok\"", resp.StatusCode, body)
	}
	for _, h := range []string{"X-Internal", "Keep-Alive", "Proxy-Authenticate", "Upgrade"} {
		if v := resp.Header.Get(h); v != "" {
			t.Errorf("client received %s: %q, want it stripped", h, v)
		}
	}
	if got := resp.Header.Get("X-Public"); got != "yes" {
		t.Errorf("got X-Public %q, want %q", got, "yes")
	}
}

// heapSampler records the largest heap seen while it runs.
type heapSampler struct {
	stop chan struct{}
	done chan struct{}
	max  atomic.Uint64
}

func sampleHeap() *heapSampler {
	h := &heapSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		var ms runtime.MemStats
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > h.max.Load() {
				h.max.Store(ms.HeapInuse)
			}
			select {
			case <-h.stop:
				return
			case <-t.C:
			}
		}
	}()
	return h
}

func (h *heapSampler) Stop() uint64 {
	close(h.stop)
	<-h.done
	return h.max.Load()
}

func TestLargeResponseStreamsWithFlatMemory(t *testing.T) {
	bs := startBackends(t, 1)
	cfg := yamlConfig(t, `
listeners: [{name: web, address: "127.0.0.1:1"}]
routes: [{name: app, match: {path_prefix: /}, upstream: app}]
upstreams: [{name: app, backends: [{address: "{{B1}}"}]}]
admin: {address: "off"}
`, bs)
	_, url := startServer(t, cfg, Options{})
	const size = 1 << 30
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	hs := sampleHeap()
	resp, err := http.Get(fmt.Sprintf("%s/bytes/%d", url, size))
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	peak := hs.Stop()
	if err != nil || n != size {
		t.Fatalf("got %d bytes (err %v), want %d", n, err, size)
	}
	// Backend, proxy and client all live in this process; streaming keeps
	// all three at buffer sizes, so the heap must not grow by more than a
	// few MiB for a 1 GiB body.
	const limit = 32 << 20
	if growth := int64(peak) - int64(before.HeapInuse); growth > limit {
		t.Errorf("heap grew by %d MiB while streaming 1 GiB, want under %d MiB", growth>>20, limit>>20)
	}
}

// TestLargeUploadStreamsWithFlatMemory sends 1 GiB, fixed-length and
// chunked, through a route that streams request bodies to a backend that
// first stalls for half a second: the heap stays at buffer sizes, so the
// loop reads from the client only as fast as the backend takes the bytes.
func TestLargeUploadStreamsWithFlatMemory(t *testing.T) {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(500 * time.Millisecond) // a slow backend: the client must wait, not Helios buffer
		n, err := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "%d %v", n, err)
	}))
	defer origin.Close()
	cfg := yamlConfig(t, `
listeners: [{name: web, address: "127.0.0.1:1"}]
routes: [{name: app, match: {path_prefix: /}, upstream: app, request_buffering: "off", max_body_bytes: 0}]
upstreams: [{name: app, backends: [{address: "`+strings.TrimPrefix(origin.URL, "http://")+`"}]}]
admin: {address: "off"}
`, nil)
	_, url := startServer(t, cfg, Options{})
	const size = 1 << 30
	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprintf("chunked=%v", chunked), func(t *testing.T) {
			runtime.GC()
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			hs := sampleHeap()
			body := io.LimitReader(zeroReader{}, size)
			req, _ := http.NewRequest("POST", url+"/up", body)
			if !chunked {
				req.ContentLength = size
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				hs.Stop()
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			peak := hs.Stop()
			if want := fmt.Sprintf("%d <nil>", size); resp.StatusCode != 200 || string(got) != want {
				t.Fatalf("got %d %q, want 200 %q", resp.StatusCode, got, want)
			}
			const limit = 32 << 20
			if growth := int64(peak) - int64(before.HeapInuse); growth > limit {
				t.Errorf("heap grew by %d MiB while uploading 1 GiB, want under %d MiB", growth>>20, limit>>20)
			}
		})
	}
}

// zeroReader reads zeros without end.
type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func TestLargeRequestBodyStreamsBothWays(t *testing.T) {
	bs := startBackends(t, 1)
	cfg := yamlConfig(t, `
listeners: [{name: web, address: "127.0.0.1:1"}]
routes: [{name: app, match: {path_prefix: /}, upstream: app}]
upstreams: [{name: app, backends: [{address: "{{B1}}"}]}]
admin: {address: "off"}
`, bs)
	_, url := startServer(t, cfg, Options{})
	const size = 64 << 20
	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprintf("chunked=%v", chunked), func(t *testing.T) {
			pr, pw := io.Pipe()
			sum := sha256.New()
			go func() {
				block := make([]byte, 64<<10)
				for i := range block {
					block[i] = byte(i * 7)
				}
				for sent := 0; sent < size; sent += len(block) {
					sum.Write(block)
					if _, err := pw.Write(block); err != nil {
						return
					}
				}
				pw.Close()
			}()
			req, _ := http.NewRequest("POST", url+"/echo", pr)
			if !chunked {
				req.ContentLength = size
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			// Skip the echoed head, then hash the echoed body.
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					t.Fatalf("reading echoed head: %v", err)
				}
				if line == "\r\n" {
					break
				}
			}
			got := sha256.New()
			n, err := io.Copy(got, br)
			if err != nil || n != size {
				t.Fatalf("got %d echoed bytes (err %v), want %d", n, err, size)
			}
			if string(got.Sum(nil)) != string(sum.Sum(nil)) {
				t.Error("echoed body differs from the body sent")
			}
		})
	}
}

func TestWebSocketEcho(t *testing.T) {
	bs := startBackends(t, 1)
	cfg := yamlConfig(t, `
listeners: [{name: web, address: "127.0.0.1:1"}]
routes: [{name: app, match: {path_prefix: /}, upstream: app}]
upstreams: [{name: app, backends: [{address: "{{B1}}"}]}]
admin: {address: "off"}
`, bs)
	s, _ := startServer(t, cfg, Options{})
	addr := s.Addr("web").String()
	ws, err := websocket.Dial("ws://"+addr+"/ws", "", "http://"+addr+"/")
	if err != nil {
		t.Fatalf("dialing a WebSocket through Helios: %v", err)
	}
	defer ws.Close()
	for _, msg := range []string{"hello", strings.Repeat("x", 100000), "bye"} {
		if err := websocket.Message.Send(ws, msg); err != nil {
			t.Fatal(err)
		}
		var got string
		ws.SetReadDeadline(time.Now().Add(5 * time.Second))
		if err := websocket.Message.Receive(ws, &got); err != nil {
			t.Fatal(err)
		}
		if got != msg {
			t.Errorf("got echo of %d bytes, want %d", len(got), len(msg))
		}
	}
}

func TestGracefulShutdownFinishesInFlight(t *testing.T) {
	bs := startBackends(t, 3)
	cfg := yamlConfig(t, threeBackends, bs)
	s, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	addr := s.Addr("web").String()
	url := "http://" + addr
	const n = 6
	var wg sync.WaitGroup
	results := make([]string, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get(url + "/delay/400")
			if err != nil {
				results[i] = err.Error()
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			results[i] = fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(body)))
		}()
	}
	time.Sleep(150 * time.Millisecond) // the requests are at the backends
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := s.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: got %v, want nil", err)
	}
	wg.Wait()
	for i, r := range results {
		if !strings.HasPrefix(r, "200 delayed 400 ms") {
			t.Errorf("in-flight request %d: got %q, want a 200 after the delay", i, r)
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Shutdown took %v, want about the remaining 250ms", d)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Error("a new connection was accepted after Shutdown, want refused")
	}
}

func TestProxyErrors(t *testing.T) {
	bs := startBackends(t, 1)
	// A port with nothing listening.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()
	cfg := yamlConfig(t, `
listeners: [{name: web, address: "127.0.0.1:1"}]
routes:
  - {name: only-host, match: {host: only.test, path_prefix: /}, upstream: live}
  - {name: dead, match: {path_prefix: /dead/}, upstream: dead}
  - {name: slow, match: {path_prefix: /delay/}, upstream: slow}
upstreams:
  - {name: live, backends: [{address: "{{B1}}"}]}
  - {name: dead, backends: [{address: "`+dead+`"}]}
  - name: slow
    backends: [{address: "{{B1}}"}]
    transport: {response_header_timeout: 100ms}
    retries: {attempts: 0}
admin: {address: "off"}
`, bs)
	_, url := startServer(t, cfg, Options{})
	tests := []struct {
		name, path string
		status     int
		body       string
	}{
		{"no route", "/nothing", 404, "no route"},
		{"unreachable backend", "/dead/x", 502, "could not be reached"},
		{"backend timeout", "/delay/1000", 504, "did not answer in time"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body, _ := get(t, http.DefaultClient, url+tt.path)
			if status != tt.status || !strings.Contains(body, tt.body) {
				t.Errorf("got %d %q, want %d with %q", status, body, tt.status, tt.body)
			}
		})
	}
}

func TestHeadChunkedAndContinue(t *testing.T) {
	bs := startBackends(t, 1)
	cfg := yamlConfig(t, `
listeners: [{name: web, address: "127.0.0.1:1"}]
routes: [{name: app, match: {path_prefix: /}, upstream: app}]
upstreams: [{name: app, backends: [{address: "{{B1}}"}]}]
admin: {address: "off"}
`, bs)
	s, _ := startServer(t, cfg, Options{})
	addr := s.Addr("web").String()

	t.Run("HEAD keeps Content-Length and sends no body", func(t *testing.T) {
		out := rawExchange(t, addr, "HEAD /bytes/1000 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		head, body, _ := strings.Cut(out, "\r\n\r\n")
		if !strings.Contains(head, "Content-Length: 1000") || body != "" {
			t.Errorf("got head %q and %d body bytes, want Content-Length: 1000 and no body", head, len(body))
		}
	})
	t.Run("chunked request body", func(t *testing.T) {
		out := rawExchange(t, addr, "POST /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n"+
			"5\r\nhello\r\n7\r\n, world\r\n0\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(out)), nil)
		if err != nil {
			t.Fatalf("got %q: %v", out, err)
		}
		body, err := io.ReadAll(resp.Body)
		// Request buffering (on by default) held the body whole, so it
		// went on with its length.
		if err != nil || resp.StatusCode != 200 || !strings.HasSuffix(string(body), "\r\n\r\nhello, world") ||
			!strings.Contains(string(body), "Content-Length: 12") {
			t.Errorf("got %d %q (%v), want the chunked body echoed whole, with its length", resp.StatusCode, body, err)
		}
	})
	t.Run("100-continue", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n")
		br := bufio.NewReader(c)
		line, err := br.ReadString('\n')
		if err != nil || line != "HTTP/1.1 100 Continue\r\n" {
			t.Fatalf("got %q (%v), want a 100 Continue before sending the body", line, err)
		}
		br.ReadString('\n')
		io.WriteString(c, "ping")
		rest, _ := io.ReadAll(br)
		if !strings.HasPrefix(string(rest), "HTTP/1.1 200") || !strings.HasSuffix(string(rest), "ping") || strings.Contains(string(rest), "Expect:") {
			t.Errorf("got %q, want a 200 echoing the body, without Expect forwarded", rest)
		}
	})
}

func TestRespondAndStatic(t *testing.T) {
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "index.html"), []byte("<h1>home</h1>"), 0o644)
	os.WriteFile(filepath.Join(root, "data.txt"), []byte("0123456789"), 0o644)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o644)
	os.Symlink(filepath.Join(outside, "secret"), filepath.Join(root, "link"))
	cfg := yamlConfig(t, `
listeners: [{name: web, address: "127.0.0.1:1"}]
routes:
  - {name: ping, match: {path: /ping}, respond: {status: 201, body: '{"ok":true}', headers: {Content-Type: application/json}}}
  - {name: files, match: {path_prefix: /static/}, static: {root: "`+root+`", strip_prefix: /static}}
upstreams: []
admin: {address: "off"}
`, nil)
	s, url := startServer(t, cfg, Options{})

	resp, err := http.Get(url + "/ping")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 201 || string(body) != `{"ok":true}` || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("respond: got %d %q %q, want 201 {\"ok\":true} application/json", resp.StatusCode, body, resp.Header.Get("Content-Type"))
	}

	tests := []struct {
		name, path string
		header     map[string]string
		status     int
		body       string
	}{
		{"index", "/static/", nil, 200, "<h1>home</h1>"},
		{"file", "/static/data.txt", nil, 200, "0123456789"},
		{"range", "/static/data.txt", map[string]string{"Range": "bytes=2-4"}, 206, "234"},
		{"missing", "/static/nope", nil, 404, ""},
		{"symlink out of the root", "/static/link", nil, 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", url+tt.path, nil)
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status || (tt.body != "" && string(body) != tt.body) {
				t.Errorf("got %d %q, want %d %q", resp.StatusCode, body, tt.status, tt.body)
			}
		})
	}
	t.Run("dot segments cannot leave the root", func(t *testing.T) {
		out := rawExchange(t, s.Addr("web").String(), "GET /static/../../../../etc/passwd HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		if strings.Contains(out, "root:") || !strings.HasPrefix(out, "HTTP/1.1 404") {
			t.Errorf("got %q, want 404", firstLine(out))
		}
	})
	t.Run("conditional request", func(t *testing.T) {
		resp, _ := http.Get(url + "/static/data.txt")
		resp.Body.Close()
		etag := resp.Header.Get("Etag")
		req, _ := http.NewRequest("GET", url+"/static/data.txt", nil)
		req.Header.Set("If-None-Match", etag)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if etag == "" || resp.StatusCode != 304 {
			t.Errorf("got ETag %q and status %d for If-None-Match, want an ETag and 304", etag, resp.StatusCode)
		}
	})
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\r\n")
	return line
}

func TestMaxConnections(t *testing.T) {
	bs := startBackends(t, 1)
	cfg := yamlConfig(t, `
listeners: [{name: web, address: "127.0.0.1:1", max_connections: 2}]
routes: [{name: app, match: {path_prefix: /}, upstream: app}]
upstreams: [{name: app, backends: [{address: "{{B1}}"}]}]
admin: {address: "off"}
`, bs)
	s, _ := startServer(t, cfg, Options{})
	addr := s.Addr("web").String()
	var conns []net.Conn
	for i := 0; i < 2; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	roundTrip := func(c net.Conn) (string, error) {
		c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return "", err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return "", err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.Status, nil
	}
	for i, c := range conns {
		if st, err := roundTrip(c); err != nil || st != "200 OK" {
			t.Fatalf("connection %d: got %q, %v; want 200 OK", i, st, err)
		}
	}
	extra, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	if st, err := roundTrip(extra); err == nil {
		t.Errorf("third connection: got %q, want it refused (closed) at max_connections 2", st)
	}
	for i, c := range conns {
		if st, err := roundTrip(c); err != nil || st != "200 OK" {
			t.Errorf("connection %d after the refusal: got %q, %v; want 200 OK", i, st, err)
		}
	}
}

func TestBackendDeathCostsNoFailedGET(t *testing.T) {
	bs := startBackends(t, 3)
	_, url := startServer(t, yamlConfig(t, threeBackends, bs), Options{})
	c := &http.Client{Timeout: 5 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var failures, total atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				resp, err := c.Get(url + "/")
				total.Add(1)
				if err != nil {
					failures.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					failures.Add(1)
				}
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	bs[1].stop()
	time.Sleep(time.Second)
	cancel()
	wg.Wait()
	if f := failures.Load(); f != 0 {
		t.Errorf("got %d failed GETs of %d after a backend died, want 0 (connect errors are retried)", f, total.Load())
	}
}
