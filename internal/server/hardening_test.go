package server

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/config"
	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/wire"
)

// testEngines are the engine drivers every hardening test runs on.
var testEngines = []string{config.PollerNative, config.PollerPortable}

// eachEngine runs f once per engine driver, as a subtest named after it.
func eachEngine(t *testing.T, f func(t *testing.T, engine string)) {
	for _, e := range testEngines {
		t.Run(e, func(t *testing.T) { f(t, e) })
	}
}

// setEngine makes every listener of cfg use engine.
func setEngine(cfg *config.Config, engine string) {
	for i := range cfg.Listeners {
		cfg.Listeners[i].Poller = engine
	}
}

// backendFailures returns the failures counted against each backend of
// the first upstream, and whether any is ejected.
func backendFailures(s *Server) (fails []uint64, ejected bool) {
	for _, b := range s.Pipeline().Graph().Upstreams[0].Backends {
		fails = append(fails, b.Failures())
		if _, ok := b.EjectedUntil(); ok {
			ejected = true
		}
	}
	return fails, ejected
}

// idle waits until no request is in flight to any backend of the first
// upstream.
func idle(t *testing.T, s *Server) {
	t.Helper()
	waitFor(t, 5*time.Second, "backends idle", func() bool {
		for _, b := range s.Pipeline().Graph().Upstreams[0].Backends {
			if b.Inflight() != 0 {
				return false
			}
		}
		return true
	})
}

// readHead reads from br until the end of a response head and returns it.
func readHead(br *bufio.Reader) (string, error) {
	var head strings.Builder
	for {
		line, err := br.ReadString('\n')
		head.WriteString(line)
		if err != nil {
			return head.String(), err
		}
		if line == "\r\n" {
			return head.String(), nil
		}
	}
}

// strictConfig ejects a backend, and opens its breaker, on one failure:
// a single failure counted against the wrong party shows. Bodies stream
// (request buffering would keep an abandoned upload from any backend).
const strictConfig = `
listeners: [{name: web, address: "127.0.0.1:1"}]
routes: [{name: app, match: {path_prefix: /}, upstream: app, request_buffering: off}]
upstreams:
  - name: app
    backends: [{address: "{{B1}}"}, {address: "{{B2}}"}, {address: "{{B3}}"}]
    passive: {max_fails: 1, fail_window: 10s, eject_for: 30s}
    circuit_breaker: {consecutive_failures: 1}
admin: {address: "off"}
`

// Issue 9, item 1: a client that goes away must never count against the
// backend, in any phase. With a full-duplex backend (/echo answers while
// the upload still arrives) the clients below each left mid-exchange;
// with max_fails 1 and a breaker that opens on one failure, a single
// misattributed failure ejects a healthy backend.
func TestClientAbortIsNotABackendFailure(t *testing.T) {
	cases := []struct {
		name string
		req  string
		// readBody: bytes of the answer's body to read before leaving.
		readBody int
	}{
		{"fixed-length upload cut short", "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n0123456789", 0},
		{"chunked upload cut short", "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\na\r\n0123456789\r\n", 0},
		{"large download left early", "GET /bytes/50000000 HTTP/1.1\r\nHost: x\r\n\r\n", 100000},
		{"small upload, download left early", "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n0123456789", 10},
	}
	eachEngine(t, func(t *testing.T, engine string) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				bs := startBackends(t, 3)
				cfg := yamlConfig(t, strictConfig, bs)
				setEngine(cfg, engine)
				s, _ := startServer(t, cfg, Options{})
				addr := s.Addr("web").String()
				for i := 0; i < 6; i++ {
					c, err := net.Dial("tcp", addr)
					if err != nil {
						t.Fatal(err)
					}
					c.SetDeadline(time.Now().Add(5 * time.Second))
					io.WriteString(c, tc.req)
					br := bufio.NewReader(c)
					head, err := readHead(br)
					if err != nil || !strings.HasPrefix(head, "HTTP/1.1 200") {
						c.Close()
						t.Errorf("request %d: got %q (err %v), want a 200 before leaving", i, firstLine(head), err)
						continue
					}
					if tc.readBody > 0 {
						if _, err := io.ReadFull(br, make([]byte, tc.readBody)); err != nil {
							t.Fatalf("reading the body: %v", err)
						}
					}
					c.Close()
				}
				idle(t, s)
				fails, ejected := backendFailures(s)
				for i, f := range fails {
					if f != 0 {
						t.Errorf("backend %d: got %d failures, want 0 (clients left, backends did nothing wrong)", i+1, f)
					}
				}
				if ejected {
					t.Error("a backend was ejected for clients that left")
				}
			})
		}
	})
}

// recordings keeps the records of finished requests (a proxy.Recorder).
type recordings struct {
	mu   sync.Mutex
	recs []proxy.Record
}

func (r *recordings) Record(_ wire.Exchange, rec proxy.Record) {
	r.mu.Lock()
	r.recs = append(r.recs, rec)
	r.mu.Unlock()
}

func (r *recordings) reset() {
	r.mu.Lock()
	r.recs = nil
	r.mu.Unlock()
}

// statuses returns the recorded statuses, waiting briefly for the
// records of requests that are still finishing.
func (r *recordings) statuses() []int {
	deadline := time.Now().Add(2 * time.Second)
	for {
		r.mu.Lock()
		n := len(r.recs)
		var out []int
		for _, rec := range r.recs {
			out = append(out, rec.Status)
		}
		r.mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			return out
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Issue 9, item 10: an upload that stalls is the client's fault, whether
// its body is chunked or has a length: 408, logged as 408, and never a
// failure of the backend.
func TestStalledUploadIs408(t *testing.T) {
	// The backend reads the whole body before it answers.
	var origin *httptest.Server
	origin = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Write([]byte("done"))
	}))
	defer origin.Close()
	cases := []struct{ name, req string }{
		{"fixed length", "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789"},
		{"fixed length, large", "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n0123456789"},
		{"chunked", "POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\na\r\n0123456789\r\n"},
		// Streamed to the backend as it arrives: the stall is the
		// client's all the same, with the backend already waiting.
		{"unbuffered fixed length", "POST /stream/up HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789"},
		{"unbuffered chunked", "POST /stream/up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\na\r\n0123456789\r\n"},
	}
	eachEngine(t, func(t *testing.T, engine string) {
		cfg := yamlConfig(t, `
listeners: [{name: web, address: "127.0.0.1:1", idle_timeout: 300ms}]
routes:
  - {name: stream, match: {path_prefix: /stream/}, upstream: app, request_buffering: "off"}
  - {name: app, match: {path_prefix: /}, upstream: app}
upstreams:
  - name: app
    backends: [{address: "`+strings.TrimPrefix(origin.URL, "http://")+`"}]
    passive: {max_fails: 1, fail_window: 10s, eject_for: 30s}
admin: {address: "off"}
`, nil)
		setEngine(cfg, engine)
		rec := &recordings{}
		s, _ := startServer(t, cfg, Options{Recorder: rec})
		addr := s.Addr("web").String()
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				rec.reset()
				out := rawExchange(t, addr, tc.req)
				if !strings.HasPrefix(out, "HTTP/1.1 408") {
					t.Errorf("got %q, want a 408", firstLine(out))
				}
				idle(t, s)
				if got := rec.statuses(); fmt.Sprint(got) != "[408]" {
					t.Errorf("got recorded statuses %v, want [408]", got)
				}
				if fails, _ := backendFailures(s); fails[0] != 0 {
					t.Errorf("got %d backend failures, want 0", fails[0])
				}
			})
		}
	})
}

// upgradeOrigin is a backend that answers 101 to every request whose head
// carries an Upgrade header, and 200 with the head it saw otherwise; with
// always set it answers 101 to every request, as a broken backend might.
func upgradeOrigin(t *testing.T, always bool) string {
	return scriptedBackend(t, func(c net.Conn) {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		head, err := readHead(bufio.NewReader(c))
		if err != nil {
			return
		}
		if always || strings.Contains(strings.ToLower(head), "\r\nupgrade:") {
			io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\ntunnel open\n")
			io.Copy(c, c)
			return
		}
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(head), head)
	})
}

// Issue 9, item 3: an upgrade is forwarded only for a protocol the route
// allows (websocket by default, never h2c); a refused one is served as a
// plain request, and a 101 to a request that did not ask for an upgrade
// is a bad gateway. Before, GET /h2c with Upgrade: h2c was tunnelled and
// requests sent through the tunnel reached /admin/secret, which a route
// answers with 403.
func TestUpgradesFollowRoutes(t *testing.T) {
	const h2cReq = "GET /h2c HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n"
	eachEngine(t, func(t *testing.T, engine string) {
		for _, always := range []bool{false, true} {
			t.Run(fmt.Sprintf("backend always upgrades=%v", always), func(t *testing.T) {
				origin := upgradeOrigin(t, always)
				cfg := yamlConfig(t, `
listeners: [{name: web, address: "127.0.0.1:1"}]
routes:
  - {name: admin, match: {path_prefix: /admin}, respond: {status: 403, body: "forbidden"}}
  - {name: app, match: {path_prefix: /}, upstream: app}
upstreams: [{name: app, backends: [{address: "`+origin+`"}], retries: {attempts: 0}}]
admin: {address: "off"}
`, nil)
				setEngine(cfg, engine)
				s, _ := startServer(t, cfg, Options{})
				out := rawExchange(t, s.Addr("web").String(), h2cReq+"GET /admin/secret HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
				if always {
					if !strings.HasPrefix(out, "HTTP/1.1 502") {
						t.Errorf("got %q, want 502 for a 101 nobody asked for", firstLine(out))
					}
				} else {
					if !strings.HasPrefix(out, "HTTP/1.1 200") {
						t.Fatalf("got %q, want the plain 200", firstLine(out))
					}
					if strings.Contains(strings.ToLower(out), "upgrade: h2c") || strings.Contains(strings.ToLower(out), "http2-settings") {
						t.Errorf("the backend saw the refused upgrade:\n%s", out)
					}
				}
				if strings.Contains(out, "tunnel open") {
					t.Errorf("a tunnel was opened:\n%s", out)
				}
			})
		}
	})
}

// Issue 9, item 9: requests a lenient parser let through.
func TestLenientRequestsRefused(t *testing.T) {
	tests := []struct {
		name, req, want string
	}{
		{"TRACE", "TRACE / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "HTTP/1.1 405"},
		{"CONNECT to a path", "CONNECT /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "HTTP/1.1 405"},
		{"10,000-byte method", strings.Repeat("M", 10000) + " / HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 501"},
		{"150 header lines", "GET / HTTP/1.1\r\nHost: x\r\n" + strings.Repeat("X-A: b\r\n", 150) + "\r\n", "HTTP/1.1 431"},
		{"empty Host", "GET / HTTP/1.1\r\nHost: \r\n\r\n", "HTTP/1.1 400"},
		{"Host with a bad port", "GET / HTTP/1.1\r\nHost: x:y\r\n\r\n", "HTTP/1.1 400"},
		{"Host a port alone", "GET / HTTP/1.1\r\nHost: :80\r\n\r\n", "HTTP/1.1 400"},
		{"Host empty brackets", "GET / HTTP/1.1\r\nHost: []\r\n\r\n", "HTTP/1.1 400"},
		{"chunk size with 20 leading zeros", "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n000000000000000000005\r\nhello\r\n0\r\n\r\n", "HTTP/1.1 200"},
	}
	eachEngine(t, func(t *testing.T, engine string) {
		bs := startBackends(t, 1)
		cfg := yamlConfig(t, `
listeners: [{name: web, address: "127.0.0.1:1"}]
routes: [{name: app, match: {path_prefix: /}, upstream: app}]
upstreams: [{name: app, backends: [{address: "{{B1}}"}]}]
admin: {address: "off"}
`, bs)
		setEngine(cfg, engine)
		s, _ := startServer(t, cfg, Options{})
		addr := s.Addr("web").String()
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if out := rawExchange(t, addr, tt.req); !strings.HasPrefix(out, tt.want) {
					t.Errorf("got %q, want %s", firstLine(out), tt.want)
				}
			})
		}
		t.Run("underscore headers dropped", func(t *testing.T) {
			out := rawExchange(t, addr, "GET /echo HTTP/1.1\r\nHost: x\r\nX_Forwarded_For: 6.6.6.6\r\nX-Kept: 1\r\nConnection: close\r\n\r\n")
			if !strings.Contains(out, "X-Kept: 1") {
				t.Fatalf("the echo lacks the ordinary header:\n%s", out)
			}
			if strings.Contains(out, "6.6.6.6") {
				t.Errorf("a header with underscores reached the backend:\n%s", out)
			}
		})
	})
}

// Issue 9, item 5: 3,000 clients that sent their bodies slowly held 3,000
// backend connections; with request buffering (the default, auto) a slow
// upload costs a backend nothing until it is complete, and bodies over
// max_body_bytes get 413.
func TestRequestBuffering(t *testing.T) {
	const half = 100 << 10
	eachEngine(t, func(t *testing.T, engine string) {
		for _, mode := range []string{"auto", "off"} {
			t.Run(mode, func(t *testing.T) {
				bs := startBackends(t, 1)
				cfg := yamlConfig(t, `
listeners: [{name: web, address: "127.0.0.1:1"}]
routes: [{name: app, match: {path_prefix: /}, upstream: app, request_buffering: `+mode+`}]
upstreams: [{name: app, backends: [{address: "{{B1}}"}]}]
admin: {address: "off"}
`, bs)
				setEngine(cfg, engine)
				s, _ := startServer(t, cfg, Options{})
				addr := s.Addr("web").String()
				var cs []net.Conn
				for i := 0; i < 10; i++ {
					c, err := net.Dial("tcp", addr)
					if err != nil {
						t.Fatal(err)
					}
					defer c.Close()
					c.SetDeadline(time.Now().Add(10 * time.Second))
					fmt.Fprintf(c, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", 2*half)
					c.Write(make([]byte, half))
					cs = append(cs, c)
				}
				time.Sleep(300 * time.Millisecond)
				got := bs[0].Connections()
				if mode == "auto" && got != 0 {
					t.Errorf("got %d backend connections while the uploads stall, want 0", got)
				}
				if mode == "off" && got == 0 {
					t.Errorf("got no backend connection while unbuffered uploads stall, want some (streaming)")
				}
				for i, c := range cs {
					c.Write(make([]byte, half))
					br := bufio.NewReader(c)
					head, err := readHead(br)
					if err != nil || !strings.HasPrefix(head, "HTTP/1.1 200") {
						t.Fatalf("client %d: got %q (%v), want 200", i, firstLine(head), err)
					}
				}
			})
		}
	})
}

// Issue 26, weakness 3: request_buffers bounds what request buffering
// holds beyond each route's caps. With the temporary files spent, a route
// that buffers what it can (auto) streams the rest of a body, and one
// that buffers whole bodies (on) answers 503, not the backend's failure;
// a reload that grants more lets the same body through; nothing is held
// once the exchanges are over.
func TestRequestBufferBudgets(t *testing.T) {
	const body = 200 << 10
	tmpl := `
listeners: [{name: web, address: "127.0.0.1:1", h2c: true}]
routes:
  - {name: on, match: {host: on.example}, upstream: app, request_buffering: "on"}
  - {name: app, match: {path_prefix: /}, upstream: app}
upstreams: [{name: app, backends: [{address: "{{B1}}"}]}]
admin: {address: "off"}
request_buffers: {connection_bytes: 1048576, memory_bytes: 1048576, file_bytes: %d}
`
	eachEngine(t, func(t *testing.T, engine string) {
		bs := startBackends(t, 1)
		cfg := yamlConfig(t, fmt.Sprintf(tmpl, 0), bs)
		setEngine(cfg, engine)
		s, _ := startServer(t, cfg, Options{})
		addr := s.Addr("web").String()
		post := func(host string) string {
			out := rawExchange(t, addr, fmt.Sprintf("POST /echo HTTP/1.1\r\nHost: %s\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", host, body, strings.Repeat("b", body)))
			idle(t, s)
			if rb := s.RequestBuffers(); rb.Memory != 0 || rb.File != 0 {
				t.Errorf("%s: got %d bytes in memory and %d in files held after the exchange, want none", host, rb.Memory, rb.File)
			}
			return out
		}
		if out := post("x"); !strings.HasPrefix(out, "HTTP/1.1 200") || !strings.HasSuffix(out, strings.Repeat("b", 100)) {
			t.Errorf("auto, no file budget: got %q, want 200 and the body back (the rest streamed)", firstLine(out))
		}
		if out := post("on.example"); !strings.HasPrefix(out, "HTTP/1.1 503") {
			t.Errorf("on, no file budget: got %q, want 503", firstLine(out))
		}
		if fails, _ := backendFailures(s); fails[0] != 0 {
			t.Errorf("got %d backend failures, want 0", fails[0])
		}
		cfg2 := yamlConfig(t, fmt.Sprintf(tmpl, 1<<20), bs)
		setEngine(cfg2, engine)
		if err := s.Reload(cfg2); err != nil {
			t.Fatal(err)
		}
		if out := post("on.example"); !strings.HasPrefix(out, "HTTP/1.1 200") {
			t.Errorf("on, after a reload with a file budget: got %q, want 200", firstLine(out))
		}
	})
}

// TestBodyLimits checks max_body_bytes (413, declared or counted) and
// what request buffering does with bodies it holds whole: chunked ones
// go on with a Content-Length, and a retry sends the body again.
func TestBodyLimits(t *testing.T) {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "got %d bytes, Content-Length %q, Transfer-Encoding %q", n, r.Header.Get("Content-Length"), r.TransferEncoding)
	}))
	defer sink.Close()
	var failed atomic.Int64 // bodies the failing backend received whole
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n, err := io.Copy(io.Discard, r.Body); err == nil && n > 0 {
			failed.Add(1)
		}
		w.WriteHeader(503)
	}))
	defer failing.Close()
	chunked := func(n int) string {
		return fmt.Sprintf("PUT /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", n, strings.Repeat("z", n))
	}
	fixed := func(n int) string {
		return fmt.Sprintf("PUT /up HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", n, strings.Repeat("z", n))
	}
	tests := []struct {
		name, route, req, want string
	}{
		{"declared length over the limit", "max_body_bytes: 1000", fixed(1001), "HTTP/1.1 413"},
		{"chunked body over the limit", "max_body_bytes: 1000", chunked(5000), "HTTP/1.1 413"},
		{"chunked body over the limit, unbuffered", "max_body_bytes: 1000, request_buffering: off", chunked(200000), "HTTP/1.1 413"},
		{"at the limit", "max_body_bytes: 1000", fixed(1000), "got 1000 bytes"},
		{"buffered whole: larger than the buffers with on", "request_buffering: on, request_buffer_memory_bytes: 1000, request_buffer_file_bytes: 1000", chunked(3000), "HTTP/1.1 413"},
		{"buffered chunked body goes with a length", "request_buffer_memory_bytes: 1000", chunked(100000), `got 100000 bytes, Content-Length "100000", Transfer-Encoding []`},
		{"a body larger than the buffers streams with auto", "request_buffer_memory_bytes: 1000, request_buffer_file_bytes: 1000", chunked(100000), `got 100000 bytes, Content-Length "", Transfer-Encoding ["chunked"]`},
		{"a buffered body is sent again on a retry", "request_buffer_memory_bytes: 1000", fixed(100000), "got 100000 bytes"},
	}
	eachEngine(t, func(t *testing.T, engine string) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				backends := `[{address: "` + strings.TrimPrefix(sink.URL, "http://") + `"}]`
				if strings.Contains(tt.name, "retry") {
					// The failing backend is tried first (round robin
					// starts there) and answers 503: PUT is retried.
					backends = `[{address: "` + strings.TrimPrefix(failing.URL, "http://") + `"}, {address: "` + strings.TrimPrefix(sink.URL, "http://") + `"}]`
				}
				cfg := yamlConfig(t, `
listeners: [{name: web, address: "127.0.0.1:1"}]
routes: [{name: app, match: {path_prefix: /}, upstream: app, `+tt.route+`}]
upstreams: [{name: app, backends: `+backends+`}]
admin: {address: "off"}
`, nil)
				setEngine(cfg, engine)
				s, _ := startServer(t, cfg, Options{})
				before := failed.Load()
				out := rawExchange(t, s.Addr("web").String(), tt.req)
				if !strings.Contains(out, tt.want) {
					t.Errorf("got %q, want it to contain %q", out, tt.want)
				}
				if strings.Contains(tt.name, "retry") && failed.Load() != before+1 {
					t.Errorf("the failing backend got %d whole bodies, want 1 (tried first)", failed.Load()-before)
				}
			})
		}
	})
}

// TestQuietTunnelIsClosed: an upgraded connection (WebSocket) is a tunnel
// on the loop; one that carries bytes stays open past the upstream's
// transport.read_timeout, and one quiet for that long is closed, on every
// driver.
func TestQuietTunnelIsClosed(t *testing.T) {
	origin := scriptedBackend(t, func(c net.Conn) {
		c.SetDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(c)
		if _, err := readHead(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		io.Copy(c, br) // echo until Helios closes the tunnel
	})
	eachEngine(t, func(t *testing.T, engine string) {
		cfg := yamlConfig(t, `
listeners: [{name: web, address: "127.0.0.1:1"}]
routes: [{name: app, match: {path_prefix: /}, upstream: app}]
upstreams: [{name: app, backends: [{address: "`+origin+`"}], transport: {read_timeout: 400ms}}]
admin: {address: "off"}
`, nil)
		setEngine(cfg, engine)
		s, _ := startServer(t, cfg, Options{})
		c := dialListener(t, s, "web")
		io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		br := bufio.NewReader(c)
		head, err := readHead(br)
		if err != nil || !strings.HasPrefix(head, "HTTP/1.1 101") {
			t.Fatalf("got %q (%v), want a 101", head, err)
		}
		// Busy for 1.2 s, three times the timeout: the tunnel stays.
		var last time.Time
		for i := 0; i < 12; i++ {
			time.Sleep(100 * time.Millisecond)
			io.WriteString(c, "ping\n")
			if line, err := br.ReadString('\n'); err != nil || line != "ping\n" {
				t.Fatalf("message %d: got %q (%v), want the echo", i, line, err)
			}
			last = time.Now()
		}
		// Quiet: closed about the timeout after the last bytes it carried
		// (the loop dates them at the start of its batch, a little before
		// the client has them).
		_, err = br.ReadByte()
		waited := time.Since(last)
		if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("quiet tunnel: got %v after %v, want it closed", err, waited)
		}
		if waited < 350*time.Millisecond || waited > 3*time.Second {
			t.Errorf("quiet tunnel closed %v after its last bytes, want about 400ms", waited)
		}
	})
}

// panicky is a recorder that panics on requests for /boom.
type panicky struct{}

func (panicky) Record(x wire.Exchange, _ proxy.Record) {
	if strings.HasPrefix(string(x.Path()), "/boom") {
		panic("boom")
	}
}

// TestPanicIsCountedInMetrics: a panic while a request is served closes
// that connection alone and is exported as helios_panics_total; the next
// connection is served, on every driver.
func TestPanicIsCountedInMetrics(t *testing.T) {
	eachEngine(t, func(t *testing.T, engine string) {
		cfg := yamlConfig(t, `
listeners: [{name: web, address: "127.0.0.1:1"}]
routes: [{name: ok, match: {path_prefix: /}, respond: {status: 200, body: "fine"}}]
admin: {address: "off"}
`, nil)
		setEngine(cfg, engine)
		s, _ := startServer(t, cfg, Options{Recorder: panicky{}})
		addr := s.Addr("web").String()
		// The recorder runs once the answer is out: the client may see it
		// before the connection closes (no Connection: close was asked).
		rawExchange(t, addr, "GET /boom HTTP/1.1\r\nHost: x\r\n\r\n")
		if out := rawExchange(t, addr, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); !strings.HasSuffix(out, "fine") {
			t.Errorf("the next connection: got %q, want the answer", out)
		}
		mfs, err := s.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		var got float64 = -1
		for _, mf := range mfs {
			if mf.GetName() == "helios_panics_total" {
				got = mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		if got != 1 {
			t.Errorf("helios_panics_total: got %v, want 1 (-1: not exported)", got)
		}
	})
}

// TestUpstreamsKeepTheirOwnPools: two upstreams naming the same backend
// get a transport each, with its own options and its own warm
// connections (the loop's pools were keyed by address alone, and the
// last use set the options for both); a reload that changes neither
// keeps both pools warm. On every driver.
func TestUpstreamsKeepTheirOwnPools(t *testing.T) {
	eachEngine(t, func(t *testing.T, engine string) {
		bs := startBackends(t, 1)
		yaml := `
listeners: [{name: web, address: "127.0.0.1:1"}]
routes:
  - {name: fast, match: {host: fast}, upstream: fast}
  - {name: slow, match: {host: slow}, upstream: slow}
upstreams:
  - {name: fast, backends: [{address: "{{B1}}"}], transport: {response_header_timeout: 300ms}, retries: {attempts: 0}}
  - {name: slow, backends: [{address: "{{B1}}"}], retries: {attempts: 0}}
admin: {address: "off"}
`
		cfg := yamlConfig(t, yaml, bs)
		setEngine(cfg, engine)
		s, _ := startServer(t, cfg, Options{})
		// One client connection: one loop, so one shard of each pool.
		c := dialListener(t, s, "web")
		br := bufio.NewReader(c)
		get := func(host, path string) int {
			t.Helper()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, host)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("%s %s: %v", host, path, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return resp.StatusCode
		}
		for round := 0; round < 2; round++ {
			if got := get("slow", "/delay/600"); got != 200 {
				t.Errorf("round %d: slow upstream, 600ms answer: got %d, want 200 (its own timeout)", round, got)
			}
			if got := get("fast", "/delay/600"); got != 504 {
				t.Errorf("round %d: fast upstream, 600ms answer: got %d, want 504 (300ms timeout)", round, got)
			}
		}
		// The 504s cost the fast pool its connection; warm both again.
		before := bs[0].Connections()
		get("fast", "/")
		get("slow", "/")
		if got := bs[0].Connections() - before; got != 1 {
			t.Errorf("warming: got %d new backend connections, want 1 (the fast pool's)", got)
		}
		warm := bs[0].Connections()
		for i := 0; i < 3; i++ {
			get("fast", "/")
			get("slow", "/")
		}
		if got := bs[0].Connections(); got != warm {
			t.Errorf("keep-alive: got %d backend connections, want %d (one per upstream)", got, warm)
		}
		cfg2 := yamlConfig(t, yaml, bs)
		setEngine(cfg2, engine)
		if err := s.Reload(cfg2); err != nil {
			t.Fatal(err)
		}
		get("fast", "/")
		get("slow", "/")
		if got := bs[0].Connections(); got != warm {
			t.Errorf("after a reload: got %d backend connections, want %d (both pools kept warm)", got, warm)
		}
	})
}

// dialListener connects to listener name of s, with a 5 s deadline; the
// connection closes when the test ends.
func dialListener(t *testing.T, s *Server, name string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr(name).String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(5 * time.Second))
	return c
}
