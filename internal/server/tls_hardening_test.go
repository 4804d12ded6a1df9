package server

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/tlsconf/tlstest"
)

// Issue 26, bug 1: connections to a TLS listener that sent nothing held
// the places of max_handshakes, and while they did every new connection
// was closed at once (refused). A connection now holds a place only from
// its whole ClientHello, and at the cap the oldest handshake waiting for
// its client is shed for the new one.

// tlsAttack is a server whose listener web has a cap of 8 handshakes,
// and what a client of it needs.
type tlsAttack struct {
	s     *Server
	addr  string
	certs *testCerts
	// hello is the ClientHello a client of site.example sends.
	hello []byte
}

// startTLSAttack serves httpsConfig with a cap of 8 handshakes and the
// handshake timeout given, on engine.
func startTLSAttack(t *testing.T, engine, handshakeTimeout string) *tlsAttack {
	t.Helper()
	certs := newTestCerts(t)
	certs.write(t, "site", "site.example")
	yaml := strings.NewReplacer("{{DIR}}", certs.dir, "{{EXTRA}}", ", max_handshakes: 8, handshake_timeout: "+handshakeTimeout).Replace(httpsConfig)
	cfg := yamlConfig(t, yaml, startBackends(t, 1))
	setEngine(cfg, engine)
	s, _ := startServer(t, cfg, Options{})
	hello, err := tlstest.ClientHello(&tls.Config{RootCAs: certs.pool, ServerName: "site.example"})
	if err != nil {
		t.Fatal(err)
	}
	return &tlsAttack{s: s, addr: s.Addr("web").String(), certs: certs, hello: hello}
}

// openSending connects to addr and sends b (nothing when empty).
func openSending(t *testing.T, addr string, b []byte) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if len(b) > 0 {
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// isClosed reads what the server sent c until it closes c, within d;
// it reports false when c is still open after d.
func isClosed(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	return !errors.Is(err, os.ErrDeadlineExceeded)
}

// openWithin waits up to d for listener web to hold want connections, and
// returns how many it holds.
func openWithin(s *Server, want int, d time.Duration) int {
	deadline := time.Now().Add(d)
	for {
		n := int(s.OpenConnections()["web"])
		if n >= want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// politeClient makes a request on a new TLS connection each time.
func politeClient(t *testing.T, certs *testCerts) *http.Client {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: certs.pool, ServerName: "site.example"}, DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// TestTLSSilentConnectionsLeaveRoom: 64 connections that send nothing and
// 16 that send part of a ClientHello, with max_handshakes 8 (and the
// default handshake timeout, 10s), hold no place: a client opening a new
// TLS connection per request is served every time, and nothing is
// refused.
func TestTLSSilentConnectionsLeaveRoom(t *testing.T) {
	eachEngine(t, func(t *testing.T, engine string) {
		a := startTLSAttack(t, engine, "10s")
		s, addr, certs, hello := a.s, a.addr, a.certs, a.hello
		for i := 0; i < 64; i++ {
			openSending(t, addr, nil)
		}
		for i := 0; i < 16; i++ {
			openSending(t, addr, hello[:1+i*(len(hello)-1)/16])
		}
		if n := openWithin(s, 80, 5*time.Second); n < 80 {
			t.Errorf("open connections: got %d, want the 80 quiet ones kept open", n)
		}
		c := politeClient(t, certs)
		for i := 0; i < 20; i++ {
			if code, _, _ := get(t, c, "https://"+addr+"/"); code != 200 {
				t.Fatalf("request %d: got %d, want 200", i, code)
			}
		}
		for _, result := range []string{"refused", "shed"} {
			if n := handshakes(t, s, result); n != 0 {
				t.Errorf("handshakes %s: got %v, want 0", result, n)
			}
		}
	})
}

// TestTLSReopeningAttackerDoesNotStarve: an attacker keeps 20 connections
// open, reopening each as soon as Helios closes it (16 that send nothing
// or part of a ClientHello, which take no place; 4 that send a whole
// ClientHello and then nothing, which fit under the cap with the polite
// client's one), while a polite client opens a new TLS connection for
// each of 60 requests, 20 ms apart (longer in all than the 1s handshake
// timeout, so the attacker does reopen): every request is served.
func TestTLSReopeningAttackerDoesNotStarve(t *testing.T) {
	eachEngine(t, func(t *testing.T, engine string) {
		a := startTLSAttack(t, engine, "1s")
		s, addr, certs, hello := a.s, a.addr, a.certs, a.hello
		var payloads [][]byte
		for i := 0; i < 8; i++ {
			payloads = append(payloads, nil, hello[:1+i*(len(hello)-1)/8])
		}
		for i := 0; i < 4; i++ {
			payloads = append(payloads, hello)
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var reopened sync.Map
		for i, b := range payloads {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					c, err := net.DialTimeout("tcp", addr, 5*time.Second)
					if err != nil {
						continue
					}
					if n > 0 {
						reopened.Store(i, n)
					}
					c.Write(b)
					go func() { <-stop; c.Close() }()
					io.Copy(io.Discard, c) // until Helios closes it
					c.Close()
				}
			}()
		}
		defer func() { close(stop); wg.Wait() }()
		if n := openWithin(s, len(payloads), 5*time.Second); n < len(payloads) {
			t.Logf("open connections: %d of the attacker's %d (the rest refused)", n, len(payloads))
		}
		c := politeClient(t, certs)
		served := 0
		for i := 0; i < 60; i++ {
			if code, _ := tryGet(c, "https://"+addr+"/"); code == 200 {
				served++
			}
			time.Sleep(20 * time.Millisecond)
		}
		if served != 60 {
			t.Errorf("polite client: %d of 60 requests served, want all", served)
		}
		attackers := 0
		reopened.Range(func(any, any) bool { attackers++; return true })
		t.Logf("%d of %d attacker connections reopened at least once", attackers, len(payloads))
	})
}

// handshakes returns the handshakes of listener web that ended with
// result, all versions together.
func handshakes(t *testing.T, s *Server, result string) float64 {
	t.Helper()
	mfs, err := s.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "helios_tls_handshakes_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			if labels["listener"] == "web" && labels["result"] == result {
				n += value(m)
			}
		}
	}
	return n
}

// tryGet is get without failing the test: the status, or 0 on an error.
func tryGet(c *http.Client, url string) (int, error) {
	res, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	io.Copy(io.Discard, res.Body)
	return res.StatusCode, nil
}

// TestTLSStalledHandshakesShedOldestFirst: with max_handshakes 8 (and the
// default handshake timeout, 10s), eight connections that send a whole ClientHello and then nothing hold every
// place; each new handshake sheds the oldest of them rather than being
// refused, and a polite client is served.
func TestTLSStalledHandshakesShedOldestFirst(t *testing.T) {
	eachEngine(t, func(t *testing.T, engine string) {
		a := startTLSAttack(t, engine, "10s")
		s, addr, certs, hello := a.s, a.addr, a.certs, a.hello
		var stalled []net.Conn
		for i := 0; i < 10; i++ {
			stalled = append(stalled, openSending(t, addr, hello))
			// Each is admitted (shedding one past the cap) and waits for
			// its client before the next comes.
			waiting, shed := min(i+1, 8), max(i+1-8, 0)
			waitFor(t, 10*time.Second, "the stalled handshake", func() bool {
				n, _ := metric(t, s, "helios_tls_handshakes_waiting", map[string]string{"listener": "web"})
				return int(n) == waiting && handshakes(t, s, "shed") == float64(shed)
			})
		}
		// The last two took the places of the first two, in order.
		for i, c := range stalled {
			if closed := isClosed(c, 50*time.Millisecond); closed != (i < 2) {
				t.Errorf("stalled handshake %d: got closed %v, want %v", i, closed, i < 2)
			}
		}
		c := politeClient(t, certs)
		if code, _, _ := get(t, c, "https://"+addr+"/"); code != 200 {
			t.Errorf("polite client: got %d, want 200", code)
		}
		if !isClosed(stalled[2], 5*time.Second) {
			t.Errorf("stalled handshake 2: still open, want it shed for the polite client")
		}
		waitFor(t, 10*time.Second, "three handshakes counted as shed", func() bool { return handshakes(t, s, "shed") == 3 })
		if n := handshakes(t, s, "refused"); n != 0 {
			t.Errorf("handshakes refused: got %v, want 0", n)
		}
	})
}
