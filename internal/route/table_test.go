package route

import "testing"

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
			got, ok := tab.Match([]byte(tt.host), []byte(tt.path))
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
	if v, ok := tab.Match([]byte("b.test"), []byte("/")); ok {
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
	host, path := []byte("www.example.com"), []byte("/api/users/7")
	allocs := testing.AllocsPerRun(1000, func() { tab.Match(host, path) })
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
	host, path := []byte("localhost"), []byte("/index.html")
	b.ReportAllocs()
	for b.Loop() {
		tab.Match(host, path)
	}
}
