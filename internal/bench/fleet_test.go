package bench

import (
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/config"
	"github.com/helios-lb/helios/internal/discovery"
)

// TestFleetScenarios checks the discovery and shared-limit scenarios run
// Helios against its own baseline and no peer, and that each contender's
// config says what it measures: SRV records on the bench's resolver or
// fixed addresses; a limit in Redis or in the process.
func TestFleetScenarios(t *testing.T) {
	ss, err := LoadScenarios()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"discovery": "helios,helios-fixed", "shared-limit": "helios,helios-local-limit"}
	for _, s := range ss {
		w, ok := want[s.Name]
		if !ok {
			continue
		}
		delete(want, s.Name)
		c := s.Cases[0].merged(s.Defaults)
		r := &runner{opt: Options{Peers: []string{"nginx", "haproxy", "caddy"}, BasePort: 28080}, res: &Results{Profile: Profile{CPUs: 2}}}
		var names []string
		for _, ct := range r.contenders(c) {
			names = append(names, ct.res.Name)
			d := r.peerData(ct.peer, s, c, ct.features, ct.traced)
			if ct.fixed {
				d.Resolver, d.SRV = "", ""
			}
			if ct.localLimit {
				d.RateLimitStore = ""
			}
			d.Dir, d.StaticRoot = t.TempDir(), t.TempDir()
			text := render(t, "helios", d)
			cfg, err := config.Parse([]byte(text), "helios.yaml", func(string) (string, bool) { return "", false })
			if err != nil {
				t.Fatalf("%s: config.Parse: %v\n%s", ct.res.Name, err, text)
			}
			app := cfg.Upstreams[0]
			route := cfg.Routes[len(cfg.Routes)-1]
			switch {
			case s.Name == "discovery" && ct.fixed:
				if len(app.Backends) != 3 || app.Backends[0].Address != "127.0.0.1:28081" || cfg.Discovery.Resolver != "" {
					t.Errorf("%s: got backends %+v, discovery %+v; want the three fixed addresses", ct.res.Name, app.Backends, cfg.Discovery)
				}
			case s.Name == "discovery":
				if len(app.Backends) != 1 || app.Backends[0].SRV != benchSRVName || cfg.Discovery.Resolver != "127.0.0.1:28088" {
					t.Errorf("%s: got backends %+v, discovery %+v; want SRV %s on 127.0.0.1:28088", ct.res.Name, app.Backends, cfg.Discovery, benchSRVName)
				}
			case ct.localLimit:
				if route.RateLimit == nil || route.RateLimit.Store != "" {
					t.Errorf("%s: got rate_limit %+v, want one in the process", ct.res.Name, route.RateLimit)
				}
			default:
				if route.RateLimit == nil || route.RateLimit.Store != "redis://127.0.0.1:28089/0" {
					t.Errorf("%s: got rate_limit %+v, want one in redis://127.0.0.1:28089/0", ct.res.Name, route.RateLimit)
				}
			}
		}
		if got := strings.Join(names, ","); got != w {
			t.Errorf("%s: contenders %s, want %s", s.Name, got, w)
		}
	}
	if len(want) > 0 {
		t.Errorf("scenarios missing: %v", want)
	}
}

// TestBenchDNS asks the discovery scenario's DNS server what Helios asks
// it, with Helios's own resolver: one SRV record per backend port, each
// target's address in the additional section, and NXDOMAIN elsewhere.
func TestBenchDNS(t *testing.T) {
	addr := freeUDPAddr(t)
	s, err := startDNS(addr, []string{"127.0.0.1:9001", "127.0.0.1:9002", "127.0.0.1:9003"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res := discovery.NewResolver(addr)
	recs, ttl, err := res.LookupSRV(ctx, benchSRVName)
	if err != nil {
		t.Fatal(err)
	}
	var ports []int
	for _, r := range recs {
		ports = append(ports, int(r.Port))
		if len(r.Addrs) != 1 || r.Addrs[0].String() != "127.0.0.1" {
			t.Errorf("record %+v: want the target's address 127.0.0.1", r)
		}
	}
	if !slices.Equal(ports, []int{9001, 9002, 9003}) || ttl != benchTTL*time.Second {
		t.Errorf("got ports %v, TTL %s; want 9001-9003, %ds", ports, ttl, benchTTL)
	}
	if _, _, err := res.LookupAddrs(ctx, "nothing.bench."); err == nil {
		t.Error("a name the server does not have: got no error")
	}
	if s.Queries() == 0 {
		t.Error("got no queries counted")
	}
}

// freeUDPAddr returns a loopback address whose port is free for both UDP
// and TCP at the time of the call.
func freeUDPAddr(t *testing.T) string {
	t.Helper()
	for range 20 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		if pc, err := net.ListenPacket("udp", addr); err == nil {
			pc.Close()
			return addr
		}
	}
	t.Fatal("no free port for UDP and TCP")
	return ""
}

// TestWaitRedis starts the real redis-server as the shared-limit scenario
// does and waits for its PONG; a server that exits is reported at once.
func TestWaitRedis(t *testing.T) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed (make redis-deps installs it)")
	}
	addr := freeUDPAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	var ps procs
	defer ps.stopAll()
	dir := t.TempDir()
	p, err := ps.start("redis", []string{bin, "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no"}, nil, "", filepath.Join(dir, "redis.log"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := waitRedis(ctx, addr, p, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	bad, err := ps.start("redis-bad", []string{bin, "--port", "not-a-port"}, nil, "", filepath.Join(dir, "bad.log"))
	if err != nil {
		t.Fatal(err)
	}
	if err := waitRedis(ctx, "127.0.0.1:1", bad, 5*time.Second); err == nil || !strings.Contains(err.Error(), "exited") {
		t.Errorf("a redis-server that exits: got %v, want an error saying it exited", err)
	}
}
