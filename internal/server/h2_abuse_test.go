package server

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestHTTP2AbuseLimitsOnAListener: a client that trips an abuse limit on
// a real h2c listener loses its connection with GOAWAY
// ENHANCE_YOUR_CALM, the listener's counter in /metrics says which limit,
// and a well-behaved client on the same listener meanwhile is served.
func TestHTTP2AbuseLimitsOnAListener(t *testing.T) {
	bs := startBackends(t, 1)
	yaml := `
listeners: [{name: web, address: "127.0.0.1:1", h2c: true}]
routes:
  - {name: ping, match: {path: /ping}, respond: {status: 200, body: "pong"}}
  - {name: app, match: {path_prefix: /}, upstream: app}
upstreams: [{name: app, backends: [{address: "{{B1}}"}]}]
admin: {address: "off"}
`
	s, base := startServer(t, yamlConfig(t, yaml, bs), Options{})
	addr := strings.TrimPrefix(base, "http://")
	tests := []struct {
		name  string
		limit string
		abuse func(fr *http2.Framer, block []byte)
	}{
		{
			// CVE-2023-44487: streams opened and reset before their
			// answer (they wait on a slow backend).
			name: "rapid reset", limit: "rapid_reset",
			abuse: func(fr *http2.Framer, block []byte) {
				for id := uint32(1); id < 2*400; id += 2 {
					fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndStream: true, EndHeaders: true})
					fr.WriteRSTStream(id, http2.ErrCodeCancel)
				}
			},
		},
		{
			// CVE-2024-27316: a header block that never ends.
			name: "CONTINUATION flood", limit: "header_flood",
			abuse: func(fr *http2.Framer, block []byte) {
				fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block, EndStream: true})
				for i := 0; i < 100; i++ {
					fr.WriteContinuation(1, false, []byte{0x40, 1, 'x', 1, 'y'}) // literal x: y
				}
			},
		},
		{
			// CVE-2019-9512: PINGs the client does not need answered.
			name: "PING flood", limit: "ping_flood",
			abuse: func(fr *http2.Framer, _ []byte) {
				for i := 0; i < 1100; i++ {
					fr.WritePing(false, [8]byte{byte(i)})
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, _ := metric(t, s, "helios_http2_limit_closes_total", map[string]string{"listener": "web", "limit": tt.limit})
			nc, fr := h2RawConn(t, addr)
			defer nc.Close()
			tt.abuse(fr, requestBlock(t, "/delay/2000"))
			code, err := goAwayCode(fr)
			if err != nil {
				t.Fatalf("waiting for GOAWAY: %v", err)
			}
			if code != http2.ErrCodeEnhanceYourCalm {
				t.Errorf("GOAWAY code: got %v, want ENHANCE_YOUR_CALM", code)
			}
			// The abuser's connection is gone; another client is served.
			if status, body, _ := get(t, &http.Client{Transport: newH2ServerClient(t, nil)}, base+"/ping"); status != 200 || body != "pong" {
				t.Errorf("another client: got %d %q, want 200 pong", status, body)
			}
			waitFor(t, 5*time.Second, "the limit's counter", func() bool {
				got, _ := metric(t, s, "helios_http2_limit_closes_total", map[string]string{"listener": "web", "limit": tt.limit})
				return got == before+1
			})
		})
	}
}

// h2RawConn opens an h2c connection with prior knowledge and returns a
// framer over it, the preface and SETTINGS sent.
func h2RawConn(t *testing.T, addr string) (net.Conn, *http2.Framer) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(nc, http2.ClientPreface)
	fr := http2.NewFramer(nc, nc)
	fr.WriteSettings()
	return nc, fr
}

// requestBlock is the HPACK block of a GET for path.
func requestBlock(t *testing.T, path string) []byte {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "x"}, {":path", path}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	return buf.Bytes()
}

// goAwayCode reads frames until a GOAWAY, and returns its code.
func goAwayCode(fr *http2.Framer) (http2.ErrCode, error) {
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return 0, err
		}
		if ga, ok := f.(*http2.GoAwayFrame); ok && ga.ErrCode != http2.ErrCodeNo {
			return ga.ErrCode, nil
		}
		if _, ok := f.(*http2.GoAwayFrame); ok {
			continue // a graceful one first, then the real one
		}
	}
}
