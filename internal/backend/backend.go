// Package backend is the built-in origin server behind `helios backend`:
// a small, fast HTTP server for demos, tests and benchmarks. It runs on
// Helios's own engine (internal/engine), so benchmarks spend little CPU on it:
// fixed answers come from the event loops, and the endpoints that stream
// or wait (echo, bytes, ws, delay) are net/http handlers the engine runs
// as an in-process backend.
//
//	GET /             200, X-Backend: NAME, a short body naming the backend
//	GET /healthz      200 "ok" (or the status set with SetHealth)
//	GET /status/CODE  that status
//	GET /delay/MS     200 after MS milliseconds
//	ANY /echo         the request line, headers and body back
//	ANY /sink         the request body read and dropped; 200 "N bytes"
//	GET /bytes/N      N bytes, streamed
//	GET /ws           a WebSocket echo
//	GET /stats        {"name":..., "connections":..., "requests":...}
package backend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/websocket"

	"github.com/helios-lb/helios/internal/engine"
	"github.com/helios-lb/helios/internal/httpmsg"
	"github.com/helios-lb/helios/internal/upstream"
	"github.com/helios-lb/helios/internal/wire"
)

// Options tune a Backend. The zero value answers at once.
type Options struct {
	// Delay holds every answer back this long (the slow backend of the
	// benchmarks). Zero: none.
	Delay time.Duration
	// Loops is the number of event loops. Zero: one per processor.
	Loops int
}

// Backend is one built-in origin server.
type Backend struct {
	name     string
	opts     Options
	conns    atomic.Uint64
	requests atomic.Uint64
	health   atomic.Int64 // status /healthz answers with
	failing  atomic.Int64 // when set, the status of every other answer

	rootHeader *httpmsg.Header
	rootBody   []byte
	// handlers is the whole backend as a net/http handler (delay mode),
	// and streams its endpoints that stream or wait.
	handlers *wire.Local
	streams  *wire.Local

	mu   sync.Mutex
	eng  *engine.Engine
	ll   *engine.LoopListener
	done chan struct{} // closed by Shutdown: Serve returns
	// stopped: Shutdown was called (a Serve that starts late stops at
	// once).
	stopped bool
}

// New returns a backend that names itself name, answering at once.
func New(name string) *Backend { return NewWith(name, Options{}) }

// NewWith returns a backend that names itself name, with options o.
func NewWith(name string, o Options) *Backend {
	b := &Backend{name: name, opts: o}
	b.health.Store(200)
	b.rootHeader = httpmsg.HeaderOf("X-Backend", name, "Content-Type", "text/plain; charset=utf-8")
	b.rootBody = []byte("hello from " + name + "\n")
	mux := http.NewServeMux()
	mux.HandleFunc("/echo", b.serveEcho)
	mux.HandleFunc("/bytes/", b.serveBytes)
	mux.Handle("/ws", websocket.Handler(echoMessages))
	mux.HandleFunc("/delay/", b.serveDelay)
	b.streams = &wire.Local{Name: name, Handler: mux}
	b.handlers = &wire.Local{Name: name + " (delayed)", Handler: http.HandlerFunc(b.serveDelayed)}
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

// errStopped is Serve's answer once the backend has been shut down.
var errStopped = errors.New("backend: shut down")

// Serve serves ln until Shutdown, and then returns an error saying so.
// The caller may close ln at any time: the backend listens on a
// duplicate of its socket, which Shutdown closes.
func (b *Backend) Serve(ln net.Listener) error {
	tl, ok := ln.(*net.TCPListener)
	if !ok {
		return fmt.Errorf("backend %s: serves TCP listeners only", b.name)
	}
	f, err := tl.File()
	if err != nil {
		return fmt.Errorf("backend %s: %w", b.name, err)
	}
	defer f.Close()
	fd := int(f.Fd())
	if err := syscall.SetNonblock(fd, true); err != nil {
		return fmt.Errorf("backend %s: %w", b.name, err)
	}
	eng, err := engine.NewEngine(stepper{b}, engine.EngineOptions{Loops: b.opts.Loops})
	if err != nil {
		return fmt.Errorf("backend %s: %w", b.name, err)
	}
	eng.SetErrorLog(func(msg string, err error) { fmt.Fprintf(os.Stderr, "backend %s: %s: %v\n", b.name, msg, err) })
	o := engine.Options{ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second, OutputBufferBytes: 256 << 10}
	ll, err := eng.Attach(b.name, []int{fd}, o, func() bool { b.conns.Add(1); return true }, func() {})
	if err != nil {
		eng.Close()
		return fmt.Errorf("backend %s: %w", b.name, err)
	}
	done := make(chan struct{})
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		ll.Stop()
		eng.Close()
		return errStopped
	}
	b.eng, b.ll, b.done = eng, ll, done
	b.mu.Unlock()
	<-done
	return errStopped
}

// Shutdown stops accepting and drains: idle connections close, busy ones
// after their answer; when ctx ends first the rest are closed.
func (b *Backend) Shutdown(ctx context.Context) error {
	b.mu.Lock()
	eng, ll, done := b.eng, b.ll, b.done
	b.eng = nil
	b.stopped = true
	b.mu.Unlock()
	if eng == nil {
		return nil
	}
	ll.Stop()
	err := ll.Shutdown(ctx)
	eng.Close()
	close(done)
	return err
}

var (
	textHeader = httpmsg.HeaderOf("X-Content-Type-Options", "nosniff", "Content-Type", "text/plain; charset=utf-8")
	okBody     = []byte("ok\n")
	jsonHeader = httpmsg.HeaderOf("Content-Type", "application/json")
)

// answer returns the fixed answer to path, or ok false for the endpoints
// that stream or wait. It is the one place that decides every fixed
// answer, whether the loops send it or a delayed handler does.
func (b *Backend) answer(p []byte) (status int, header *httpmsg.Header, body []byte, ok bool) {
	if code := int(b.failing.Load()); code != 0 && string(p) != "/healthz" && string(p) != "/stats" {
		return code, b.rootHeader, []byte(strconv.Itoa(code) + " from " + b.name + "\n"), true
	}
	switch {
	case string(p) == "/":
		return 200, b.rootHeader, b.rootBody, true
	case string(p) == "/healthz":
		return int(b.health.Load()), textHeader, okBody, true
	case strings.HasPrefix(string(p), "/status/"):
		code, err := strconv.Atoi(string(p[len("/status/"):]))
		if err != nil || code < 200 || code > 599 {
			return 400, textHeader, []byte("status must be 200..599\n"), true
		}
		return code, b.rootHeader, []byte(strconv.Itoa(code) + " from " + b.name + "\n"), true
	case string(p) == "/stats":
		body := fmt.Sprintf("{\"name\":%q,\"connections\":%d,\"requests\":%d}\n", b.name, b.Connections(), b.Requests())
		return 200, jsonHeader, []byte(body), true
	case string(p) == "/echo", strings.HasPrefix(string(p), "/bytes/"), string(p) == "/ws", strings.HasPrefix(string(p), "/delay/"):
		return 0, nil, nil, false
	}
	return 404, textHeader, []byte("not found\n"), true
}

// serveDelayed answers every request Delay late (delay mode).
func (b *Backend) serveDelayed(w http.ResponseWriter, r *http.Request) {
	time.Sleep(b.opts.Delay)
	status, header, body, ok := b.answer([]byte(r.URL.Path))
	if !ok {
		b.streams.Handler.ServeHTTP(w, r)
		return
	}
	for _, f := range header.Fields {
		w.Header().Set(string(f.Name), string(f.Value))
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}

// serveDelay answers /delay/MS after MS milliseconds.
func (b *Backend) serveDelay(w http.ResponseWriter, r *http.Request) {
	ms, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/delay/"))
	if err != nil || ms < 0 || ms > 600000 {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(400)
		io.WriteString(w, "delay must be 0..600000 ms\n")
		return
	}
	time.Sleep(time.Duration(ms) * time.Millisecond)
	w.Header().Set("X-Backend", b.name)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, "delayed "+strconv.Itoa(ms)+" ms by "+b.name+"\n")
}

// stepper runs a Backend's requests on the engine (wire.Stepper).
type stepper struct{ b *Backend }

func (s stepper) NewFlow() wire.Flow { return &flow{b: s.b} }

// flow is one connection's requests: a fixed answer from the loop, or the
// in-process handler (wire.Flow).
type flow struct {
	b        *Backend
	status   int
	header   *httpmsg.Header
	body     []byte
	local    *wire.Local
	ex       wire.Exchange // a /sink request, while its body is read
	sinkBody []byte        // its answer, rendered in a buffer of its own
}

func (f *flow) Begin(ex wire.Exchange) wire.Action {
	b := f.b
	b.requests.Add(1)
	if b.opts.Delay > 0 {
		f.local = b.handlers
		return wire.ActServeHTTP
	}
	if string(ex.Path()) == "/sink" && b.failing.Load() == 0 {
		// The loop reads the body and drops it, then answers.
		f.ex = ex
		return wire.ActBuffer
	}
	status, header, body, ok := b.answer(ex.Path())
	if !ok {
		f.local = b.streams
		return wire.ActServeHTTP
	}
	f.status, f.header, f.body = status, header, body
	return wire.ActRespond
}

func (f *flow) Answer() (int, *httpmsg.Header, []byte)       { return f.status, f.header, f.body }
func (f *flow) Handler() *wire.Local                         { return f.local }
func (f *flow) Files() wire.Files                            { return nil }
func (f *flow) Target() (*wire.Transport, *upstream.Backend) { return nil, nil }
func (f *flow) BufferLimits() wire.BufferLimits              { return wire.BufferLimits{Discard: true} }
func (f *flow) ResponseBuffer() *wire.ResponseBuffer         { return nil }

// Buffered answers /sink once its body has been read and dropped: with
// its length.
func (f *flow) Buffered(err error) wire.Action {
	if err != nil {
		f.status, f.header, f.body = 400, textHeader, []byte("reading the body: "+err.Error()+"\n")
		return wire.ActRespond
	}
	f.status, f.header = 200, f.b.rootHeader
	f.sinkBody = strconv.AppendInt(f.sinkBody[:0], f.ex.BodyRead(), 10)
	f.sinkBody = append(f.sinkBody, " bytes\n"...)
	f.body = f.sinkBody
	f.ex = nil
	return wire.ActRespond
}
func (f *flow) Delay() time.Duration   { return 0 }
func (f *flow) Resume() wire.Action    { return wire.ActClose } // never asked: it does not wait
func (f *flow) Sent(int, int64, error) {}
func (f *flow) Finish()                {}

// AnswerHeader writes every answer's head as it is (wire.Flow).
func (f *flow) AnswerHeader(h *httpmsg.Header, _ bool) *httpmsg.Header { return h }
func (f *flow) Refused(wire.Exchange, int, error)                      {}

// Forwarded answers a failed handler with 502, or sends its answer.
func (f *flow) Forwarded(status int, err error) wire.Action {
	if err == nil {
		return wire.ActSend
	}
	if errors.Is(err, wire.ErrClientGone) {
		return wire.ActClose
	}
	f.status, f.header, f.body = 502, textHeader, []byte("502 handler failed\n")
	return wire.ActRespond
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
	// Full duplex: the answer starts, and each piece of the body goes
	// back, as it arrives, not when net/http's buffer fills (net/http
	// stops reading a body once the answer has started unless told).
	http.NewResponseController(w).EnableFullDuplex()
	f, _ := w.(http.Flusher)
	io.WriteString(w, head.String())
	if f != nil {
		f.Flush()
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if f != nil {
				f.Flush()
			}
		}
		if err != nil {
			break
		}
	}
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
