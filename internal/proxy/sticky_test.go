package proxy

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/httpmsg"
	"github.com/helios-lb/helios/internal/route"
	"github.com/helios-lb/helios/internal/upstream"
	"github.com/helios-lb/helios/internal/wire"
)

var testSecret = []byte("0123456789abcdef0123456789abcdef")

func testSticky(upstreamName string) *Sticky {
	return NewSticky(upstreamName, StickyOptions{Cookie: "srv", Path: "/", MaxAge: time.Hour, HTTPOnly: true, SameSite: "Lax", Secret: testSecret})
}

// TestStickyValue checks the cookie values: 16 URL-safe characters that
// do not show the address, alike for the same upstream, address and
// secret, and different when any of them differs.
func TestStickyValue(t *testing.T) {
	s := testSticky("app")
	v := s.Value("10.0.0.1:8080")
	if len(v) != 16 || strings.ContainsAny(v, "+/=;, ") {
		t.Errorf("got value %q, want 16 base64url characters", v)
	}
	if strings.Contains(v, "10.0.0.1") || strings.Contains(v, "8080") {
		t.Errorf("got value %q, want one that does not show the address", v)
	}
	if again := testSticky("app").Value("10.0.0.1:8080"); again != v {
		t.Errorf("got %q, then %q for the same upstream, address and secret; want the same", v, again)
	}
	others := map[string]string{
		"another address":  s.Value("10.0.0.2:8080"),
		"another upstream": testSticky("app2").Value("10.0.0.1:8080"),
		"another secret":   NewSticky("app", StickyOptions{Cookie: "srv", Secret: []byte("fedcba9876543210")}).Value("10.0.0.1:8080"),
	}
	for what, o := range others {
		if o == v {
			t.Errorf("%s: got the same value %q, want another", what, o)
		}
	}
	tab := s.Table([]*upstream.Backend{{Addr: "10.0.0.1:8080"}})
	if got, want := string(tab.setCookie[0]), "srv="+v+"; Path=/; Max-Age=3600; HttpOnly; SameSite=Lax"; got != want {
		t.Errorf("Set-Cookie: got %q, want %q", got, want)
	}
	bare := NewSticky("app", StickyOptions{Cookie: "s", Secure: true, SameSite: "None", Secret: testSecret}).Table([]*upstream.Backend{{Addr: "a:1"}})
	if got := string(bare.setCookie[0]); !strings.HasSuffix(got, "; Secure; SameSite=None") || strings.Contains(got, "Max-Age") || strings.Contains(got, "Path") {
		t.Errorf("Set-Cookie of a session cookie: got %q, want no Max-Age or Path, Secure and SameSite=None", got)
	}
}

// stickyPipeline returns a pipeline over three backends (b1, b2, b3,
// picked first available first) with sticky sessions.
func stickyPipeline(t *testing.T) (*Pipeline, *Upstream) {
	t.Helper()
	var bs []*upstream.Backend
	for i := range 3 {
		bs = append(bs, &upstream.Backend{State: upstream.NewState(nil), Addr: fmt.Sprintf("b%d", i+1), Weight: 1, Index: i})
	}
	up := &Upstream{Name: "app", Backends: bs, Picker: firstAvailable(bs), Transport: &wire.Transport{Name: "app"},
		Retry: defaultPolicy(), Stats: &UpstreamStats{}, Sticky: testSticky("app")}
	tab, err := route.New([]route.Entry[*Route]{{Name: "app", Value: &Route{Name: "app", Upstream: up}}})
	if err != nil {
		t.Fatal(err)
	}
	return New(&Graph{Routes: tab, Upstreams: []*Upstream{up}}), up
}

// setCookieOf returns the Set-Cookie fields of an answer.
func setCookieOf(r *httpmsg.Response) []string {
	var out []string
	for _, f := range r.Header.Fields {
		if httpmsg.EqualFold(f.Name, "set-cookie") {
			out = append(out, string(f.Value))
		}
	}
	return out
}

// TestStickyPicks checks where a request goes and what cookie its answer
// sets: a cookie naming a usable backend wins over the strategy and sets
// nothing; without one, or when its backend is out, the strategy picks
// and the answer sets the cookie of the backend that served it.
func TestStickyPicks(t *testing.T) {
	s := testSticky("app")
	cookie := func(addr string) []field { return []field{{"Cookie", []byte("a=1; srv=" + s.Value(addr) + "; z=2")}} }
	setFor := func(addr string) string {
		return "srv=" + s.Value(addr) + "; Path=/; Max-Age=3600; HttpOnly; SameSite=Lax"
	}
	tests := []struct {
		name       string
		hdr        []field
		down       string
		script     map[string]any
		wantTried  string
		wantCookie []string
	}{
		{name: "no cookie: the strategy, and the cookie set", wantTried: "[b1]", wantCookie: []string{setFor("b1")}},
		{name: "a cookie for b2: b2, nothing set", hdr: cookie("b2"), wantTried: "[b2]"},
		{name: "a cookie for b3: b3", hdr: cookie("b3"), wantTried: "[b3]"},
		{name: "its backend down: moved, with a new cookie", hdr: cookie("b2"), down: "b2", wantTried: "[b1]", wantCookie: []string{setFor("b1")}},
		{name: "a forged value", hdr: []field{{"Cookie", []byte("srv=AAAAAAAAAAAAAAAAAAAAAA")}}, wantTried: "[b1]", wantCookie: []string{setFor("b1")}},
		{name: "another upstream's value", hdr: []field{{"Cookie", []byte("srv=" + testSticky("other").Value("b2"))}}, wantTried: "[b1]", wantCookie: []string{setFor("b1")}},
		{name: "its backend fails: the retry's backend sets the cookie", hdr: cookie("b2"), script: map[string]any{"b1": 200, "b2": 503, "b3": 200},
			wantTried: "[b2 b1]", wantCookie: []string{setFor("b1")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, up := stickyPipeline(t)
			for _, b := range up.Backends {
				b.SetDown(b.Addr == tt.down)
			}
			script := tt.script
			if script == nil {
				script = map[string]any{"b1": 200, "b2": 200, "b3": 200}
			}
			tr := &fakeTransport{script: script}
			ex := &fakeExchange{method: "GET", hdr: tt.hdr, resp: &httpmsg.Response{}}
			serve(p.NewFlow(), tr, ex)
			if got := fmt.Sprint(tr.tried); got != tt.wantTried {
				t.Errorf("got backends tried %s, want %s", got, tt.wantTried)
			}
			if got := setCookieOf(ex.resp); fmt.Sprint(got) != fmt.Sprint(tt.wantCookie) {
				t.Errorf("got Set-Cookie %q, want %q", got, tt.wantCookie)
			}
		})
	}
}

// TestStickyAllocatesNothing checks that a request stuck by its cookie,
// and one whose answer sets the cookie, allocate nothing.
func TestStickyAllocatesNothing(t *testing.T) {
	p, _ := stickyPipeline(t)
	f := p.NewFlow()
	s := testSticky("app")
	for _, hdr := range [][]field{nil, {{"Cookie", []byte("srv=" + s.Value("b2"))}}} {
		ex := &fakeExchange{method: "GET", hdr: hdr, resp: &httpmsg.Response{}}
		if allocs := testing.AllocsPerRun(1000, func() {
			ex.resp.Reset()
			serve(f, okTransport{}, ex)
		}); allocs != 0 {
			t.Errorf("cookie %q: got %v allocations per request, want 0", hdr, allocs)
		}
	}
}

// TestStickySplitKeepsVersion checks that a client stuck to a backend of
// one variant stays on it whatever the split's weights, as after a
// reload that shifts them, while the backend is available; then it is
// drawn by weight again.
func TestStickySplitKeepsVersion(t *testing.T) {
	build := func(weights ...uint64) (*Pipeline, *Split) {
		sp := newSplit(2, 5)
		p := splitPipeline(t, sp, weights...)
		for i := range sp.Variants {
			sp.Variants[i].Upstream.Sticky = testSticky(sp.Variants[i].Upstream.Name)
		}
		return p, sp
	}
	p, sp := build(95, 5)
	// A canary client: the v2 backend's cookie, as v2's answer set it.
	v2 := sp.Variants[1].Upstream
	ex := func() *fakeExchange {
		return &fakeExchange{method: "GET", hdr: []field{{"Cookie", []byte("srv=" + testSticky("v2").Value("v2"))}}, resp: &httpmsg.Response{}}
	}
	tr := &recordingTransport{}
	for range 1000 {
		serve(p.NewFlow(), tr, ex())
	}
	// A reload that moves weight away from the canary.
	p2, sp2 := build(1000, 1)
	for range 1000 {
		serve(p2.NewFlow(), tr, ex())
	}
	for i, got := range tr.tried {
		if got != "v2" {
			t.Fatalf("request %d: got %s, want v2 (the client's version)", i, got)
		}
	}
	// Its backend goes: the client is drawn by weight again.
	sp2.Variants[1].Upstream.Backends[0].SetDown(true)
	v2.Backends[0].SetDown(true)
	tr.tried = nil
	for range 100 {
		serve(p2.NewFlow(), tr, ex())
	}
	v1 := 0
	for _, got := range tr.tried {
		if got == "v1" {
			v1++
		}
	}
	if v1 < 90 {
		t.Errorf("with its backend down: got %d of 100 on v1, want nearly all (weights 1000/1)", v1)
	}
}
