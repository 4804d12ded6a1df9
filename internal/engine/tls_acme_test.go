package engine

import (
	"crypto/tls"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/netpoll"
)

// A handshake that agrees on ALPN acme-tls/1 (a TLS-ALPN-01 validation,
// RFC 8737) only proves control of the name: the engine closes the
// connection after it and serves no HTTP on it, while a client that
// agrees on http/1.1 on the same listener is served.
func TestACMETLSALPNHandshakeIsClosed(t *testing.T) {
	run(t, func(t *testing.T, k netpoll.Kind) {
		tp := newTestTLS(t)
		tp.cfg.NextProtos = []string{"http/1.1", alpnACME}
		p := fileProxy(t, k, map[string][]byte{"a.txt": []byte("hello")}, tp)

		exchange := func(proto string) (string, error) {
			c, err := tls.DialWithDialer(&net.Dialer{Timeout: testTimeout}, "tcp", p.addr,
				&tls.Config{ServerName: "localhost", RootCAs: tp.pool, NextProtos: []string{proto}})
			if err != nil {
				return "", err
			}
			defer c.Close()
			if got := c.ConnectionState().NegotiatedProtocol; got != proto {
				t.Fatalf("negotiated %q, want %q", got, proto)
			}
			c.SetDeadline(time.Now().Add(testTimeout))
			io.WriteString(c, "GET /files/a.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
			b, err := io.ReadAll(c)
			return string(b), err
		}
		got, err := exchange(alpnACME)
		if got != "" || err != nil && !isClosedErr(err) {
			t.Errorf("after an acme-tls/1 handshake: got %q, %v; want the connection closed without an answer", got, err)
		}
		got, err = exchange("http/1.1")
		if err != nil || !strings.HasPrefix(got, "HTTP/1.1 200") {
			t.Errorf("after an http/1.1 handshake: got %q, %v; want 200", got, err)
		}
	})
}

// isClosedErr reports an error that means the peer closed or reset.
func isClosedErr(err error) bool {
	s := err.Error()
	return strings.Contains(s, "reset") || strings.Contains(s, "closed") || strings.Contains(s, "EOF")
}
