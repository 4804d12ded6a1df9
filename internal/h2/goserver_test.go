package h2

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// These tests run a client Conn, behind the test driver, against
// golang.org/x/net/http2's server (h2c), as Helios talks to h2c
// backends such as gRPC services.

// startGoServer serves h over h2c on a loopback listener until the
// test ends.
func startGoServer(t *testing.T, h http.Handler, maxStreams uint32) string {
	srv := &http2.Server{MaxConcurrentStreams: maxStreams}
	return loopbackServer(t, func(nc net.Conn) { srv.ServeConn(nc, &http2.ServeConnOpts{Handler: h}) })
}

// dialClient connects a client Conn to addr through the test driver.
func dialClient(t *testing.T, addr string, cfg Config) *netDriver {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	d := serveNetConn(nc, func(out Output) *Conn { return NewClientConn(out, &testClient{}, cfg) })
	t.Cleanup(func() {
		d.do(func(c *Conn) { d.abort = true; c.Close(nil) })
		<-d.done
	})
	return d
}

// grpcLike echoes the request body and ends with gRPC's trailers.
func grpcLike(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/grpc")
	w.Header().Set("Trailer", "Grpc-Status, Grpc-Message")
	w.WriteHeader(200)
	io.Copy(w, r.Body)
	w.Header().Set("Grpc-Status", "0")
	w.Header().Set("Grpc-Message", r.Trailer.Get("X-Request-Trailer"))
}

// roundTrip sends one request through the driver and waits for its
// answer.
func roundTrip(t *testing.T, d *netDriver, h *RequestHead, body []byte, trailers []Field) *clientExchange {
	t.Helper()
	var x *clientExchange
	var err error
	d.do(func(c *Conn) {
		x, err = send(c, h, body, trailers)
		if x != nil {
			x.doneCh = make(chan struct{})
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-x.doneCh:
	case <-time.After(30 * time.Second):
		t.Fatal("no answer in 30s")
	}
	return x
}

func TestClientAgainstGoServer(t *testing.T) {
	addr := startGoServer(t, http.HandlerFunc(grpcLike), 0)
	d := dialClient(t, addr, Config{})
	tests := []struct {
		name     string
		body     []byte
		trailers []Field
		message  string
	}{
		{name: "unary", body: []byte("\x00\x00\x00\x00\x05hello")},
		{name: "request trailers", body: []byte("x"), trailers: fieldList("x-request-trailer", "seen"), message: "seen"},
		{name: "large body", body: randomBytes(5<<20, 9)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Go's server keeps only the request trailers declared.
			h := request("POST", "/pkg.Svc/Call", field("content-type", "application/grpc"), field("te", "trailers"), field("trailer", "X-Request-Trailer"))
			x := roundTrip(t, d, h, tt.body, tt.trailers)
			if x.err != nil || x.status != 200 || !bytes.Equal(x.body, tt.body) {
				t.Fatalf("got err %v, status %d, %d bytes; want 200 and the %d bytes sent", x.err, x.status, len(x.body), len(tt.body))
			}
			got := map[string]string{}
			for _, f := range x.trailers {
				got[string(f.Name)] = string(f.Value)
			}
			if got["grpc-status"] != "0" || got["grpc-message"] != tt.message {
				t.Errorf("got trailers %v, want grpc-status 0 and grpc-message %q", x.trailers, tt.message)
			}
		})
	}
}

// TestClientStreamLimitFromGoServer: the server's
// SETTINGS_MAX_CONCURRENT_STREAMS bounds what the client opens, and a
// stream that ends makes room again.
func TestClientStreamLimitFromGoServer(t *testing.T) {
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/wait" {
			<-release
		}
		w.Write([]byte("done"))
	})
	addr := startGoServer(t, h, 3)
	d := dialClient(t, addr, Config{})
	// The server's SETTINGS arrive with its first answer.
	roundTrip(t, d, request("GET", "/"), nil, nil)
	var avail int
	d.do(func(c *Conn) { avail = c.AvailableStreams() })
	if avail != 3 {
		t.Fatalf("got %d available streams, want the server's 3", avail)
	}
	var waiting []*clientExchange
	d.do(func(c *Conn) {
		for c.CanOpen() {
			x, err := send(c, request("GET", "/wait"), nil, nil)
			if err != nil {
				t.Error(err)
				return
			}
			x.doneCh = make(chan struct{})
			waiting = append(waiting, x)
		}
	})
	if len(waiting) != 3 {
		t.Fatalf("got %d streams opened before CanOpen went false, want 3", len(waiting))
	}
	close(release)
	for _, x := range waiting {
		<-x.doneCh
		if x.err != nil || string(x.body) != "done" {
			t.Errorf("got %v, %q; want done", x.err, x.body)
		}
	}
	d.do(func(c *Conn) { avail = c.AvailableStreams() })
	if avail != 3 {
		t.Errorf("got %d available streams after the answers, want 3", avail)
	}
}
