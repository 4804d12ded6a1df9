package engine

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/wire"
)

// Clients and backends that fail, over the whole matrix (matrix_test.go).

// TestMatrixClientGone has the client give up on its request while it
// is at a slow backend, before the answer's head or in its body (an
// HTTP/2 client resets its stream, an HTTP/1.1 one closes its
// connection): the request ends as 499 (not the backend's fault: the
// guard is told Ignored), the backend's request is cancelled, and the
// next request is served. How the backend's request ends is the backend
// protocol's: an HTTP/2 backend's stream is reset and its connection
// serves the next request (a reset costs the stream only), an HTTP/1.1
// backend's connection, its answer still to come, is closed rather than
// pooled. An HTTP/2 client's reset is counted, and costs it its stream
// only: the next request goes on the same connection.
func TestMatrixClientGone(t *testing.T) {
	for _, midBody := range []bool{false, true} {
		name := "at the backend"
		if midBody {
			name = "mid-body"
		}
		t.Run(name, func(t *testing.T) {
			matrix(t, func(t *testing.T, c *cell) { testClientGone(t, c, midBody) }, inParallel())
		})
	}
}

// testClientGone is TestMatrixClientGone in one cell; midBody: the
// backend sends its head and part of its body before it stalls, and the
// client reads some of it first.
func testClientGone(t *testing.T, c *cell, midBody bool) {
	reached := make(chan struct{}, 1)
	cancelled := make(chan struct{}, 1)
	c.be.handle(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/quick" {
			io.WriteString(w, "quick")
			return
		}
		if midBody {
			w.Header().Set("Content-Length", "10000000")
			w.Write(bytes.Repeat([]byte("m"), 64<<10))
			w.(http.Flusher).Flush()
		}
		reached <- struct{}{}
		select {
		case <-r.Context().Done():
			cancelled <- struct{}{}
		case <-time.After(testTimeout):
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", c.base+"/slow", nil)
	done := make(chan error, 1)
	go func() {
		resp, err := c.tr.RoundTrip(req)
		if err == nil {
			// Some of the body, then the client gives up.
			_, err = io.ReadFull(resp.Body, make([]byte, 1000))
			cancel()
			_, err2 := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil {
				err = err2
			}
		}
		done <- err
	}()
	recv(t, reached, "the request at the backend")
	if !midBody {
		cancel()
	}
	if err := recv(t, done, "the client to give up"); err == nil {
		t.Fatal("the client got its whole answer, want it to have given up")
	}
	recv(t, cancelled, "the backend's request to be cancelled")
	checkRecord(t, c.p, proxy.StatusClientClosed, wire.ErrClientGone)
	if got := c.p.guard.outcomes(); len(got) != 1 || got[0] != proxy.Ignored {
		t.Errorf("got outcomes %v, want [Ignored]", got)
	}
	if !c.backend.http2() {
		waitFor(t, "the backend connection to be closed", func() bool { return c.be.closed.Load() == 1 })
		if n := c.p.idleBackendConns(); n != 0 {
			t.Errorf("got %d idle backend connections, want 0", n)
		}
	}
	if c.client.http2() {
		if n := c.h2stats.PeerResets.Load(); n != 1 {
			t.Errorf("got %d resets from the client counted, want 1", n)
		}
	}
	if r, err := c.get("/quick", nil); err != nil || r.status != 200 || r.body != "quick" {
		t.Errorf("next request: got (%d, %q, %v), want (200, quick)", r.status, r.body, err)
	}
	checkRecord(t, c.p, 200, nil)
	if n := c.dials.Load(); c.client.http2() && n != 1 {
		t.Errorf("got %d client connections, want 1 (the reset costs its stream only)", n)
	}
	a, cl := c.be.accepts.Load(), c.be.closed.Load()
	switch {
	case c.backend.http2() && (a != 1 || cl != 0):
		t.Errorf("got %d backend connections dialled and %d closed, want 1 and 0 (a reset costs its stream only)", a, cl)
	case !c.backend.http2() && a != 2:
		t.Errorf("got %d backend connections dialled, want 2 (the first closed)", a)
	}
}

// TestMatrixScriptedBackendFailures has an HTTP/1.1 backend fail a
// request in each way it can: the client gets the pipeline's answer (502,
// 504) or, once its answer has begun, a cut one; the record says how the
// backend failed; a connect error is retried on the next backend. Only
// the HTTP/1.1 backend protocol: the backends are scripted byte by byte
// (a malformed head, a body cut short), and how an HTTP/2 backend fails
// is its own (TestH2UpBackendConnectionBreaks, TestH2UpPing). What the
// failure costs the client is its protocol's: an HTTP/2 client its
// stream only, its connection serving the next; an HTTP/1.1 client
// nothing, or, once its answer was cut, its connection, which is closed.
func TestMatrixScriptedBackendFailures(t *testing.T) {
	answering := func(t testing.TB, resp string) string {
		return startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
			if readReqHead(br) != "" {
				io.WriteString(nc, resp)
			}
		}).addr
	}
	tests := []struct {
		name string
		cfg  func(t testing.TB) loopConfig
		// status is the answer's; 0: the answer is cut.
		status  int
		body    string
		wantErr error
		attempt int
		// twice: the request is sent twice on the connection.
		twice bool
	}{
		{name: "dial refused", cfg: func(t testing.TB) loopConfig { return loopTo(deadAddr(t)) },
			status: 502, body: string(bodyBadGateway), wantErr: wire.ErrConnect, attempt: 1, twice: true},
		{name: "malformed head", cfg: func(t testing.TB) loopConfig {
			return loopTo(answering(t, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nx"))
		}, status: 502, body: string(bodyBadGateway), wantErr: wire.ErrBackend, attempt: 1},
		{name: "101 nobody asked for", cfg: func(t testing.TB) loopConfig {
			return loopTo(answering(t, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"))
		}, status: 502, body: string(bodyBadGateway), wantErr: wire.ErrBackend, attempt: 1},
		{name: "no head in time", cfg: func(t testing.TB) loopConfig {
			be := startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
				readReqHead(br)
				io.Copy(io.Discard, br)
			})
			cfg := loopTo(be.addr)
			cfg.to.ResponseHeaderTimeout = 100 * time.Millisecond
			return cfg
		}, status: 504, wantErr: wire.ErrTimeout, attempt: 1},
		{name: "closes mid fixed body", cfg: func(t testing.TB) loopConfig {
			return loopTo(answering(t, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b"))
		}, wantErr: wire.ErrBackend, attempt: 1},
		{name: "closes mid chunked body", cfg: func(t testing.TB) loopConfig {
			return loopTo(answering(t, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"))
		}, wantErr: wire.ErrBackend, attempt: 1},
		{name: "body read timeout", cfg: func(t testing.TB) loopConfig {
			be := startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
				readReqHead(br)
				io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
				io.Copy(io.Discard, br)
			})
			cfg := loopTo(be.addr)
			cfg.to.ReadTimeout = 100 * time.Millisecond
			return cfg
		}, wantErr: wire.ErrTimeout, attempt: 1},
		{name: "connect error retried on the next backend", cfg: func(t testing.TB) loopConfig {
			cfg := loopConfig{backends: []string{deadAddr(t), okBackend(t, nil).addr}, to: defaultTransport}
			cfg.retry = proxy.RetryPolicy{Attempts: 1, OnConnectError: true}
			return cfg
		}, status: 200, body: "ok", attempt: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			modes(t, func(t *testing.T, m mode, _ matrixOpts) {
				cfg := tt.cfg(t)
				c := startFront(t, m, cfg)
				for range 1 + btoi(tt.twice) {
					r, err := c.get("/x", nil)
					switch {
					case tt.status == 0:
						checkCut(t, c, err)
					case err != nil:
						t.Errorf("got %v, want an answer", err)
					case r.status != tt.status || tt.body != "" && r.body != tt.body:
						t.Errorf("got (%d, %q), want (%d, %q)", r.status, r.body, tt.status, tt.body)
					}
					rec := c.p.nextRec(t)
					if tt.wantErr != nil && !errors.Is(rec.Err, tt.wantErr) || tt.wantErr == nil && rec.Err != nil {
						t.Errorf("record: got %v, want %v", rec.Err, tt.wantErr)
					}
					if rec.Attempts != tt.attempt {
						t.Errorf("record: got %d attempts, want %d", rec.Attempts, tt.attempt)
					}
				}
				if tt.status == 0 {
					if n := c.p.idleBackendConns(); n != 0 {
						t.Errorf("got %d idle backend connections, want 0", n)
					}
				}
				if r, err := c.get("/fixed/next", nil); err != nil || r.status != 200 || r.body != "fixed" {
					t.Errorf("next request: got (%d, %q, %v), want (200, fixed)", r.status, r.body, err)
				}
				want := int32(1) // a failure costs an HTTP/2 client its stream only
				if tt.status == 0 && !c.client.http2() {
					want = 2
					// The cut answer's connection, seen on the wire: the
					// proxy closes it.
					rc := c.raw(t)
					rc.send("GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
					if _, err := rc.tryRead("GET"); !errors.Is(err, io.ErrUnexpectedEOF) {
						t.Errorf("raw client: got %v, want %v", err, io.ErrUnexpectedEOF)
					}
					rc.expectClosed(time.Second)
					c.p.nextRec(t)
				}
				if n := c.dials.Load(); n != want {
					t.Errorf("got %d client connections, want %d", n, want)
				}
			}, onlyBackends(backendH1), inParallel())
		})
	}
}

// checkCut checks err is what a client gets of an answer cut after its
// head: an HTTP/1.1 client a body short of its length, an HTTP/2 client
// its stream reset.
func checkCut(t testing.TB, c *cell, err error) {
	t.Helper()
	switch {
	case c.client.http2() && (err == nil || !strings.Contains(err.Error(), "stream error")):
		t.Errorf("got %v, want the stream reset", err)
	case !c.client.http2() && !errors.Is(err, io.ErrUnexpectedEOF):
		t.Errorf("got %v, want %v", err, io.ErrUnexpectedEOF)
	}
}

// btoi is 1 for true, 0 for false.
func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
