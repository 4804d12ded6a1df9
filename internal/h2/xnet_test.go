package h2

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// These tests run golang.org/x/net/http2's client (h2c with prior
// knowledge) against a server Conn behind the test driver.

func newH2CClient(t *testing.T) *http.Client {
	t.Helper()
	tr := &http2.Transport{
		AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 60 * time.Second}
}

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestXNetClientRequests(t *testing.T) {
	addr := startTestServer(t, Config{})
	client := newH2CClient(t)
	base := "http://" + addr
	tests := []struct {
		name   string
		method string
		path   string
		body   []byte
		want   []byte
	}{
		{name: "GET", method: "GET", path: "/", want: helloBody},
		{name: "HEAD-like GET with query", method: "GET", path: "/?a=b&c=d", want: helloBody},
		{name: "small POST echoed", method: "POST", path: "/", body: []byte("ping"), want: []byte("ping")},
		{name: "POST larger than the stream window echoed", method: "POST", path: "/", body: randomBytes(3<<20+17, 1), want: randomBytes(3<<20+17, 1)},
		{name: "PUT of one frame echoed", method: "PUT", path: "/x", body: randomBytes(16384, 2), want: randomBytes(16384, 2)},
		{name: "download", method: "GET", path: "/bytes/100000", want: bytes.Repeat([]byte("0123456789abcdef"), 100000/16)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body io.Reader
			if tt.body != nil {
				body = bytes.NewReader(tt.body)
			}
			req, err := http.NewRequest(tt.method, base+tt.path, body)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 200 || resp.ProtoMajor != 2 {
				t.Errorf("got status %d proto %d, want 200 over HTTP/2", resp.StatusCode, resp.ProtoMajor)
			}
			if !bytes.Equal(got, tt.want) {
				t.Errorf("got a body of %d bytes, want %d bytes (equal: false)", len(got), len(tt.want))
			}
		})
	}
}

func TestXNetClientTrailers(t *testing.T) {
	addr := startTestServer(t, Config{})
	client := newH2CClient(t)
	body := randomBytes(200<<10, 3)
	pr, pw := io.Pipe()
	req, err := http.NewRequest("POST", "http://"+addr+"/trailers", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Trailer = http.Header{"Grpc-Status": nil, "X-Request-Trailer": nil}
	go func() {
		pw.Write(body)
		req.Trailer.Set("Grpc-Status", "0")
		req.Trailer.Set("X-Request-Trailer", "sent after the body")
		pw.Close()
	}()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, body) {
		t.Errorf("got a body of %d bytes, want the %d bytes sent", len(got), len(body))
	}
	for name, want := range map[string]string{"X-Trailer": "done", "Grpc-Status": "0", "X-Request-Trailer": "sent after the body"} {
		if got := resp.Trailer.Get(name); got != want {
			t.Errorf("trailer %s: got %q, want %q", name, got, want)
		}
	}
}

func TestXNetClientConcurrentStreams(t *testing.T) {
	addr := startTestServer(t, Config{MaxConcurrentStreams: 16})
	client := newH2CClient(t)
	// One request first, so that the client has the server's SETTINGS
	// before it opens the others (until then it assumes 100 streams,
	// and the server would refuse the excess).
	if resp, err := client.Get("http://" + addr + "/"); err != nil {
		t.Fatal(err)
	} else {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			want := []byte(fmt.Sprintf("stream %d says %s", i, strings.Repeat("x", i*37)))
			resp, err := client.Post("http://"+addr+"/", "text/plain", bytes.NewReader(want))
			if err != nil {
				errs <- err
				return
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				errs <- err
				return
			}
			if !bytes.Equal(got, want) {
				errs <- fmt.Errorf("request %d: got %d bytes, want %d", i, len(got), len(want))
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestXNetClientLargeDownload(t *testing.T) {
	addr := startTestServer(t, Config{})
	const size = 48 << 20
	if got := download(t, newH2CClient(t), fmt.Sprintf("http://%s/bytes/%d", addr, size), nil); got != size {
		t.Errorf("got %d bytes, want %d", got, size)
	}
}

// TestXNetClientSlowReader reads a download slowly: the Go client's
// windows (4 MiB per stream) fill, the machine waits for credit, and
// the whole body still arrives.
func TestXNetClientSlowReader(t *testing.T) {
	addr := startTestServer(t, Config{})
	const size = 12 << 20
	pause := func(total int64) {
		if total < 6<<20 {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if got := download(t, newH2CClient(t), fmt.Sprintf("http://%s/bytes/%d", addr, size), pause); got != size {
		t.Errorf("got %d bytes, want %d", got, size)
	}
}

// download GETs a /bytes/N url, checks the test server's pattern and
// returns the length; pause, when set, runs after each read.
func download(t *testing.T, client *http.Client, url string, pause func(total int64)) int64 {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	pattern := []byte("0123456789abcdef")
	buf := make([]byte, 1<<20)
	var total int64
	for {
		n, err := resp.Body.Read(buf)
		for i := 0; i < n; i++ {
			if buf[i] != pattern[(total+int64(i))%16] {
				t.Fatalf("byte %d: got %q, want %q", total+int64(i), buf[i], pattern[(total+int64(i))%16])
			}
		}
		total += int64(n)
		if err == io.EOF {
			return total
		}
		if err != nil {
			t.Fatalf("after %d bytes: %v", total, err)
		}
		if pause != nil {
			pause(total)
		}
	}
}
