package engine

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/netpoll"
)

// TestBatchedReads: on the io_uring poller, a keep-alive client's
// requests and its backend's answers are read in the loops' batched
// reads, and what goes through is whole: a head larger than a batched
// read's share of a socket, an answer of many shares, a request that
// comes in two pieces. (Every engine test runs on this poller too.)
func TestBatchedReads(t *testing.T) {
	hb, _ := newHTTPBackend(t, httpMux())
	p := startLoopProxy(t, netpoll.KindURing, loopTo(hb.Listener.Addr().String()))
	if on, _, err := p.eng.BatchReads(); !on {
		t.Skipf("io_uring is not available here: %v", err)
	}
	c := dialRaw(t, p.addr)
	const n = 20
	for i := 0; i < n; i++ {
		c.send("GET /fixed HTTP/1.1\r\nHost: a\r\n\r\n")
		if r := c.read("GET"); r.body != "fixed" {
			t.Fatalf("request %d: got %q, want %q", i, r.body, "fixed")
		}
	}
	// A request's head, then its answer: two sockets read in batches a
	// request, but the first, which the loop reads at its connection's
	// accept.
	if _, reads, _ := p.eng.BatchReads(); reads < 2*n-1 {
		t.Fatalf("%d sockets read in batches for %d proxied requests, want at least %d", reads, n, 2*n-1)
	}
	big := "GET /fixed HTTP/1.1\r\nHost: a\r\nX-Pad: " + strings.Repeat("p", 3*preSlot) + "\r\n\r\n"
	c.send(big)
	if r := c.read("GET"); r.body != "fixed" {
		t.Fatalf("after a head of %d bytes: got %q, want %q", len(big), r.body, "fixed")
	}
	c.send("GET /size/100000 HTTP/1.1\r\nHost: a\r\n\r\n")
	if r := c.read("GET"); r.body != strings.Repeat("s", 100000) {
		t.Fatalf("an answer of %d bytes came as %d", 100000, len(r.body))
	}
	c.send("GET /fix")
	time.Sleep(20 * time.Millisecond)
	c.send("ed HTTP/1.1\r\nHost: a\r\n\r\n")
	if r := c.read("GET"); r.body != "fixed" {
		t.Fatalf("a request in two pieces: got %q, want %q", r.body, "fixed")
	}
}

// TestEpollAlone runs the proxy's, TLS's and the soak's tests on epoll
// without batched reads (poller: epoll), which every other engine test
// leaves to the io_uring poller.
func TestEpollAlone(t *testing.T) {
	for name, f := range map[string]func(*testing.T, netpoll.Kind){
		"proxy": testLoopProxyHTTPBackend, "tls": testLoopTLS, "soak": testLoopSoak,
	} {
		t.Run(name, func(t *testing.T) { f(t, netpoll.KindEpoll) })
	}
}

// TestClientClosedSeesBatchedRead: whether a client has gone is told by
// what a batched read took from its socket, when it took something, not
// by a peek at the socket behind it (which would find only the FIN that
// follows a pipelined request).
func TestClientClosedSeesBatchedRead(t *testing.T) {
	c := &lconn{fd: -1}
	c.fr.pre = &preRead{b: []byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n"), err: io.EOF}
	if c.clientClosed() {
		t.Fatal("a request a batched read took was taken for a close")
	}
	c.fr.pre = &preRead{err: io.EOF}
	if !c.clientClosed() {
		t.Fatal("the end a batched read found was not taken for a close")
	}
}
