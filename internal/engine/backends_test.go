package engine

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/wire"
)

// Backends the engine tests forward to.

// defaultTransport keeps connections and bounds every wait.
var defaultTransport = wire.TransportSettings{
	MaxIdlePerBackend:     8,
	IdleTimeout:           time.Minute,
	DialTimeout:           testTimeout,
	ResponseHeaderTimeout: testTimeout,
	ReadTimeout:           testTimeout,
}

// rawBackend runs a scripted function per accepted connection.
type rawBackend struct {
	addr    string
	accepts atomic.Int32
}

func startRawBackend(t testing.TB, serve func(nc net.Conn, br *bufio.Reader)) *rawBackend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &rawBackend{addr: ln.Addr().String()}
	serveConns(t, ln, &b.accepts, func(nc net.Conn) {
		nc.SetDeadline(time.Now().Add(testTimeout))
		serve(nc, bufio.NewReader(nc))
	})
	return b
}

// serveConns accepts connections on ln, counting them in accepts, and
// runs serve on each on a goroutine of its own, closing the connection
// when serve returns. When the test ends the listener and every
// connection are closed and the goroutines waited for.
func serveConns(t testing.TB, ln net.Listener, accepts *atomic.Int32, serve func(nc net.Conn)) {
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			accepts.Add(1)
			mu.Lock()
			conns = append(conns, nc)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer nc.Close()
				serve(nc)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
}

// readReqHead reads a request head; "" at EOF.
func readReqHead(br *bufio.Reader) string {
	var sb strings.Builder
	for {
		line, err := br.ReadString('\n')
		sb.WriteString(line)
		if err != nil {
			return ""
		}
		if line == "\r\n" {
			return sb.String()
		}
	}
}

// headFields parses the field lines of a raw head into name -> values,
// names lower-cased, values in order.
func headFields(head string) map[string][]string {
	m := make(map[string][]string)
	lines := strings.Split(strings.TrimSuffix(head, "\r\n\r\n"), "\r\n")
	for _, l := range lines[1:] {
		name, value, _ := strings.Cut(l, ":")
		name = strings.ToLower(name)
		m[name] = append(m[name], strings.TrimSpace(value))
	}
	return m
}

// headBackend reads the requests on each connection head by head (a
// request's body is not read) and has answer write each one's answer.
func headBackend(t testing.TB, answer func(nc net.Conn, head string)) *rawBackend {
	return startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
		for head := readReqHead(br); head != ""; head = readReqHead(br) {
			answer(nc, head)
		}
	})
}

// requestBackend reads the requests on each connection whole, the body
// as framed on the wire (readRawBody), and has answer write each one's
// answer.
func requestBackend(t testing.TB, answer func(nc net.Conn, r h1Request)) *rawBackend {
	return startRawBackend(t, func(nc net.Conn, br *bufio.Reader) {
		for head := readReqHead(br); head != ""; head = readReqHead(br) {
			body, err := readRawBody(br, head)
			if err != nil {
				return
			}
			answer(nc, h1Request{head, body})
		}
	})
}

// okBackend answers every request on a connection with a fixed 200 and
// hands each request head to heads.
func okBackend(t testing.TB, heads chan<- string) *rawBackend {
	return headBackend(t, func(nc net.Conn, head string) {
		if heads != nil {
			heads <- head
		}
		io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	})
}

// newHTTPBackend starts a net/http backend and counts its connections.
func newHTTPBackend(t testing.TB, h http.Handler) (*httptest.Server, *atomic.Int32) {
	var conns atomic.Int32
	s := httptest.NewUnstartedServer(h)
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s, &conns
}

func httpMux() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/chunked", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Sum")
		io.WriteString(w, "part1,")
		w.(http.Flusher).Flush()
		io.WriteString(w, "part2")
		w.Header().Set("X-Sum", "42")
	})
	mux.HandleFunc("/fixed", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "5")
		io.WriteString(w, "fixed")
	})
	mux.HandleFunc("/head", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		if r.Method != "HEAD" {
			w.Write(make([]byte, 100))
		}
	})
	mux.HandleFunc("/204", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	mux.HandleFunc("/304", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"x"`)
		w.WriteHeader(304)
	})
	mux.HandleFunc("/size/", func(w http.ResponseWriter, r *http.Request) {
		var n int
		fmt.Sscan(strings.TrimPrefix(r.URL.Path, "/size/"), &n)
		w.Header().Set("Content-Length", fmt.Sprint(n))
		w.Write(bytes.Repeat([]byte("s"), n))
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(400)
			return
		}
		w.Header().Set("X-Req-CL", fmt.Sprint(r.ContentLength))
		w.Header().Set("X-Req-TE", strings.Join(r.TransferEncoding, ","))
		var tr []string
		for k, v := range r.Trailer {
			tr = append(tr, k+"="+strings.Join(v, ","))
		}
		sort.Strings(tr)
		w.Header().Set("X-Req-Trailer", strings.Join(tr, ";"))
		w.Header().Set("X-Req-Sum", fmt.Sprintf("%x", sha256.Sum256(b)))
		w.Header().Set("Content-Length", fmt.Sprint(len(b)))
		w.Write(b)
	})
	return mux
}
