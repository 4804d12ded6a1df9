package server

import (
	"crypto/tls"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/helios-lb/helios/internal/config"
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
		bs := startBackends(t, 1)
		dead := deadAddr(t)
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
  - {name: dead, backends: [{address: "`+dead+`"}], retries: {attempts: 0}}
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

// deadAddr returns a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
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
		if got := metricValue(t, s, "helios_rate_limited_total", map[string]string{"route": "api"}); got != float64(len(clients)) {
			t.Errorf("helios_rate_limited_total{route=api}: got %v, want %d", got, len(clients))
		}
	})
}

// metricValue returns the value of the series name with labels from s's
// registry (-1 when there is none).
func metricValue(t *testing.T, s *Server, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := s.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
					continue series
				}
			}
			switch {
			case m.Counter != nil:
				return m.GetCounter().GetValue()
			case m.Gauge != nil:
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

// writeUsers writes an htpasswd file of bcrypt hashes (at the lowest
// cost, for speed) for the users name:password.
func writeUsers(t *testing.T, users ...string) string {
	t.Helper()
	var b strings.Builder
	for _, u := range users {
		name, pass, _ := strings.Cut(u, ":")
		h, err := bcrypt.GenerateFromPassword([]byte(pass), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(name + ":" + string(h) + "\n")
	}
	f := filepath.Join(t.TempDir(), "users")
	if err := os.WriteFile(f, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestBasicAuth asks for credentials on /admin, over every protocol on
// both engines: none or wrong ones get 401 with the challenge (a wrong
// password after its bcrypt ran off the loop), right ones reach the
// backend (the first after bcrypt, the next from the cache).
func TestBasicAuth(t *testing.T) {
	users := writeUsers(t, "ann:secret", "bob:hunter2")
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
