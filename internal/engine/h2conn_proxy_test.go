package engine

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/h2"
	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/route"
	"github.com/helios-lb/helios/internal/static"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// HTTP/2 clients proxied and answered: heads, flow control, files, many
// streams, and streams that abuse the limits. Request bodies, answer
// trailers and large answers, which every client protocol has:
// TestMatrixBodies, TestMatrixTrailers.

// TestLoopH2Proxy proxies two streams of one connection to an HTTP/1.1
// backend on one kept-alive connection: the request line and fields as
// the backend reads them (no connection-specific field, no length for a
// bodiless request), and the answer's fields, repeated ones too, without
// the backend's hop-by-hop fields.
func TestLoopH2Proxy(t *testing.T) {
	const answer = "HTTP/1.1 201 Created\r\nX-Mixed-Case: Value\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n" +
		"Connection: X-Hop, keep-alive\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\nContent-Length: 5\r\n\r\nhello"
	modes(t, func(t *testing.T, m mode, _ matrixOpts) {
		got := make(chan h1Request, 4)
		be := recordingBackend(t, answer, got)
		p, tp := startFrontTLS(t, m, loopTo(be.addr))
		c := newH2Client(t, p.addr, tp)
		hdr := http.Header{"Cookie": {"a=1; b=2"}, "X-Custom": {"v1"}}
		for i := 0; i < 2; i++ {
			r, err := c.do(context.Background(), "GET", "/p/q?x=1", nil, hdr, nil)
			if err != nil {
				t.Fatalf("request %d: got %v, want an answer", i, err)
			}
			if r.status != 201 || r.body != "hello" || r.proto != "HTTP/2.0" {
				t.Errorf("request %d: got (%d, %q, %s), want (201, hello, HTTP/2.0)", i, r.status, r.body, r.proto)
			}
			if v := r.header.Get("X-Mixed-Case"); v != "Value" {
				t.Errorf("x-mixed-case: got %q, want Value", v)
			}
			if v := r.header.Values("Set-Cookie"); !equalStrings(v, []string{"a=1", "b=2"}) {
				t.Errorf("set-cookie: got %q, want [a=1 b=2]", v)
			}
			for _, name := range []string{"Connection", "Keep-Alive", "X-Hop"} {
				if v, ok := r.header[name]; ok {
					t.Errorf("%s: got %q, want it absent", name, v)
				}
			}
			req := nextRequest(t, got)
			line, _, _ := strings.Cut(req.head, "\r\n")
			if line != "GET /p/q?x=1 HTTP/1.1" {
				t.Errorf("request line: got %q, want %q", line, "GET /p/q?x=1 HTTP/1.1")
			}
			proto := "http"
			if m.client.tls() {
				proto = "https"
			}
			f := headFields(req.head)
			for name, want := range map[string][]string{
				"host": {p.addr}, "cookie": {"a=1; b=2"}, "x-custom": {"v1"},
				"x-forwarded-proto": {proto}, "x-forwarded-for": {"127.0.0.1"},
			} {
				if !equalStrings(f[name], want) {
					t.Errorf("backend's %s: got %q, want %q", name, f[name], want)
				}
			}
			for _, name := range []string{"transfer-encoding", "content-length", "te", "connection"} {
				if v, ok := f[name]; ok {
					t.Errorf("backend's %s: got %q, want it absent", name, v)
				}
			}
			if rec := p.nextRec(t); rec.Status != 201 || rec.Err != nil || rec.Attempts != 1 || rec.Bytes != 5 {
				t.Errorf("record: got (%v, %v, %d attempts, %d bytes), want (201, nil, 1, 5)", rec.Status, rec.Err, rec.Attempts, rec.Bytes)
			}
		}
		if n := c.dials.Load(); n != 1 {
			t.Errorf("got %d client connections, want 1 (both requests on one)", n)
		}
		if n := be.accepts.Load(); n != 1 {
			t.Errorf("got %d backend connections, want 1 (kept alive between streams)", n)
		}
	}, onlyClients(clientH2, clientH2C), onlyBackends(backendH1))
}

// TestLoopH2WireFields reads answers frame by frame: field names in lower
// case, no connection-specific field, the length of a chunked answer
// left out, a HEAD answer and a 204 as HEADERS that end the stream, and
// a CONNECT refused with 405 on its stream alone.
func TestLoopH2WireFields(t *testing.T) {
	be := headBackend(t, func(nc net.Conn, head string) {
		switch {
		case strings.HasPrefix(head, "GET /chunked "):
			io.WriteString(nc, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\nProxy-Connection: x\r\n"+
				"Upgrade: h2c\r\nTE: trailers\r\nX-UPPER: 1\r\nContent-Type: text/plain\r\nTrailer: X-Sum\r\n\r\n"+
				"5\r\nhello\r\n0\r\nX-Sum: 42\r\n\r\n")
		case strings.HasPrefix(head, "GET /204 "):
			io.WriteString(nc, "HTTP/1.1 204 No Content\r\nX-Empty: yes\r\n\r\n")
		case strings.HasPrefix(head, "HEAD "):
			io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")
		default:
			io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	modes(t, func(t *testing.T, m mode, _ matrixOpts) {
		p, tp := startFrontTLS(t, m, loopTo(be.addr))
		c := dialH2Raw(t, p.addr, tp, 0)
		tests := []struct {
			name, method, path string
			status             string
			body               string
			fields             map[string][]string
			absent             []string
			trailers           map[string]string
			// bodyless: the HEADERS end the stream; no DATA.
			bodyless bool
			// date: the proxy's own answer carries a Date (a
			// backend's is relayed as it came, as over HTTP/1.1).
			date bool
		}{
			{name: "chunked answer", method: "GET", path: "/chunked", status: "200", body: "hello",
				fields: map[string][]string{"x-upper": {"1"}, "content-type": {"text/plain"}, "trailer": {"X-Sum"}},
				absent: []string{"content-length"}, trailers: map[string]string{"x-sum": "42"}},
			{name: "HEAD proxied", method: "HEAD", path: "/head", status: "200", bodyless: true,
				fields: map[string][]string{"content-length": {"100"}}},
			{name: "204 proxied", method: "GET", path: "/204", status: "204", bodyless: true,
				fields: map[string][]string{"x-empty": {"yes"}}, absent: []string{"content-length"}},
			{name: "fixed answer", method: "GET", path: "/fixed/x", status: "200", body: "fixed", date: true,
				fields: map[string][]string{"x-test": {"1"}, "content-length": {"5"}}},
			{name: "HEAD of a fixed answer", method: "HEAD", path: "/fixed/x", status: "200", bodyless: true, date: true,
				fields: map[string][]string{"x-test": {"1"}, "content-length": {"5"}}},
			{name: "CONNECT refused", method: "CONNECT", path: "", status: "405", body: "CONNECT is not supported\n", date: true},
			{name: "after them all", method: "GET", path: "/", status: "200", body: "ok"},
		}
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				c.t = t
				id := uint32(2*i + 1)
				c.request(id, tt.method, tt.path, true)
				r := c.response(id)
				if r.reset || r.status != tt.status || string(r.body) != tt.body {
					t.Fatalf("got (%q, %q, reset %v %v), want (%q, %q, no reset)", r.status, r.body, r.reset, r.code, tt.status, tt.body)
				}
				checkWireFields(t, "head", r.fields)
				checkWireFields(t, "trailers", r.trailers)
				if got := len(r.field("date")) == 1; got != tt.date {
					t.Errorf("date: got %q, want one: %v", r.field("date"), tt.date)
				}
				for name, want := range tt.fields {
					if got := r.field(name); !equalStrings(got, want) {
						t.Errorf("%s: got %q, want %q", name, got, want)
					}
				}
				for _, name := range tt.absent {
					if got := r.field(name); got != nil {
						t.Errorf("%s: got %q, want it absent", name, got)
					}
				}
				gotTr := map[string]string{}
				for _, f := range r.trailers {
					gotTr[f.Name] = f.Value
				}
				if len(gotTr) != len(tt.trailers) {
					t.Errorf("trailers: got %v, want %v", gotTr, tt.trailers)
				}
				for name, v := range tt.trailers {
					if gotTr[name] != v {
						t.Errorf("trailer %s: got %q, want %q", name, gotTr[name], v)
					}
				}
				if tt.bodyless && r.dataFrames != 0 {
					t.Errorf("got %d DATA frames, want the HEADERS to end the stream", r.dataFrames)
				}
			})
		}
	}, onlyClients(clientH2, clientH2C), onlyBackends(backendH1))
}

// TestLoopH2Respond serves fixed answers on HTTP/2 streams: GET and HEAD
// (the length said, no body), and a 1 MiB answer, more than the client's
// initial windows, whole.
func TestLoopH2Respond(t *testing.T) {
	modes(t, func(t *testing.T, m mode, _ matrixOpts) {
		p, tp := startFrontTLS(t, m, loopConfig{})
		c := newH2Client(t, p.addr, tp)
		tests := []struct {
			method, path string
			status       int
			body         string
			length       int64
			header       map[string]string
		}{
			{"GET", "/fixed/a", 200, "fixed", 5, map[string]string{"X-Test": "1", "Content-Length": "5"}},
			{"HEAD", "/fixed/a", 200, "", 5, map[string]string{"X-Test": "1", "Content-Length": "5"}},
			{"GET", "/big-fixed", 200, string(bigFixed.Body), int64(len(bigFixed.Body)), nil},
			{"HEAD", "/big-fixed", 200, "", int64(len(bigFixed.Body)), nil},
		}
		for _, tt := range tests {
			t.Run(tt.method+" "+tt.path, func(t *testing.T) {
				r, err := c.do(context.Background(), tt.method, tt.path, nil, nil, nil)
				if err != nil {
					t.Fatal(err)
				}
				if r.status != tt.status || r.body != tt.body || r.length != tt.length {
					t.Errorf("got (%d, %d bytes, length %d), want (%d, %d bytes, length %d)", r.status, len(r.body), r.length, tt.status, len(tt.body), tt.length)
				}
				for name, v := range tt.header {
					if got := r.header.Get(name); got != v {
						t.Errorf("%s: got %q, want %q", name, got, v)
					}
				}
				if r.header.Get("Date") == "" {
					t.Error("date: got none, want one")
				}
				if rec := p.nextRec(t); rec.Status != tt.status || rec.Err != nil {
					t.Errorf("record: got (%v, %v), want (%v, nil)", rec.Status, rec.Err, tt.status)
				}
			})
		}
		if n := c.dials.Load(); n != 1 {
			t.Errorf("got %d client connections, want 1", n)
		}
	}, onlyClients(clientH2, clientH2C), onlyBackends(backendH1))
}

// TestLoopH2FlowControl reads answers with small receive windows, given
// back only as the data is read: no DATA frame passes the windows, and
// every answer (forwarded, fixed, from a file) arrives whole.
func TestLoopH2FlowControl(t *testing.T) {
	hb, _ := newHTTPBackend(t, httpMux())
	file := randomBody(1<<20+11, 3)
	modes(t, func(t *testing.T, m mode, _ matrixOpts) {
		p, tp := startFrontTLS(t, m, loopTo(hb.Listener.Addr().String()))
		addFileRoute(t, p, map[string][]byte{"f.bin": file})
		c := dialH2Raw(t, p.addr, tp, 16384)
		tests := []struct {
			path string
			want []byte
		}{
			{"/size/2000000", bytes.Repeat([]byte("s"), 2000000)},
			{"/big-fixed", bigFixed.Body},
			{"/files/f.bin", file},
			{"/chunked", []byte("part1,part2")},
		}
		for i, tt := range tests {
			id := uint32(2*i + 1)
			c.request(id, "GET", tt.path, true)
			r := c.response(id)
			if r.reset || r.status != "200" || !bytes.Equal(r.body, tt.want) {
				t.Errorf("%s: got (%q, %d bytes, reset %v %v), want (200, %d bytes)", tt.path, r.status, len(r.body), r.reset, r.code, len(tt.want))
			}
		}
	}, onlyClients(clientH2, clientH2C), onlyBackends(backendH1))
}

// addFileRoute adds a route serving files (internal/static's planner,
// the loop's own file answers) under /files/ in front of p's routes.
func addFileRoute(t *testing.T, p *loopProxy, files map[string][]byte) *static.Handler {
	t.Helper()
	h := fileHandler(t, files)
	tab, err := route.New([]route.Entry[*proxy.Route]{
		{Name: "files", PathPrefix: "/files/", Value: &proxy.Route{Name: "files", Files: h}},
		{Name: "fixed", PathPrefix: "/fixed/", Value: &proxy.Route{Name: "fixed", Respond: &fixedRoute}},
		{Name: "big", Path: "/big-fixed", Value: &proxy.Route{Name: "big", Respond: &bigFixed}},
		{Name: "up", Value: &proxy.Route{Name: "up", Upstream: p.up}},
	})
	if err != nil {
		t.Fatal(err)
	}
	p.pipe.Swap(&proxy.Graph{Routes: tab, Upstreams: []*proxy.Upstream{p.up}, Recorder: p})
	return h
}

// TestLoopH2Files serves static files on HTTP/2 streams: whole, a range,
// HEAD, a conditional request, a missing file, and a 4 MiB file whole.
func TestLoopH2Files(t *testing.T) {
	big := randomBody(4<<20, 4)
	modes(t, func(t *testing.T, m mode, _ matrixOpts) {
		p, tp := startFrontTLS(t, m, loopConfig{})
		mid := randomBody(30<<10, 7) // held in memory by the planner
		addFileRoute(t, p, map[string][]byte{"a.txt": []byte("hello, files\n"), "mid.bin": mid, "big.bin": big})
		c := newH2Client(t, p.addr, tp)
		r := c.get("/files/a.txt")
		etag := r.header.Get("Etag")
		if r.status != 200 || r.body != "hello, files\n" || etag == "" {
			t.Fatalf("whole: got (%d, %q, etag %q), want (200, the file, an etag)", r.status, r.body, etag)
		}
		tests := []struct {
			name, method string
			hdr          http.Header
			status       int
			body         string
			length       string
		}{
			{"range", "GET", http.Header{"Range": {"bytes=7-"}}, 206, "files\n", "6"},
			{"head", "HEAD", nil, 200, "", "13"},
			{"conditional", "GET", http.Header{"If-None-Match": {etag}}, 304, "", ""},
			{"missing", "GET", nil, 404, "", ""},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				path := "/files/a.txt"
				if tt.status == 404 {
					path = "/files/missing"
				}
				r, err := c.do(context.Background(), tt.method, path, nil, tt.hdr, nil)
				if err != nil {
					t.Fatal(err)
				}
				if r.status != tt.status || (tt.status != 404 && r.body != tt.body) {
					t.Errorf("got (%d, %q), want (%d, %q)", r.status, r.body, tt.status, tt.body)
				}
				if tt.length != "" && r.header.Get("Content-Length") != tt.length {
					t.Errorf("content-length: got %q, want %q", r.header.Get("Content-Length"), tt.length)
				}
			})
		}
		if r := c.get("/files/mid.bin"); r.status != 200 || r.body != string(mid) {
			t.Errorf("held in memory: got (%d, %d bytes), want (200, the %d bytes)", r.status, len(r.body), len(mid))
		}
		if r := c.get("/files/big.bin"); r.status != 200 || r.body != string(big) {
			t.Errorf("big: got (%d, %d bytes), want (200, the %d bytes)", r.status, len(r.body), len(big))
		}
	}, onlyClients(clientH2, clientH2C), onlyBackends(backendH1))
}

// TestLoopH2ManyStreams runs 50 streams at once on one connection, fixed
// answers, downloads and uploads mixed: each gets its own answer.
func TestLoopH2ManyStreams(t *testing.T) {
	hb, _ := newHTTPBackend(t, httpMux())
	modes(t, func(t *testing.T, m mode, _ matrixOpts) {
		p, tp := startFrontTLS(t, m, loopTo(hb.Listener.Addr().String()))
		c := newH2Client(t, p.addr, tp)
		c.get("/fixed/warm") // the connection, before the streams race for it
		const n = 50
		errs := make(chan error, n)
		for i := 0; i < n; i++ {
			go func() {
				var (
					r    clientResp
					err  error
					want string
				)
				switch i % 3 {
				case 0:
					r, err = c.do(context.Background(), "GET", fmt.Sprintf("/fixed/%d", i), nil, nil, nil)
					want = "fixed"
				case 1:
					r, err = c.do(context.Background(), "GET", fmt.Sprintf("/size/%d", 1000*i+1), nil, nil, nil)
					want = strings.Repeat("s", 1000*i+1)
				case 2:
					body := randomBody(3000*i+5, uint64(i))
					r, err = c.do(context.Background(), "POST", "/echo", bytes.NewReader(body), nil, nil)
					want = string(body)
				}
				switch {
				case err != nil:
					errs <- fmt.Errorf("stream %d: %w", i, err)
				case r.status != 200 || r.body != want:
					errs <- fmt.Errorf("stream %d: got (%d, %d bytes), want (200, %d bytes)", i, r.status, len(r.body), len(want))
				default:
					errs <- nil
				}
			}()
		}
		for i := 0; i < n; i++ {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
		if got := c.dials.Load(); got != 1 {
			t.Errorf("got %d client connections, want 1", got)
		}
	}, onlyClients(clientH2, clientH2C), onlyBackends(backendH1))
}

// TestLoopH2StreamLimitAbuse has a client open more streams than
// SETTINGS_MAX_CONCURRENT_STREAMS before it resets them (rapid reset in
// bursts): the first answer to the abuse is GOAWAY ENHANCE_YOUR_CALM, not
// a reset of each stream over the limit, whether the client had
// acknowledged the server's SETTINGS or not.
func TestLoopH2StreamLimitAbuse(t *testing.T) {
	be := silentBackend(t)
	modes(t, func(t *testing.T, m mode, _ matrixOpts) {
		for _, acked := range []bool{false, true} {
			name := "before the SETTINGS ack"
			if acked {
				name = "after the SETTINGS ack"
			}
			t.Run(name, func(t *testing.T) {
				stats := new(h2.Stats)
				cfg := loopTo(be.addr)
				cfg.opts.HTTP2.Stats = stats
				p, tp := startFrontTLS(t, m, cfg)
				c := dialH2Raw(t, p.addr, tp, 0)
				first := uint32(1)
				if acked {
					// next acknowledges the server's SETTINGS on its
					// way to the answer.
					c.request(1, "GET", "/fixed/x", true)
					if r := c.response(1); r.status != "200" {
						t.Fatalf("got %q, want 200", r.status)
					}
					p.nextRec(t)
					first = 3
				}
				const burst = 300 // over the default limit of 128
				for id := first; id < first+2*burst; id += 2 {
					c.request(id, "GET", "/up", true)
				}
				for id := first; id < first+2*burst; id += 2 {
					c.fr.WriteRSTStream(id, http2.ErrCodeCancel)
				}
				for {
					ev, err := c.next()
					if err != nil {
						t.Fatalf("got %v, want GOAWAY", err)
					}
					if ev.typ == http2.FrameGoAway {
						if ev.code != http2.ErrCodeEnhanceYourCalm {
							t.Errorf("got GOAWAY %v, want ENHANCE_YOUR_CALM", ev.code)
						}
						break
					}
					if ev.typ == http2.FrameRSTStream {
						t.Fatalf("got RST_STREAM %v on stream %d before the GOAWAY, want GOAWAY first", ev.code, ev.stream)
					}
				}
				if got := stats.RefusedStreamCloses.Load(); got != 1 {
					t.Errorf("got RefusedStreamCloses %d, want 1", got)
				}
				// The streams taken (as many as the limit) end as the
				// client's doing; no other reached the pipeline.
				for i := 0; i < int(h2.DefaultMaxConcurrentStreams); i++ {
					if rec := p.nextRec(t); rec.Status != 499 {
						t.Fatalf("record %d: got %d (%v), want 499", i, rec.Status, rec.Err)
					}
				}
			})
		}
	}, onlyClients(clientH2, clientH2C), onlyBackends(backendH1))
}

// TestLoopH2UnfinishedHeaderBlock has a client send a header block
// without END_HEADERS and stop: the connection holds the block encoded,
// no more than the header list size (64 KiB), and ends it (GOAWAY
// ENHANCE_YOUR_CALM) once read_header_timeout has passed, as an
// unfinished HTTP/1.1 head gets 408 then; a block past the header list
// size ends the connection at once.
func TestLoopH2UnfinishedHeaderBlock(t *testing.T) {
	tests := []struct {
		name  string
		size  int
		flood bool // past the bound: GOAWAY at once
	}{
		{"stalled under the bound", 60 << 10, false},
		{"past the bound", 120 << 10, true},
	}
	modes(t, func(t *testing.T, m mode, _ matrixOpts) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				stats := new(h2.Stats)
				cfg := loopTo("127.0.0.1:1")
				cfg.opts.ReadHeaderTimeout = 300 * time.Millisecond
				cfg.opts.IdleTimeout = time.Minute
				cfg.opts.HTTP2.Stats = stats
				p, tp := startFrontTLS(t, m, cfg)
				c := dialH2Raw(t, p.addr, tp, 0)
				// A first request has the SETTINGS exchanged, so that the
				// client writes nothing inside the block.
				c.request(1, "GET", "/fixed/x", true)
				c.response(1)
				start := time.Now()
				c.hb.Reset()
				for _, f := range [][2]string{{":method", "GET"}, {":scheme", c.scheme}, {":path", "/"}, {":authority", c.host}} {
					c.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
				}
				for c.hb.Len() < tt.size {
					// Never indexed, and not shortened by Huffman coding.
					c.enc.WriteField(hpack.HeaderField{Name: "x-pad", Value: strings.Repeat("\xfe", 1000), Sensitive: true})
				}
				block := c.hb.Bytes()
				c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: block[:16384]})
				for off := 16384; off < len(block); off += 16384 {
					c.fr.WriteContinuation(3, false, block[off:min(off+16384, len(block))])
				}
				if !tt.flood {
					var held int
					waitFor(t, "the block to be held", func() bool {
						held = p.headerBlockBytes()
						return held >= tt.size
					})
					if held > h2.DefaultMaxHeaderListSize {
						t.Errorf("got %d bytes held for a block of %d, want at most the header list size, %d", held, len(block), h2.DefaultMaxHeaderListSize)
					}
				}
				for {
					ev := c.mustNext()
					if ev.typ != http2.FrameGoAway {
						continue
					}
					if ev.code != http2.ErrCodeEnhanceYourCalm {
						t.Errorf("got GOAWAY %v, want ENHANCE_YOUR_CALM", ev.code)
					}
					break
				}
				// The sweep ticks HTTP/2 connections once a second.
				if el := time.Since(start); !tt.flood && el > 300*time.Millisecond+3*time.Second {
					t.Errorf("got GOAWAY after %v, want it within the 300ms read_header_timeout (and a tick)", el)
				}
				closes := &stats.HeaderTimeoutCloses
				if tt.flood {
					closes = &stats.HeaderFloodCloses
				}
				if got := closes.Load(); got != 1 {
					t.Errorf("got %d closes by the limit, want 1", got)
				}
			})
		}
	}, onlyClients(clientH2, clientH2C), onlyBackends(backendH1))
}

// headerBlockBytes adds up what the loops' HTTP/2 connections hold for
// header blocks not finished yet.
func (p *loopProxy) headerBlockBytes() int {
	n := 0
	for _, l := range p.eng.loops {
		l.do(func() {
			for c := l.conns.head; c != nil; c = c.next {
				if c.h2 != nil {
					n += c.h2.conn.HeaderBlockBytes()
				}
			}
		})
	}
	return n
}
