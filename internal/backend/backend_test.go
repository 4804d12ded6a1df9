package backend

import (
	"bytes"
	"encoding/json"
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

// TestJSON: /json/N answers exactly N bytes of valid JSON, the same each
// time, and refuses sizes out of bounds.
func TestJSON(t *testing.T) {
	for _, n := range []int{16, 100, 20 << 10} {
		doc := JSON(n)
		var v struct{ Items []map[string]any }
		if len(doc) != n || json.Unmarshal(doc, &v) != nil {
			t.Errorf("JSON(%d): got %d bytes, valid %v", n, len(doc), json.Valid(doc))
		}
		if n > 1000 && len(v.Items) < 10 {
			t.Errorf("JSON(%d): got %d records, want many", n, len(v.Items))
		}
		if !bytes.Equal(JSON(n), doc) {
			t.Errorf("JSON(%d) differs from one call to the next", n)
		}
	}
	b := New("b1")
	for _, tt := range []struct {
		path   string
		status int
		n      int
	}{{"/json/20480", 200, 20480}, {"/json/20480", 200, 20480}, {"/json/15", 400, -1}, {"/json/x", 400, -1}} {
		status, h, body, ok := b.answer([]byte(tt.path))
		if !ok || status != tt.status || tt.n >= 0 && len(body) != tt.n {
			t.Errorf("%s: got %d with %d bytes, want %d with %d", tt.path, status, len(body), tt.status, tt.n)
		}
		if ct, _ := h.Get("content-type"); status == 200 && string(ct) != "application/json" {
			t.Errorf("%s: Content-Type %q, want application/json", tt.path, ct)
		}
	}
}
