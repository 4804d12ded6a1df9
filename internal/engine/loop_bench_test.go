package engine

import (
	"encoding/base64"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/auth"
	"github.com/helios-lb/helios/internal/auth/authtest"
	"github.com/helios-lb/helios/internal/compress"
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
	// head is the first answer's head.
	head string
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
func newLoopKeepAlive(t testing.TB) *keepAliveLoop { return newLoopKeepAliveWith(t, loopConfig{}, "") }

// newLoopKeepAliveTraced is newLoopKeepAlive with the proxy's pipeline
// tracing under pol (nil: off).
func newLoopKeepAliveTraced(t testing.TB, pol *tracing.Policy) *keepAliveLoop {
	return newLoopKeepAliveWith(t, loopConfig{tracing: pol}, "")
}

// newLoopKeepAliveWith is newLoopKeepAlive with the proxy's tracing and
// its upstream route's compression as extra has them, and fields (whole
// lines) added to the request.
func newLoopKeepAliveWith(t testing.TB, extra loopConfig, fields string) *keepAliveLoop {
	backend := startLoopProxy(t, netpoll.KindEpoll, loopConfig{bare: true, fixed: map[string]proxy.Fixed{
		"/bench": {Status: 200, Header: *benchHeader, Body: benchBody},
	}, opts: Options{IdleTimeout: time.Minute, WriteTimeout: time.Minute}})
	p := startLoopProxy(t, netpoll.KindEpoll, loopConfig{
		backends: []string{backend.addr}, to: defaultTransport, bare: true, tracing: extra.tracing, compress: extra.compress,
		opts: Options{ReadHeaderTimeout: time.Minute, IdleTimeout: time.Minute, WriteTimeout: time.Minute},
	})
	l := &keepAliveLoop{
		c:   dialRaw(t, p.addr),
		req: []byte("GET /bench HTTP/1.1\r\nHost: bench.example\r\nUser-Agent: bench\r\nAccept: */*\r\n" + fields + "\r\n"),
	}
	l.c.nc.SetDeadline(time.Time{})
	l.c.nc.Write(l.req)
	l.head = l.c.readHead()
	size := len(l.head) + len(benchBody)
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
func TestLoopProxyRoundTripAllocs(t *testing.T) {
	testRoundTripAllocs(t, func() *keepAliveLoop { return newLoopKeepAlive(t) })
}

// TestLoopProxySmallBodyRoundTripAllocs: a request with a body small
// enough to be read whole behind its head (32 KiB, under maxLoopBody)
// costs no allocation either, at the proxy or at the backend engine: the
// buffer it is read into is one the loop keeps (bodyBufs), not one made
// per request.
func TestLoopProxySmallBodyRoundTripAllocs(t *testing.T) {
	testRoundTripAllocs(t, func() *keepAliveLoop {
		l := newLoopKeepAlive(t)
		body := strings.Repeat("b", 32<<10)
		l.req = []byte("POST /bench HTTP/1.1\r\nHost: bench.example\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
		return l
	})
}

// TestLoopProxyTracedRoundTripAllocs: with tracing on, a request that is
// not sampled still costs no allocation through the loops (issue 24): it
// starts a trace, decides, and hands the backend its context in memory
// the exchange lends.
func TestLoopProxyTracedRoundTripAllocs(t *testing.T) {
	testRoundTripAllocs(t, func() *keepAliveLoop {
		return newLoopKeepAliveTraced(t, tracing.NewPolicy(0, true, tracing.W3C, tracing.B3))
	})
}

// TestLoopProxyCompressionNotAppliedAllocs: with compression configured
// on the route but not applied, a request costs no allocation through
// the loops either: an answer too small for it, and one the client
// accepts no coding for (which gets Vary: Accept-Encoding all the same).
func TestLoopProxyCompressionNotAppliedAllocs(t *testing.T) {
	policy := func(minBytes int64) *compress.Policy {
		pol, err := compress.NewPolicy(compress.Options{MinBytes: minBytes})
		if err != nil {
			t.Fatal(err)
		}
		return pol
	}
	tests := []struct {
		name   string
		pol    *compress.Policy
		fields string
		vary   bool
	}{
		{name: "too small", pol: policy(1024), fields: "Accept-Encoding: gzip, br, zstd\r\n"},
		{name: "no coding accepted", pol: policy(-1), vary: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l *keepAliveLoop
			testRoundTripAllocs(t, func() *keepAliveLoop {
				l = newLoopKeepAliveWith(t, loopConfig{compress: tt.pol}, tt.fields)
				if got := strings.Contains(l.head, "Vary: Accept-Encoding"); got != tt.vary {
					t.Fatalf("got Vary %v in\n%s\nwant %v", got, l.head, tt.vary)
				}
				return l
			})
			if l != nil && strings.Contains(string(l.buf), "Content-Encoding") {
				t.Errorf("got a compressed answer:\n%s", l.buf)
			}
		})
	}
}

// TestLoopH2RespondAllocs checks the HTTP/2 fixed-answer path (an h2c
// client, a route that responds) allocates at most one object per request
// through the loop: the machine's h2.Stream, which is not reused (a
// handler may keep it). HPACK decodes into the connection's buffers, the
// stream's head is copied into memory the stream keeps on the loop's free
// list, and its fields into a field array of the loop's.
func TestLoopH2RespondAllocs(t *testing.T) { testH2Allocs(t, h2BenchRespond, 1) }

// TestLoopH2ProxyAllocs: an h2c request proxied to an HTTP/1.1 backend
// costs the client's h2.Stream and nothing else.
func TestLoopH2ProxyAllocs(t *testing.T) { testH2Allocs(t, h2BenchProxyH1, 1) }

// TestLoopH2ProxyH2CAllocs: an h2c request proxied to an h2c backend (an
// engine in this process, its allocations counted too) costs an h2.Stream
// on each of the three connections: the client's, the proxy's to the
// backend, and the backend's own.
func TestLoopH2ProxyH2CAllocs(t *testing.T) { testH2Allocs(t, h2BenchProxyH2C, 3) }

func testH2Allocs(t *testing.T, target h2BenchTarget, want int) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool allocate")
	}
	c := newH2Bench(t, target)
	for i := 0; i < 100; i++ {
		if err := c.roundTrip(); err != nil {
			t.Fatal(err)
		}
	}
	allocs := testing.AllocsPerRun(500, func() {
		if err := c.roundTrip(); err != nil {
			t.Fatal(err)
		}
	})
	// Half an allocation of room, as testRoundTripAllocs leaves, for the
	// runtime's own and the Date value made once a second.
	if allocs >= float64(want)+0.5 {
		t.Errorf("got %v allocs per request, want %d", allocs, want)
	}
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

// testRoundTripAllocs counts the allocations of the round trips of the
// keep-alive loop start returns.
func testRoundTripAllocs(t *testing.T, start func() *keepAliveLoop) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool allocate")
	}
	l := start()
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
	testRoundTripAllocs(t, func() *keepAliveLoop { return l })
}
