package h2

import (
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// This file is the test driver: it drives a Conn over a net.Conn from
// goroutines, the way a portable (non-event-loop) driver would, so that
// real peers (x/net/http2's client and server, h2spec) can talk to the
// machine. One goroutine owns the Conn and does everything to it; a
// reader goroutine hands it what the socket gave, and a writer goroutine
// writes out what the Conn wrote, so the Conn's Output never blocks.
// Output that piles up (a peer that does not read) blocks the machine's
// DATA through SetOutputBlocked, as an event loop's driver does.

// Output backlog marks of the test driver.
const (
	driverHighWater = 256 << 10
	driverLowWater  = 64 << 10
)

// netDriver drives one Conn over one net.Conn.
type netDriver struct {
	nc      net.Conn
	conn    *Conn
	out     *pendingOutput
	cmds    chan func(*Conn)
	done    chan struct{}
	tick    time.Duration
	blocked bool
	abort   bool // closed by us: no lingering for the peer
}

// pendingOutput is the Conn's Output: it appends, and the writer
// goroutine empties it onto the socket.
type pendingOutput struct {
	mu      sync.Mutex
	buf     []byte
	err     error
	closed  bool
	wake    chan struct{}
	drained chan struct{}
}

func newPendingOutput() *pendingOutput {
	return &pendingOutput{wake: make(chan struct{}, 1), drained: make(chan struct{}, 1)}
}

func (o *pendingOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	if o.err != nil {
		o.mu.Unlock()
		return 0, o.err
	}
	o.buf = append(o.buf, p...)
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (o *pendingOutput) pending() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.buf)
}

// writeLoop writes what is pending until the output is closed and
// empty.
func (o *pendingOutput) writeLoop(nc net.Conn) {
	var spare []byte
	for {
		o.mu.Lock()
		for len(o.buf) == 0 {
			if o.closed || o.err != nil {
				o.mu.Unlock()
				return
			}
			o.mu.Unlock()
			<-o.wake
			o.mu.Lock()
		}
		chunk := o.buf
		o.buf = spare[:0]
		o.mu.Unlock()
		_, err := nc.Write(chunk)
		spare = chunk
		o.mu.Lock()
		if err != nil && o.err == nil {
			o.err = err
		}
		o.mu.Unlock()
		select {
		case o.drained <- struct{}{}:
		default:
		}
	}
}

func (o *pendingOutput) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// serveNetConn serves nc with a Conn made by newConn (given the
// Output), until the connection is over. It returns at once; the driver
// closes nc when done.
func serveNetConn(nc net.Conn, newConn func(Output) *Conn) *netDriver {
	d := &netDriver{nc: nc, out: newPendingOutput(), cmds: make(chan func(*Conn), 16), done: make(chan struct{}), tick: 50 * time.Millisecond}
	go d.out.writeLoop(nc)
	d.conn = newConn(d.out)
	go d.run()
	return d
}

// do runs f on the driver's goroutine (with the Conn) and waits for
// it; it returns false if the connection is over.
func (d *netDriver) do(f func(*Conn)) bool {
	ran := make(chan struct{})
	select {
	case d.cmds <- func(c *Conn) { f(c); close(ran) }:
	case <-d.done:
		return false
	}
	select {
	case <-ran:
		return true
	case <-d.done:
		return false
	}
}

type readResult struct {
	b   []byte
	err error
}

func (d *netDriver) run() {
	defer close(d.done)
	reads := make(chan readResult)
	go func() {
		for {
			b := make([]byte, 32<<10)
			n, err := d.nc.Read(b)
			select {
			case reads <- readResult{b[:n], err}:
			case <-d.done:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	ticker := time.NewTicker(d.tick)
	defer ticker.Stop()
	c := d.conn
	var in []byte
	eof := false
	for !c.Done() && !eof {
		select {
		case r := <-reads:
			in = append(in, r.b...)
			n, _ := c.Feed(in)
			in = in[:copy(in, in[n:])]
			if r.err != nil && !c.Done() {
				c.Close(r.err)
				eof = true
			}
		case now := <-ticker.C:
			c.Tick(now)
		case <-d.out.drained:
		case f := <-d.cmds:
			f(c)
		}
		// Backpressure: the machine holds DATA while the socket
		// lags, as an event loop's driver makes it do.
		switch p := d.out.pending(); {
		case !d.blocked && p > driverHighWater:
			d.blocked = true
			c.SetOutputBlocked(true)
		case d.blocked && p < driverLowWater:
			d.blocked = false
			c.SetOutputBlocked(false)
		}
	}
	// Write out what is left, then close our side and give the peer a
	// moment to read it before the socket goes (closing with unread
	// input would reset the connection and could lose the GOAWAY).
	d.out.close()
	deadline := time.Now().Add(2 * time.Second)
	for d.out.pending() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if tc, ok := d.nc.(interface{ CloseWrite() error }); ok && !eof && !d.abort {
		tc.CloseWrite()
		timer := time.NewTimer(time.Second)
	drain:
		for {
			select {
			case r := <-reads:
				if r.err != nil {
					break drain
				}
			case <-timer.C:
				break drain
			}
		}
		timer.Stop()
	}
	d.nc.Close()
}

// testServer is a server handler for the tests that drive real peers:
//   - a request without a body gets 200 and helloBody;
//   - a request with a body gets it echoed as it arrives, with flow
//     control end to end (its bytes are Consumed only once written
//     out), and its trailers echoed as response trailers;
//   - /bytes/N gets N bytes of a pattern, written as windows allow;
//   - /trailers adds the trailer x-trailer: done.
type testServer struct{}

var helloBody = []byte("hello from the h2 test server\n")

// pattern is what /bytes/N sends, repeated.
var pattern = []byte(strings.Repeat("0123456789abcdef", 1024))

// outbound is a body, and trailers, that a test handler writes as the
// windows allow: pending bytes first, then remaining bytes of pattern.
type outbound struct {
	pending   []byte
	echo      bool // pending is received body: Consumed once written out
	remaining int64
	sent      int64 // bytes of pattern sent
	end       bool  // nothing more to add: finish once all is out
	trailers  []Field
	finished  bool
}

func newTestServer() *testServer { return &testServer{} }

func (h *testServer) OnRequest(s *Stream, r *RequestHead, end bool) {
	o := &outbound{}
	s.SetUser(o)
	path := string(r.Path)
	if strings.HasPrefix(path, "/trailers") {
		o.trailers = fieldList("x-trailer", "done")
	}
	switch {
	case strings.HasPrefix(path, "/bytes/"):
		n, _ := strconv.ParseInt(path[len("/bytes/"):], 10, 64)
		o.remaining, o.end = n, true
		s.WriteHeaders(200, fieldList("content-length", strconv.FormatInt(n, 10)), false)
	case end:
		o.pending, o.end = helloBody, true
		s.WriteHeaders(200, fieldList("content-type", "text/plain"), false)
	default:
		o.echo = true
		s.WriteHeaders(200, fieldList("content-type", "application/octet-stream"), false)
	}
	o.pump(s)
}

func (h *testServer) OnData(s *Stream, p []byte, end bool) { s.User().(*outbound).received(s, p, end) }

func (h *testServer) OnTrailers(s *Stream, fields []Field) {
	s.User().(*outbound).receivedTrailers(s, fields)
}

func (h *testServer) OnWritable(s *Stream) { s.User().(*outbound).pump(s) }

func (h *testServer) OnReset(s *Stream, err error) {}

// received takes body bytes: echoed, or consumed at once.
func (o *outbound) received(s *Stream, p []byte, end bool) {
	if o.echo {
		o.pending = append(o.pending, p...)
	} else {
		s.Consumed(len(p))
	}
	o.end = o.end || end
	o.pump(s)
}

// receivedTrailers echoes trailers after the body.
func (o *outbound) receivedTrailers(s *Stream, fields []Field) {
	o.trailers = append(o.trailers, cloneFields(fields)...)
	o.end = true
	o.pump(s)
}

// pump writes what there is to write, as far as the windows allow.
func (o *outbound) pump(s *Stream) {
	for len(o.pending) > 0 || o.remaining > 0 {
		p := o.pending
		if len(p) == 0 {
			// Continue the pattern where the last write left it.
			at := int(o.sent % 16)
			p = pattern[at : at+int(min(int64(len(pattern)-16), o.remaining))]
		}
		n, err := s.WriteData(p, false)
		if err != nil {
			return
		}
		if len(o.pending) > 0 {
			o.pending = o.pending[n:]
			if o.echo {
				s.Consumed(n)
			}
		} else {
			o.remaining -= int64(n)
			o.sent += int64(n)
		}
		if n < len(p) {
			return
		}
	}
	if o.end && !o.finished {
		o.finished = true
		if len(o.trailers) > 0 {
			s.WriteTrailers(o.trailers)
		} else {
			s.WriteData(nil, true)
		}
	}
}

// loopbackServer accepts loopback connections and serves each with
// serve, on a goroutine of its own, until the test ends; then it closes
// the listener and the connections and waits for the goroutines.
func loopbackServer(t testing.TB, serve func(nc net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, nc)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				serve(nc)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, nc := range conns {
			nc.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// startTestServer serves loopback connections with server Conns and
// testServer handlers, through the test driver; it returns the address.
func startTestServer(t testing.TB, cfg Config) string {
	return loopbackServer(t, func(nc net.Conn) {
		d := serveNetConn(nc, func(out Output) *Conn { return NewServerConn(out, newTestServer(), cfg) })
		<-d.done
	})
}
