// Package backend is the built-in origin server behind `helios backend`:
// a small, fast HTTP server for demos, tests and benchmarks. It runs on
// Helios's own HTTP/1.1 engine, so benchmarks spend little CPU on it.
//
//	GET /             200, X-Backend: NAME, a short body naming the backend
//	GET /healthz      200 "ok" (or the status set with SetHealth)
//	GET /status/CODE  that status
//	GET /delay/MS     200 after MS milliseconds
//	ANY /echo         the request line, headers and body back
//	GET /bytes/N      N bytes, streamed
//	GET /ws           a WebSocket echo
//	GET /stats        {"name":..., "connections":..., "requests":...}
package backend

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/net/websocket"

	"github.com/helios-lb/helios/internal/h1"
	"github.com/helios-lb/helios/internal/wire"
)

// Backend is one built-in origin server.
type Backend struct {
	name     string
	srv      *h1.Server
	conns    atomic.Uint64
	requests atomic.Uint64
	health   atomic.Int64 // status /healthz answers with
	failing  atomic.Int64 // when set, the status of every other answer

	rootHeader []byte
	rootBody   []byte
	echo       http.Handler
	bytesH     http.Handler
	ws         http.Handler
}

// New returns a backend that names itself name.
func New(name string) *Backend {
	b := &Backend{name: name}
	b.health.Store(200)
	b.rootHeader = []byte("X-Backend: " + name + "\r\nContent-Type: text/plain; charset=utf-8\r\n")
	b.rootBody = []byte("hello from " + name + "\n")
	b.echo = http.HandlerFunc(b.serveEcho)
	b.bytesH = http.HandlerFunc(b.serveBytes)
	b.ws = websocket.Handler(echoMessages)
	b.srv = h1.NewServer(h1.HandlerFunc(b.serve), h1.Options{
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
	})
	return b
}

// Name returns the backend's name.
func (b *Backend) Name() string { return b.name }

// Connections returns the number of connections accepted so far.
func (b *Backend) Connections() uint64 { return b.conns.Load() }

// Requests returns the number of requests served so far.
func (b *Backend) Requests() uint64 { return b.requests.Load() }

// SetHealth makes /healthz answer with status (200 by default).
func (b *Backend) SetHealth(status int) { b.health.Store(int64(status)) }

// SetFailing makes every path but /healthz and /stats answer with status;
// 0 returns to normal. It simulates a backend that is up but broken.
func (b *Backend) SetFailing(status int) { b.failing.Store(int64(status)) }

// Serve accepts connections on ln until it is closed.
func (b *Backend) Serve(ln net.Listener) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		b.conns.Add(1)
		go b.srv.ServeConn(c)
	}
}

// Shutdown closes idle connections and waits for busy ones, up to ctx.
func (b *Backend) Shutdown(ctx context.Context) error { return b.srv.Shutdown(ctx) }

var (
	textHeader = []byte("X-Content-Type-Options: nosniff\r\nContent-Type: text/plain; charset=utf-8\r\n")
	okBody     = []byte("ok\n")
)

func (b *Backend) serve(ex wire.Exchange) {
	b.requests.Add(1)
	p := ex.Path()
	if code := int(b.failing.Load()); code != 0 && string(p) != "/healthz" && string(p) != "/stats" {
		ex.Respond(code, b.rootHeader, []byte(strconv.Itoa(code)+" from "+b.name+"\n"))
		return
	}
	switch {
	case string(p) == "/":
		ex.Respond(200, b.rootHeader, b.rootBody)
	case string(p) == "/healthz":
		code := int(b.health.Load())
		ex.Respond(code, textHeader, okBody)
	case strings.HasPrefix(string(p), "/status/"):
		code, err := strconv.Atoi(string(p[len("/status/"):]))
		if err != nil || code < 200 || code > 599 {
			ex.Respond(400, textHeader, []byte("status must be 200..599\n"))
			return
		}
		ex.Respond(code, b.rootHeader, []byte(strconv.Itoa(code)+" from "+b.name+"\n"))
	case strings.HasPrefix(string(p), "/delay/"):
		ms, err := strconv.Atoi(string(p[len("/delay/"):]))
		if err != nil || ms < 0 || ms > 600000 {
			ex.Respond(400, textHeader, []byte("delay must be 0..600000 ms\n"))
			return
		}
		time.Sleep(time.Duration(ms) * time.Millisecond)
		ex.Respond(200, b.rootHeader, []byte("delayed "+strconv.Itoa(ms)+" ms by "+b.name+"\n"))
	case string(p) == "/echo":
		ex.ServeHTTP(b.echo)
	case strings.HasPrefix(string(p), "/bytes/"):
		ex.ServeHTTP(b.bytesH)
	case string(p) == "/ws":
		ex.ServeHTTP(b.ws)
	case string(p) == "/stats":
		body := fmt.Sprintf("{\"name\":%q,\"connections\":%d,\"requests\":%d}\n", b.name, b.Connections(), b.Requests())
		ex.Respond(200, []byte("Content-Type: application/json\r\n"), []byte(body))
	default:
		ex.Respond(404, textHeader, []byte("not found\n"))
	}
}

// serveEcho writes back the request line, the headers (sorted, one per
// line) and the body, streaming the body as it arrives.
func (b *Backend) serveEcho(w http.ResponseWriter, r *http.Request) {
	var head strings.Builder
	fmt.Fprintf(&head, "%s %s %s\r\n", r.Method, r.RequestURI, r.Proto)
	fmt.Fprintf(&head, "Host: %s\r\n", r.Host)
	keys := make([]string, 0, len(r.Header))
	for k := range r.Header {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, v := range r.Header[k] {
			fmt.Fprintf(&head, "%s: %s\r\n", k, v)
		}
	}
	head.WriteString("\r\n")
	w.Header().Set("X-Backend", b.name)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if r.ContentLength >= 0 {
		w.Header().Set("Content-Length", strconv.FormatInt(int64(head.Len())+r.ContentLength, 10))
	}
	io.WriteString(w, head.String())
	io.Copy(w, r.Body)
	for k, vs := range r.Trailer {
		for _, v := range vs {
			fmt.Fprintf(w, "Trailer-%s: %s\r\n", k, v)
		}
	}
}

// serveBytes streams N bytes (up to 64 GiB) with a Content-Length.
func (b *Backend) serveBytes(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.ParseInt(strings.TrimPrefix(r.URL.Path, "/bytes/"), 10, 64)
	if err != nil || n < 0 || n > 64<<30 {
		http.Error(w, "size must be 0..68719476736", http.StatusBadRequest)
		return
	}
	w.Header().Set("X-Backend", b.name)
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
	w.WriteHeader(200)
	chunk := make([]byte, 32<<10)
	for i := range chunk {
		chunk[i] = 'a' + byte(i%26)
	}
	for n > 0 {
		k := min(n, int64(len(chunk)))
		if _, err := w.Write(chunk[:k]); err != nil {
			return
		}
		n -= k
	}
}

// echoMessages sends every WebSocket message back whole (io.Copy would
// split large messages into frames of its buffer size).
func echoMessages(ws *websocket.Conn) {
	for {
		var msg []byte
		if err := websocket.Message.Receive(ws, &msg); err != nil {
			return
		}
		if err := websocket.Message.Send(ws, msg); err != nil {
			return
		}
	}
}
