package h1

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/helios-lb/helios/internal/wire"
)

// The event-loop engine.
//
// Engine runs one event loop per CPU, nginx-style: each loop owns an epoll
// instance, some of the listening sockets, the client connections it
// accepted and its own keep-alive connections to backends (so a request
// never crosses loops and no pool needs a lock). Sockets are registered
// once, edge-triggered; a read that comes back short means the socket is
// drained, so no read ever comes back empty-handed (EAGAIN) on the hot
// path, and no goroutine parks or wakes per request. The request pipeline
// is driven step by step through wire.Flow.
//
// The loop handles the common exchange completely: a request whose body
// (if any) is already buffered, answered from the proxy (respond) or by a
// backend, whatever the size or framing of the answer (bodies stream with
// backpressure). A connection that needs blocking work — a static file,
// an upgrade, a streamed request body, Expect: 100-continue — is handed
// over, with the bytes already read, to the goroutine engine (Server),
// which serves it from then on. Both engines share the parser, the head
// rendering and the pipeline, so behaviour is the same.

// Engine is the event-loop engine. It is safe for concurrent use.
type Engine struct {
	stepper  wire.Stepper
	loops    []*loop
	status   *statusLines
	date     dateCache
	draining atomic.Bool
	stopped  atomic.Bool
	errorLog func(msg string, err error)
	wg       sync.WaitGroup
	// dialControl, when set, is given each backend socket before it
	// connects (tests shrink buffers with it).
	dialControl func(fd int)
	// lookup resolves backend host names, off the loops; ctx ends with
	// the engine. resolveEvery and resolveRetry say when to look again
	// (tests shorten them).
	lookup       func(ctx context.Context, host string) ([]netip.Addr, error)
	resolveEvery time.Duration
	resolveRetry time.Duration
	ctx          context.Context
	cancel       context.CancelFunc
}

// NewEngine starts n event loops (n <= 0: GOMAXPROCS) serving requests
// with s.
func NewEngine(s wire.Stepper, n int) (*Engine, error) {
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	e := &Engine{stepper: s, status: newStatusLines(), lookup: lookupHost, resolveEvery: resolveEvery, resolveRetry: resolveRetry}
	e.ctx, e.cancel = context.WithCancel(context.Background())
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
	return e, nil
}

// SetErrorLog sets the function told of connection-level errors. Call it
// before attaching listeners.
func (e *Engine) SetErrorLog(f func(msg string, err error)) { e.errorLog = f }

// Loops returns the number of event loops.
func (e *Engine) Loops() int { return len(e.loops) }

// LoopListener is a listening socket set served by an Engine.
type LoopListener struct {
	eng      *Engine
	name     string
	fds      []int
	opts     atomic.Pointer[Options]
	fallback *Server
	admit    func() bool
	release  func()
	stopped  atomic.Bool
	draining atomic.Bool
}

// Attach serves the listening sockets fds (non-blocking, bound and
// listening; the caller keeps owning and closes them after Stop) on the
// engine's loops, socket i on loop i modulo the loop count. admit is asked
// before each accepted connection is served (false: it is closed at once,
// the max_connections cap) and release is called when one ends. fallback
// serves connections handed over for blocking work; it should carry the
// same options.
func (e *Engine) Attach(name string, fds []int, o Options, fallback *Server, admit func() bool, release func()) (*LoopListener, error) {
	ll := &LoopListener{eng: e, name: name, fds: fds, fallback: fallback, admit: admit, release: release}
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
	if ll.fallback != nil {
		ll.fallback.SetOptions(o)
	}
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
// none is left, or with ctx's error after closing the rest. Connections
// handed to the fallback Server are drained by its Shutdown.
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
// closed, busy ones close after their current answer, and connections
// handed to goroutines are drained by their Server (the caller shuts
// those down too). It returns when the loops hold no connection, or with
// ctx's error after closing what was left. Stop the listeners first.
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
	for _, l := range e.loops {
		if l != nil {
			l.post(nil) // nil: close everything and stop
		}
	}
	e.wg.Wait()
	for _, l := range e.loops {
		if l != nil {
			l.epFile.Close()
			syscall.Close(l.wake)
		}
	}
}

// OpenConns returns the number of client connections the loops hold.
func (e *Engine) OpenConns() int {
	n := 0
	for _, l := range e.loops {
		n += int(l.nconns.Load())
	}
	return n
}

// IdleBackendConns returns the idle keep-alive connections to addr kept
// by all loops.
func (e *Engine) IdleBackendConns(addr string) int {
	n := 0
	for _, l := range e.loops {
		l.do(func() {
			if p := l.pools[addr]; p != nil {
				n += len(p.idle)
			}
		})
	}
	return n
}

// errEngineClosed is returned by Attach after Close.
var errEngineClosed = errors.New("h1: event loops closed")

// Epoll event bits (syscall has them as signed constants for some).
const (
	evIn    = uint32(syscall.EPOLLIN)
	evOut   = uint32(syscall.EPOLLOUT)
	evErr   = uint32(syscall.EPOLLERR)
	evHup   = uint32(syscall.EPOLLHUP)
	evRdHup = uint32(syscall.EPOLLRDHUP)
	evET    = uint32(1) << 31
)

// sweepEvery is how often a loop checks deadlines: timeouts are exact to
// within this.
const sweepEvery = 50 * time.Millisecond

// target is what a file descriptor registered with a loop leads to.
type target interface {
	event(ev uint32)
}

type loop struct {
	eng  *Engine
	id   int
	ep   int
	wake int // eventfd: other goroutines post work and wake the loop

	// The epoll descriptor as Go's netpoller sees it, to park on.
	epFile  *os.File
	epRaw   syscall.RawConn
	waitFn  func(uintptr) bool
	waitN   int
	waitErr error
	// lastBusy is when the loop last found events after waiting.
	lastBusy int64

	mu    sync.Mutex
	queue []func()
	// stopping: the stop has been posted; nothing more is taken.
	stopping bool

	targets []target // by fd
	// tags, by fd, tell registrations of one fd number apart: an fd
	// closed while handling a batch of events may be reused (sockets
	// get the lowest free number) before the batch reaches an event
	// the old socket had, which must not go to the new one.
	tags      []int32
	lastTag   int32
	listeners map[int]*LoopListener
	conns     lconnList // client connections, for deadline sweeps
	nconns    atomic.Int64
	pools     map[string]*lpool
	now       int64 // unix nanoseconds at the last wake-up
	lastSweep int64
	events    []syscall.EpollEvent
	// acceptLater lists listening sockets with connections left queued
	// for want of descriptors.
	acceptLater []int

	// Free lists: backend read buffers, client read buffers and write
	// buffers. A client connection starts with a smaller buffer than a
	// backend one: a request head is usually well under 2 KiB, and the
	// buffer grows (up to max_header_bytes, or for a buffered body) when
	// it is not. At c10k that is 2 KiB less per connection in flight.
	readBufs  bufList
	headBufs  bufList
	writeBufs bufList
	freeConns []*lconn
}

func newLoop(e *Engine, id int) (*loop, error) {
	ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	wfd, _, errno := syscall.Syscall(syscall.SYS_EVENTFD2, 0, syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
	if errno != 0 {
		syscall.Close(ep)
		return nil, os.NewSyscallError("eventfd2", errno)
	}
	l := &loop{eng: e, id: id, ep: ep, wake: int(wfd), listeners: map[int]*LoopListener{},
		pools: map[string]*lpool{}, events: make([]syscall.EpollEvent, 256),
		readBufs: bufList{size: readBufSize}, headBufs: bufList{size: headBufSize}, writeBufs: bufList{size: writeBufSize}}
	// The loop's epoll instance is itself registered with Go's netpoller
	// (an epoll descriptor is readable when events are ready), so an idle
	// loop parks its goroutine like any other, and its processor runs
	// other goroutines at once. A blocking epoll_wait would hold the
	// processor until sysmon took it back (20 µs to 10 ms), stalling the
	// goroutines that serve handed-over connections, health checks and
	// the admin API.
	if err := syscall.SetNonblock(ep, true); err != nil {
		syscall.Close(ep)
		syscall.Close(int(wfd))
		return nil, os.NewSyscallError("fcntl", err)
	}
	l.epFile = os.NewFile(uintptr(ep), "epoll")
	rc, err := l.epFile.SyscallConn()
	if err != nil {
		l.epFile.Close()
		syscall.Close(int(wfd))
		return nil, err
	}
	l.epRaw = rc
	l.waitFn = func(uintptr) bool {
		l.waitN, l.waitErr = epollWaitRaw(l.ep, l.events)
		return l.waitN != 0 || l.waitErr != nil
	}
	if err := syscall.EpollCtl(ep, syscall.EPOLL_CTL_ADD, l.wake, &syscall.EpollEvent{Events: evIn, Fd: int32(l.wake)}); err != nil {
		syscall.Close(ep)
		syscall.Close(l.wake)
		return nil, os.NewSyscallError("epoll_ctl", err)
	}
	return l, nil
}

// post queues f to run on the loop and wakes it. A nil f stops the loop
// (after closing what it holds); post reports false, and drops f, once
// the stop has been posted.
func (l *loop) post(f func()) bool {
	l.mu.Lock()
	if l.stopping {
		l.mu.Unlock()
		return false
	}
	l.stopping = f == nil
	l.queue = append(l.queue, f)
	l.mu.Unlock()
	var one = [8]byte{1}
	syscall.Write(l.wake, one[:])
	return true
}

// do runs f on the loop and waits for it; it does nothing once the loop
// is stopping.
func (l *loop) do(f func()) {
	done := make(chan struct{})
	if l.post(func() { f(); close(done) }) {
		<-done
	}
}

func (l *loop) run() {
	defer l.eng.wg.Done()
	// A loop does not lock its OS thread: a locked goroutine that parks
	// or yields costs two futex calls and two thread switches each time
	// (the scheduler hands it back to its own thread). Unlocked, a
	// connection per request went from 0.97 to 1.21 of nginx's rate
	// (see docs/performance.md).
	for {
		// Busy: events are usually waiting, so look without a blocking
		// call first; only an empty look waits, parked in Go's netpoller.
		n, err := epollWaitRaw(l.ep, l.events)
		if n == 0 && err == nil {
			n, err = l.wait()
		}
		l.now = time.Now().UnixNano()
		if err != nil {
			n = 0 // EpollWait reports -1 with its error
			if err != syscall.EINTR {
				l.logf("epoll_wait failed", err)
				time.Sleep(10 * time.Millisecond)
				continue
			}
		}
		if !l.dispatch(l.events[:n]) {
			l.closeAll()
			return
		}
		if l.now-l.lastSweep >= int64(sweepEvery) {
			l.lastSweep = l.now
			l.sweep()
		}
	}
}

// dispatch handles a batch of events; it reports false when the loop
// must stop.
func (l *loop) dispatch(events []syscall.EpollEvent) bool {
	for i := range events {
		ev := &events[i]
		fd := int(ev.Fd)
		if fd == l.wake {
			if !l.runQueue() {
				return false
			}
			continue
		}
		if ll := l.listeners[fd]; ll != nil {
			l.accept(ll, fd)
			continue
		}
		if fd < len(l.targets) && l.targets[fd] != nil && l.tags[fd] == ev.Pad {
			l.targets[fd].event(ev.Events)
		}
	}
	return true
}

// runQueue runs posted work; it reports false when the loop must stop.
func (l *loop) runQueue() bool {
	var buf [8]byte
	syscall.Read(l.wake, buf[:])
	l.mu.Lock()
	q := l.queue
	l.queue = nil
	l.mu.Unlock()
	for _, f := range q {
		if f == nil {
			return false
		}
		f()
	}
	return true
}

func (l *loop) logf(msg string, err error) {
	if l.eng.errorLog != nil {
		l.eng.errorLog(msg, err)
	}
}

// register adds fd to the loop's epoll, edge-triggered for reading,
// writing and the peer's shutdown.
func (l *loop) register(fd int, t target) error {
	for fd >= len(l.targets) {
		l.targets = append(l.targets, make([]target, len(l.targets)+1024)...)
		l.tags = append(l.tags, make([]int32, len(l.tags)+1024)...)
	}
	l.targets[fd] = t
	l.lastTag++
	l.tags[fd] = l.lastTag
	// The tag rides in the event's data next to the fd.
	err := syscall.EpollCtl(l.ep, syscall.EPOLL_CTL_ADD, fd, &syscall.EpollEvent{Events: evIn | evOut | evRdHup | evET, Fd: int32(fd), Pad: l.lastTag})
	if err != nil {
		l.targets[fd] = nil
		return os.NewSyscallError("epoll_ctl", err)
	}
	return nil
}

// forget removes fd from the loop (before it is closed or handed over).
func (l *loop) forget(fd int, deregister bool) {
	if fd < len(l.targets) {
		l.targets[fd] = nil
	}
	if deregister {
		syscall.EpollCtl(l.ep, syscall.EPOLL_CTL_DEL, fd, nil)
	}
}

func (l *loop) addListener(ll *LoopListener, fd int) error {
	if err := syscall.EpollCtl(l.ep, syscall.EPOLL_CTL_ADD, fd, &syscall.EpollEvent{Events: evIn | evET, Fd: int32(fd)}); err != nil {
		return os.NewSyscallError("epoll_ctl", err)
	}
	l.listeners[fd] = ll
	// Connections may be queued already: the edge came before we looked.
	l.accept(ll, fd)
	return nil
}

func (l *loop) removeListener(ll *LoopListener) {
	for fd, x := range l.listeners {
		if x == ll {
			syscall.EpollCtl(l.ep, syscall.EPOLL_CTL_DEL, fd, nil)
			delete(l.listeners, fd)
		}
	}
}

// accept takes every queued connection (edge-triggered: until EAGAIN).
func (l *loop) accept(ll *LoopListener, lfd int) {
	for {
		var rsa syscall.RawSockaddrAny
		n := uint32(syscall.SizeofSockaddrAny)
		r, _, errno := syscall.RawSyscall6(syscall.SYS_ACCEPT4, uintptr(lfd), uintptr(unsafe.Pointer(&rsa)), uintptr(unsafe.Pointer(&n)),
			syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0, 0)
		fd := int(r)
		switch errno {
		case 0:
		case syscall.EINTR, syscall.ECONNABORTED:
			continue
		case syscall.EAGAIN:
			return
		case syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM:
			// Out of descriptors: leave the rest queued. No new edge
			// comes for connections already queued, so the sweeps try
			// again until the queue is empty.
			l.logf("accept failed", errno)
			if !slices.Contains(l.acceptLater, lfd) {
				l.acceptLater = append(l.acceptLater, lfd)
			}
			return
		default:
			l.logf("accept failed", errno)
			return
		}
		if ll.stopped.Load() || l.eng.draining.Load() || l.eng.stopped.Load() || !ll.admit() {
			syscall.Close(fd)
			continue
		}
		c := l.allocConn()
		if err := l.register(fd, c); err != nil {
			l.logf("registering a connection", err)
			l.freeConns = append(l.freeConns, c)
			syscall.Close(fd)
			ll.release()
			continue
		}
		l.startConn(c, ll, fd, sockaddrAddrPort(&rsa))
		c.setDeadline(dlIdle, ll.opts.Load().IdleTimeout)
	}
}

// sockaddrAddrPort decodes an accept4 address.
func sockaddrAddrPort(rsa *syscall.RawSockaddrAny) netip.AddrPort {
	switch rsa.Addr.Family {
	case syscall.AF_INET:
		p := (*syscall.RawSockaddrInet4)(unsafe.Pointer(rsa))
		port := uint16(p.Port>>8) | uint16(p.Port<<8)
		return netip.AddrPortFrom(netip.AddrFrom4(p.Addr), port)
	case syscall.AF_INET6:
		p := (*syscall.RawSockaddrInet6)(unsafe.Pointer(rsa))
		port := uint16(p.Port>>8) | uint16(p.Port<<8)
		return netip.AddrPortFrom(netip.AddrFrom16(p.Addr).Unmap(), port)
	}
	return netip.AddrPort{}
}

// sweep enforces deadlines and closes stale idle backend connections.
func (l *loop) sweep() {
	now := l.now
	if len(l.acceptLater) > 0 {
		fds := l.acceptLater
		l.acceptLater = nil
		for _, fd := range fds {
			if ll := l.listeners[fd]; ll != nil {
				l.accept(ll, fd)
			}
		}
	}
	for c := l.conns.head; c != nil; {
		next := c.next
		if c.deadline != 0 && now >= c.deadline {
			c.timeout()
		}
		c = next
	}
	for _, p := range l.pools {
		p.reap(now)
	}
}

// drain closes idle connections and marks busy ones to close after their
// answer; it returns how many remain.
func (l *loop) drain() int {
	for c := l.conns.head; c != nil; {
		next := c.next
		if c.state == lsIdle && len(c.rd.buffered()) == 0 {
			c.close()
		}
		c = next
	}
	return int(l.nconns.Load())
}

// drainListener closes a draining listener's idle connections and
// returns how many of its connections remain.
func (l *loop) drainListener(ll *LoopListener) int {
	n := 0
	for c := l.conns.head; c != nil; {
		next := c.next
		if c.ll == ll {
			if c.state == lsIdle && len(c.rd.buffered()) == 0 {
				c.close()
			} else {
				n++
			}
		}
		c = next
	}
	return n
}

func (l *loop) closeListenerConns(ll *LoopListener) {
	for c := l.conns.head; c != nil; {
		next := c.next
		if c.ll == ll {
			c.abort()
		}
		c = next
	}
}

func (l *loop) closeAll() {
	for c := l.conns.head; c != nil; {
		next := c.next
		c.abort()
		c = next
	}
	for _, p := range l.pools {
		p.closeIdle()
	}
}

// bufList is one of a loop's buffer free lists, all of one size: no
// locking and no sync.Pool churn. A connection holds a read buffer only
// while it has a request in hand, so idle keep-alive connections cost no
// buffer.
type bufList struct {
	size int
	bufs [][]byte
}

func (f *bufList) get() []byte {
	if n := len(f.bufs); n > 0 {
		b := f.bufs[n-1]
		f.bufs = f.bufs[:n-1]
		return b
	}
	return make([]byte, f.size)
}

// put keeps b for reuse unless it has grown or the list is long enough.
func (f *bufList) put(b []byte) {
	if len(b) == f.size && len(f.bufs) < 4096 {
		f.bufs = append(f.bufs, b)
	}
}

// handOver gives a client connection to the goroutine engine with the
// bytes already read from it.
func (l *loop) handOver(c *lconn, pending []byte) {
	ll := c.ll
	fd := c.fd
	l.forget(fd, true)
	l.conns.remove(c)
	l.nconns.Add(-1)
	c.fd = -1
	f := os.NewFile(uintptr(fd), "client")
	nc, err := net.FileConn(f) // a dup, registered with Go's poller
	f.Close()
	if err != nil {
		l.logf("handing a connection over", err)
		ll.release()
		l.freeConn(c)
		return
	}
	buf := append([]byte(nil), pending...)
	l.freeConn(c)
	go func() {
		defer ll.release()
		ll.fallback.ServeConnBuffered(nc, buf)
	}()
}

// wait parks until the loop's epoll has events, or until the next sweep
// is due.
//
// Under load the next event is microseconds away, so the loop first
// yields and polls a few times before parking. And a busy loop parks with
// a short deadline: Go's scheduler polls its netpoller when a thread
// runs out of work, and with every processor busy running loops that can
// be as late as sysmon's next look (10 ms or more), which showed as
// stalls of tens of milliseconds at the 99th percentile. The deadline
// bounds that wait; an idle loop sleeps until the next sweep.
func (l *loop) wait() (int, error) {
	for i := 0; i < spinPolls; i++ {
		// Give the CPU to whatever else is runnable on it (on a shared
		// machine: the client and the backends, whose answers are the
		// next events) without leaving Go's processor.
		schedYield()
		if n, err := epollWaitRaw(l.ep, l.events); n != 0 || err != nil {
			l.lastBusy = l.now
			return n, err
		}
	}
	l.waitN, l.waitErr = 0, nil
	d := sweepEvery
	if l.now-l.lastBusy < int64(busyFor) {
		d = busyWait
	}
	l.epFile.SetReadDeadline(time.Now().Add(d))
	if err := l.epRaw.Read(l.waitFn); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		return 0, err
	}
	if l.waitN > 0 {
		l.lastBusy = l.now
	}
	return l.waitN, l.waitErr
}

const (
	// spinPolls is how many times an empty loop yields its CPU and
	// polls again before it parks (under a microsecond each when nothing
	// else wants the CPU).
	spinPolls = 8
	// busyWait bounds a park shortly after events, busyFor says how
	// recent "shortly" is.
	busyWait = 2 * time.Millisecond
	busyFor  = 200 * time.Millisecond
)

// schedYield lets other runnable threads use this CPU (sched_yield(2));
// unlike runtime.Gosched it keeps the goroutine on its thread and
// processor, so it involves no wake-up.
func schedYield() {
	syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
}

// epollWaitRaw polls without blocking and without the scheduler's
// syscall bookkeeping.
func epollWaitRaw(ep int, events []syscall.EpollEvent) (int, error) {
	r, _, e := syscall.RawSyscall6(syscall.SYS_EPOLL_WAIT, uintptr(ep), uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}
