package server

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// rudeBackend reads each request head and then closes the connection
// without answering (reset: true) or holds it unanswered until the test
// ends (reset: false). It returns its address.
func rudeBackend(t *testing.T, reset bool) string {
	t.Helper()
	done := make(chan struct{})
	addr := scriptedBackend(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			if line == "\r\n" {
				break
			}
		}
		if reset {
			c.(*net.TCPConn).SetLinger(0)
			return
		}
		<-done
	})
	t.Cleanup(func() { close(done) })
	return addr
}

const retryConfig = `
listeners: [{name: web, address: "127.0.0.1:1"}]
routes: [{name: app, match: {path_prefix: /}, upstream: app}]
upstreams:
  - name: app
    backends: [{address: "%s"}, {address: "{{B1}}"}]
    transport: {response_header_timeout: 30s}
    retries: {attempts: 1, on: [%s]%s}
admin: {address: "off"}
`

// TestRetryConditionsThroughHelios checks the retry conditions of issue
// 21 through real sockets: reset retries a GET whose backend closed the
// connection before answering (and connect_error alone no longer does);
// per_try_timeout cuts an attempt at a backend that never answers, far
// inside response_header_timeout, and timeout retries it; a backoff
// spaces the retry without losing it.
func TestRetryConditionsThroughHelios(t *testing.T) {
	tests := []struct {
		name   string
		reset  bool // the first backend resets; else it never answers
		on     string
		extra  string
		want   int
		wantBe string
	}{
		{name: "reset retried", reset: true, on: "reset", want: 200, wantBe: "b1"},
		{name: "reset, with a backoff", reset: true, on: "reset", extra: ", backoff: {base: 20ms, max: 40ms}", want: 200, wantBe: "b1"},
		{name: "reset not retried on connect_error", reset: true, on: "connect_error", want: 502},
		{name: "per-try timeout retried", on: "timeout", extra: ", per_try_timeout: 300ms", want: 200, wantBe: "b1"},
		{name: "per-try timeout not retried", on: "reset", extra: ", per_try_timeout: 300ms", want: 504},
	}
	eachEngine(t, func(t *testing.T, engine string) {
		bs := startBackends(t, 1)
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				cfg := yamlConfig(t, fmt.Sprintf(retryConfig, rudeBackend(t, tt.reset), tt.on, tt.extra), bs)
				setEngine(cfg, engine)
				_, url := startServer(t, cfg, Options{})
				// Round robin starts at the rude backend.
				status, got := getAs(t, &http.Client{Timeout: 10 * time.Second}, url+"/")
				if status != tt.want || got != tt.wantBe {
					t.Errorf("got %d from %q, want %d from %q", status, got, tt.want, tt.wantBe)
				}
			})
		}
	})
}

// TestRetryResetNotForPOST checks that reset retries idempotent methods
// only: the backend may have acted on a POST before it broke.
func TestRetryResetNotForPOST(t *testing.T) {
	bs := startBackends(t, 1)
	cfg := yamlConfig(t, fmt.Sprintf(retryConfig, rudeBackend(t, true), "reset", ", idempotent_only: false"), bs)
	_, url := startServer(t, cfg, Options{})
	resp, err := http.Post(url+"/echo", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 502 {
		t.Errorf("got %d, want 502", resp.StatusCode)
	}
}
