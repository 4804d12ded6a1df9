package loadgen

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/backend"
)

// The WebSocket client against the built-in backend's echo: every message
// comes back whole, and a refused upgrade is counted, not retried in a loop.
func TestRunWSAgainstTheBackendEcho(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go backend.New("b").Serve(ln)
	defer ln.Close()
	for _, size := range []int{16, 300, 70000} {
		res, err := RunWS(context.Background(), WSConfig{URL: "ws://" + ln.Addr().String() + "/ws", Connections: 3, Duration: 300 * time.Millisecond, MessageBytes: size})
		if err != nil {
			t.Fatal(err)
		}
		if res.Messages < 10 || res.Errors.Total() != 0 || res.Latency.Count != res.Messages {
			t.Errorf("%d-byte messages: got %d messages, errors %+v, want at least 10 and none", size, res.Messages, res.Errors)
		}
	}
	res, err := RunWS(context.Background(), WSConfig{URL: "ws://" + ln.Addr().String() + "/", Connections: 2, Duration: 250 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Messages != 0 || res.Errors.Non2xx < 2 || res.Errors.Non2xx > 10 {
		t.Errorf("no WebSocket at /: got %d messages, %d refused upgrades, want 0 and 2..10", res.Messages, res.Errors.Non2xx)
	}
}

func TestRunHandshakes(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	tests := []struct {
		name       string
		resume     bool
		wantResume bool
	}{
		{"full handshakes", false, false},
		{"resumed", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conns.Store(0)
			res, err := RunHandshakes(context.Background(), HandshakeConfig{URL: srv.URL + "/", Connections: 4, Duration: 300 * time.Millisecond, Resume: tt.resume})
			if err != nil {
				t.Fatal(err)
			}
			if res.Handshakes < 10 || res.Errors.Total() != 0 {
				t.Fatalf("got %d handshakes, errors %+v, want at least 10 and none", res.Handshakes, res.Errors)
			}
			// Every handshake was a connection of its own.
			if got := uint64(conns.Load()); got < res.Handshakes {
				t.Errorf("server saw %d connections for %d handshakes", got, res.Handshakes)
			}
			// The first handshake of each client is a full one.
			resumedMost := res.Resumed+uint64(res.Connections) >= res.Handshakes && res.Resumed > 0
			if resumedMost != tt.wantResume || !tt.wantResume && res.Resumed != 0 {
				t.Errorf("resumed %d of %d, want resumption %v", res.Resumed, res.Handshakes, tt.wantResume)
			}
		})
	}
}

func TestRunIdle(t *testing.T) {
	var active atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(r.Proto)) }))
	srv.EnableHTTP2 = true
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			active.Add(1)
		case http.StateClosed, http.StateHijacked:
			active.Add(-1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	for _, h2 := range []bool{false, true} {
		done := make(chan *IdleResult)
		go func() {
			res, err := RunIdle(context.Background(), IdleConfig{URL: srv.URL + "/", Connections: 30, H2: h2, Hold: 400 * time.Millisecond})
			if err != nil {
				t.Error(err)
			}
			done <- res
		}()
		time.Sleep(250 * time.Millisecond)
		held := active.Load()
		res := <-done
		if res == nil {
			return
		}
		if res.Opened != 30 || res.Failed != 0 || held != 30 {
			t.Errorf("h2 %v: got %d opened, %d failed, %d held at the server, want 30, 0, 30", h2, res.Opened, res.Failed, held)
		}
	}
}

func TestParseJSON(t *testing.T) {
	var b bytes.Buffer
	in := &WSResult{Format: FormatWS, Messages: 7, Latency: LatencyMS{Count: 7}}
	if err := WriteJSON(&b, in); err != nil {
		t.Fatal(err)
	}
	var out WSResult
	if err := ParseJSON(strings.NewReader("$ helios bench wsload\n"+b.String()), &out, FormatWS); err != nil || out.Messages != 7 {
		t.Errorf("got %+v, %v, want 7 messages", out, err)
	}
	var h HandshakeResult
	if err := ParseJSON(&b, &h, FormatHandshake); err == nil {
		t.Errorf("a wsload result parsed as a handshake result")
	}
}
