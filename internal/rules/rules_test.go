package rules

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/helios-lb/helios/internal/httpmsg"
)

// arena is an Allocator for tests.
type arena struct{ b []byte }

func (a *arena) Alloc(n int) []byte {
	if cap(a.b)-len(a.b) < n {
		a.b = make([]byte, 0, max(4096, n))
	}
	i := len(a.b)
	a.b = a.b[:i+n]
	return a.b[i : i+n : i+n]
}

func vars() *Vars {
	return &Vars{
		ClientIP: netip.MustParseAddr("198.51.100.7"), Host: []byte("example.com"), Path: []byte("/a/b"),
		Query: []byte("x=1"), Scheme: []byte("https"), RequestID: []byte("abc"),
		Header: httpmsg.HeaderOf("User-Agent", "curl/8", "X-Tenant", "t1"),
	}
}

func TestTemplate(t *testing.T) {
	tests := []struct {
		in, want, err string
	}{
		{in: "plain", want: "plain"},
		{in: "https://{host}{path}{?query}", want: "https://example.com/a/b?x=1"},
		{in: "{client_ip} {scheme} {request_id} {query}", want: "198.51.100.7 https abc x=1"},
		{in: "{header.x-tenant}/{header.X-Tenant}/{header.absent}", want: "t1/t1/"},
		{in: "{{literal}} }}", want: "{literal} }"},
		{in: "{nope}", err: "unknown variable {nope}"},
		{in: "{host", err: "is not closed"},
		{in: "a}b", err: "a lone }"},
		{in: "{header.bad name}", err: "is not a header name"},
	}
	for _, tt := range tests {
		tpl, err := Compile(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: got error %v, want one with %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tt.in, err)
		}
		if got := string(tpl.Render(vars(), &arena{})); got != tt.want {
			t.Errorf("%q: got %q, want %q", tt.in, got, tt.want)
		}
	}
	v := vars()
	v.Query = nil
	tpl, _ := Compile("{path}{?query}")
	if got := string(tpl.Render(v, &arena{})); got != "/a/b" {
		t.Errorf("{?query} without a query: got %q, want /a/b", got)
	}
}

func TestHeaderRules(t *testing.T) {
	r, err := CompileHeaderRules(
		map[string]string{"X-Client": "{client_ip}", "Strict-Transport-Security": "max-age=63072000"},
		map[string]string{"Via": "1.1 helios"},
		[]string{"Server", "X-Powered-By"})
	if err != nil {
		t.Fatal(err)
	}
	h := httpmsg.HeaderOf("Server", "nginx", "X-Client", "spoofed", "Via", "1.1 lb", "X-Powered-By", "PHP")
	r.Apply(h, vars(), &arena{})
	var got []string
	for _, f := range h.Fields {
		if !f.Drop {
			got = append(got, string(f.Name)+": "+string(f.Value))
		}
	}
	want := "Via: 1.1 lb|Strict-Transport-Security: max-age=63072000|X-Client: 198.51.100.7|Via: 1.1 helios"
	if strings.Join(got, "|") != want {
		t.Errorf("got %q, want %q", strings.Join(got, "|"), want)
	}
	for _, bad := range []string{"Connection", "transfer-encoding", "Keep-Alive", "TE", "Upgrade", "Proxy-Authorization", "Content-Length", "Host", "bad name"} {
		if _, err := CompileHeaderRules(map[string]string{bad: "x"}, nil, nil); err == nil {
			t.Errorf("set %s: got no error, want one", bad)
		}
	}
	if _, err := CompileHeaderRules(nil, map[string]string{"X-A": "{nope}"}, nil); err == nil || !strings.Contains(err.Error(), "X-A") {
		t.Errorf("bad template: got %v, want an error naming X-A", err)
	}
}

func TestHeaderRulesAllocateNothing(t *testing.T) {
	r, _ := CompileHeaderRules(map[string]string{"X-Client": "{client_ip}", "X-Static": "1"}, map[string]string{"X-Req": "{request_id}"}, []string{"Server"})
	v := vars()
	a := &arena{}
	base := httpmsg.HeaderOf("Server", "x", "A", "b")
	h := &httpmsg.Header{Fields: make([]httpmsg.Field, 0, 16)}
	if n := testing.AllocsPerRun(100, func() {
		h.Fields = append(h.Fields[:0], base.Fields...)
		a.b = a.b[:0]
		r.Apply(h, v, a)
	}); n != 0 {
		t.Errorf("got %v allocations, want 0", n)
	}
}

func TestRewrite(t *testing.T) {
	tests := []struct {
		name   string
		c      RewriteConfig
		target string
		want   string
	}{
		{name: "strip", c: RewriteConfig{StripPrefix: "/api"}, target: "/api/users?id=1", want: "/users?id=1"},
		{name: "strip to root", c: RewriteConfig{StripPrefix: "/api"}, target: "/api", want: "/"},
		{name: "strip not a segment", c: RewriteConfig{StripPrefix: "/api"}, target: "/apix", want: "/apix"},
		{name: "strip with slash", c: RewriteConfig{StripPrefix: "/api/"}, target: "/api/v1", want: "/v1"},
		{name: "add", c: RewriteConfig{AddPrefix: "/v2"}, target: "/users", want: "/v2/users"},
		{name: "add with slash", c: RewriteConfig{AddPrefix: "/v2/"}, target: "/users", want: "/v2/users"},
		{name: "strip and add", c: RewriteConfig{StripPrefix: "/old", AddPrefix: "/new/"}, target: "/old?q", want: "/new/?q"},
		{name: "regex", c: RewriteConfig{Regex: `^/u/(\d+)$`, Replacement: "/users/$1"}, target: "/u/42?x=1", want: "/users/42?x=1"},
		{name: "regex no match", c: RewriteConfig{Regex: `^/u/(\d+)$`, Replacement: "/users/$1"}, target: "/v/42", want: "/v/42"},
		{name: "regex sets query", c: RewriteConfig{Regex: `^/search/(\w+)$`, Replacement: "/s?q=$1"}, target: "/search/go?page=2", want: "/s?q=go"},
		{name: "regex sets query, keeps client's", c: RewriteConfig{Regex: `^/search/(\w+)$`, Replacement: "/s?q=$1", KeepQuery: true}, target: "/search/go?page=2", want: "/s?q=go&page=2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rw, err := CompileRewrite(tt.c)
			if err != nil {
				t.Fatal(err)
			}
			r := &httpmsg.Request{Target: []byte(tt.target)}
			r.Path = r.Target
			if i := strings.IndexByte(tt.target, '?'); i >= 0 {
				r.Path = r.Target[:i]
			}
			rw.Apply(r, &arena{})
			if string(r.Target) != tt.want {
				t.Errorf("got %q, want %q", r.Target, tt.want)
			}
			if wantPath, _, _ := strings.Cut(tt.want, "?"); string(r.Path) != wantPath {
				t.Errorf("path: got %q, want %q", r.Path, wantPath)
			}
		})
	}
	for _, bad := range []RewriteConfig{{StripPrefix: "api"}, {Regex: "("}, {Regex: "a", Replacement: "b"}, {Replacement: "/x"}, {Regex: "a", Replacement: "/b", StripPrefix: "/a"}} {
		if _, err := CompileRewrite(bad); err == nil {
			t.Errorf("%+v: got no error, want one", bad)
		}
	}
}

func TestRedirect(t *testing.T) {
	v := vars()
	rd, err := CompileRedirect("https://{host}{path}{?query}", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(rd.Location(v, &arena{})); got != "https://example.com/a/b?x=1" || rd.Status() != 308 {
		t.Errorf("redirect: got %d %q, want 308 https://example.com/a/b?x=1", rd.Status(), got)
	}
	if _, err := CompileRedirect("/x", 200); err == nil {
		t.Errorf("status 200: got no error, want one")
	}
}
