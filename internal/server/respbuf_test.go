package server

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// metricSum returns the sum of the samples of the named metric whose
// labels include those given (name=value), and whether it was exported.
func metricSum(t *testing.T, s *Server, name string, labels ...string) (float64, bool) {
	t.Helper()
	mfs, err := s.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum, found := 0.0, false
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				ok := false
				for _, lp := range m.GetLabel() {
					ok = ok || lp.GetName() == labels[i] && lp.GetValue() == labels[i+1]
				}
				if !ok {
					continue metrics
				}
			}
			found = true
			switch {
			case m.GetCounter() != nil:
				sum += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum, found
}

// Issue 26, weakness 5, through the configuration: response buffering is
// on by default (auto), within the process's response_buffers caps, so
// slow readers of a large answer leave the backend's handlers free before
// they read a byte, and the metrics say what it did; a route with
// response_buffering: off buffers nothing. On every driver.
func TestResponseBufferingFromConfig(t *testing.T) {
	// The answer is larger than the kernel lets the socket to a client
	// hold (net.ipv4.tcp_wmem's largest, 4 MiB by default), so that some
	// of it must wait in Helios or at the backend.
	const clients, size = 2, 8 << 20
	body := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	eachEngine(t, func(t *testing.T, engine string) {
		for _, mode := range []string{"auto", "off"} {
			t.Run(mode, func(t *testing.T) {
				// Handlers in flight are what a slow reader holds of the
				// backend.
				var active atomic.Int32
				be := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					active.Add(1)
					defer active.Add(-1)
					w.Header().Set("Content-Length", fmt.Sprint(size))
					w.Write(body)
				}))
				be.Config.ConnState = func(c net.Conn, st http.ConnState) {
					if st == http.StateNew {
						c.(*net.TCPConn).SetWriteBuffer(16 << 10)
					}
				}
				be.Start()
				defer be.Close()
				route := "{name: app, match: {path_prefix: /}, upstream: app}"
				if mode == "off" {
					route = "{name: app, match: {path_prefix: /}, upstream: app, response_buffering: \"off\"}"
				}
				cfg := yamlConfig(t, `
listeners: [{name: web, address: "127.0.0.1:1"}]
routes: [`+route+`]
upstreams: [{name: app, backends: [{address: "`+be.Listener.Addr().String()+`"}]}]
response_buffers: {memory_bytes: 1048576, file_bytes: 67108864}
admin: {address: "off"}
`, nil)
				setEngine(cfg, engine)
				s, _ := startServer(t, cfg, Options{})
				d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
					return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
				}}
				var cs []net.Conn
				for i := 0; i < clients; i++ {
					c, err := d.Dial("tcp", s.Addr("web").String())
					if err != nil {
						t.Fatal(err)
					}
					defer c.Close()
					c.SetDeadline(time.Now().Add(20 * time.Second))
					io.WriteString(c, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
					cs = append(cs, c)
				}
				if mode == "auto" {
					waitFor(t, 10*time.Second, "the backend's handlers to be done while no client reads", func() bool {
						n, _ := metricSum(t, s, "helios_response_buffered_total")
						return n == clients && active.Load() == 0
					})
					if n, _ := metricSum(t, s, "helios_response_buffer_bytes", "where", "file"); n <= 0 || n > 64<<20 {
						t.Errorf("helios_response_buffer_bytes{where=file}: got %v, want some, within the cap", n)
					}
				} else {
					time.Sleep(300 * time.Millisecond)
				}
				for i, c := range cs {
					// Now a fast reader (a receive buffer this small
					// would crawl, the window opening a little at a time).
					c.(*net.TCPConn).SetReadBuffer(4 << 20)
					resp, err := http.ReadResponse(bufio.NewReader(c), nil)
					if err != nil {
						t.Fatalf("client %d: %v", i, err)
					}
					got, err := io.ReadAll(resp.Body)
					if err != nil || !bytes.Equal(got, body) {
						t.Errorf("client %d: got %d bytes (%v), want the %d sent", i, len(got), err, size)
					}
				}
				buffered, found := metricSum(t, s, "helios_response_buffered_total")
				if want := map[string]float64{"auto": clients, "off": 0}[mode]; !found || buffered != want {
					t.Errorf("helios_response_buffered_total: got %v (exported %v), want %v", buffered, found, want)
				}
				waitFor(t, 5*time.Second, "the buffers to be let go", func() bool {
					n, _ := metricSum(t, s, "helios_response_buffer_bytes")
					return n == 0
				})
				if spilled, _ := metricSum(t, s, "helios_response_buffer_spilled_bytes_total"); mode == "auto" && spilled == 0 || mode == "off" && spilled != 0 {
					t.Errorf("helios_response_buffer_spilled_bytes_total: got %v in mode %s", spilled, mode)
				}
			})
		}
	})
}
