package engine

import (
	"context"
	"errors"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/helios-lb/helios/internal/http1"
	"github.com/helios-lb/helios/internal/netpoll"
	"github.com/helios-lb/helios/internal/wire"
)

// The Engine's API: what the server package starts, attaches listeners
// to, reconfigures, drains and stops.

// Engine is the event-loop engine. It is safe for concurrent use.
type Engine struct {
	stepper  wire.Stepper
	loops    []*loop
	status   *http1.StatusLines
	date     dateCache
	draining atomic.Bool
	stopped  atomic.Bool
	errorLog func(msg string, err error)
	// acceptErr, when set, is told of failed accepts instead of errorLog.
	acceptErr func(err error)
	// panics counts requests a panic on a loop ended (Panics).
	panics atomic.Uint64
	// batchedReads counts sockets read in the loops' batched reads;
	// batchErr is why a loop of the io_uring poller has none (BatchReads).
	batchedReads atomic.Uint64
	batchErr     error
	wg           sync.WaitGroup
	// dialControl, when set, is given each backend socket before it
	// connects (tests shrink buffers with it).
	dialControl func(fd int)
	// acceptControl, when set, is given each client socket accepted
	// (tests shrink its buffers).
	acceptControl func(fd int)
	// lookup resolves backend host names, off the loops; ctx ends with
	// the engine. resolveEvery and resolveRetry say when to look again
	// (tests shorten them).
	lookup       func(ctx context.Context, host string) ([]netip.Addr, error)
	resolveEvery time.Duration
	resolveRetry time.Duration
	ctx          context.Context
	cancel       context.CancelFunc
	kind         netpoll.Kind
	// spills carries request-buffering writes to the spill goroutine;
	// spillBufs holds their buffers (*[]byte, spillSize).
	spills    chan spillJob
	spillBufs sync.Pool
	// spoolBufs holds the buffers answers are gathered in for their
	// files (*[]byte, empty, spoolChunk of room; respbuffer.go).
	spoolBufs sync.Pool
	// locals are the in-process backends serving handlers (local.go).
	localMu sync.Mutex
	locals  map[*wire.Local]*localServer
	// fds is the descriptor budget backend connections draw on (nil:
	// none; descriptors.go).
	fds Descriptors
	// wrapPoller is EngineOptions.wrapPoller.
	wrapPoller func(netpoll.Poller) netpoll.Poller
}

// spillSize is the most a loop hands the spill goroutine in one write.
const spillSize = 32 << 10

// EngineOptions configure an Engine. The zero value is one loop per
// processor on this system's native poller.
type EngineOptions struct {
	// Loops is the number of event loops; 0 or less: GOMAXPROCS.
	Loops int
	// Poller is the readiness poller the loops use; "" is
	// netpoll.Native().
	Poller netpoll.Kind
	// Descriptors is the process's descriptor budget, which backend
	// connections draw on: a request whose backend connection would pass
	// it waits for one to close (as at a backend's connection cap).
	// Nil: no budget.
	Descriptors Descriptors
	// wrapPoller, when set, stands between each loop and its poller
	// (tests withhold chosen events with it).
	wrapPoller func(netpoll.Poller) netpoll.Poller
}

// Descriptors is a descriptor budget backend connections draw on
// (listener.Descriptors implements it).
type Descriptors interface {
	// TakeBackend counts a backend connection about to be opened; false:
	// no room.
	TakeBackend() bool
	// ReleaseBackend ends one TakeBackend counted.
	ReleaseBackend()
	// Squeezed reports whether clients want back room backend
	// connections took: idle ones then close rather than wait.
	Squeezed() bool
}

// NewEngine starts event loops serving requests with s.
func NewEngine(s wire.Stepper, o EngineOptions) (*Engine, error) {
	n := o.Loops
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	if o.Poller == "" {
		o.Poller = netpoll.Native()
	}
	e := &Engine{stepper: s, status: http1.NewStatusLines(), lookup: lookupHost, resolveEvery: resolveEvery, resolveRetry: resolveRetry, kind: o.Poller, fds: o.Descriptors, wrapPoller: o.wrapPoller}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	e.spills = make(chan spillJob, 1024)
	e.spillBufs.New = func() any { b := make([]byte, spillSize); return &b }
	e.spoolBufs.New = func() any { b := make([]byte, 0, spoolChunk); return &b }
	for i := 0; i < n; i++ {
		l, err := newLoop(e, i)
		if err != nil {
			e.Close()
			return nil, err
		}
		e.loops = append(e.loops, l)
	}
	for _, l := range e.loops {
		e.wg.Add(1)
		go l.run()
	}
	e.wg.Add(1)
	go e.spillLoop()
	return e, nil
}

// SetErrorLog sets the function told of connection-level errors. Call it
// before attaching listeners.
func (e *Engine) SetErrorLog(f func(msg string, err error)) { e.errorLog = f }

// Panics returns how many connections a panic on an event loop has cost
// (each is closed, its stack logged, and the loop goes on).
func (e *Engine) Panics() uint64 { return e.panics.Load() }

// SetAcceptErrorHook sets the function told of each failed accept instead
// of the error log, so that the caller can count them and rate-limit the
// warning. Call it before attaching listeners.
func (e *Engine) SetAcceptErrorHook(f func(err error)) { e.acceptErr = f }

// Loops returns the number of event loops.
func (e *Engine) Loops() int { return len(e.loops) }

// LoopListener is a listening socket set served by an Engine.
type LoopListener struct {
	eng      *Engine
	name     string
	fds      []int
	opts     atomic.Pointer[Options]
	admit    func() bool
	release  func()
	stopped  atomic.Bool
	draining atomic.Bool
	// perAddr counts open connections by address, for
	// Options.MaxConnsPerIP.
	perAddr addrCounts
}

// Attach serves the listening sockets fds (non-blocking, bound and
// listening; the caller keeps owning and closes them after Stop) on the
// engine's loops, socket i on loop i modulo the loop count. admit is asked
// before each accepted connection is served (false: it is closed at once,
// the max_connections cap) and release is called when one ends.
func (e *Engine) Attach(name string, fds []int, o Options, admit func() bool, release func()) (*LoopListener, error) {
	ll := &LoopListener{eng: e, name: name, fds: fds, admit: admit, release: release}
	ll.SetOptions(o)
	for i, fd := range fds {
		l := e.loops[i%len(e.loops)]
		err := errEngineClosed
		l.do(func() { err = l.addListener(ll, fd) })
		if err != nil {
			ll.Stop()
			return nil, err
		}
	}
	return ll, nil
}

// SetOptions replaces the options for new exchanges.
func (ll *LoopListener) SetOptions(o Options) {
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = defaultMaxHeaderBytes
	}
	ll.opts.Store(&o)
}

// Stop stops accepting on the listener's sockets (connections already
// accepted go on). After it returns the caller may close the sockets.
func (ll *LoopListener) Stop() {
	if ll.stopped.Swap(true) {
		return
	}
	for _, l := range ll.eng.loops {
		l.do(func() { l.removeListener(ll) })
	}
}

// Shutdown drains the listener's connections (after Stop): those waiting
// for a request close now, busy ones after their answer; it returns when
// none is left, or with ctx's error after closing the rest.
func (ll *LoopListener) Shutdown(ctx context.Context) error {
	ll.draining.Store(true)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		total := 0
		for _, l := range ll.eng.loops {
			n := 0
			l.do(func() { n = l.drainListener(ll) })
			total += n
		}
		if total == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			for _, l := range ll.eng.loops {
				l.do(func() { l.closeListenerConns(ll) })
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// Shutdown drains the engine: connections waiting for a request are
// closed and busy ones close after their current answer. It returns when
// the loops hold no connection, or with ctx's error after closing what
// was left. Stop the listeners first.
func (e *Engine) Shutdown(ctx context.Context) error {
	e.draining.Store(true)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		total := 0
		for _, l := range e.loops {
			n := 0
			l.do(func() { n = l.drain() })
			total += n
		}
		if total == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			for _, l := range e.loops {
				l.do(l.closeAll)
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// Close stops the loops and closes every connection they hold. The
// listening sockets stay open (their owner closes them).
func (e *Engine) Close() {
	if e.stopped.Swap(true) {
		return
	}
	e.cancel() // host name lookups
	defer e.closeLocals()
	for _, l := range e.loops {
		if l != nil {
			l.post(nil) // nil: close everything and stop
		}
	}
	e.wg.Wait()
	for _, l := range e.loops {
		if l != nil {
			l.poller.Shutdown()
			l.pre.close()
		}
	}
}

// BatchReads reports whether the loops read the sockets a batch of
// events finds readable in one system call (the io_uring poller), how
// many sockets they have read so, and, when the poller asked for it but
// the kernel refused io_uring, why (the loops then read each socket with
// read(2)).
func (e *Engine) BatchReads() (on bool, reads uint64, err error) {
	for _, l := range e.loops {
		on = on || l.pre.on
	}
	return on, e.batchedReads.Load(), e.batchErr
}

// OpenConns returns the number of client connections the loops hold.
func (e *Engine) OpenConns() int {
	n := 0
	for _, l := range e.loops {
		n += int(l.nconns.Load())
	}
	return n
}

// Stuck reports whether some loop has been handling one batch of events
// for longer than d: a handler or a blocking call holds it, and every
// connection it serves waits. A loop waiting for events is never stuck,
// however long it waits. It reads a timestamp per loop and posts nothing,
// so a watchdog may ask as often as it likes.
func (e *Engine) Stuck(d time.Duration) bool {
	now := time.Now().UnixNano()
	for _, l := range e.loops {
		if w := l.working.Load(); w != 0 && now-w > int64(d) {
			return true
		}
	}
	return false
}

// IdleBackendConns returns the idle keep-alive connections to addr kept
// by all loops.
func (e *Engine) IdleBackendConns(addr string) int {
	n := 0
	for _, l := range e.loops {
		l.do(func() {
			for k, p := range l.pools {
				if k.addr == addr {
					n += len(p.idle)
				}
			}
		})
	}
	return n
}

// errEngineClosed is returned by Attach after Close.
var errEngineClosed = errors.New("engine: event loops closed")
