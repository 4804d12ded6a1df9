package engine

import (
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/helios-lb/helios/internal/httpmsg"
	"github.com/helios-lb/helios/internal/netpoll"
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
// The loop serves every exchange itself, each behaviour in one place:
// fixed answers, forwarding with retries, bodies of any size and framing
// both ways with backpressure (reqbody.go), Expect: 100-continue, request
// buffering, upgrades as tunnels (tunnel.go), and handlers that must
// block (ActServeHTTP: a net/http handler served on a goroutine of its
// own behind a socketpair, as an in-process backend; local.go). The
// poller is internal/netpoll's: epoll on Linux, Go's netpoller elsewhere
// (and in tests, to run every test on both).

// Readiness bits, as netpoll reports them, and evTimeout, which the
// sweeps deliver to a connection whose deadline has passed.
const (
	evIn      = netpoll.In
	evOut     = netpoll.Out
	evErr     = netpoll.Err
	evHup     = netpoll.Hup
	evRdHup   = netpoll.RdHup
	evTimeout = uint32(1) << 30
)

// deliver hands an event to its connection. A panic while the connection
// handles it costs that connection only: it is closed, the stack is
// logged once and counted (Engine.Panics), and the loop goes on with its
// other connections. One bad request must not take every connection of
// the loop down with it (net/http does the same per connection).
func (l *loop) deliver(t target, ev uint32) {
	// A backend connection's exchange, as it was when the event came:
	// the exchange may let go of the connection (back to its pool)
	// before the code that panics runs, and must still be closed.
	var owner *lconn
	if u, ok := t.(*lupconn); ok {
		owner = u.client
	}
	defer func() {
		if r := recover(); r != nil {
			l.recovered(t, owner, r)
		}
	}()
	t.event(ev)
}

// run1 runs posted work; a panic in it is logged and counted, and the
// loop goes on.
func (l *loop) run1(f func()) {
	defer func() {
		if r := recover(); r != nil {
			l.eng.panics.Add(1)
			l.logf("panic on an event loop", fmt.Errorf("%v\n%s", r, debug.Stack()))
		}
	}()
	f()
}

// recovered closes the connection a panic came from (for a backend
// connection, owner: its exchange when the event came). The exchange's
// state is unknown, so nothing more of it runs: its sockets are closed
// as they are.
func (l *loop) recovered(t target, owner *lconn, r any) {
	l.eng.panics.Add(1)
	if r != http.ErrAbortHandler {
		l.logf("panic on an event loop; the connection is closed", fmt.Errorf("%v\n%s", r, debug.Stack()))
	}
	var c *lconn
	switch t := t.(type) {
	case *lconn:
		c = t
	case *lupconn:
		c = owner
		if t.client == nil && t.state != upIdle {
			// Let go by its exchange, and not to the pool (a pooled
			// one is whole: it stays).
			t.close()
		}
	case *h2up:
		t.close(errPanicked)
		return
	}
	if c == nil || c.state == lsClosed {
		return
	}
	c.crash()
}

// errPanicked ends what a panic on a loop left behind.
var errPanicked = errors.New("closed after a panic on the event loop")

// sweepEvery is how often a loop checks deadlines: timeouts are exact to
// within this.
const sweepEvery = 50 * time.Millisecond

// target is what a file descriptor registered with a loop leads to.
type target interface {
	event(ev uint32)
}

type loop struct {
	eng    *Engine
	id     int
	poller netpoll.Poller
	// pre reads the sockets of a batch of events in one system call, on
	// the io_uring poller (preload.go).
	pre preloader
	// lastBusy is when the loop last found events after waiting.
	lastBusy int64
	// working is when the loop began handling its current batch of
	// events, or 0 while it waits for one (Engine.Stuck reads it).
	working atomic.Int64

	mu    sync.Mutex
	queue []func()
	// posted: the queue has work the loop has not taken yet (post sets
	// it, runQueue clears it); the loop looks at it after every batch,
	// so posted work does not wait for the wake-up's own event behind
	// every socket that was ready before it.
	posted atomic.Bool
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
	// streams are the lconns serving HTTP/2 streams (h2conn.go), for
	// deadline sweeps; due is the sweep's scratch for them.
	streams   lconnList
	due       []dueConn
	nconns    atomic.Int64
	pools     map[poolKey]*lpool
	now       int64 // unix nanoseconds at the last wake-up
	lastSweep int64
	events    []netpoll.Event
	// acceptLater lists listening sockets with connections left queued
	// for want of descriptors.
	acceptLater []int
	// fdWaiters counts the requests in the loop's pools that wait for
	// the descriptor budget (descriptors.go).
	fdWaiters int
	// spillLater holds spill writes the spill goroutine had no room for.
	spillLater []spillJob
	// scratchBuf is a piece of request body on its way to a buffer.
	scratchBuf []byte
	// gather holds the chunks of the request body being pumped, to go
	// to its backend in one write (chunkgather.go); gatherBeforeFill is
	// beforeFill as the lent reader's hook.
	gather           chunkGather
	gatherBeforeFill func()
	// tlsGather joins a head and the piece behind it into one TLS
	// record (tlsSink.WriteVec); made on first use.
	tlsGather []byte
	// tlsRecords gathers the records of one large TLS write, to leave
	// in one system call (loop.tlsWrite).
	tlsRecords []byte
	// fwd applies the forwarding rules to the loop's requests.
	fwd httpmsg.Forwarder

	// Free lists: backend read buffers, client read buffers and write
	// buffers. A client connection starts with a smaller buffer than a
	// backend one: a request head is usually well under 2 KiB, and the
	// buffer grows (up to max_header_bytes, or for a buffered body) when
	// it is not. At c10k that is 2 KiB less per connection in flight.
	readBufs  bufList
	headBufs  bufList
	writeBufs bufList
	// bodyBufs are client read buffers a small body was read whole into
	// (bodyBufSize), kept, fewer, for the next: a 64 KiB upload would
	// otherwise allocate its buffer per request.
	bodyBufs bufList
	// fieldBufs are request heads' field arrays, held, like a head's
	// read buffer, only while a connection has a request in hand.
	fieldBufs fieldList
	freeConns []*lconn
	// freeFlows are the pipeline's flows between exchanges (takeFlow).
	freeFlows []wire.Flow
	// HTTP/2: connections' read buffers and their output buffers, and
	// stream state kept for reuse.
	h2ReadBufs  bufList
	h2OutBufs   bufList
	freeStreams []*h2stream
	// h2ups are the loop's HTTP/2 connections to backends (ticked by the
	// sweeps); freeUpStreams, lupconns in the stream role kept for reuse.
	h2ups         []*h2up
	freeUpStreams []*lupconn
	// held are the HTTP/2 client connections whose output is gathered
	// until the end of the loop's batch of events (hold).
	held []*h2conn
	// handshakesWoken: the batch started a TLS handshake's goroutine or
	// told one its socket is ready; the loop then yields its processor
	// once (run).
	handshakesWoken bool
}

// hold gathers h's output until the end of the loop's current batch of
// events, when it leaves in one write with whatever else the batch made:
// the answers of several streams, or an answer's head, body and end that
// came in separate events of its backend. Until then the output is in
// the machine, not in the connection's writer: the connection must not
// end meanwhile (h2check waits for releaseHeld).
func (l *loop) hold(h *h2conn) {
	if h.held {
		return
	}
	h.held = true
	h.conn.Hold()
	l.held = append(l.held, h)
}

// releaseHeld writes out what hold gathered, and ends the sessions that
// ended while their output was held, now that it has gone to their
// writers.
func (l *loop) releaseHeld() {
	for i := 0; i < len(l.held); i++ {
		// Releasing one may make another stream's answer (OnWritable),
		// holding more: the loop runs to the end of the list as it grows.
		l.release(l.held[i])
	}
	clear(l.held)
	l.held = l.held[:0]
}

// release writes out what h held, and ends its session if it is over; a
// panic costs h's connection (if it still has it), not the loop.
func (l *loop) release(h *h2conn) {
	defer func() {
		if r := recover(); r != nil {
			var t target
			if h.c.h2 == h {
				t = h.c
			}
			l.recovered(t, nil, r)
		}
	}()
	h.held = false
	h.conn.Release()
	if h.c.h2 == h {
		h.c.h2check()
	}
}

// dueConn is a stream whose deadline a sweep found passed, and which of
// its lconn's uses it was (a stream ended meanwhile is not told).
type dueConn struct {
	c   *lconn
	inc uint32
}

func newLoop(e *Engine, id int) (*loop, error) {
	p, err := netpoll.New(e.kind)
	if err != nil {
		return nil, err
	}
	if e.wrapPoller != nil {
		p = e.wrapPoller(p)
	}
	l := &loop{eng: e, id: id, poller: p, listeners: map[int]*LoopListener{},
		pools: map[poolKey]*lpool{}, events: make([]netpoll.Event, 256),
		readBufs: bufList{size: readBufSize}, headBufs: bufList{size: headBufSize}, writeBufs: bufList{size: writeBufSize},
		bodyBufs:   bufList{size: bodyBufSize, max: 64},
		h2ReadBufs: bufList{size: h2ReadBufSize}, h2OutBufs: bufList{size: h2OutBufSize}}
	l.gatherBeforeFill = l.beforeFill
	if e.kind == netpoll.KindURing {
		var err error
		if l.pre, err = newPreloader(); err != nil && e.batchErr == nil {
			e.batchErr = err
		}
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
	l.posted.Store(true)
	l.mu.Unlock()
	l.poller.Wake()
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
		n, err := l.poller.Poll(l.events)
		if n == 0 && err == nil {
			l.working.Store(0)
			n, err = l.wait()
		}
		l.now = time.Now().UnixNano()
		l.working.Store(l.now)
		if err != nil {
			n = 0 // EpollWait reports -1 with its error
			if err != syscall.EINTR {
				l.logf("epoll_wait failed", err)
				time.Sleep(10 * time.Millisecond)
				continue
			}
		}
		if l.pre.on {
			l.preload(l.events[:n])
		}
		ok := l.dispatch(l.events[:n])
		l.unload()
		if !ok {
			l.releaseHeld()
			l.closeAll()
			return
		}
		if l.now-l.lastSweep >= int64(sweepEvery) {
			l.lastSweep = l.now
			l.sweep()
		}
		l.releaseHeld()
		if l.handshakesWoken {
			// A handshake's goroutine, woken by this batch, waits in this
			// processor's run queue; a busy loop would keep it waiting
			// until the scheduler preempts the loop (10 ms), once per
			// round trip of the handshake. Let it run now.
			l.handshakesWoken = false
			runtime.Gosched()
		}
		if l.posted.Load() {
			// Work posted meanwhile (a finished handshake, say) runs
			// now: its wake-up event would come in a later batch, behind
			// every socket ready before it, which under load is many.
			if !l.runQueue() {
				l.releaseHeld()
				l.closeAll()
				return
			}
			l.releaseHeld()
		}
	}
}

// dispatch handles a batch of events; it reports false when the loop
// must stop.
func (l *loop) dispatch(events []netpoll.Event) bool {
	for i := range events {
		ev := &events[i]
		fd := int(ev.FD)
		if fd == netpoll.WakeFD {
			if !l.runQueue() {
				return false
			}
			continue
		}
		if ll := l.listeners[fd]; ll != nil {
			l.accept(ll, fd)
			continue
		}
		if fd < len(l.targets) && l.targets[fd] != nil && l.tags[fd] == ev.Tag {
			l.deliver(l.targets[fd], ev.Events)
		}
	}
	return true
}

// runQueue runs posted work; it reports false when the loop must stop.
func (l *loop) runQueue() bool {
	l.mu.Lock()
	q := l.queue
	l.queue = nil
	l.posted.Store(false)
	l.mu.Unlock()
	for _, f := range q {
		if f == nil {
			return false
		}
		l.run1(f)
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
	// The tag rides in the event next to the fd.
	if err := l.poller.Add(fd, l.lastTag); err != nil {
		l.targets[fd] = nil
		return err
	}
	return nil
}

// closeFD forgets a registered socket and closes it.
func (l *loop) closeFD(fd int) {
	if fd < len(l.targets) {
		l.targets[fd] = nil
	}
	l.poller.Close(fd)
}

func (l *loop) addListener(ll *LoopListener, fd int) error {
	if err := l.poller.AddListener(fd); err != nil {
		return err
	}
	l.listeners[fd] = ll
	// Connections may be queued already: the edge came before we looked.
	l.accept(ll, fd)
	return nil
}

func (l *loop) removeListener(ll *LoopListener) {
	for fd, x := range l.listeners {
		if x == ll {
			l.poller.Remove(fd)
			delete(l.listeners, fd)
		}
	}
}

// accept takes every queued connection (edge-triggered: until EAGAIN).
func (l *loop) accept(ll *LoopListener, lfd int) {
	for {
		if ll.stopped.Load() {
			// Stop is under way: what is queued stays queued, for the
			// process the socket was handed to, if any.
			return
		}
		fd, remote, err := netpoll.Accept(lfd)
		switch err {
		case nil:
		case syscall.EINTR, syscall.ECONNABORTED:
			continue
		case syscall.EAGAIN:
			l.poller.Drained(lfd)
			return
		case syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM:
			// Out of descriptors: leave the rest queued. No new edge
			// comes for connections already queued, so the sweeps try
			// again until the queue is empty.
			l.acceptFailed(err.(syscall.Errno))
			if !slices.Contains(l.acceptLater, lfd) {
				l.acceptLater = append(l.acceptLater, lfd)
			}
			return
		default:
			if errno, ok := err.(syscall.Errno); ok {
				l.acceptFailed(errno)
			}
			return
		}
		// A connection accepted while the listener stops or the engine
		// drains is served (its first answer says Connection: close):
		// closing it unread would lose a request the client has sent.
		if l.eng.stopped.Load() || !ll.admit() {
			netpoll.CloseFD(fd)
			continue
		}
		if l.eng.acceptControl != nil {
			l.eng.acceptControl(fd)
		}
		c := l.allocConn()
		if err := l.register(fd, c); err != nil {
			l.logf("registering a connection", err)
			l.freeConns = append(l.freeConns, c)
			netpoll.CloseFD(fd)
			ll.release()
			continue
		}
		l.startConn(c, ll, fd, remote)
		c.opts = ll.opts.Load()
		if c.opts.ProxyProtocol != ProxyOff {
			c.awaitProxy()
			continue
		}
		if !c.admitAddr() {
			continue
		}
		if c.opts.TLS != nil {
			c.awaitHello(c.opts.TLS)
			// Read the ClientHello now: a client sends it with its
			// first bytes, and waiting for the socket's event would put
			// the handshake behind every socket ready before it (under
			// load, many). Through deliver, so a panic costs this
			// connection only.
			l.deliver(c, evIn)
			continue
		}
		// A plain connection waits for its event: a request read here
		// would often not have come yet (an extra read per connection,
		// which an A/B of proxy-close showed as CPU and no gain).
		c.setDeadline(dlIdle, c.opts.IdleTimeout)
	}
}

// acceptFailed reports a failed accept to the engine's hook, or logs it.
func (l *loop) acceptFailed(err error) {
	if l.eng.acceptErr != nil {
		l.eng.acceptErr(err)
		return
	}
	l.logf("accept failed", err)
}

// scratch returns the loop's scratch buffer (spillSize bytes).
func (l *loop) scratch() []byte {
	if l.scratchBuf == nil {
		l.scratchBuf = make([]byte, spillSize)
	}
	return l.scratchBuf
}

// sweep enforces deadlines and closes stale idle backend connections.
func (l *loop) sweep() {
	now := l.now
	l.retrySpills()
	// Descriptors other loops gave back: start a request that waits.
	// Clients that want back what idle backend connections took: close
	// those.
	l.wakeFDWaiter()
	if l.eng.squeezed() {
		for _, p := range l.pools {
			p.closeIdle()
		}
	}
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
		if c.deadline != 0 && now >= c.deadline || c.bodyDeadline != 0 && now >= c.bodyDeadline {
			l.deliver(c, evTimeout)
		}
		c = next
	}
	// A stream's timeout can end its whole connection, and so other
	// streams: the due ones are listed first, then told.
	for c := l.streams.head; c != nil; c = c.next {
		if c.deadline != 0 && now >= c.deadline || c.bodyDeadline != 0 && now >= c.bodyDeadline {
			l.due = append(l.due, dueConn{c, c.inc})
		}
	}
	for i, d := range l.due {
		if d.c.h2s != nil && d.c.inc == d.inc {
			l.deliver(d.c, evTimeout)
		}
		l.due[i] = dueConn{}
	}
	l.due = l.due[:0]
	for i := 0; i < len(l.h2ups); i++ {
		hu := l.h2ups[i]
		hu.tick(now)
		if i < len(l.h2ups) && l.h2ups[i] != hu {
			i-- // it closed, and the last took its place
		}
	}
	for k, p := range l.pools {
		p.reap(now)
		if p.retired && p.unused() {
			delete(l.pools, k)
		}
	}
}

// drain closes idle connections and marks busy ones to close after their
// answer; it returns how many remain.
func (l *loop) drain() int {
	for c := l.conns.head; c != nil; {
		next := c.next
		l.closeIfIdle(c)
		c = next
	}
	return int(l.nconns.Load())
}

// closeIfIdle closes a connection waiting for a request, and reports
// whether it did. It reads first: a request may have arrived in the
// kernel's buffer since the last edge was handled, and that one is
// served instead, with Connection: close. A connection accepted less than
// freshGrace ago that has not sent its first request yet is left open:
// its client connected to send one, which may still be on its way, and
// unlike a request on a reused keep-alive connection it would not be
// retried (clients retry only there). The drain's next round looks again.
// A TLS connection waiting for its ClientHello is treated alike
// (closeWaitingIfDue), and so is one waiting for its PROXY header.
func (l *loop) closeIfIdle(c *lconn) bool {
	if c.state == lsH2 {
		c.h2drain()
		return c.state == lsClosed
	}
	if c.state == lsHello {
		return c.closeWaitingIfDue(c.readHello, c.noHello)
	}
	if c.state == lsProxy {
		return c.closeWaitingIfDue(c.readProxy, c.close)
	}
	if c.state != lsIdle || len(c.rd.buffered()) != 0 {
		return false
	}
	l.deliver(c, evIn)
	if c.state == lsIdle && len(c.rd.buffered()) == 0 && (c.fresh == 0 || l.now-c.fresh >= int64(freshGrace)) {
		c.close()
	}
	return c.state == lsClosed
}

// freshGrace is how long a drain waits for the first request of a
// connection accepted just before it.
const freshGrace = time.Second

// drainListener closes a draining listener's idle connections and
// returns how many of its connections remain.
func (l *loop) drainListener(ll *LoopListener) int {
	n := 0
	for c := l.conns.head; c != nil; {
		next := c.next
		if c.ll == ll && !l.closeIfIdle(c) {
			n++
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
	// Closing a connection ended its streams; none should be left.
	for l.streams.head != nil {
		l.streams.head.abort()
	}
	for len(l.h2ups) > 0 {
		l.h2ups[0].close(errAborted)
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
	// max bounds the buffers kept (0: 4096).
	max  int
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
	max := f.max
	if max == 0 {
		max = 4096
	}
	if len(b) == f.size && len(f.bufs) < max {
		f.bufs = append(f.bufs, b)
	}
}

// putClientBuf gives back a client connection's read buffer: a head's,
// or one a small body was read into.
func (l *loop) putClientBuf(b []byte) {
	if len(b) == bodyBufSize {
		l.bodyBufs.put(b)
		return
	}
	l.headBufs.put(b)
}

// fieldList is a loop's free list of header field arrays.
type fieldList struct{ lists [][]httpmsg.Field }

// fieldsCap is the room a field array starts with: a browser's request
// head has about a dozen fields.
const fieldsCap = 16

func (f *fieldList) get() []httpmsg.Field {
	if n := len(f.lists); n > 0 {
		h := f.lists[n-1]
		f.lists = f.lists[:n-1]
		return h
	}
	return make([]httpmsg.Field, 0, fieldsCap)
}

// put keeps h for reuse, emptied (its fields point into buffers that
// go on to other connections), unless it has grown large (a head of
// hundreds of fields) or the list is long enough.
func (f *fieldList) put(h []httpmsg.Field) {
	if cap(h) <= 4*fieldsCap && len(f.lists) < 4096 {
		clear(h[:cap(h)])
		f.lists = append(f.lists, h[:0])
	}
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
		netpoll.Yield()
		if n, err := l.poller.Poll(l.events); n != 0 || err != nil {
			l.lastBusy = l.now
			return n, err
		}
	}
	d := sweepEvery
	if l.now-l.lastBusy < int64(busyFor) {
		d = busyWait
	}
	n, err := l.poller.Wait(l.events, d)
	if n > 0 {
		l.lastBusy = l.now
	}
	return n, err
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
