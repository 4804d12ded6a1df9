package tlsconf

import (
	"crypto/tls"
	"sync"
	"sync/atomic"
)

// Gate admits a listener's TLS handshakes under a cap on those in
// progress, and counts how every handshake ends. A handshake holds its
// place from Begin to End; the engine begins one only once the client has
// sent its ClientHello, so a connection that says nothing holds none.
//
// At the cap, Begin sheds rather than refuses: the handshake admitted
// first among those waiting for their client (a ClientHello followed by
// silence, a server flight the client never answers) is stopped, counted
// as shed, and the new one takes its place. A client that stalls its
// handshake thus keeps a place only until newer handshakes need it, and
// cannot lock new clients out by holding every place. Only when no
// handshake in progress waits for its client (all of them are working)
// is the new one refused.
//
// The zero value is ready to use. A Gate is safe for concurrent use.
type Gate struct {
	stats HandshakeStats
	n     atomic.Int64 // len of the list, for readers without the lock

	mu sync.Mutex
	// oldest and newest end the list of handshakes in progress, in the
	// order they began.
	oldest, newest *Handshake
}

// Handshake is one handshake in progress, from Gate.Begin (or
// Provider.BeginHandshake) to its End.
type Handshake struct {
	g    *Gate
	stop func()
	// waiting: the handshake waits for its client (Waiting).
	waiting atomic.Bool

	// Under g.mu: its place in the list (listed), and whether Begin shed
	// it to make room.
	prev, next *Handshake
	listed     bool
	shed       bool
}

// Begin admits a handshake when fewer than limit are in progress (limit
// 0 or less: no cap), shedding the oldest waiting one to make room when
// there are not; stop is called (once, from any goroutine) if this
// handshake is shed in turn, and must make it end soon. Begin
// returns nil when no handshake could be shed: the handshake must not
// start, and the refusal is counted. Otherwise End must follow, however
// the handshake ends.
func (g *Gate) Begin(limit int, stop func()) *Handshake {
	h := &Handshake{g: g, stop: stop}
	for {
		g.mu.Lock()
		if limit <= 0 || g.n.Load() < int64(limit) {
			g.link(h)
			g.mu.Unlock()
			return h
		}
		v := g.oldestWaiting()
		if v == nil {
			g.mu.Unlock()
			g.stats.Count(ResultRefused, 0, false)
			return nil
		}
		g.unlink(v)
		v.shed = true
		g.mu.Unlock()
		// A cap lowered by a reload may take more than one.
		v.stop()
	}
}

// oldestWaiting returns the first handshake of the list that waits for
// its client, or nil. g.mu is held.
func (g *Gate) oldestWaiting() *Handshake {
	for h := g.oldest; h != nil; h = h.next {
		if h.waiting.Load() {
			return h
		}
	}
	return nil
}

func (g *Gate) link(h *Handshake) {
	h.prev = g.newest
	if g.newest != nil {
		g.newest.next = h
	} else {
		g.oldest = h
	}
	g.newest = h
	h.listed = true
	g.n.Add(1)
}

func (g *Gate) unlink(h *Handshake) {
	if h.prev != nil {
		h.prev.next = h.next
	} else {
		g.oldest = h.next
	}
	if h.next != nil {
		h.next.prev = h.prev
	} else {
		g.newest = h.prev
	}
	h.prev, h.next, h.listed = nil, nil, false
	g.n.Add(-1)
}

// Waiting says whether the handshake is waiting for its client: for
// bytes to read, or for room to write. Only a waiting handshake is shed.
func (h *Handshake) Waiting(on bool) { h.waiting.Store(on) }

// End releases the handshake's place and counts how it ended: cs is the
// connection's state (tls.Conn.ConnectionState) and err the handshake's
// error, nil on success. A handshake that Begin shed is counted as shed,
// unless it completed all the same. End is called once.
func (h *Handshake) End(cs tls.ConnectionState, err error) {
	g := h.g
	g.mu.Lock()
	if h.listed {
		g.unlink(h)
	}
	shed := h.shed
	g.mu.Unlock()
	r := Classify(err)
	if shed && err != nil {
		// (Shed as it finished, it is a handshake like any other.)
		r = ResultShed
	}
	g.stats.Count(r, cs.Version, err == nil && cs.DidResume)
}

// NoHello counts a connection that ended before its ClientHello arrived
// (it never held a place).
func (g *Gate) NoHello() { g.stats.Count(ResultNoHello, 0, false) }

// InProgress returns how many handshakes hold a place: begun, and neither
// ended nor shed.
func (g *Gate) InProgress() int64 { return g.n.Load() }

// Waiting returns how many handshakes in progress wait for their client:
// those Begin would shed at the cap.
func (g *Gate) Waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for h := g.oldest; h != nil; h = h.next {
		if h.waiting.Load() {
			n++
		}
	}
	return n
}

// Stats returns the counters of how handshakes ended.
func (g *Gate) Stats() *HandshakeStats { return &g.stats }
