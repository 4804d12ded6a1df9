package engine

import (
	"encoding/base64"
	"io"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/auth"
	"github.com/helios-lb/helios/internal/auth/authtest"
	"github.com/helios-lb/helios/internal/httpmsg"
	"github.com/helios-lb/helios/internal/netpoll"
	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/ratelimit"
	"github.com/helios-lb/helios/internal/realip"
	"github.com/helios-lb/helios/internal/route"
	"github.com/helios-lb/helios/internal/rules"
	"github.com/helios-lb/helios/internal/tracing"
)

// keepAliveLoop is a client in keep-alive that sends one request and
// reads its answer of a known size.
type keepAliveLoop struct {
	c   *rawClient
	req []byte
	buf []byte
}

var (
	benchHeader = httpmsg.HeaderOf("Content-Type", "text/plain")
	benchBody   = []byte("hello, world\n")
)

func (l *keepAliveLoop) roundTrip() error {
	if _, err := l.c.nc.Write(l.req); err != nil {
		return err
	}
	_, err := io.ReadFull(l.c.br, l.buf)
	return err
}

// newLoopKeepAlive is a client, a loop engine proxy (the real pipeline,
// without a recorder or guard) and a backend (another engine, answering
// from a fixed route) over loopback, with the client in keep-alive.
func newLoopKeepAlive(t testing.TB) *keepAliveLoop { return newLoopKeepAliveTraced(t, nil) }

// newLoopKeepAliveTraced is newLoopKeepAlive with the proxy's pipeline
// tracing under pol (nil: off).
func newLoopKeepAliveTraced(t testing.TB, pol *tracing.Policy) *keepAliveLoop {
	backend := startLoopProxy(t, netpoll.KindEpoll, loopConfig{bare: true, fixed: map[string]proxy.Fixed{
		"/bench": {Status: 200, Header: *benchHeader, Body: benchBody},
	}, opts: Options{IdleTimeout: time.Minute, WriteTimeout: time.Minute}})
	p := startLoopProxy(t, netpoll.KindEpoll, loopConfig{
		backends: []string{backend.addr}, to: defaultTransport, bare: true, tracing: pol,
		opts: Options{ReadHeaderTimeout: time.Minute, IdleTimeout: time.Minute, WriteTimeout: time.Minute},
	})
	l := &keepAliveLoop{
		c:   dialRaw(t, p.addr),
		req: []byte("GET /bench HTTP/1.1\r\nHost: bench.example\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n"),
	}
	l.c.nc.SetDeadline(time.Time{})
	l.c.nc.Write(l.req)
	size := len(l.c.readHead()) + len(benchBody)
	l.c.br.Discard(len(benchBody))
	l.buf = make([]byte, size)
	return l
}

// BenchmarkLoopProxy measures a proxied keep-alive request through the
// event loops (client, proxy and backend on this machine: compare runs
// with benchstat, not one number with another).
func BenchmarkLoopProxy(b *testing.B) {
	l := newLoopKeepAlive(b)
	b.ReportAllocs()
	for b.Loop() {
		if err := l.roundTrip(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestLoopProxyRoundTripAllocs checks the steady keep-alive path through
// the event loops does not allocate per request (client, loop and
// backend all count; an average under one per round trip leaves room for
// the runtime's own, such as the Date line once a second).
func TestLoopProxyRoundTripAllocs(t *testing.T) { testRoundTripAllocs(t, nil) }

// TestLoopProxyTracedRoundTripAllocs: with tracing on, a request that is
// not sampled still costs no allocation through the loops (issue 24): it
// starts a trace, decides, and hands the backend its context in memory
// the exchange lends.
func TestLoopProxyTracedRoundTripAllocs(t *testing.T) {
	testRoundTripAllocs(t, tracing.NewPolicy(0, true, tracing.W3C, tracing.B3))
}

// BenchmarkLoopProxyTraced is BenchmarkLoopProxy with tracing on and
// nothing sampled: what deciding and propagating costs.
func BenchmarkLoopProxyTraced(b *testing.B) {
	l := newLoopKeepAliveTraced(b, tracing.NewPolicy(0, true))
	b.ReportAllocs()
	for b.Loop() {
		if err := l.roundTrip(); err != nil {
			b.Fatal(err)
		}
	}
}

func testRoundTripAllocs(t *testing.T, pol *tracing.Policy) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool allocate")
	}
	checkRoundTripAllocs(t, newLoopKeepAliveTraced(t, pol))
}

// checkRoundTripAllocs warms l up, then checks its round trips allocate
// nothing.
func checkRoundTripAllocs(t *testing.T, l *keepAliveLoop) {
	t.Helper()
	for i := 0; i < 100; i++ {
		if err := l.roundTrip(); err != nil {
			t.Fatal(err)
		}
	}
	allocs := testing.AllocsPerRun(500, func() {
		if err := l.roundTrip(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs >= 0.5 {
		t.Errorf("got %v allocs per round trip, want 0", allocs)
	}
}

// TestLoopProxyPolicyRoundTripAllocs is TestLoopProxyRoundTripAllocs
// with every edge policy but compression and forward_auth on: the client
// is a trusted proxy whose X-Forwarded-For names the client, the route
// matches on a method and a header regex, allows the client's network,
// rate-limits far above the load, asks for basic credentials (verified
// before), rewrites the path, and sets and removes fields of the request
// and of the answer. The steady keep-alive path still allocates nothing.
func TestLoopProxyPolicyRoundTripAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool allocate")
	}
	users, err := auth.LoadUsers(authtest.File(t, "ann:secret"))
	if err != nil {
		t.Fatal(err)
	}
	authz := "Basic " + base64.StdEncoding.EncodeToString([]byte("ann:secret"))
	users.Verify([]byte(authz))
	reqRules, err := rules.CompileHeaderRules(map[string]string{"X-Client": "{client_ip}"}, map[string]string{"X-Request": "{request_id}"}, []string{"X-Tenant"})
	if err != nil {
		t.Fatal(err)
	}
	respRules, err := rules.CompileHeaderRules(map[string]string{"Strict-Transport-Security": "max-age=63072000"}, nil, []string{"Content-Type"})
	if err != nil {
		t.Fatal(err)
	}
	rw, err := rules.CompileRewrite(rules.RewriteConfig{StripPrefix: "/api"})
	if err != nil {
		t.Fatal(err)
	}
	backend := startLoopProxy(t, netpoll.KindEpoll, loopConfig{bare: true, fixed: map[string]proxy.Fixed{
		"/bench": {Status: 200, Header: *benchHeader, Body: benchBody},
	}, opts: Options{IdleTimeout: time.Minute, WriteTimeout: time.Minute}})
	p := startLoopProxy(t, netpoll.KindEpoll, loopConfig{
		backends: []string{backend.addr}, to: defaultTransport, bare: true,
		opts: Options{ReadHeaderTimeout: time.Minute, IdleTimeout: time.Minute, WriteTimeout: time.Minute,
			RealIP: realip.New([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, realip.XForwardedFor)},
		upCond: &route.Cond{Methods: []string{"GET"}, Headers: []route.Pair{{Name: "X-Tenant", Value: "~^t[0-9]+$"}}},
		upPolicy: &proxy.Policy{
			Allow:           []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")},
			RateLimit:       proxy.NewRateLimit(ratelimit.New(0), ratelimit.Limit{Requests: 1_000_000, Per: time.Second, Burst: 1000}, proxy.RateKeyClientIP, ""),
			BasicAuth:       proxy.NewBasicAuth(users, "bench"),
			Rewrite:         rw,
			RequestHeaders:  reqRules,
			ResponseHeaders: respRules,
		},
	})
	l := &keepAliveLoop{
		c: dialRaw(t, p.addr),
		req: []byte("GET /api/bench HTTP/1.1\r\nHost: bench.example\r\nUser-Agent: bench\r\nAccept: */*\r\n" +
			"X-Forwarded-For: 203.0.113.1, 198.51.100.7\r\nX-Tenant: t42\r\nAuthorization: " + authz + "\r\n\r\n"),
	}
	l.c.nc.SetDeadline(time.Time{})
	l.c.nc.Write(l.req)
	head := l.c.readHead()
	if !strings.HasPrefix(head, "HTTP/1.1 200") || !strings.Contains(head, "Strict-Transport-Security: max-age=63072000\r\n") || strings.Contains(head, "Content-Type") {
		t.Fatalf("got\n%s\nwant 200 with the answer's rules applied", head)
	}
	l.c.br.Discard(len(benchBody))
	l.buf = make([]byte, len(head)+len(benchBody))
	checkRoundTripAllocs(t, l)
}
