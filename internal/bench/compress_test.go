package bench

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestCheckCompressed: a proxy that answers in the coding asked for
// passes; one that sends the answer as it is, or in another coding,
// does not.
func TestCheckCompressed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ce := r.URL.Query().Get("ce"); ce != "" && strings.Contains(r.Header.Get("Accept-Encoding"), ce) {
			w.Header().Set("Content-Encoding", ce)
		}
		w.Write([]byte("body"))
	}))
	defer srv.Close()
	for _, tt := range []struct {
		query, coding string
		ok            bool
	}{{"?ce=gzip", "gzip", true}, {"?ce=zstd", "zstd", true}, {"", "gzip", false}, {"?ce=br", "gzip", false}} {
		err := checkCompressed(context.Background(), srv.Client(), srv.URL+"/"+tt.query, tt.coding)
		if (err == nil) != tt.ok {
			t.Errorf("%s asked for %s: got %v, want ok %v", tt.query, tt.coding, err, tt.ok)
		}
	}
}
