package bench

import (
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// The grpc scenario: unary calls over HTTP/2 through the proxy to backends
// that speak HTTP/2 without TLS (h2c), as gRPC services usually do behind a
// proxy. The load is h2load POSTing one framed gRPC message per call (the
// bytes of a call do not depend on a .proto, and h2load is the same C tool
// the h2 scenario uses, far lighter on a shared machine than a Go gRPC
// client); the backends answer every call with its own message and
// grpc-status 0 in the trailers.
const (
	// grpcPath is the method called.
	grpcPath = "/helios.bench.Echo/Unary"
	// grpcRequestFile holds one call's body: a gRPC frame (flag byte,
	// 4-byte length) around grpcMessageBytes of message.
	grpcRequestFile  = "grpc-request.bin"
	grpcMessageBytes = 100
)

// grpcHeaders are the request headers of a gRPC call.
var grpcHeaders = map[string]string{"content-type": "application/grpc", "te": "trailers"}

// grpcRequest returns one call's body.
func grpcRequest() []byte {
	b := make([]byte, 5+grpcMessageBytes)
	binary.BigEndian.PutUint32(b[1:5], grpcMessageBytes)
	for i := range grpcMessageBytes {
		b[5+i] = 'a' + byte(i%26)
	}
	return b
}

// GRPCEcho answers gRPC unary calls with the request's own message and
// grpc-status 0; anything else on /healthz is "ok" (for health checks) and
// elsewhere 404.
func GRPCEcho(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/healthz":
			io.WriteString(w, "ok\n")
		case r.Method == http.MethodPost && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc"):
			body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
			if err != nil || len(body) < 5 || int(binary.BigEndian.Uint32(body[1:5])) != len(body)-5 {
				w.Header().Set("Content-Type", "application/grpc")
				w.Header().Set("Grpc-Status", "3") // INVALID_ARGUMENT, trailers-only
				return
			}
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("X-Backend", name)
			w.Header().Set("Trailer", "Grpc-Status")
			w.Write(body)
			w.Header().Set("Grpc-Status", "0")
		default:
			http.NotFound(w, r)
		}
	})
}

// ServeH2C serves h on ln over HTTP/1.1 and HTTP/2 without TLS (prior
// knowledge, as gRPC clients and proxies speak it) until ln is closed.
func ServeH2C(ln net.Listener, h http.Handler) error {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: h, Protocols: &p, ReadHeaderTimeout: 10 * time.Second}
	return srv.Serve(ln)
}
