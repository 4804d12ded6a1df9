package engine

import (
	"strings"
	"testing"
)

// Issue 26: lower-case and unknown methods (get, helloGET) reached the
// backend. A standard method spelled in another case gets 400 and never
// reaches a backend, over HTTP/1.1 and HTTP/2 (h2c and TLS); an extension
// method, in any case, is forwarded as it came.
func TestLoopMethodCase(t *testing.T) {
	tests := []struct {
		method string
		status int
	}{
		{"get", 400},
		{"Get", 400},
		{"post", 400},
		{"trace", 400},
		{"delete", 400},
		{"helloGET", 200},
		{"PROPFIND", 200},
		{"purge", 200},
		{"GET", 200},
	}
	heads := make(chan string, 100)
	be := okBackend(t, heads)
	reached := func(t *testing.T, method string, status int) {
		t.Helper()
		if status != 200 {
			select {
			case h := <-heads:
				t.Errorf("%s: the backend got %q, want nothing", method, h)
			default:
			}
			return
		}
		if h := <-heads; !strings.HasPrefix(h, method+" / HTTP/1.1\r\n") {
			t.Errorf("%s: the backend got %q, want the method as sent", method, h)
		}
	}
	modes(t, func(t *testing.T, m mode, _ matrixOpts) {
		c := startFront(t, m, loopTo(be.addr))
		p := c.p
		if !m.client.http2() {
			for _, tt := range tests {
				c := c.raw(t)
				c.send(tt.method + " / HTTP/1.1\r\nHost: x\r\n\r\n")
				r := c.read(tt.method)
				if r.status != tt.status {
					t.Errorf("%s: got %d, want %d", tt.method, r.status, tt.status)
				}
				if tt.status == 400 && !r.close {
					t.Errorf("%s: got a 400 that keeps the connection open, want it closed", tt.method)
				}
				if rec := p.nextRec(t); rec.Status != tt.status {
					t.Errorf("%s: recorded %d, want %d", tt.method, rec.Status, tt.status)
				}
				reached(t, tt.method, tt.status)
			}
			return
		}
		h := dialH2Raw(t, p.addr, c.front, 0)
		for i, tt := range tests {
			id := uint32(2*i + 1)
			h.request(id, tt.method, "/", true)
			if r := h.response(id); r.status != itoa(tt.status) {
				t.Errorf("%s: got %q (reset %v %v), want %d", tt.method, r.status, r.reset, r.code, tt.status)
			}
			p.nextRec(t)
			reached(t, tt.method, tt.status)
		}
	}, onlyBackends(backendH1))
}
