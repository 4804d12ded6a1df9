package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/helios-lb/helios/internal/auth/authtest"
	"github.com/helios-lb/helios/internal/config"
	"github.com/helios-lb/helios/internal/proxyproto"
)

// policyListeners are the two listeners every edge policy test serves
// on: "plain" (HTTP/1.1 and h2c) and "web" (TLS: HTTP/1.1 and h2 through
// ALPN); {{L}} stands for keys added to both.
const policyListeners = `
listeners:
  - {name: plain, address: "127.0.0.1:1", h2c: true{{L}}}
  - name: web
    address: "127.0.0.2:1"
    tls: {cert_file: "{{DIR}}/site.pem", key_file: "{{DIR}}/site.key"}{{LB}}
admin: {address: "off"}
`

// protoClient is one of the four ways a client reaches a policy test's
// server: HTTP/1.1 in the clear, HTTP/1.1 over TLS, h2 (TLS) and h2c.
type protoClient struct {
	name string
	// base is the URL of the listener it speaks to, without a path.
	base string
	rt   http.RoundTripper
	// listener is the name of that listener; tls says it is "web".
	listener string
	tls      bool
}

// do sends method to path (and a header per pair) and returns the
// answer, its body read.
func (c protoClient) do(t *testing.T, method, path string, pairs ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, c.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(pairs); i += 2 {
		if strings.EqualFold(pairs[i], "host") {
			req.Host = pairs[i+1]
			continue
		}
		req.Header.Add(pairs[i], pairs[i+1])
	}
	res, err := c.rt.RoundTrip(req)
	if err != nil {
		t.Fatalf("%s %s over %s: %v", method, path, c.name, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s over %s: reading the body: %v", method, path, c.name, err)
	}
	return res, string(b)
}

// policyServer starts Helios on engine with the policy listeners (with
// listenerKeys added to both, as ", key: value...") and the routes and
// upstreams of rest ({{B1}}... the backends bs), and returns it with its
// four clients.
func policyServer(t *testing.T, engine, listenerKeys, rest string, bs []*testBackend, o Options) (*Server, []protoClient) {
	t.Helper()
	certs := newTestCerts(t)
	certs.write(t, "site", "site.example", "127.0.0.1", "127.0.0.2")
	lb := ""
	if listenerKeys != "" {
		lb = "\n    " + strings.ReplaceAll(strings.TrimPrefix(listenerKeys, ", "), ", ", "\n    ")
	}
	yaml := strings.NewReplacer("{{L}}", listenerKeys, "{{LB}}", lb).Replace(policyListeners) + rest
	cfg := h2ServerConfig(t, yaml, certs, bs, engine)
	s, _ := startServer(t, cfg, o)
	return s, protoClients(t, s, certs)
}

// protoClients returns the four clients of a server with the policy
// listeners.
func protoClients(t *testing.T, s *Server, certs *testCerts) []protoClient {
	tlsConf := &tls.Config{RootCAs: certs.pool, ServerName: "site.example"}
	h1 := &http.Transport{DisableCompression: true}
	h1tls := &http.Transport{DisableCompression: true, TLSClientConfig: tlsConf,
		TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}} // HTTP/1.1 only
	t.Cleanup(h1.CloseIdleConnections)
	t.Cleanup(h1tls.CloseIdleConnections)
	plain, web := s.Addr("plain").String(), s.Addr("web").String()
	return []protoClient{
		{name: "http1", base: "http://" + plain, rt: h1, listener: "plain"},
		{name: "https1", base: "https://" + web, rt: h1tls, listener: "web", tls: true},
		{name: "h2", base: "https://" + web, rt: newH2ServerClient(t, certs), listener: "web", tls: true},
		{name: "h2c", base: "http://" + plain, rt: newH2ServerClient(t, nil), listener: "plain"},
	}
}

// TestRouteMatchConditions routes by method, header, query, client
// address and not, over every protocol on every engine: the first route
// whose conditions all hold answers.
func TestRouteMatchConditions(t *testing.T) {
	eachEngine(t, func(t *testing.T, engine string) {
		_, clients := policyServer(t, engine, "", `
routes:
  - {name: writes, match: {path_prefix: /api/, methods: [POST, PUT]}, respond: {body: writes}}
  - {name: beta, match: {headers: {X-Beta: "1"}}, respond: {body: beta}}
  - {name: mobile, match: {headers: {User-Agent: "~(?i)iphone"}}, respond: {body: mobile}}
  - {name: debug, match: {query: {debug: "*", lang: "pt br"}}, respond: {body: debug}}
  - {name: office, match: {client_cidrs: [10.0.0.0/8]}, respond: {body: office}}
  - {name: local, match: {client_cidrs: [127.0.0.0/8], path_prefix: /local/, not: {path_prefix: /local/secret}}, respond: {body: local}}
  - {name: other, respond: {body: other}}
`, nil, Options{})
		for _, c := range clients {
			t.Run(c.name, func(t *testing.T) {
				for _, tt := range []struct {
					method, path string
					pairs        []string
					want         string
				}{
					{"PUT", "/api/x", nil, "writes"},
					{"GET", "/api/x", nil, "other"},
					{"GET", "/", []string{"X-Beta", "1"}, "beta"},
					{"GET", "/", []string{"X-Beta", "2"}, "other"},
					{"GET", "/", []string{"User-Agent", "Mozilla (iPhone)"}, "mobile"},
					{"GET", "/?lang=pt+br&debug", nil, "debug"},
					{"GET", "/?lang=en&debug", nil, "other"},
					{"GET", "/local/x", nil, "local"},
					{"GET", "/local/secret", nil, "other"},
				} {
					if res, body := c.do(t, tt.method, tt.path, tt.pairs...); res.StatusCode != 200 || body != tt.want {
						t.Errorf("%s %s %v: got (%d, %q), want (200, %q)", tt.method, tt.path, tt.pairs, res.StatusCode, body, tt.want)
					}
				}
			})
		}
	})
}

// clientRoutes answer /who with the client address and scheme the
// listener found, and forward the rest to {{B1}} (whose /echo shows the
// head it got).
const clientRoutes = `
routes:
  - name: who
    match: {path: /who}
    respond: {body: ok}
    response_headers: {set: {X-Client: "{client_ip}", X-Scheme: "{scheme}"}}
  - name: office
    match: {path: /office, client_cidrs: [198.51.100.0/24]}
    respond: {body: office}
  - {name: app, upstream: app}
upstreams: [{name: app, backends: [{address: "{{B1}}"}]}]
`

// echoed returns the values of the field name in an /echo answer.
func echoed(body, name string) []string {
	var out []string
	for _, line := range strings.Split(body, "\r\n") {
		if k, v, ok := strings.Cut(line, ": "); ok && strings.EqualFold(k, name) {
			out = append(out, v)
		}
	}
	return out
}

// TestClientAddressSpoofing checks, over every protocol on both engines,
// that a client's own forwarding fields never become its address nor
// reach a backend as a proxy's: without trusted_proxies, and with
// trusted proxies that do not include the client, X-Forwarded-For is
// replaced by the peer and Forwarded and X-Real-IP are dropped; with the
// client a trusted proxy, the field it names (X-Forwarded-For,
// Forwarded, X-Real-IP) gives the client, X-Forwarded-For is appended to
// and X-Forwarded-Proto is believed.
func TestClientAddressSpoofing(t *testing.T) {
	spoof := []string{"X-Forwarded-For", "203.0.113.9, 198.51.100.4", "X-Real-IP", "198.51.100.5",
		"Forwarded", "for=198.51.100.6;proto=https", "X-Forwarded-Proto", "https"}
	tests := []struct {
		name, listener string
		// client is what the listener must find; "peer": the loopback
		// peer. xff is what the backend must get after the peer.
		client, xff, scheme string
		passed              bool // Forwarded and X-Real-IP reach the backend
	}{
		{name: "no trusted proxies", client: "peer", scheme: "http"},
		{name: "trusted proxies elsewhere", listener: ", trusted_proxies: [10.0.0.0/8]", client: "peer", scheme: "http"},
		{name: "trusted, x-forwarded-for", listener: ", trusted_proxies: [127.0.0.0/8]", client: "198.51.100.4", xff: "203.0.113.9, 198.51.100.4, ", scheme: "https", passed: true},
		{name: "trusted, forwarded", listener: ", trusted_proxies: [127.0.0.0/8], client_ip_header: forwarded", client: "198.51.100.6", xff: "203.0.113.9, 198.51.100.4, ", scheme: "https", passed: true},
		{name: "trusted, x-real-ip", listener: ", trusted_proxies: [127.0.0.0/8], client_ip_header: x-real-ip", client: "198.51.100.5", xff: "203.0.113.9, 198.51.100.4, ", scheme: "https", passed: true},
	}
	eachEngine(t, func(t *testing.T, engine string) {
		bs := startBackends(t, 1)
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				_, clients := policyServer(t, engine, tt.listener, clientRoutes, bs, Options{})
				for _, c := range clients {
					t.Run(c.name, func(t *testing.T) {
						res, _ := c.do(t, "GET", "/who", spoof...)
						got := res.Header.Get("X-Client")
						switch {
						case tt.client == "peer" && !strings.HasPrefix(got, "127."):
							t.Errorf("client address: got %q, want the loopback peer", got)
						case tt.client != "peer" && got != tt.client:
							t.Errorf("client address: got %q, want %q", got, tt.client)
						}
						scheme := tt.scheme
						if c.tls {
							scheme = "https"
						}
						if got := res.Header.Get("X-Scheme"); got != scheme {
							t.Errorf("scheme: got %q, want %q", got, scheme)
						}
						wantOffice := tt.client != "peer" && strings.HasPrefix(tt.client, "198.51.100.")
						if _, body := c.do(t, "GET", "/office", spoof...); (body == "office") != wantOffice {
							t.Errorf("client_cidrs 198.51.100.0/24: got %q, want matched %v", body, wantOffice)
						}
						_, body := c.do(t, "GET", "/echo", spoof...)
						xff := echoed(body, "X-Forwarded-For")
						if len(xff) != 1 || !strings.HasPrefix(xff[0], tt.xff+"127.") || strings.Count(xff[0], ",") != strings.Count(tt.xff, ",") {
							t.Errorf("X-Forwarded-For at the backend: got %q, want %q and the loopback peer", xff, tt.xff)
						}
						if got := len(echoed(body, "X-Real-IP")) + len(echoed(body, "Forwarded")); got > 0 != tt.passed {
							t.Errorf("X-Real-IP and Forwarded at the backend: got %d fields, want passed on %v\n%s", got, tt.passed, body)
						}
						if got := echoed(body, "X-Forwarded-Proto"); len(got) != 1 || got[0] != scheme {
							t.Errorf("X-Forwarded-Proto at the backend: got %q, want [%s]", got, scheme)
						}
					})
				}
			})
		}
	})
}

// TestHeaderRulesOnEveryAnswer sets, adds and removes request and
// response fields, over every protocol on both engines: the request
// rules reach the backend, and the response rules edit a backend's
// answer, a fixed answer, a static file, a redirect, a static route's own
// 404 and Helios's 502 alike (HSTS set once). A rewrite changes the path
// that goes on, query kept.
func TestHeaderRulesOnEveryAnswer(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("file a"), 0o644); err != nil {
		t.Fatal(err)
	}
	eachEngine(t, func(t *testing.T, engine string) {
		bs := startBackends(t, 2)
		bs[1].stop() // a backend that is down: Helios's 502
		_, clients := policyServer(t, engine, "", `
routes:
  - name: api
    match: {path_prefix: /api/}
    upstream: app
    rewrite: {strip_prefix: /api}
    request_headers:
      set: {X-Tenant: "t-{header.x-user}", X-Path: "{path}"}
      add: {X-Seen: "{client_ip}"}
      remove: [X-Secret]
    response_headers: &rh
      set: {Strict-Transport-Security: "max-age=63072000", X-Request: "{request_id}"}
      add: {X-Extra: "1"}
      remove: [X-Backend]
  - {name: fixed, match: {path: /fixed}, respond: {status: 201, body: made, headers: {X-Backend: fixed}}, response_headers: *rh}
  - {name: files, match: {path_prefix: /files/}, static: {root: "`+dir+`", strip_prefix: /files}, response_headers: *rh}
  - {name: moved, match: {path_prefix: /old/}, redirect: {to: "https://new.example{path}{?query}", status: 301}, response_headers: *rh}
  - {name: down, match: {path: /down}, upstream: dead, response_headers: *rh}
  - {name: app, upstream: app}
upstreams:
  - {name: app, backends: [{address: "{{B1}}"}]}
  - {name: dead, backends: [{address: "{{B2}}"}], retries: {attempts: 0}}
`, bs, Options{})
		for _, c := range clients {
			t.Run(c.name, func(t *testing.T) {
				res, body := c.do(t, "GET", "/api/echo?q=1", "X-User", "ann", "X-Secret", "s", "X-Tenant", "spoofed")
				if res.StatusCode != 200 || !strings.HasPrefix(body, "GET /echo?q=1 HTTP/1.1") {
					t.Fatalf("rewrite: got (%d, %q), want the backend's echo of GET /echo?q=1", res.StatusCode, firstLine(body))
				}
				for name, want := range map[string]string{"X-Tenant": "t-ann", "X-Path": "/api/echo", "X-Secret": ""} {
					if got := strings.Join(echoed(body, name), ","); got != want {
						t.Errorf("request %s at the backend: got %q, want %q", name, got, want)
					}
				}
				if got := echoed(body, "X-Seen"); len(got) != 1 || !strings.HasPrefix(got[0], "127.") {
					t.Errorf("request X-Seen at the backend: got %q, want the client address", got)
				}
				for _, tt := range []struct {
					path   string
					status int
				}{{"/api/echo", 200}, {"/fixed", 201}, {"/files/a.txt", 200}, {"/files/missing", 404}, {"/old/x?y=1", 301}, {"/down", 502}} {
					res, _ := c.do(t, "GET", tt.path)
					if res.StatusCode != tt.status {
						t.Errorf("%s: got %d, want %d", tt.path, res.StatusCode, tt.status)
					}
					if got := res.Header.Get("Strict-Transport-Security"); got != "max-age=63072000" {
						t.Errorf("%s: Strict-Transport-Security: got %q, want max-age=63072000", tt.path, got)
					}
					if got := res.Header.Values("X-Extra"); len(got) != 1 || got[0] != "1" {
						t.Errorf("%s: X-Extra: got %q, want [1]", tt.path, got)
					}
					if got := res.Header.Get("X-Backend"); got != "" {
						t.Errorf("%s: X-Backend: got %q, want it removed", tt.path, got)
					}
					if got := res.Header.Get("X-Request"); len(got) != 32 {
						t.Errorf("%s: X-Request: got %q, want the request id", tt.path, got)
					}
					if tt.path == "/old/x?y=1" {
						if got := res.Header.Get("Location"); got != "https://new.example/old/x?y=1" {
							t.Errorf("redirect: Location: got %q, want https://new.example/old/x?y=1", got)
						}
					}
				}
			})
		}
	})
}

// TestAccessListsAndHTTPSRedirect checks allow and deny (403) and a
// listener's redirect_https, with a route that opts out, over every
// protocol on both engines: cleartext requests are redirected to the TLS
// listener's port with host, path and query; TLS ones are served.
func TestAccessListsAndHTTPSRedirect(t *testing.T) {
	eachEngine(t, func(t *testing.T, engine string) {
		s, clients := policyServer(t, engine, "", `
routes:
  - {name: health, match: {path: /healthz}, respond: {body: up}, https_redirect: false}
  - {name: office, match: {path_prefix: /office/}, respond: {body: office}, allow: [10.0.0.0/8]}
  - {name: blocked, match: {path_prefix: /blocked/}, respond: {body: blocked}, allow: [127.0.0.0/8], deny: [127.0.0.0/8]}
  - {name: local, match: {path_prefix: /local/}, respond: {body: local}, allow: [10.0.0.0/8, 127.0.0.0/8], deny: [192.0.2.0/24]}
  - {name: app, respond: {body: app}}
`, nil, Options{})
		// redirect_https goes on the plain listener only (a TLS one may
		// not have it): reload with it there.
		cfg := s.Config()
		next := *cfg
		next.Listeners = append([]config.Listener(nil), cfg.Listeners...)
		next.Listeners[0].RedirectHTTPS = true
		if err := s.Reload(&next); err != nil {
			t.Fatal(err)
		}
		_, tlsPort, _ := net.SplitHostPort(s.Addr("web").String())
		for _, c := range clients {
			t.Run(c.name, func(t *testing.T) {
				if c.tls {
					for path, want := range map[string]string{"/office/x": "403", "/blocked/x": "403", "/local/x": "local", "/healthz": "up", "/a": "app"} {
						res, body := c.do(t, "GET", path)
						if got := body; want == "403" && res.StatusCode != 403 || want != "403" && got != want {
							t.Errorf("%s: got (%d, %q), want %s", path, res.StatusCode, got, want)
						}
					}
					return
				}
				res, _ := c.do(t, "POST", "/a/b?c=d", "Host", "shop.example")
				if want := "https://shop.example:" + tlsPort + "/a/b?c=d"; res.StatusCode != 308 || res.Header.Get("Location") != want {
					t.Errorf("cleartext: got (%d, %q), want (308, %q)", res.StatusCode, res.Header.Get("Location"), want)
				}
				if res, body := c.do(t, "GET", "/healthz"); res.StatusCode != 200 || body != "up" {
					t.Errorf("https_redirect false: got (%d, %q), want (200, up)", res.StatusCode, body)
				}
			})
		}
	})
}

// TestRateLimit limits a route to one request a minute per X-Key, over
// every protocol on both engines: the second request gets 429 with
// Retry-After and the RateLimit fields, other keys are not limited, and
// helios_rate_limited_total counts the refusals.
func TestRateLimit(t *testing.T) {
	eachEngine(t, func(t *testing.T, engine string) {
		s, clients := policyServer(t, engine, "", `
routes:
  - name: api
    respond: {body: ok}
    rate_limit: {requests: 1, per: 1m, key: "header:X-Key"}
    response_headers: {set: {X-Policy: "on"}}
`, nil, Options{})
		for _, c := range clients {
			t.Run(c.name, func(t *testing.T) {
				if res, _ := c.do(t, "GET", "/", "X-Key", c.name); res.StatusCode != 200 {
					t.Fatalf("first request: got %d, want 200", res.StatusCode)
				}
				res, body := c.do(t, "GET", "/", "X-Key", c.name)
				if res.StatusCode != 429 || !strings.Contains(body, "rate limit") {
					t.Fatalf("second request: got (%d, %q), want 429", res.StatusCode, body)
				}
				for name, want := range map[string]string{"Retry-After": "60", "RateLimit-Policy": `"default";q=1;w=60`, "RateLimit": `"default";r=0;t=60`, "X-Policy": "on"} {
					if got := res.Header.Get(name); got != want {
						t.Errorf("%s: got %q, want %q", name, got, want)
					}
				}
				if res, _ := c.do(t, "GET", "/", "X-Key", c.name+"-other"); res.StatusCode != 200 {
					t.Errorf("another key: got %d, want 200", res.StatusCode)
				}
			})
		}
		if got := s.Pipeline().Graph().RouteList[0].Stats.RateLimited.Load(); got != uint64(len(clients)) {
			t.Errorf("helios_rate_limited_total: got %d, want %d", got, len(clients))
		}
		if got, _ := metric(t, s, "helios_rate_limited_total", map[string]string{"route": "api"}); got != float64(len(clients)) {
			t.Errorf("helios_rate_limited_total{route=api}: got %v, want %d", got, len(clients))
		}
	})
}

// TestBasicAuth asks for credentials on /admin, over every protocol on
// both engines: none or wrong ones get 401 with the challenge (a wrong
// password after its bcrypt ran off the loop), right ones reach the
// backend (the first after bcrypt, the next from the cache).
func TestBasicAuth(t *testing.T) {
	users := authtest.File(t, "ann:secret", "bob:hunter2")
	eachEngine(t, func(t *testing.T, engine string) {
		bs := startBackends(t, 1)
		_, clients := policyServer(t, engine, "", `
routes:
  - name: admin
    match: {path_prefix: /admin}
    upstream: app
    rewrite: {strip_prefix: /admin}
    basic_auth: {realm: "Helios admin", users_file: "`+users+`"}
  - {name: app, respond: {body: open}}
upstreams: [{name: app, backends: [{address: "{{B1}}"}]}]
`, bs, Options{})
		basic := func(user, pass string) string {
			return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
		}
		for _, c := range clients {
			t.Run(c.name, func(t *testing.T) {
				for _, tt := range []struct {
					name, authz string
					status      int
				}{
					{"none", "", 401},
					{"unknown user", basic("eve", "secret"), 401},
					{"wrong password", basic("ann", "nope-"+c.name), 401},
					{"wrong password again", basic("ann", "nope-"+c.name), 401},
					{"right", basic("ann", "secret"), 200},
					{"right, cached", basic("ann", "secret"), 200},
					{"another user", basic("bob", "hunter2"), 200},
					{"not basic", "Bearer x", 401},
				} {
					var pairs []string
					if tt.authz != "" {
						pairs = []string{"Authorization", tt.authz}
					}
					res, body := c.do(t, "GET", "/admin/echo", pairs...)
					if res.StatusCode != tt.status {
						t.Errorf("%s: got %d, want %d", tt.name, res.StatusCode, tt.status)
					}
					if tt.status == 401 {
						if got := res.Header.Get("WWW-Authenticate"); got != `Basic realm="Helios admin", charset="UTF-8"` {
							t.Errorf("%s: WWW-Authenticate: got %q, want the realm", tt.name, got)
						}
					} else if !strings.HasPrefix(body, "GET /echo") {
						t.Errorf("%s: got %q, want the backend's echo", tt.name, firstLine(body))
					}
				}
				if res, body := c.do(t, "GET", "/open"); res.StatusCode != 200 || body != "open" {
					t.Errorf("another route: got (%d, %q), want (200, open)", res.StatusCode, body)
				}
			})
		}
	})
}

// TestForwardAuth asks an authentication service about every request,
// over every protocol on both engines: its 2xx lets the request through
// with X-User copied (a client's own X-User replaced), its 302 reaches
// the client as it sent it, and a service that does not answer in time
// gets the client 504.
func TestForwardAuth(t *testing.T) {
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("X-Token") {
		case "good":
			if r.Header.Get("X-Forwarded-Method") != "POST" || r.Header.Get("X-Forwarded-Uri") != "/app/echo?x=1" {
				w.WriteHeader(400)
				return
			}
			w.Header().Set("X-User", "alice")
			w.Header().Add("X-Groups", "a")
			w.Header().Add("X-Groups", "b")
		case "slow":
			time.Sleep(500 * time.Millisecond)
		default:
			w.Header().Set("Location", "/login?next="+r.Header.Get("X-Forwarded-Uri"))
			w.Header().Set("Set-Cookie", "flow=1")
			w.WriteHeader(302)
			io.WriteString(w, "log in first")
		}
	}))
	t.Cleanup(svc.Close)
	eachEngine(t, func(t *testing.T, engine string) {
		bs := startBackends(t, 1)
		_, clients := policyServer(t, engine, "", `
routes:
  - name: app
    upstream: app
    rewrite: {strip_prefix: /app}
    forward_auth: {address: "`+svc.URL+`/verify", copy_headers: [X-User, X-Groups], timeout: 200ms}
upstreams: [{name: app, backends: [{address: "{{B1}}"}]}]
`, bs, Options{})
		for _, c := range clients {
			t.Run(c.name, func(t *testing.T) {
				res, body := c.do(t, "POST", "/app/echo?x=1", "X-Token", "good", "X-User", "mallory")
				if res.StatusCode != 200 || !strings.HasPrefix(body, "POST /echo?x=1") {
					t.Fatalf("allowed: got (%d, %q), want the backend's echo", res.StatusCode, firstLine(body))
				}
				if got := echoed(body, "X-User"); len(got) != 1 || got[0] != "alice" {
					t.Errorf("X-User at the backend: got %q, want [alice]", got)
				}
				if got := echoed(body, "X-Groups"); strings.Join(got, ",") != "a,b" {
					t.Errorf("X-Groups at the backend: got %q, want [a b]", got)
				}
				res, body = c.do(t, "GET", "/app/x", "X-Token", "bad")
				if res.StatusCode != 302 || res.Header.Get("Location") != "/login?next=/app/x" || res.Header.Get("Set-Cookie") != "flow=1" || body != "log in first" {
					t.Errorf("refused: got (%d, %q, %q, %q), want the service's 302", res.StatusCode, res.Header.Get("Location"), res.Header.Get("Set-Cookie"), body)
				}
				if res, _ := c.do(t, "GET", "/app/x", "X-Token", "slow"); res.StatusCode != 504 {
					t.Errorf("a service too slow: got %d, want 504", res.StatusCode)
				}
			})
		}
	})
}

// prefixConn sends prefix in front of its first write: a PROXY header
// that arrives with the client's first bytes (a request, a ClientHello).
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Write(p []byte) (int, error) {
	if c.prefix != nil {
		b := append(c.prefix, p...)
		c.prefix = nil
		n, err := c.Conn.Write(b)
		return max(0, n-(len(b)-len(p))), err
	}
	return c.Conn.Write(p)
}

// proxiedClients returns the four protocol clients of a server with the
// policy listeners, each connection starting with the PROXY header
// header() returns.
func proxiedClients(t *testing.T, s *Server, certs *testCerts, header func() []byte) []protoClient {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &prefixConn{Conn: c, prefix: header()}, nil
	}
	tlsConf := &tls.Config{RootCAs: certs.pool, ServerName: "site.example"}
	h1 := &http.Transport{DisableCompression: true, DialContext: dial}
	h1tls := &http.Transport{DisableCompression: true, DialContext: dial, TLSClientConfig: tlsConf,
		TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}
	h2 := &http2.Transport{DisableCompression: true, DialTLSContext: func(ctx context.Context, network, addr string, cfg *tls.Config) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		cfg = cfg.Clone()
		cfg.NextProtos = []string{"h2"}
		tc := tls.Client(c, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, err
		}
		return tc, nil
	}, TLSClientConfig: tlsConf}
	h2c := &http2.Transport{DisableCompression: true, AllowHTTP: true, DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
		return dial(ctx, network, addr)
	}}
	for _, tr := range []interface{ CloseIdleConnections() }{h1, h1tls, h2, h2c} {
		t.Cleanup(tr.CloseIdleConnections)
	}
	plain, web := s.Addr("plain").String(), s.Addr("web").String()
	return []protoClient{
		{name: "http1", base: "http://" + plain, rt: h1, listener: "plain"},
		{name: "https1", base: "https://" + web, rt: h1tls, listener: "web", tls: true},
		{name: "h2", base: "https://" + web, rt: h2, listener: "web", tls: true},
		{name: "h2c", base: "http://" + plain, rt: h2c, listener: "plain"},
	}
}

// proxyHeader returns a PROXY header of version v for a client at src.
func proxyHeader(v int, src string) func() []byte {
	return func() []byte {
		s, d := netip.MustParseAddrPort(src), netip.MustParseAddrPort("192.0.2.1:443")
		if v == 1 {
			return proxyproto.AppendV1(nil, s, d)
		}
		return proxyproto.AppendV2(nil, s, d)
	}
}

// refusedConns returns the connections listener's policy refused for
// reason.
func refusedConns(s *Server, listener, reason string) uint64 {
	st := s.ListenerStats()[listener]
	if reason == "proxy_protocol" {
		return st.ProxyRefused.Load()
	}
	return st.PerIPRefused.Load()
}

// closedUnanswered dials addr, sends what, and reports whether the
// connection closed without an answer within 5s.
func closedUnanswered(t *testing.T, addr string, what []byte) bool {
	t.Helper()
	out, err := rawExchangeErr(t, addr, string(what))
	return out == "" && err == nil
}

// TestProxyProtocolListener takes PROXY headers, over every protocol on
// both engines (the header arriving with the client's first bytes, a
// request or a ClientHello): the header's source is the client, for the
// route's {client_ip}, client_cidrs and X-Forwarded-For. A header of the
// wrong version, a malformed one, none where one is required, one from a
// peer that is not a trusted proxy, or one that never comes closes the
// connection unanswered, counted; optional serves a connection without
// one as it is.
func TestProxyProtocolListener(t *testing.T) {
	eachEngine(t, func(t *testing.T, engine string) {
		bs := startBackends(t, 1)
		for _, v := range []int{1, 2} {
			t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
				certs := newTestCerts(t)
				certs.write(t, "site", "site.example", "127.0.0.1", "127.0.0.2")
				yaml := strings.NewReplacer("{{L}}", fmt.Sprintf(", trusted_proxies: [127.0.0.0/8], proxy_protocol: v%d, read_header_timeout: 300ms", v),
					"{{LB}}", fmt.Sprintf("\n    trusted_proxies: [127.0.0.0/8]\n    proxy_protocol: v%d\n    read_header_timeout: 300ms", v)).Replace(policyListeners) + clientRoutes
				s, _ := startServer(t, h2ServerConfig(t, yaml, certs, bs, engine), Options{})
				for _, c := range proxiedClients(t, s, certs, proxyHeader(v, "198.51.100.7:5555")) {
					t.Run(c.name, func(t *testing.T) {
						if res, _ := c.do(t, "GET", "/who"); res.Header.Get("X-Client") != "198.51.100.7" {
							t.Errorf("client address: got %q, want 198.51.100.7", res.Header.Get("X-Client"))
						}
						if _, body := c.do(t, "GET", "/office"); body != "office" {
							t.Errorf("client_cidrs: got %q, want office", body)
						}
						if _, body := c.do(t, "GET", "/echo", "X-Forwarded-For", "10.6.6.6"); strings.Join(echoed(body, "X-Forwarded-For"), ",") != "198.51.100.7" {
							t.Errorf("X-Forwarded-For at the backend: got %q, want [198.51.100.7]", echoed(body, "X-Forwarded-For"))
						}
					})
				}
				plain := s.Addr("plain").String()
				other := proxyHeader(3-v, "198.51.100.7:5555")()
				for _, tt := range []struct {
					name string
					send []byte
				}{
					{"the other version", append(other, "GET /who HTTP/1.1\r\nHost: x\r\n\r\n"...)},
					{"malformed", []byte("PROXY TCP4 198.51.100.7 nope 1 2\r\nGET /who HTTP/1.1\r\nHost: x\r\n\r\n")},
					{"missing", []byte("GET /who HTTP/1.1\r\nHost: x\r\n\r\n")},
					{"never sent", nil},
				} {
					before := refusedConns(s, "plain", "proxy_protocol")
					if !closedUnanswered(t, plain, tt.send) {
						t.Errorf("%s: got an answer, want the connection closed", tt.name)
					}
					waitFor(t, 5*time.Second, tt.name+" counted", func() bool { return refusedConns(s, "plain", "proxy_protocol") == before+1 })
				}
				if got, _ := metric(t, s, "helios_connections_refused_total", map[string]string{"listener": "plain", "reason": "proxy_protocol"}); got != 4 {
					t.Errorf("helios_connections_refused_total{listener=plain,reason=proxy_protocol}: got %v, want 4", got)
				}
			})
		}
		t.Run("untrusted peer", func(t *testing.T) {
			_, clients := policyServer(t, engine, ", trusted_proxies: [10.0.0.0/8], proxy_protocol: optional", clientRoutes, bs, Options{})
			s := clients[0]
			addr := strings.TrimPrefix(s.base, "http://")
			if !closedUnanswered(t, addr, append(proxyHeader(1, "198.51.100.7:5555")(), "GET /who HTTP/1.1\r\nHost: x\r\n\r\n"...)) {
				t.Errorf("a PROXY header from a peer that is not a trusted proxy: got an answer, want the connection closed")
			}
			// Without a header, optional serves the peer as it is.
			if res, _ := s.do(t, "GET", "/who"); !strings.HasPrefix(res.Header.Get("X-Client"), "127.") {
				t.Errorf("optional, no header: got client %q, want the peer", res.Header.Get("X-Client"))
			}
		})
	})
}

// TestMaxConnectionsPerIP caps the connections of one client address,
// after the PROXY header: a third connection from an address with two
// open is closed at once (counted), another address is served, and a
// place freed is taken again.
func TestMaxConnectionsPerIP(t *testing.T) {
	eachEngine(t, func(t *testing.T, engine string) {
		cfg := yamlConfig(t, `
listeners: [{name: web, address: "127.0.0.1:1", max_connections_per_ip: 2, trusted_proxies: [127.0.0.0/8], proxy_protocol: v1}]
routes: [{name: who, respond: {body: ok}, response_headers: {set: {X-Client: "{client_ip}"}}}]
admin: {address: "off"}
`, nil)
		setEngine(cfg, engine)
		s, _ := startServer(t, cfg, Options{})
		addr := s.Addr("web").String()
		open := func(src string) (net.Conn, *bufio.Reader) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			c.SetDeadline(time.Now().Add(5 * time.Second))
			c.Write(append(proxyHeader(1, src)(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n"...))
			return c, bufio.NewReader(c)
		}
		served := func(br *bufio.Reader) bool {
			res, err := http.ReadResponse(br, nil)
			if err != nil {
				return false
			}
			io.Copy(io.Discard, res.Body)
			return res.StatusCode == 200
		}
		c1, br1 := open("198.51.100.7:1")
		_, br2 := open("198.51.100.7:2")
		if !served(br1) || !served(br2) {
			t.Fatal("the first two connections: got no answer, want both served")
		}
		_, br3 := open("198.51.100.7:3")
		if served(br3) {
			t.Errorf("a third connection from the address: got served, want closed")
		}
		if _, br := open("198.51.100.8:1"); !served(br) {
			t.Errorf("another address: got no answer, want it served")
		}
		if got := refusedConns(s, "web", "max_connections_per_ip"); got != 1 {
			t.Errorf("refused: got %d, want 1", got)
		}
		c1.Close()
		waitFor(t, 5*time.Second, "the freed place to be taken", func() bool {
			_, br := open("198.51.100.7:4")
			return served(br)
		})
	})
}

// TestResponseRulesOnAnUpgrade: the 101 that opens a WebSocket tunnel is
// an answer of the route too, and gets its response rules, on both
// engines.
func TestResponseRulesOnAnUpgrade(t *testing.T) {
	eachEngine(t, func(t *testing.T, engine string) {
		bs := startBackends(t, 1)
		cfg := yamlConfig(t, `
listeners: [{name: web, address: "127.0.0.1:1"}]
routes: [{name: app, upstream: app, response_headers: {set: {X-Policy: "on"}}}]
upstreams: [{name: app, backends: [{address: "{{B1}}"}]}]
admin: {address: "off"}
`, bs)
		setEngine(cfg, engine)
		s, _ := startServer(t, cfg, Options{})
		c, err := net.Dial("tcp", s.Addr("web").String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: x\r\nOrigin: http://x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != 101 || res.Header.Get("X-Policy") != "on" {
			t.Errorf("got %d with X-Policy %q, want 101 with on", res.StatusCode, res.Header.Get("X-Policy"))
		}
	})
}
