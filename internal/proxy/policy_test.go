package proxy

import (
	"encoding/base64"
	"fmt"
	"math"
	"net/netip"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/auth"
	"github.com/helios-lb/helios/internal/auth/authtest"
	"github.com/helios-lb/helios/internal/httpmsg"
	"github.com/helios-lb/helios/internal/ratelimit"
	"github.com/helios-lb/helios/internal/route"
	"github.com/helios-lb/helios/internal/rules"
	"github.com/helios-lb/helios/internal/wire"
)

// policyPipeline serves one route with policy p: a fixed 200, or the
// upstream up when it is not nil.
func policyPipeline(t testing.TB, p *Policy, up *Upstream) *Pipeline {
	t.Helper()
	rt := &Route{Name: "r", Policy: p, Stats: &RouteStats{}}
	if up != nil {
		rt.Upstream = up
	} else {
		rt.Respond = &Fixed{Status: 200, Body: []byte("ok")}
	}
	tab, err := route.New([]route.Entry[*Route]{{Name: "r", Value: rt}})
	if err != nil {
		t.Fatal(err)
	}
	return New(&Graph{Routes: tab, RouteList: []*Route{rt}})
}

// fakeClock is a rate limit's time, moved by hand.
type fakeClock struct{ now int64 }

func (c *fakeClock) Now() int64 { return c.now }

// TestRateLimitAccuracy sends a route three times its rate for 10
// seconds, evenly: it admits requests x seconds + burst, within 2%.
func TestRateLimitAccuracy(t *testing.T) {
	for _, lim := range []ratelimit.Limit{
		{Requests: 100, Per: time.Second, Burst: 50},
		{Requests: 10, Per: time.Second, Burst: 0},
		{Requests: 600, Per: time.Minute, Burst: 20},
	} {
		t.Run(fmt.Sprintf("%d per %v burst %d", lim.Requests, lim.Per, lim.Burst), func(t *testing.T) {
			clk := &fakeClock{}
			rl := NewRateLimit(ratelimit.New(0), lim, RateKeyClientIP, "")
			rl.Now = clk.Now
			p := policyPipeline(t, &Policy{RateLimit: rl}, nil)
			f := p.NewFlow()
			ex := &fakeExchange{method: "GET"}
			const seconds = 10
			rate := 3 * float64(lim.Requests) / lim.Per.Seconds()
			n := int(rate * seconds)
			admitted, limited := 0, 0
			for i := range n {
				clk.now = int64(float64(i) / rate * 1e9)
				ex.begin()
				serve(f, okTransport{}, ex)
				switch ex.status {
				case 200:
					admitted++
				case 429:
					limited++
				}
			}
			want := float64(lim.Requests)/lim.Per.Seconds()*seconds + float64(lim.Burst)
			if math.Abs(float64(admitted)-want) > 0.02*want {
				t.Errorf("admitted %d of %d, want %.0f ± 2%%", admitted, n, want)
			}
			if admitted+limited != n {
				t.Errorf("answered %d + %d, want %d", admitted, limited, n)
			}
			if got := p.Graph().RouteList[0].Stats.RateLimited.Load(); got != uint64(limited) {
				t.Errorf("RateLimited: got %d, want %d", got, limited)
			}
		})
	}
}

// TestRateLimitKeysAndAnswer checks what a limit counts by and what a
// refused request gets: 429 with Retry-After and the RateLimit fields.
func TestRateLimitKeysAndAnswer(t *testing.T) {
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	lim := ratelimit.Limit{Requests: 1, Per: time.Minute}
	tests := []struct {
		name   string
		key    RateKeyKind
		header string
		// second is the second request's client and X-Key; wantSecond
		// its status.
		second     *fakeExchange
		wantSecond int
	}{
		{name: "client ip: another client", key: RateKeyClientIP, second: &fakeExchange{method: "GET", addr: b}, wantSecond: 200},
		{name: "client ip: the same client", key: RateKeyClientIP, second: &fakeExchange{method: "GET", addr: a}, wantSecond: 429},
		{name: "route: every client together", key: RateKeyRoute, second: &fakeExchange{method: "GET", addr: b}, wantSecond: 429},
		{name: "header: another value", key: RateKeyHeader, header: "X-Key", second: &fakeExchange{method: "GET", addr: a, hdr: []field{{"X-Key", []byte("k2")}}}, wantSecond: 200},
		{name: "header: the same value", key: RateKeyHeader, header: "X-Key", second: &fakeExchange{method: "GET", addr: b, hdr: []field{{"X-Key", []byte("k1")}}}, wantSecond: 429},
		{name: "header: none, by client", key: RateKeyHeader, header: "X-Key", second: &fakeExchange{method: "GET", addr: b}, wantSecond: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := &fakeClock{now: 1e9}
			rl := NewRateLimit(ratelimit.New(0), lim, tt.key, tt.header)
			rl.Now = clk.Now
			p := policyPipeline(t, &Policy{RateLimit: rl}, nil)
			f := p.NewFlow()
			first := &fakeExchange{method: "GET", addr: a, hdr: []field{{"X-Key", []byte("k1")}}}
			if tt.key == RateKeyHeader && tt.name == "header: none, by client" {
				first.hdr = nil
			}
			serve(f, okTransport{}, first)
			if first.status != 200 {
				t.Fatalf("first: got %d, want 200", first.status)
			}
			clk.now += int64(10 * time.Second)
			serve(f, okTransport{}, tt.second)
			if tt.second.status != tt.wantSecond {
				t.Fatalf("second: got %d, want %d", tt.second.status, tt.wantSecond)
			}
			if tt.wantSecond == 429 {
				want := "Retry-After: 50\r\nRateLimit-Policy: \"default\";q=1;w=60\r\nRateLimit: \"default\";r=0;t=50\r\nContent-Type: text/plain; charset=utf-8\r\n"
				if tt.second.respHeader != want {
					t.Errorf("429 header: got %q, want %q", tt.second.respHeader, want)
				}
			}
		})
	}
}

// TestAccessLists checks allow and deny on the client address: deny
// first, then a non-empty allow.
func TestAccessLists(t *testing.T) {
	pre := netip.MustParsePrefix
	tests := []struct {
		name        string
		allow, deny []netip.Prefix
		client      string
		want        int
	}{
		{"no lists", nil, nil, "192.0.2.1", 200},
		{"allowed", []netip.Prefix{pre("10.0.0.0/8"), pre("192.0.2.0/24")}, nil, "192.0.2.1", 200},
		{"not allowed", []netip.Prefix{pre("10.0.0.0/8")}, nil, "192.0.2.1", 403},
		{"denied", nil, []netip.Prefix{pre("192.0.2.1/32")}, "192.0.2.1", 403},
		{"denied over allowed", []netip.Prefix{pre("192.0.2.0/24")}, []netip.Prefix{pre("192.0.2.1/32")}, "192.0.2.1", 403},
		{"IPv6", []netip.Prefix{pre("2001:db8::/32")}, nil, "2001:db8::1", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := policyPipeline(t, &Policy{Allow: tt.allow, Deny: tt.deny}, nil)
			ex := &fakeExchange{method: "GET", addr: netip.MustParseAddr(tt.client)}
			serve(p.NewFlow(), okTransport{}, ex)
			if ex.status != tt.want {
				t.Errorf("got %d, want %d", ex.status, tt.want)
			}
		})
	}
}

// loadUsers loads users given as "name:password" (authtest.File).
func loadUsers(t testing.TB, users ...string) *auth.Users {
	t.Helper()
	u, err := auth.LoadUsers(authtest.File(t, users...))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func basicAuthz(user, pass string) []byte {
	return []byte("Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass)))
}

// TestBasicAuthWaitsOffTheLoop checks the flow's side of basic
// authentication: credentials never verified make the flow wait
// (ActWait) for bcrypt on another goroutine, which wakes it through the
// exchange's Waker; Resume then lets the request go on (or answers 401),
// and the result is cached; a client gone during the wait is closed.
func TestBasicAuthWaitsOffTheLoop(t *testing.T) {
	users := loadUsers(t, "ann:secret")
	p := policyPipeline(t, &Policy{BasicAuth: NewBasicAuth(users, "r")}, nil)
	for _, tt := range []struct {
		name  string
		pass  string
		wait  bool
		want  int
		leave bool // the client leaves during the wait
	}{
		{name: "right, verified off the loop", pass: "secret", wait: true, want: 200},
		{name: "right, cached", pass: "secret", want: 200},
		{name: "wrong, verified off the loop", pass: "nope", wait: true, want: 401},
		{name: "wrong, cached", pass: "nope", want: 401},
		{name: "client gone during the wait", pass: "other", wait: true, leave: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := p.NewFlow()
			ex := &fakeExchange{method: "GET", hdr: []field{{"Authorization", basicAuthz("ann", tt.pass)}}}
			act := f.Begin(ex)
			if (act == wire.ActWait) != tt.wait {
				t.Fatalf("got action %v, want a wait %v", act, tt.wait)
			}
			if act == wire.ActWait {
				if d := f.Delay(); d <= 0 {
					t.Fatalf("Delay: got %v, want a bound", d)
				}
				deadline := time.Now().Add(5 * time.Second)
				for ex.wakes.Load() == 0 && time.Now().Before(deadline) {
					time.Sleep(time.Millisecond)
				}
				if ex.wakes.Load() != 1 {
					t.Fatalf("wakes: got %d, want 1", ex.wakes.Load())
				}
				if tt.leave {
					if act := f.Forwarded(0, wire.ErrClientGone); act != wire.ActClose {
						t.Errorf("client gone: got %v, want ActClose", act)
					}
					f.Finish()
					return
				}
				act = f.Resume()
			}
			if act != wire.ActRespond {
				t.Fatalf("got %v, want an answer", act)
			}
			status, h, _ := f.Answer()
			if status != tt.want {
				t.Errorf("got %d, want %d", status, tt.want)
			}
			if v, _ := h.Get("www-authenticate"); status == 401 && string(v) != `Basic realm="r", charset="UTF-8"` {
				t.Errorf("WWW-Authenticate: got %q", v)
			}
			f.Sent(status, 0, nil)
			f.Finish()
		})
	}
}

// TestResponseRulesCopyASharedHead checks that AnswerHeader edits a
// fixed answer's fields in the flow's own copy, never in place.
func TestResponseRulesCopyASharedHead(t *testing.T) {
	rh, err := rules.CompileHeaderRules(map[string]string{"X-Frame-Options": "DENY"}, nil, []string{"Server"})
	if err != nil {
		t.Fatal(err)
	}
	p := policyPipeline(t, &Policy{ResponseHeaders: rh}, nil)
	f := p.NewFlow()
	ex := &fakeExchange{method: "GET"}
	f.Begin(ex)
	shared := httpmsg.HeaderOf("Server", "x", "A", "1")
	h := f.AnswerHeader(shared, true)
	if h == shared || shared.Len() != 2 || shared.Fields[0].Drop {
		t.Fatalf("the shared head was edited: %+v", shared.Fields)
	}
	if v, _ := h.Get("x-frame-options"); string(v) != "DENY" || h.Len() != 2 {
		t.Errorf("the copy: got %d fields, X-Frame-Options %q; want A and X-Frame-Options DENY", h.Len(), v)
	}
	own := httpmsg.HeaderOf("Server", "x")
	if got := f.AnswerHeader(own, false); got != own || own.Len() != 1 {
		t.Errorf("an answer's own head: got another head or %d fields, want it edited in place", own.Len())
	}
}

// TestPolicyAllocatesNothing serves requests through a route with every
// policy but forward_auth on (allow list, a rate limit far above the
// load, basic auth with verified credentials, a rewrite, request and
// response header rules with variables): the steady path allocates
// nothing.
func TestPolicyAllocatesNothing(t *testing.T) {
	users := loadUsers(t, "ann:secret")
	authz := basicAuthz("ann", "secret")
	users.Verify(authz)
	reqRules, _ := rules.CompileHeaderRules(map[string]string{"X-Client": "{client_ip}", "X-Path": "{path}"}, map[string]string{"X-Req": "{request_id}"}, []string{"X-Secret"})
	respRules, _ := rules.CompileHeaderRules(map[string]string{"Strict-Transport-Security": "max-age=1"}, nil, []string{"Server"})
	rw, _ := rules.CompileRewrite(rules.RewriteConfig{StripPrefix: "/api"})
	pol := &Policy{
		Allow:           []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")},
		RateLimit:       NewRateLimit(ratelimit.New(0), ratelimit.Limit{Requests: 1_000_000, Per: time.Second, Burst: 1000}, RateKeyClientIP, ""),
		BasicAuth:       NewBasicAuth(users, "r"),
		Rewrite:         rw,
		RequestHeaders:  reqRules,
		ResponseHeaders: respRules,
	}
	_, up := pipelineFor(t, &fakeTransport{}, defaultPolicy(), NewBudget(0.2, 10, time.Minute))
	p := policyPipeline(t, pol, up)
	ex := &fakeExchange{method: "GET", path: []byte("/api/users"), hdr: []field{{"Authorization", authz}, {"X-Secret", []byte("s")}}}
	f := p.NewFlow()
	resp := &httpmsg.Header{}
	round := func() {
		ex.begin()
		serve(f, okTransport{}, ex)
		resp.Reset()
		resp.Add(serverName, serverValue)
		f.AnswerHeader(resp, false)
	}
	round()
	if ex.status != 200 || string(ex.req.Path) != "/users" {
		t.Fatalf("got (%d, %q), want (200, /users)", ex.status, ex.req.Path)
	}
	if n := testing.AllocsPerRun(1000, round); n != 0 {
		t.Errorf("got %v allocations per request, want 0", n)
	}
}

var serverName, serverValue = []byte("Server"), []byte("x")
