// Package netpoll tells an event loop which of its sockets are ready. Two
// pollers implement one contract:
//
//   - Epoll (Linux): one epoll instance per loop, every socket registered
//     once, edge-triggered, with raw system calls; an idle loop parks in
//     Go's netpoller on the epoll descriptor itself.
//   - Portable (every Unix, Linux included, so that tests run it): Go's
//     own netpoller watches each socket from a small goroutine that posts
//     readiness to the loop, emulating edge-triggered reports.
//
// The contract is epoll's edge-triggered one: after Add, a socket is
// reported readable when bytes (or its end) arrive, and writable when
// room appears; a report may be spurious, and one comes again only after
// the loop has found the socket drained (a short read, or EAGAIN: it calls
// Drained) or blocked (a write that left bytes over: it calls Blocked).
// Epoll ignores those two calls; the portable poller needs them.
package netpoll

import "time"

// Readiness bits of Event.Events (epoll's values).
const (
	In    uint32 = 0x1
	Out   uint32 = 0x4
	Err   uint32 = 0x8
	Hup   uint32 = 0x10
	RdHup uint32 = 0x2000 // the peer shut its side down
)

// WakeFD is the Event.FD of the report that Wake was called.
const WakeFD = -1

// Event is one readiness report: the socket, the tag it was added with,
// and what it is ready for.
type Event struct {
	Events uint32
	FD     int32
	Tag    int32
}

// Poller watches one event loop's sockets. Only the loop calls its
// methods, except Wake, which any goroutine may call.
type Poller interface {
	// Add watches a connected socket for reading, writing and the peer's
	// shutdown; its events carry tag (loops tell a closed socket's late
	// events from those of the next socket given its number).
	Add(fd int, tag int32) error
	// AddListener watches a listening socket for connections to accept
	// (its events carry tag 0).
	AddListener(fd int) error
	// Remove stops watching a listening socket without closing it.
	Remove(fd int)
	// Close stops watching a connected socket and closes it.
	Close(fd int)
	// Drained says a read of fd came back short or with EAGAIN: report
	// it readable again when more arrives.
	Drained(fd int)
	// Blocked says a write to fd left bytes unwritten: report it writable
	// again when room appears.
	Blocked(fd int)
	// Poll fills events with what is ready now, without waiting.
	Poll(events []Event) (int, error)
	// Wait fills events, waiting up to d for something to be ready (or
	// for Wake). A waiting loop lets its goroutine's processor run
	// other goroutines.
	Wait(events []Event, d time.Duration) (int, error)
	// Wake makes the loop's Poll or Wait report a WakeFD event soon.
	Wake()
	// Shutdown releases the poller; the sockets stay open.
	Shutdown() error
}

// Kind names a poller.
type Kind string

// The pollers.
const (
	// KindEpoll is Linux's epoll; elsewhere New falls back to Portable.
	KindEpoll Kind = "epoll"
	// KindURing is epoll for readiness, with the sockets a loop's batch
	// of events finds readable read in one io_uring_enter (RecvBatch)
	// where the kernel allows io_uring; the poller itself is KindEpoll's.
	// Elsewhere it is Portable.
	KindURing Kind = "io_uring"
	// KindPortable watches sockets through Go's netpoller.
	KindPortable Kind = "portable"
)

// Native returns the poller this system's loops use by default: epoll
// with io_uring's batched reads on Linux, the portable one elsewhere.
func Native() Kind { return native }

// New returns a poller of the given kind; KindEpoll or KindURing where
// epoll does not exist gives the portable poller.
func New(k Kind) (Poller, error) {
	if (k == KindEpoll || k == KindURing) && native != KindPortable {
		return newEpoll()
	}
	return newPortable(), nil
}
