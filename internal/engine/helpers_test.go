package engine

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/httpmsg"
)

// testTimeout bounds every blocking step of a socket test, so a broken
// engine fails the test instead of hanging it.
const testTimeout = 10 * time.Second

// rawClient drives a connection with bytes the test controls.
type rawClient struct {
	t  testing.TB
	nc net.Conn
	br *bufio.Reader
}

func dialRaw(t testing.TB, addr string) *rawClient {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(testTimeout))
	return &rawClient{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func (c *rawClient) send(s string) {
	c.t.Helper()
	if _, err := io.WriteString(c.nc, s); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// result is a response read by a rawClient, body included.
type result struct {
	status  int
	header  http.Header
	body    string
	trailer http.Header
	close   bool // the response said the connection closes
	chunked bool
}

// read reads one response to a request with the given method.
func (c *rawClient) read(method string) result {
	c.t.Helper()
	r, err := c.tryRead(method)
	if err != nil {
		c.t.Fatalf("reading response: %v", err)
	}
	return r
}

func (c *rawClient) tryRead(method string) (result, error) {
	resp, err := http.ReadResponse(c.br, &http.Request{Method: method})
	if err != nil {
		return result{}, err
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return result{}, err
	}
	return result{
		status: resp.StatusCode, header: resp.Header, body: string(b), trailer: resp.Trailer,
		close: resp.Close, chunked: len(resp.TransferEncoding) > 0,
	}, nil
}

// readHead reads the raw bytes of a response head.
func (c *rawClient) readHead() string {
	c.t.Helper()
	var sb strings.Builder
	for {
		line, err := c.br.ReadString('\n')
		sb.WriteString(line)
		if err != nil {
			c.t.Fatalf("reading head: %v (so far %q)", err, sb.String())
		}
		if line == "\r\n" || line == "\n" {
			return sb.String()
		}
	}
}

// expectClosed checks the server closes the connection within d and sends
// nothing more.
func (c *rawClient) expectClosed(d time.Duration) {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(d))
	b, err := c.br.ReadByte()
	switch {
	case err == nil:
		rest, _ := c.br.Peek(c.br.Buffered())
		c.t.Fatalf("got byte %q (then %q), want the connection closed", b, rest)
	case errors.Is(err, os.ErrDeadlineExceeded):
		c.t.Fatalf("connection still open after %v, want it closed", d)
	}
	c.nc.SetReadDeadline(time.Now().Add(testTimeout))
}

// expectOpen checks the server keeps the connection open for d without
// sending anything.
func (c *rawClient) expectOpen(d time.Duration) {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(d))
	b, err := c.br.ReadByte()
	if err == nil {
		c.t.Fatalf("got byte %q, want nothing", b)
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		c.t.Fatalf("got %v, want the connection open", err)
	}
	c.nc.SetReadDeadline(time.Now().Add(testTimeout))
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}

// waitFor polls cond until it holds or the test times out.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// lines renders what the section passes on (httpmsg.TrailerFields) as
// "name: value\r\n" lines, for comparisons.
func (t *trailerSection) lines() []byte {
	var s lineSink
	httpmsg.TrailerFields(&s, &t.hdr)
	return s.b
}

// lineSink renders fields as HTTP/1.1 lines.
type lineSink struct{ b []byte }

func (s *lineSink) Field(name, value []byte) {
	s.b = append(append(append(append(s.b, name...), ": "...), value...), "\r\n"...)
}

// equalStrings reports whether a and b hold the same strings in order.
func equalStrings(a, b []string) bool { return slices.Equal(a, b) }
