package backend

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"testing"
)

// /sink reads an upload whole, with a Content-Length or chunked, and
// answers with its length.
func TestSink(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := New("b1")
	go b.Serve(ln)
	defer ln.Close()
	url := "http://" + ln.Addr().String() + "/sink"
	body := bytes.Repeat([]byte("x"), 1<<20)
	tests := []struct {
		name    string
		body    io.Reader
		length  int64
		chunked bool
	}{
		{"fixed length", bytes.NewReader(body), int64(len(body)), false},
		{"chunked", io.MultiReader(bytes.NewReader(body)), -1, true},
		{"empty", http.NoBody, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", url, tt.body)
			req.ContentLength = tt.length
			if tt.chunked {
				req.TransferEncoding = []string{"chunked"}
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := "1048576 bytes\n"
			if tt.length == 0 {
				want = "0 bytes\n"
			}
			if resp.StatusCode != 200 || string(got) != want {
				t.Errorf("got %d %q, want 200 %q", resp.StatusCode, got, want)
			}
		})
	}
}
