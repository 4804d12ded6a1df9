package engine

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/netpoll"
)

// TestLoopSeveralLoops serves one address from two SO_REUSEPORT sockets on
// two loops: both take connections, and each keeps its own backend pool.
func TestLoopSeveralLoops(t *testing.T) { run(t, testLoopSeveralLoops) }

func testLoopSeveralLoops(t *testing.T, k netpoll.Kind) {
	hb, conns := newHTTPBackend(t, httpMux())
	p := startLoopProxy(t, k, loopConfig{backends: []string{hb.Listener.Addr().String()}, to: defaultTransport, loops: 2})
	// A second socket on the same port, served by the second loop
	// (socket i goes to loop i modulo the loop count).
	_, port, _ := net.SplitHostPort(p.addr)
	fdA, _ := listenLoopbackAt(t, atoiT(t, port))
	fdB, _ := listenLoopbackAt(t, atoiT(t, port))
	ll2, err := p.eng.Attach("second", []int{fdA, fdB}, Options{}, p.admit, p.release)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ll2.Stop()
		syscall.Close(fdA)
		syscall.Close(fdB)
	})
	// The kernel spreads connections over the sockets by their
	// addresses; enough connections reach both.
	var mu sync.Mutex
	seen := map[int]bool{}
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := dialRaw(t, p.addr)
			c.send("GET /size/1 HTTP/1.1\r\nHost: x\r\n\r\n")
			c.read("GET")
			for i, l := range p.eng.loops {
				l.do(func() {
					for lc := l.conns.head; lc != nil; lc = lc.next {
						if lc.remote.String() == c.nc.LocalAddr().String() {
							mu.Lock()
							seen[i] = true
							mu.Unlock()
						}
					}
				})
			}
			for j := 0; j < 5; j++ {
				c.send("GET /size/10 HTTP/1.1\r\nHost: x\r\n\r\n")
				if r, err := c.tryRead("GET"); err != nil || r.body != "ssssssssss" {
					t.Errorf("got (%q, %v), want 10 bytes", r.body, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if !seen[0] || !seen[1] {
		t.Errorf("loops serving: got %v, want both", seen)
	}
	if got := conns.Load(); got < 2 {
		t.Errorf("got %d backend connections, want at least 2 (a pool per loop)", got)
	}
}

func atoiT(t *testing.T, s string) int {
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestLoopSoak runs clients doing a bit of everything at once (fixed and
// proxied answers, pipelining, fixed and chunked bodies, an in-process
// handler, clients leaving mid-answer) and checks every answer that is
// read and, when the test ends, the harness's invariants.
func TestLoopSoak(t *testing.T) { run(t, testLoopSoak) }

func testLoopSoak(t *testing.T, k netpoll.Kind) {
	hb, _ := newHTTPBackend(t, httpMux())
	cfg := loopConfig{backends: []string{hb.Listener.Addr().String()}, to: defaultTransport, loops: 2,
		opts: Options{ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second}}
	p := startLoopProxy(t, k, cfg)
	type step struct {
		req, method, body string
	}
	steps := []step{
		{"GET /fixed/a HTTP/1.1\r\nHost: x\r\n\r\n", "GET", "fixed"},
		{"GET /size/100 HTTP/1.1\r\nHost: x\r\n\r\n", "GET", strings.Repeat("s", 100)},
		{"GET /size/300000 HTTP/1.1\r\nHost: x\r\n\r\n", "GET", strings.Repeat("s", 300000)},
		{"GET /chunked HTTP/1.1\r\nHost: x\r\n\r\n", "GET", "part1,part2"},
		{"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", "POST", "hello"},
		{"HEAD /head HTTP/1.1\r\nHost: x\r\n\r\n", "HEAD", ""},
		{"GET /204 HTTP/1.1\r\nHost: x\r\n\r\n", "GET", ""},
		{"GET /local/s HTTP/1.1\r\nHost: x\r\n\r\n", "GET", "local:/local/s"},
		{"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", "POST", "abc"},
		{"GET /big-fixed HTTP/1.1\r\nHost: x\r\n\r\n", "GET", string(bigFixed.Body)},
	}
	var (
		wg       sync.WaitGroup
		answered atomic.Int32
	)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(seed, 1))
			for conn := 0; conn < 20; conn++ {
				nc, err := net.DialTimeout("tcp", p.addr, testTimeout)
				if err != nil {
					t.Error(err)
					return
				}
				nc.SetDeadline(time.Now().Add(testTimeout))
				br := bufio.NewReader(nc)
				// A few requests, some pipelined; maybe leave early.
				var want []step
				n := 1 + rnd.IntN(5)
				var sb strings.Builder
				for i := 0; i < n; i++ {
					s := steps[rnd.IntN(len(steps))]
					want = append(want, s)
					sb.WriteString(s.req)
				}
				go io.WriteString(nc, sb.String())
				leave := rnd.IntN(4) == 0
				c := &rawClient{t: t, nc: nc, br: br}
				for i, s := range want {
					if leave && i == len(want)/2 {
						break
					}
					r, err := c.tryRead(s.method)
					if err != nil || r.body != s.body {
						t.Errorf("seed %d conn %d request %d (%q): got (%d bytes, %v), want %d bytes",
							seed, conn, i, strings.SplitN(s.req, "\r\n", 2)[0], len(r.body), err, len(s.body))
						break
					}
					answered.Add(1)
					if r.close {
						break
					}
				}
				if leave && rnd.IntN(2) == 0 {
					nc.(*net.TCPConn).SetLinger(0)
				}
				nc.Close()
			}
		}(uint64(w))
	}
	wg.Wait()
	t.Logf("%d answers read", answered.Load())
	waitFor(t, "the connections to end", func() bool { return p.eng.OpenConns() == 0 })
	p.checkInvariants()
}
