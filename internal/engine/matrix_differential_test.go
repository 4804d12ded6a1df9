package engine

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/helios-lb/helios/internal/netpoll"
)

// Differential tests over the client protocols: the same request, sent
// over HTTP/1.1, HTTP/1.1 over TLS, h2 and h2c, reaches the backend as the
// same head (method, target, authority, fields), whatever the backend
// protocol and the poller. What may differ is only what says how the
// client came: X-Forwarded-Proto, and the request id Helios makes.

// sameHeadCells starts one cell per client protocol in front of backend
// protocol bp on poller k.
func sameHeadCells(t testing.TB, k netpoll.Kind, bp backendProto) []*cell {
	var cs []*cell
	for _, cp := range allClients {
		cs = append(cs, startCell(t, mode{poller: k, client: cp, backend: bp}, loopConfig{}))
	}
	return cs
}

// headOf is what a backend's record of a request says of its head, in a
// form to compare.
func headOf(s seenRequest) string {
	var names []string
	for name := range s.header {
		switch name {
		case "X-Forwarded-Proto", "X-Request-Id", "Accept-Encoding", "User-Agent":
			continue // says how the client came, or what its library adds
		}
		names = append(names, name)
	}
	slices.Sort(names)
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s host=%s\n", s.method, s.uri, s.host)
	for _, n := range names {
		fmt.Fprintf(&b, "%s: %q\n", n, s.header[n])
	}
	return b.String()
}

// sendSame sends req through every cell and checks the backends got the
// same head; ok false when some client refused to send it (its library
// may refuse what another protocol's allows).
func sendSame(t testing.TB, cs []*cell, method, target string, hdr http.Header) {
	t.Helper()
	var ref string
	var refProto clientProto
	for _, c := range cs {
		u, err := url.ParseRequestURI(target)
		if err != nil {
			t.Skipf("target %q: %v", target, err)
		}
		// One authority for every cell (each has a proxy of its own).
		req := &http.Request{Method: method, URL: u, Header: http.Header{}, Host: "front.example"}
		for k, v := range hdr {
			req.Header[k] = v
		}
		before := c.requests()
		if _, err := c.doIn(t, req); err != nil {
			t.Skipf("%s client: %v (its library refuses the request)", c.client, err)
		}
		if c.requests() == before {
			continue // answered by Helios itself (refused): nothing to compare
		}
		got := headOf(c.lastIn(t))
		if ref == "" {
			ref, refProto = got, c.client
			continue
		}
		if got != ref {
			t.Errorf("%s %s: backend got\n%s over %s, but\n%s over %s", method, target, got, c.client, ref, refProto)
		}
	}
}

func TestMatrixSameHead(t *testing.T) {
	for _, k := range pollers {
		for _, bp := range allBackends {
			t.Run(fmt.Sprintf("%s/%s", k, bp), func(t *testing.T) {
				cs := sameHeadCells(t, k, bp)
				for _, tt := range []struct {
					method, target string
					hdr            http.Header
				}{
					{"GET", "/", nil},
					{"GET", "/a/b?x=1&y=%20z#", http.Header{"X-A": {"1"}, "X-B": {"2", "3"}}},
					{"DELETE", "/res/7", http.Header{"Cookie": {"a=1", "b=2"}, "X-Forwarded-For": {"198.51.100.1"}}},
					{"OPTIONS", "/opt", http.Header{"Accept": {"*/*"}, "X-Mixed-CASE": {"v"}}},
					{"PROPFIND", "/dav", http.Header{"Depth": {"1"}}},
				} {
					sendSame(t, cs, tt.method, tt.target, tt.hdr)
				}
			})
		}
	}
}

// FuzzClientProtocols: for fuzzed targets and field values, every client
// protocol brings the backend the same head (what a client library
// refuses to send is skipped).
func FuzzClientProtocols(f *testing.F) {
	f.Add("GET", "/p?q=1", "X-Test", "value")
	f.Add("POST", "/a%2Fb", "Cookie", "a=1; b=2")
	f.Add("GET", "/sp ace", "X-Empty", "")
	f.Add("PUT", "/%E2%82%AC", "X-Tab", "a\tb")
	cs := sameHeadCells(f, pollers[0], backendH1)
	f.Fuzz(func(t *testing.T, method, target, name, value string) {
		if !strings.HasPrefix(target, "/") || len(target) > 200 || len(value) > 200 || !isTokenString(method) || !isTokenString(name) {
			t.Skip()
		}
		sendSame(t, cs, method, target, http.Header{http.CanonicalHeaderKey(name): {value}})
	})
}

func isTokenString(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !tokenChar(s[i]) {
			return false
		}
	}
	return true
}

func tokenChar(c byte) bool {
	return c > ' ' && c < 0x7f && !strings.ContainsRune("\"(),/:;<=>?@[\\]{}", rune(c))
}
