package engine

import (
	"errors"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/helios-lb/helios/internal/upstream"
	"github.com/helios-lb/helios/internal/wire"
)

// Handlers that may block (ActServeHTTP: a net/http handler, such as the
// built-in backend's echo) are in-process backends. The loop forwards the
// request to the handler over one end of a socketpair, exactly as to a
// backend — bodies both ways with backpressure, keep-alive, upgrades —
// while net/http serves the other end on goroutines of its own. Nothing
// blocks a loop, and no behaviour is written a second time.

// localServer is an in-process backend: the handler, the net/http server
// that runs it, and the transport and backend the loops forward through.
type localServer struct {
	srv *http.Server
	tr  *wire.Transport
	be  *upstream.Backend
}

// localSettings tune the connections to in-process backends: kept warm,
// with no timeout on the answer (a handler may take its time, as the
// backend's /delay does).
var localSettings = wire.TransportSettings{MaxIdlePerBackend: 64, IdleTimeout: time.Minute}

// local returns the in-process backend serving loc, starting it on first
// use.
func (e *Engine) local(loc *wire.Local) *localServer {
	e.localMu.Lock()
	defer e.localMu.Unlock()
	if ls := e.locals[loc]; ls != nil {
		return ls
	}
	ls := &localServer{
		srv: &http.Server{Handler: loc.Handler, ReadHeaderTimeout: time.Minute, ErrorLog: nil},
		tr:  &wire.Transport{Name: "local:" + loc.Name, Settings: localSettings},
		be:  &upstream.Backend{State: upstream.NewState(nil), Addr: "local:" + loc.Name},
	}
	if e.locals == nil {
		e.locals = make(map[*wire.Local]*localServer)
	}
	e.locals[loc] = ls
	return ls
}

// closeLocals stops the in-process backends' servers.
func (e *Engine) closeLocals() {
	e.localMu.Lock()
	defer e.localMu.Unlock()
	for _, ls := range e.locals {
		ls.srv.Close()
	}
}

// serveLocal forwards the request to an in-process backend.
func (c *lconn) serveLocal(loc *wire.Local) {
	ls := c.l.eng.local(loc)
	c.tr, c.be, c.local = ls.tr, ls.be, ls
	c.tries = 0
	c.flushOut() // earlier pipelined answers go before we wait
	c.timeAttempt()
	c.attempt()
}

// dialLocal opens a connection to an in-process backend: a socketpair
// whose other end net/http serves.
func (l *loop) dialLocal(p *lpool) (int, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		return -1, os.NewSyscallError("socketpair", err)
	}
	for _, fd := range fds {
		unix.CloseOnExec(fd)
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return -1, os.NewSyscallError("fcntl", err)
	}
	f := os.NewFile(uintptr(fds[1]), "local")
	nc, err := net.FileConn(f) // a duplicate, in Go's netpoller
	f.Close()
	if err != nil {
		unix.Close(fds[0])
		return -1, err
	}
	go p.local.srv.Serve(&oneConn{c: nc})
	return fds[0], nil
}

// oneConn is a net.Listener that hands out one connection and then
// reports itself done: http.Server.Serve returns at once and goes on
// serving that connection on a goroutine of its own.
type oneConn struct {
	mu sync.Mutex
	c  net.Conn
}

func (o *oneConn) Accept() (net.Conn, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	c := o.c
	o.c = nil
	if c == nil {
		return nil, errServed
	}
	return c, nil
}

func (o *oneConn) Close() error { return nil }

// errServed ends a oneConn's Serve.
var errServed = errors.New("h1: in-process connection handed out")

func (o *oneConn) Addr() net.Addr { return localAddr{} }

// localAddr is the address of an in-process backend's connections.
type localAddr struct{}

func (localAddr) Network() string { return "local" }
func (localAddr) String() string  { return "local" }
