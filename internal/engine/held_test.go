package engine

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/helios-lb/helios/internal/netpoll"
	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/route"
	"github.com/helios-lb/helios/internal/upstream"
	"github.com/helios-lb/helios/internal/wire"
)

// heldMirrorer records the body of each copy the pipeline makes.
type heldMirrorer struct {
	mu     sync.Mutex
	bodies []string
}

func (m *heldMirrorer) Mirror(r *wire.MirrorRequest) {
	m.mu.Lock()
	m.bodies = append(m.bodies, string(r.Body))
	m.mu.Unlock()
	r.Done(r, 200, nil)
}

func (m *heldMirrorer) take() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.bodies
	m.bodies = nil
	return b
}

// TestBodyHeld checks what the engine says it holds of a request body
// (wire.Exchange.BodyHeld), through the copies a mirrored route makes:
// a small body that came with the head, and a chunked body request
// buffering kept in memory (decoded), are held whole; a request without
// a body holds an empty one; a body buffering put partly in a file, and
// one that streams, are not held, and the request is not copied. The
// backend gets every body whole either way.
func TestBodyHeld(t *testing.T) { run(t, testBodyHeld) }

func testBodyHeld(t *testing.T, k netpoll.Kind) {
	be, _ := newHTTPBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		io.WriteString(w, strconv.Itoa(len(b)))
	}))
	p := startLoopProxy(t, k, loopConfig{backends: []string{be.Listener.Addr().String()}, to: wire.TransportSettings{MaxIdlePerBackend: 4}})
	sb := &upstream.Backend{State: upstream.NewState(nil), Addr: "127.0.0.1:1", Weight: 1}
	shadow := &proxy.Upstream{Name: "shadow", Backends: []*upstream.Backend{sb}, Picker: onlyBackend{sb}, Transport: &wire.Transport{Name: "shadow"}, Stats: &proxy.UpstreamStats{}}
	m := &heldMirrorer{}
	newMirror := func() *proxy.Mirror {
		return &proxy.Mirror{Upstream: shadow, PerMillion: 1_000_000, MaxInflight: 10, Sender: m, Stats: &proxy.MirrorStats{}}
	}
	buffered, streamed := newMirror(), newMirror()
	tab, err := route.New([]route.Entry[*proxy.Route]{
		{Name: "buffered", PathPrefix: "/buffered/", Value: &proxy.Route{Name: "buffered", Upstream: p.up, Mirror: buffered,
			Buffer: &wire.BufferLimits{Memory: 16 << 10, File: 1 << 20}}},
		{Name: "up", Value: &proxy.Route{Name: "up", Upstream: p.up, Mirror: streamed}},
	})
	if err != nil {
		t.Fatal(err)
	}
	p.pipe.Swap(&proxy.Graph{Routes: tab, Upstreams: []*proxy.Upstream{p.up, shadow}, Recorder: p})
	c := dialRaw(t, p.addr)
	big := strings.Repeat("x", 100<<10)
	tests := []struct {
		name, req string
		length    int
		want      []string
		unheld    *proxy.Mirror
	}{
		{name: "a small body with the head", req: "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", length: 5, want: []string{"hello"}},
		{name: "no body", req: "GET /a HTTP/1.1\r\nHost: x\r\n\r\n", want: []string{""}},
		{name: "a chunked body buffered in memory", req: "POST /buffered/a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n3\r\ndef\r\n0\r\n\r\n",
			length: 6, want: []string{"abcdef"}},
		{name: "a body buffered partly in a file", req: "POST /buffered/a HTTP/1.1\r\nHost: x\r\nContent-Length: 102400\r\n\r\n" + big,
			length: 100 << 10, unheld: buffered},
		{name: "a body that streams", req: "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 102400\r\n\r\n" + big,
			length: 100 << 10, unheld: streamed},
	}
	for _, tt := range tests {
		c.send(tt.req)
		method, _, _ := strings.Cut(tt.req, " ")
		if r := c.read(method); r.status != 200 || r.body != strconv.Itoa(tt.length) {
			t.Errorf("%s: got (%d, %q), want (200, %d): the backend gets the body whole", tt.name, r.status, r.body, tt.length)
		}
		checkRecord(t, p, 200, nil)
		if got := m.take(); strings.Join(got, "|") != strings.Join(tt.want, "|") || len(got) != len(tt.want) {
			t.Errorf("%s: got copies with bodies %q, want %q", tt.name, got, tt.want)
		}
		if tt.unheld != nil && tt.unheld.Stats.Unbuffered.Load() != 1 {
			t.Errorf("%s: got %d requests not copied for their body, want 1", tt.name, tt.unheld.Stats.Unbuffered.Load())
		}
	}
}

// onlyBackend picks its one backend while it is usable.
type onlyBackend struct{ b *upstream.Backend }

func (o onlyBackend) Pick(k upstream.Key) *upstream.Backend {
	if o.b.Usable(k) {
		return o.b
	}
	return nil
}
