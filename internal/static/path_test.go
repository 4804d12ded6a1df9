package static

import (
	"strings"
	"testing"
)

func TestResolvePath(t *testing.T) {
	tests := []struct {
		name, raw, strip string
		status           int
		key, full        string
	}{
		{"root", "/", "", 0, "./", "/"},
		{"file", "/a/b.txt", "", 0, "a/b.txt", "/a/b.txt"},
		{"directory with slash", "/a/", "", 0, "a/", "/a"},
		{"prefix stripped", "/static/a/b", "/static", 0, "a/b", "/static/a/b"},
		{"prefix with slash stripped", "/static/a/b", "/static/", 0, "a/b", "/static/a/b"},
		{"prefix alone", "/static", "/static", 0, ".", "/static"},
		{"prefix alone with slash", "/static/", "/static", 0, "./", "/static"},
		{"other prefix kept", "/other/a", "/static", 0, "other/a", "/other/a"},
		{"escapes decoded", "/a%20b/%41", "", 0, "a b/A", "/a b/A"},
		{"escaped prefix stripped", "/%73tatic/x", "/static", 0, "x", "/static/x"},
		{"dot segments resolved", "/a/./b/../c", "", 0, "a/c", "/a/c"},
		{"dot segments before the prefix", "/x/../static/y", "/static", 0, "y", "/static/y"},
		{"escaped dot segments", "/a/%2e%2e/%2E%2E/b", "", 0, "b", "/b"},
		{"never above the root", "/../../etc/passwd", "", 0, "etc/passwd", "/etc/passwd"},
		{"dot dot after the prefix", "/static..", "/static", 0, ".", "/static.."},
		{"slashes merged", "//a///b//", "", 0, "a/b/", "/a/b"},
		{"trailing dot is no slash", "/a/.", "", 0, "a", "/a"},
		{"relative path", "a/b", "", 0, "a/b", "/a/b"},
		{"empty path", "", "", 0, "./", "/"},
		{"escaped slash", "/a%2Fb", "", 404, "", ""},
		{"escaped slash lower case", "/a%2fb", "", 404, "", ""},
		{"escaped NUL", "/a%00b", "", 404, "", ""},
		{"NUL", "/a\x00b", "", 404, "", ""},
		{"truncated escape", "/a%4", "", 400, "", ""},
		{"escape at the end", "/a%", "", 400, "", ""},
		{"not hex", "/a%zz", "", 400, "", ""},
	}
	var a Answer
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := resolvePath([]byte(tt.raw), tt.strip, &a)
			if got.status != tt.status || string(got.key) != tt.key || string(got.full) != tt.full {
				t.Errorf("got status %d, key %q, full %q; want %d, %q, %q", got.status, got.key, got.full, tt.status, tt.key, tt.full)
			}
			if tt.status == 0 {
				wantName, wantSlash := strings.CutSuffix(tt.key, "/")
				if got.slash != wantSlash || string(got.name) != wantName {
					t.Errorf("got name %q, slash %v; want the key %q without its slash", got.name, got.slash, tt.key)
				}
			}
		})
	}
}

func TestCleanInto(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "/"},
		{"/", "/"},
		{"a", "/a"},
		{"/a/b/", "/a/b"},
		{"/a/../..", "/"},
		{"/a/b/../../c/./d", "/c/d"},
		{"..a/.b/...", "/..a/.b/..."},
	}
	for _, tt := range tests {
		if got := cleanInto(nil, []byte(tt.in)); string(got) != tt.want {
			t.Errorf("cleanInto(%q): got %q, want %q", tt.in, got, tt.want)
		}
	}
}
