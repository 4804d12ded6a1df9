package engine

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"

	"github.com/helios-lb/helios/internal/http1"
	"github.com/helios-lb/helios/internal/httpmsg"
)

// TestWriterBufferSizes renders heads whose fields are longer than a small
// buffer (so they take the writer's write-through paths: Field, WriteInt
// and WriteHex after a flush) through a 64-byte writer and through one of
// the loops' size, and wants the same bytes from both, and the bytes the
// codec means.
func TestWriterBufferSizes(t *testing.T) {
	long := []byte(strings.Repeat("v", 300))
	var req request
	req.Method, req.Target, req.Authority = []byte("POST"), []byte("/"+strings.Repeat("p", 100)), []byte("example.com")
	req.ContentLength = -1
	req.Header.Add([]byte("X-Long"), long)
	req.Header.Add([]byte("X-Short"), []byte("s"))
	var resp response
	resp.Status, resp.Reason, resp.ContentLength = 200, []byte("OK"), 12345
	resp.Header.Add([]byte("X-Long"), long)
	hop := httpmsg.Hop{Peer: netip.MustParseAddr("192.0.2.1")}
	var fw httpmsg.Forwarder

	render := func(size int, f func(w *writer)) []byte {
		var out bytes.Buffer
		var w writer
		w.reset(&out, make([]byte, size))
		f(&w)
		if err := w.flush(); err != nil {
			t.Fatalf("flushing a %d-byte writer: %v", size, err)
		}
		return out.Bytes()
	}
	for _, tt := range []struct {
		name string
		f    func(w *writer)
		want []string // what the rendering must contain
	}{
		{"request head", func(w *writer) { http1.WriteRequestHead(w, &fw, &req.Request, &hop, -1) },
			[]string{"POST /" + strings.Repeat("p", 100) + " HTTP/1.1\r\nHost: example.com\r\n", "X-Long: " + string(long) + "\r\n", "Transfer-Encoding: chunked\r\n\r\n"}},
		{"response head", func(w *writer) { http1.WriteResponseHead(w, &resp.Response, true, false) },
			[]string{"HTTP/1.1 200 OK\r\n", "X-Long: " + string(long) + "\r\n", "Content-Length: 12345\r\n"}},
		{"chunks", func(w *writer) {
			http1.WriteChunk(w, long)
			http1.WriteLastChunk(w, &req.Header)
		}, []string{"12c\r\n" + string(long) + "\r\n0\r\n", "X-Short: s\r\n\r\n"}},
	} {
		small, big := render(64, tt.f), render(writeBufSize, tt.f)
		if !bytes.Equal(small, big) {
			t.Errorf("%s: through a 64-byte writer %q, through %d bytes %q: want the same bytes", tt.name, small, writeBufSize, big)
		}
		for _, w := range tt.want {
			if !bytes.Contains(big, []byte(w)) {
				t.Errorf("%s: %q does not hold %q", tt.name, big, w)
			}
		}
	}
}
