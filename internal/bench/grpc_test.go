package bench

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"testing"
)

// The gRPC origin speaks h2c with prior knowledge and echoes a call with
// grpc-status 0 in the trailers; a malformed frame gets a trailers-only
// error.
func TestGRPCEchoOverH2C(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go ServeH2C(ln, GRPCEcho("g1"))
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	client := &http.Client{Transport: &http.Transport{Protocols: &p}}
	tests := []struct {
		name       string
		body       []byte
		wantBody   []byte
		wantStatus string
	}{
		{"echo", grpcRequest(), grpcRequest(), "0"},
		{"short frame", []byte{0, 0, 0, 0, 9, 'x'}, nil, "3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", "http://"+ln.Addr().String()+grpcPath, bytes.NewReader(tt.body))
			for k, v := range grpcHeaders {
				req.Header.Set(k, v)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			status := resp.Trailer.Get("Grpc-Status")
			if status == "" {
				status = resp.Header.Get("Grpc-Status")
			}
			if resp.ProtoMajor != 2 || !bytes.Equal(got, tt.wantBody) || status != tt.wantStatus {
				t.Errorf("got %s, %d bytes, grpc-status %q, want HTTP/2, %d bytes, %q", resp.Proto, len(got), status, len(tt.wantBody), tt.wantStatus)
			}
		})
	}
}
