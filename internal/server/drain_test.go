package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// TestUpgradeDrainAnswersEveryStream drains a server the way a binary
// upgrade does: a second server takes its listening sockets and serves,
// then the first shuts down, with HTTP/2 clients (10 connections with 10
// streams each, over TLS and over h2c) waiting on a backend. Every
// request is answered: by the old server, or, refused by its final
// GOAWAY, retried by the client on the new one.
// (Issue 26: streams recorded as 200 were lost when a connection was
// shut with their answers still held; the engine's test
// TestLoopH2DrainAnswersHeldStreams shows that case every time, this
// one the whole path.)
func TestUpgradeDrainAnswersEveryStream(t *testing.T) {
	eachEngine(t, func(t *testing.T, engine string) {
		certs := newTestCerts(t)
		certs.write(t, "site", "site.example", "127.0.0.1")
		bs := startBackends(t, 1)
		cfg := h2ServerConfig(t, h2Config, certs, bs, engine)
		fixedPorts(t, cfg)
		log := newCountedLog()
		old, err := New(cfg, Options{Recorder: log})
		if err != nil {
			t.Fatal(err)
		}
		if err := old.Start(); err != nil {
			t.Fatal(err)
		}
		const conns, streams = 10, 10
		type result struct {
			status int
			body   string
			err    error
		}
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			results []result
		)
		for _, l := range []struct {
			name, scheme string
			certs        *testCerts
		}{{"web", "https", certs}, {"plain", "http", nil}} {
			url := l.scheme + "://" + old.Addr(l.name).String()
			for i := 0; i < conns; i++ {
				c := &http.Client{Transport: newH2ServerClient(t, l.certs), Timeout: 10 * time.Second}
				for j := 0; j < streams; j++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						// Answers spread over 100ms, as under load.
						resp, err := c.Get(fmt.Sprintf("%s/delay/%d", url, 300+10*j))
						r := result{err: err}
						if err == nil {
							b, _ := io.ReadAll(resp.Body)
							resp.Body.Close()
							r.status, r.body = resp.StatusCode, string(b)
						}
						mu.Lock()
						results = append(results, r)
						mu.Unlock()
					}()
				}
			}
		}
		time.Sleep(150 * time.Millisecond) // the requests are at the backend
		socks, err := old.HandoffSockets()
		if err != nil {
			t.Fatal(err)
		}
		startServer(t, cfg, Options{Sockets: &handover{socks: socks}})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := old.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: got %v, want nil", err)
		}
		wg.Wait()
		for _, r := range results {
			if r.err != nil || r.status != 200 {
				t.Errorf("request: got (%d, %v), want 200", r.status, r.err)
			}
		}
		if got := len(results); got != 2*conns*streams {
			t.Errorf("got %d results, want %d", got, 2*conns*streams)
		}
		answered := 0
		for _, line := range log.lines(t) {
			if line["status"] == float64(200) {
				answered++
			}
		}
		if answered == 0 {
			t.Errorf("the old server's access log: got no request answered, want those in flight when it drained")
		}
	})
}

// TestDrainSendsWebSocketsGoingAway shuts a server down with a WebSocket
// open through it (to the built-in backend's echo), on both engines: the
// WebSocket works until the drain's deadline, then the client gets a
// close frame with status 1001 going away, and the connection closes.
// (Issue 26: WebSockets were cut at the deadline with no close frame.)
func TestDrainSendsWebSocketsGoingAway(t *testing.T) {
	eachEngine(t, func(t *testing.T, engine string) {
		bs := startBackends(t, 1)
		cfg := yamlConfig(t, oneBackend, bs)
		setEngine(cfg, engine)
		s, _ := startServer(t, cfg, Options{})
		nc, err := net.DialTimeout("tcp", s.Addr("web").String(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(nc, "GET /ws HTTP/1.1\r\nHost: x\r\nOrigin: http://x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"+
			"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
		br := bufio.NewReader(nc)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 101 {
			t.Fatalf("upgrade: got (%v, %v), want 101", resp, err)
		}
		// "hi", masked with 01 02 03 04, comes back as an unmasked
		// (binary) frame.
		io.WriteString(nc, "\x81\x82\x01\x02\x03\x04\x69\x6b")
		echo := make([]byte, 4)
		if _, err := io.ReadFull(br, echo); err != nil || string(echo) != "\x82\x02hi" {
			t.Fatalf("echo: got (%q, %v), want %q", echo, err, "\x82\x02hi")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		shut := make(chan error, 1)
		go func() { shut <- s.Shutdown(ctx) }()
		rest, err := io.ReadAll(br)
		if err != nil {
			t.Errorf("got %v, want the connection closed", err)
		}
		if string(rest) != "\x88\x02\x03\xe9" {
			t.Errorf("at the drain's deadline: got %q, want a close frame with status 1001", rest)
		}
		if err := <-shut; !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Shutdown: got %v, want the drain cut short at its deadline", err)
		}
	})
}
