package server

import (
	"context"
	"fmt"
	"io"
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
		cfg := h2ServerConfig(t, `
listeners:
  - name: web
    address: "127.0.0.1:1"
    tls: {cert_file: "{{DIR}}/site.pem", key_file: "{{DIR}}/site.key"}
  - name: plain
    address: "127.0.0.2:1"
    h2c: true
routes:
  - {name: app, match: {path_prefix: /}, upstream: app}
upstreams: [{name: app, backends: [{address: "{{B1}}"}]}]
admin: {address: "off"}
`, certs, bs, engine)
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
