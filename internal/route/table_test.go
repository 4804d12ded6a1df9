package route

import (
	"net/netip"
	"testing"

	"github.com/helios-lb/helios/internal/httpmsg"
)

// req is a request to host for target (path and query), with the fields
// of pairs.
func req(method, host, target string, pairs ...string) *httpmsg.Request {
	r := &httpmsg.Request{Method: []byte(method), Host: []byte(host), Target: []byte(target)}
	r.Path = r.Target
	for i := range r.Target {
		if r.Target[i] == '?' {
			r.Path = r.Target[:i]
			break
		}
	}
	r.Header = *httpmsg.HeaderOf(pairs...)
	return r
}

var anyClient = netip.MustParseAddr("192.0.2.1")

func TestMatch(t *testing.T) {
	tab, err := New([]Entry[string]{
		{Name: "ping", Path: "/ping", Value: "ping"},
		{Name: "api", Host: "api.example.com", PathPrefix: "/", Value: "api"},
		{Name: "sub", Host: "*.example.com", PathPrefix: "/v1/", Value: "sub"},
		{Name: "static", PathPrefix: "/static/", Value: "static"},
		{Name: "admin", Host: "*", PathPrefix: "/admin", Value: "admin"},
		{Name: "any", Value: "any"},
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, host, path, want string
	}{
		{"exact path", "x", "/ping", "ping"},
		{"exact path is not a prefix", "x", "/ping/more", "any"},
		{"exact host", "api.example.com", "/anything", "api"},
		{"host ignores case", "API.Example.COM", "/", "api"},
		{"wildcard host", "a.example.com", "/v1/x", "sub"},
		{"wildcard needs a subdomain", "example.com", "/v1/x", "any"},
		{"wildcard does not match a lookalike", "badexample.com", "/v1/x", "any"},
		{"prefix", "x", "/static/app.js", "static"},
		{"first match wins", "api.example.com", "/static/app.js", "api"},
		{"dot segments cannot dodge a route", "x", "/public/../static/a.js", "static"},
		{"escapes cannot dodge a route", "x", "/%73tatic/a.js", "static"},
		{"double slashes cannot dodge a route", "x", "//static//a.js", "static"},
		{"escaped slash stays escaped", "x", "/static%2Fa.js", "any"},
		{"dotdot stops at the root", "x", "/../../ping", "ping"},
		{"fallback", "x", "/other", "any"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tab.MatchRequest(req("GET", tt.host, tt.path), anyClient)
			if !ok || got != tt.want {
				t.Errorf("Match(%q, %q) = %q, %v; want %q", tt.host, tt.path, got, ok, tt.want)
			}
		})
	}
}

func TestNoMatch(t *testing.T) {
	tab, err := New([]Entry[int]{{Name: "a", Host: "a.test", Value: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := tab.MatchRequest(req("GET", "b.test", "/"), anyClient); ok {
		t.Errorf("got %v, %v; want no match", v, ok)
	}
}

func TestNewRejectsRelativePath(t *testing.T) {
	if _, err := New([]Entry[int]{{Name: "bad", PathPrefix: "static/"}}); err == nil {
		t.Error("got nil error for a relative path prefix, want an error")
	}
}

func TestNormalize(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/", "/"},
		{"/a/b", "/a/b"},
		{"/a/./b", "/a/b"},
		{"/a/../b", "/b"},
		{"/a/b/", "/a/b/"},
		{"//a///b", "/a/b"},
		{"/%61%62", "/ab"},
		{"/a%2fb", "/a%2fb"},
		{"/..", "/"},
		{"/a/%2e%2e/b", "/b"},
	}
	for _, tt := range tests {
		if got := string(Normalize([]byte(tt.in))); got != tt.want {
			t.Errorf("Normalize(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestMatchAllocatesNothing(t *testing.T) {
	tab, _ := New([]Entry[int]{
		{Name: "a", Host: "*.example.com", PathPrefix: "/api/", Value: 1},
		{Name: "b", Value: 2},
	})
	r := req("GET", "www.example.com", "/api/users/7")
	allocs := testing.AllocsPerRun(1000, func() { tab.MatchRequest(r, anyClient) })
	if allocs != 0 {
		t.Errorf("got %v allocations per match, want 0", allocs)
	}
}

func BenchmarkMatch(b *testing.B) {
	tab, _ := New([]Entry[int]{
		{Name: "ping", Path: "/ping", Value: 0},
		{Name: "static", PathPrefix: "/static/", Value: 1},
		{Name: "app", Host: "*", PathPrefix: "/", Value: 2},
	})
	r := req("GET", "localhost", "/index.html")
	b.ReportAllocs()
	for b.Loop() {
		tab.MatchRequest(r, anyClient)
	}
}

// TestMatchConditions checks methods, header fields, query parameters,
// client addresses and not, alone and together: every condition set must
// hold, and the first route whose conditions all hold wins.
func TestMatchConditions(t *testing.T) {
	tab, err := New([]Entry[string]{
		{Name: "writes", PathPrefix: "/api/", Cond: &Cond{Methods: []string{"POST", "PUT"}}, Value: "writes"},
		{Name: "beta", Cond: &Cond{Headers: []Pair{{Name: "X-Beta", Value: "1"}}}, Value: "beta"},
		{Name: "mobile", Cond: &Cond{Headers: []Pair{{Name: "user-agent", Value: "~(?i)(android|iphone)"}}}, Value: "mobile"},
		{Name: "traced", Cond: &Cond{Headers: []Pair{{Name: "Traceparent", Value: "*"}}}, Value: "traced"},
		{Name: "debug", Cond: &Cond{Query: []Pair{{Name: "debug", Value: "*"}}}, Value: "debug"},
		{Name: "lang", Cond: &Cond{Query: []Pair{{Name: "lang", Value: "pt br"}}}, Value: "lang"},
		{Name: "page", Cond: &Cond{Query: []Pair{{Name: "page", Value: `~^\d+$`}}}, Value: "page"},
		{Name: "office", Cond: &Cond{ClientCIDRs: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("2001:db8::/32")}}, Value: "office"},
		{Name: "not-admin", PathPrefix: "/x/", Cond: &Cond{Not: &Not{PathPrefix: "/x/admin", Cond: Cond{Methods: []string{"DELETE"}}}}, Value: "not-admin"},
		{Name: "any", Value: "any"},
	})
	if err != nil {
		t.Fatal(err)
	}
	office := netip.MustParseAddr("10.1.2.3")
	tests := []struct {
		name   string
		r      *httpmsg.Request
		client netip.Addr
		want   string
	}{
		{"method listed", req("PUT", "h", "/api/x"), anyClient, "writes"},
		{"method not listed", req("GET", "h", "/api/x"), anyClient, "any"},
		{"methods are case-sensitive", req("post", "h", "/api/x"), anyClient, "any"},
		{"header exact", req("GET", "h", "/", "x-beta", "1"), anyClient, "beta"},
		{"header exact, other value", req("GET", "h", "/", "X-Beta", "10"), anyClient, "any"},
		{"header regex", req("GET", "h", "/", "User-Agent", "Mozilla (iPhone; CPU)"), anyClient, "mobile"},
		{"header regex, no match", req("GET", "h", "/", "User-Agent", "curl/8"), anyClient, "any"},
		{"header present", req("GET", "h", "/", "traceparent", ""), anyClient, "traced"},
		{"second field of a name", req("GET", "h", "/", "X-Beta", "0", "X-Beta", "1"), anyClient, "beta"},
		{"query present, no value", req("GET", "h", "/?a=1&debug"), anyClient, "debug"},
		{"query decoded", req("GET", "h", "/?lang=pt%20br"), anyClient, "lang"},
		{"query plus is a space", req("GET", "h", "/?lang=pt+br"), anyClient, "lang"},
		{"query name exact", req("GET", "h", "/?Lang=pt+br"), anyClient, "any"},
		{"query regex", req("GET", "h", "/?x=1;page=42"), anyClient, "page"},
		{"query regex, no match", req("GET", "h", "/?page=4x"), anyClient, "any"},
		{"client in a CIDR", req("GET", "h", "/"), office, "office"},
		{"client IPv6 in a CIDR", req("GET", "h", "/"), netip.MustParseAddr("2001:db8::7"), "office"},
		{"client mapped IPv4 in a CIDR", req("GET", "h", "/"), netip.MustParseAddr("::ffff:10.1.9.9"), "office"},
		{"client outside", req("GET", "h", "/"), netip.MustParseAddr("10.2.0.1"), "any"},
		{"not: the negated match fails", req("GET", "h", "/x/admin/y"), anyClient, "not-admin"},
		{"not: the negated match holds", req("DELETE", "h", "/x/admin/y"), anyClient, "any"},
		{"not: path outside", req("DELETE", "h", "/x/other"), anyClient, "not-admin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, ok := tab.MatchRequest(tt.r, tt.client); !ok || got != tt.want {
				t.Errorf("got %q, %v; want %q", got, ok, tt.want)
			}
		})
	}
	if _, err := New([]Entry[int]{{Name: "bad", Cond: &Cond{Headers: []Pair{{Name: "a", Value: "~("}}}}}); err == nil {
		t.Error("a bad regular expression: got no error, want one")
	}
}

// TestMatchConditionsAllocateNothing matches with every kind of
// condition on a request that passes all but the last route's.
func TestMatchConditionsAllocateNothing(t *testing.T) {
	tab, _ := New([]Entry[int]{
		{Name: "a", Cond: &Cond{
			Methods: []string{"GET"}, Headers: []Pair{{Name: "X-A", Value: "~^v[0-9]+$"}, {Name: "X-B", Value: "*"}},
			Query:       []Pair{{Name: "q", Value: "a b"}, {Name: "r", Value: `~^\d+$`}},
			ClientCIDRs: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")},
			Not:         &Not{Cond: Cond{Headers: []Pair{{Name: "X-No", Value: "*"}}}},
		}, Value: 1},
		{Name: "b", Value: 2},
	})
	r := req("GET", "h", "/p?q=a%20b&r=12", "X-A", "v12", "X-B", "")
	if v, _ := tab.MatchRequest(r, anyClient); v != 1 {
		t.Fatalf("got %d, want 1", v)
	}
	if n := testing.AllocsPerRun(1000, func() { tab.MatchRequest(r, anyClient) }); n != 0 {
		t.Errorf("got %v allocations per match, want 0", n)
	}
}
