package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/helios-lb/helios/internal/accesslog"
	"github.com/helios-lb/helios/internal/config"
	"github.com/helios-lb/helios/internal/h2/h2spectest"
	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/wire"
)

// h2Config has a TLS listener "web" (http2 left to its default, on), a
// cleartext listener "plain" with h2c, and a TLS listener "noh2" with
// http2 off, in front of the built-in backend {{B1}}, with request
// buffering at its default.
const h2Config = `
listeners:
  - name: web
    address: "127.0.0.1:1"
    tls: {cert_file: "{{DIR}}/site.pem", key_file: "{{DIR}}/site.key"}
  - name: plain
    address: "127.0.0.2:1"
    h2c: true
  - name: noh2
    address: "127.0.0.3:1"
    http2: false
    tls: {cert_file: "{{DIR}}/site.pem", key_file: "{{DIR}}/site.key"}
routes:
  - {name: app, match: {path_prefix: /}, upstream: app}
upstreams: [{name: app, backends: [{address: "{{B1}}"}]}]
admin: {address: "off"}
`

// h2ServerConfig is h2Config with the certificates of certs and the
// backends bs, for engine. yamlConfig puts every listener on 127.0.0.1:0,
// and the server keys its listeners by address: each gets a loopback
// address of its own (port 0 still).
func h2ServerConfig(t *testing.T, yaml string, certs *testCerts, bs []*testBackend, engine string) *config.Config {
	t.Helper()
	cfg := yamlConfig(t, strings.ReplaceAll(yaml, "{{DIR}}", certs.dir), bs)
	for i := range cfg.Listeners {
		cfg.Listeners[i].Address = fmt.Sprintf("127.0.0.%d:0", i+1)
	}
	setEngine(cfg, engine)
	return cfg
}

// countedLog is the access log (accesslog.Logger, JSON) as the server's
// recorder, counting the requests it was handed.
type countedLog struct {
	*accesslog.Logger
	buf syncBuf
	n   atomic.Int64
}

func newCountedLog() *countedLog {
	l := &countedLog{}
	l.Logger = accesslog.New(&l.buf, accesslog.JSON)
	return l
}

func (l *countedLog) Record(ex wire.Exchange, r proxy.Record) {
	l.Logger.Record(ex, r)
	l.n.Add(1)
}

// lines closes the log and returns its lines, decoded.
func (l *countedLog) lines(t *testing.T) []map[string]any {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatalf("closing the access log: %v", err)
	}
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("access log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// syncBuf is a bytes.Buffer safe for the log's writer goroutine.
type syncBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// newH2ServerClient returns golang.org/x/net/http2's client for one of the
// server's listeners: TLS trusting certs' CA for site.example, or h2c
// with prior knowledge. Its idle connections are closed when the test
// ends.
func newH2ServerClient(t *testing.T, certs *testCerts) *http2.Transport {
	tr := &http2.Transport{DisableCompression: true}
	if certs != nil {
		tr.TLSClientConfig = &tls.Config{RootCAs: certs.pool, ServerName: "site.example"}
	} else {
		tr.AllowHTTP = true
		tr.DialTLSContext = func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}
	}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// TestHTTP2Listeners serves HTTP/2 on a TLS listener (ALPN h2, http2's
// default) and on an h2c listener, on every engine: h2spec's whole suite
// passes on both, a request reaches the backend with X-Forwarded-Proto
// saying how the client came (and its body, through request buffering),
// the access log says HTTP/2.0 and the TLS version, and a TLS listener
// with http2 off offers http/1.1 alone.
func TestHTTP2Listeners(t *testing.T) {
	eachEngine(t, func(t *testing.T, engine string) {
		certs := newTestCerts(t)
		certs.write(t, "site", "site.example", "127.0.0.1")
		bs := startBackends(t, 1)
		cfg := h2ServerConfig(t, h2Config, certs, bs, engine)
		log := newCountedLog()
		t.Cleanup(func() { log.Close() }) // if the test ends before it reads the log
		s, _ := startServer(t, cfg, Options{Recorder: log})
		listeners := []struct {
			name, scheme, proto, tls string
			certs                    *testCerts
		}{
			{name: "web", scheme: "https", proto: "https", tls: "1.3", certs: certs},
			{name: "plain", scheme: "http", proto: "http"},
		}

		t.Run("requests", func(t *testing.T) {
			for _, l := range listeners {
				t.Run(l.name, func(t *testing.T) {
					tr := newH2ServerClient(t, l.certs)
					base := l.scheme + "://" + s.Addr(l.name).String()
					for _, method := range []string{"GET", "POST"} {
						body := "body of the " + method
						req, err := http.NewRequest(method, base+"/echo?l="+l.name, strings.NewReader(body))
						if err != nil {
							t.Fatal(err)
						}
						res, err := tr.RoundTrip(req)
						if err != nil {
							t.Fatalf("%s over HTTP/2: got %v, want an answer", method, err)
						}
						echoed := readAll(t, res)
						if res.StatusCode != 200 || res.Proto != "HTTP/2.0" {
							t.Errorf("%s: got (%d, %s), want (200, HTTP/2.0)", method, res.StatusCode, res.Proto)
						}
						if want := "\r\nX-Forwarded-Proto: " + l.proto + "\r\n"; !strings.Contains(echoed, want) {
							t.Errorf("%s: the backend heard\n%s\nwant X-Forwarded-Proto: %s", method, echoed, l.proto)
						}
						if !strings.HasSuffix(echoed, body) {
							t.Errorf("%s: the backend heard\n%s\nwant the body %q at its end", method, echoed, body)
						}
					}
				})
			}
			idle(t, s)
			waitFor(t, 5*time.Second, "the requests to be logged", func() bool { return log.n.Load() >= 4 })
		})

		t.Run("access log", func(t *testing.T) {
			seen := map[string]int{}
			for _, line := range log.lines(t) {
				q, _ := line["query"].(string)
				name, ok := strings.CutPrefix(q, "l=")
				if !ok {
					continue
				}
				seen[name]++
				for _, l := range listeners {
					if l.name != name {
						continue
					}
					if line["proto"] != "HTTP/2.0" {
						t.Errorf("%s: proto: got %v, want HTTP/2.0 in %v", name, line["proto"], line)
					}
					// A cleartext line's tls field is not checked here: a
					// connection on an lconn that served TLS before keeps
					// its version (TestLoopH2CleartextAfterTLSHasNoTLSVersion
					// in internal/engine).
					if tlsv, _ := line["tls"].(string); l.tls != "" && tlsv != l.tls {
						t.Errorf("%s: tls: got %q, want %q in %v", name, tlsv, l.tls, line)
					}
				}
			}
			for _, l := range listeners {
				if seen[l.name] != 2 {
					t.Errorf("%s: got %d access log lines, want 2", l.name, seen[l.name])
				}
			}
		})

		t.Run("ALPN", func(t *testing.T) {
			for _, tt := range []struct{ listener, want string }{{"web", "h2"}, {"noh2", "http/1.1"}} {
				conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", s.Addr(tt.listener).String(),
					&tls.Config{RootCAs: certs.pool, ServerName: "site.example", NextProtos: []string{"h2", "http/1.1"}})
				if err != nil {
					t.Fatal(err)
				}
				if got := conn.ConnectionState().NegotiatedProtocol; got != tt.want {
					t.Errorf("%s: ALPN: got %q, want %q", tt.listener, got, tt.want)
				}
				conn.Close()
			}
		})

		// h2spec's cases send a request's frames one after another and
		// expect the server to act on them before it answers: the path
		// it requests must not be answered at once. A fixed answer is
		// (with RST_STREAM NO_ERROR for the body it does not read, after
		// which RFC 9113 §5.1 lets the server ignore the stream's frames),
		// and six cases then see the answer instead of the error they
		// wait for; the backend's answer 5 ms late is not.
		spec := h2spectest.Options{Path: "/delay/5"}
		t.Run("h2spec tls", func(t *testing.T) {
			o := spec
			o.TLS = true
			h2spectest.Run(t, s.Addr("web").String(), o)
		})
		t.Run("h2spec h2c", func(t *testing.T) {
			h2spectest.Run(t, s.Addr("plain").String(), spec)
		})
	})
}

// TestH2CListenerRefusesUpgrade extends TestUpgradesFollowRoutes to a
// listener with h2c on: it speaks HTTP/2 with prior knowledge only, so an
// HTTP/1.1 request asking to upgrade to h2c is served as a plain request
// (200 from the backend, no 101), without its Upgrade and HTTP2-Settings,
// and the connection goes on as HTTP/1.1, its next request routed on its
// own (the admin route's 403), not tunnelled.
func TestH2CListenerRefusesUpgrade(t *testing.T) {
	const h2cReq = "GET /h2c HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n"
	eachEngine(t, func(t *testing.T, engine string) {
		origin := upgradeOrigin(t, false)
		cfg := yamlConfig(t, `
listeners: [{name: web, address: "127.0.0.1:1", h2c: true}]
routes:
  - {name: admin, match: {path_prefix: /admin}, respond: {status: 403, body: "forbidden"}}
  - {name: app, match: {path_prefix: /}, upstream: app}
upstreams: [{name: app, backends: [{address: "`+origin+`"}], retries: {attempts: 0}}]
admin: {address: "off"}
`, nil)
		setEngine(cfg, engine)
		s, _ := startServer(t, cfg, Options{})
		out := rawExchange(t, s.Addr("web").String(), h2cReq+"GET /admin/secret HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		if !strings.HasPrefix(out, "HTTP/1.1 200") {
			t.Fatalf("got %q, want the plain 200", firstLine(out))
		}
		first, rest, _ := strings.Cut(out, "HTTP/1.1 403")
		if low := strings.ToLower(first); strings.Contains(low, "upgrade: h2c") || strings.Contains(low, "http2-settings") {
			t.Errorf("the backend saw the refused upgrade:\n%s", first)
		}
		if strings.Contains(out, "tunnel open") || strings.Contains(out, "101 Switching") {
			t.Errorf("the upgrade went through:\n%s", out)
		}
		if !strings.Contains(rest, "forbidden") {
			t.Errorf("got\n%s\nwant the next request answered 403 by its own route", out)
		}
	})
}

// TestHTTP2ClientGoneIsNotABackendFailure has an HTTP/2 client reset its
// stream while the backend is slow, on the h2c and the TLS listener: with
// a backend ejected on its first failure, the reset must count as the
// client's doing (499), never against the backend.
func TestHTTP2ClientGoneIsNotABackendFailure(t *testing.T) {
	eachEngine(t, func(t *testing.T, engine string) {
		certs := newTestCerts(t)
		certs.write(t, "site", "site.example", "127.0.0.1")
		bs := startBackends(t, 1)
		yaml := strings.ReplaceAll(h2Config, `backends: [{address: "{{B1}}"}]`,
			`backends: [{address: "{{B1}}"}], passive: {max_fails: 1, fail_window: 10s, eject_for: 30s}`)
		cfg := h2ServerConfig(t, yaml, certs, bs, engine)
		rec := &recordings{}
		s, _ := startServer(t, cfg, Options{Recorder: rec})
		for _, l := range []struct {
			name, scheme string
			certs        *testCerts
		}{{"web", "https", certs}, {"plain", "http", nil}} {
			t.Run(l.name, func(t *testing.T) {
				rec.reset()
				tr := newH2ServerClient(t, l.certs)
				ctx, cancel := context.WithCancel(context.Background())
				req, err := http.NewRequestWithContext(ctx, "GET", l.scheme+"://"+s.Addr(l.name).String()+"/delay/3000", nil)
				if err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() {
					res, err := tr.RoundTrip(req)
					if err == nil {
						res.Body.Close()
					}
					done <- err
				}()
				waitFor(t, 5*time.Second, "the request to reach the backend", func() bool {
					return s.Pipeline().Graph().Upstreams[0].Backends[0].Inflight() == 1
				})
				cancel()
				if err := <-done; err == nil {
					t.Fatal("got an answer, want the request cancelled")
				}
				idle(t, s)
				waitFor(t, 5*time.Second, "the request to be recorded", func() bool { return len(rec.statuses()) == 1 })
				if got := rec.statuses(); fmt.Sprint(got) != "[499]" {
					t.Errorf("got recorded statuses %v, want [499]", got)
				}
				if fails, ejected := backendFailures(s); fails[0] != 0 || ejected {
					t.Errorf("got %d backend failures (ejected %v), want 0", fails[0], ejected)
				}
				// The backend is still used.
				res, err := tr.RoundTrip(mustRequest(t, l.scheme+"://"+s.Addr(l.name).String()+"/echo"))
				if err != nil {
					t.Fatalf("after the reset: got %v, want an answer", err)
				}
				if body := readAll(t, res); res.StatusCode != 200 || !strings.HasPrefix(body, "GET /echo HTTP/1.1") {
					t.Errorf("after the reset: got (%d, %q), want (200, the echo)", res.StatusCode, firstLine(body))
				}
			})
		}
	})
}

func mustRequest(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}
