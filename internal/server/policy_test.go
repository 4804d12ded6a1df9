package server

import (
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"
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
