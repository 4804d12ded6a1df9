package admin

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestCheck(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			w.WriteHeader(503)
			w.Write([]byte("not ready: draining\n"))
			return
		}
		w.Write([]byte("ok\n"))
	})}
	go srv.Serve(ln)
	defer srv.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedAddr := closed.Addr().String()
	closed.Close()
	tests := []struct {
		name, address, path, want, wantErr string
	}{
		{"live", ln.Addr().String(), "/healthz", "ok", ""},
		{"all interfaces asks loopback", ":" + port, "healthz", "ok", ""},
		{"not ready", ln.Addr().String(), "/readyz", "", "503 Service Unavailable: not ready: draining"},
		{"nobody listening", closedAddr, "/readyz", "", "connection refused"},
		{"bad address", "9901", "/readyz", "", `admin address "9901"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			got, err := Check(ctx, tt.address, tt.path)
			if got != tt.want {
				t.Errorf("answer: got %q, want %q", got, tt.want)
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("got %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("got %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}
