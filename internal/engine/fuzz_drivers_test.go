package engine

import (
	"bytes"
	"io"
	"net"
	"regexp"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/netpoll"
)

// FuzzDrivers feeds the same bytes, split where the fuzzer chooses, to the
// engine on every poller and checks that their answers are the same byte
// for byte (Date aside): the pollers only say when a socket is ready, and
// the one machine must not answer differently for it (issue 10's
// differential fuzzing).
func FuzzDrivers(f *testing.F) {
	for _, s := range []string{
		"GET /fixed/a HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /fixed/a HTTP/1.1\r\nHost: x\r\n\r\nGET /fixed/b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
		"POST /fixed/p HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
		"POST /fixed/p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"GET /nowhere HTTP/1.0\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
		"\r\n\r\nGET /fixed/ HTTP/1.1\r\nHost: x\r\nX: a\r\n b\r\n\r\n",
	} {
		f.Add([]byte(s), []byte{3, 17, 1})
	}
	proxies := map[netpoll.Kind]*loopProxy{}
	for _, k := range pollers {
		// No upstream: fixed answers, errors and framing are what the
		// drivers could disagree on without a backend's timing.
		proxies[k] = startLoopProxy(f, k, loopConfig{bare: true, opts: Options{ReadHeaderTimeout: time.Minute, IdleTimeout: time.Minute}})
	}
	f.Fuzz(func(t *testing.T, in, cuts []byte) {
		if len(in) > 4096 || len(cuts) > 16 {
			return
		}
		var want []byte
		for i, k := range pollers {
			got := exchangeSplit(t, proxies[k].addr, in, cuts)
			if i == 0 {
				want = got
				continue
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s answered %q, %s %q", pollers[0], want, k, got)
			}
		}
	})
}

// dateLine is the one field whose value depends on when it is written.
var dateLine = regexp.MustCompile(`(?m)^Date: [^\r]*\r$`)

// exchangeSplit writes in to addr in pieces (each cut is the length of the
// next piece), shuts its side, and returns everything the server sent.
func exchangeSplit(t *testing.T, addr string, in, cuts []byte) []byte {
	c, err := net.DialTimeout("tcp", addr, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tc := c.(*net.TCPConn)
	tc.SetNoDelay(true)
	c.SetDeadline(time.Now().Add(5 * time.Second))
	rest := in
	for _, n := range cuts {
		if len(rest) == 0 {
			break
		}
		n := min(int(n)+1, len(rest))
		if _, err := c.Write(rest[:n]); err != nil {
			break
		}
		rest = rest[n:]
		time.Sleep(200 * time.Microsecond) // a separate read for the engine
	}
	if len(rest) > 0 {
		c.Write(rest)
	}
	tc.CloseWrite()
	out, _ := io.ReadAll(c)
	return dateLine.ReplaceAll(out, []byte("Date: -\r"))
}
