// Package ratelimit decides whether a request may go now under a rate
// limit: GCRA (the generic cell rate algorithm, a token bucket kept as one
// timestamp per key), with a bounded table of keys.
//
// A Limiter is the seam: Local keeps its state in this process; a shared
// store (Redis, for limits that hold across several instances) implements
// the same interface.
package ratelimit

import (
	"hash/maphash"
	"sync"
	"time"
)

// Limit is a rate: Requests per Per, with Burst more allowed at once.
type Limit struct {
	// Requests per Per is the sustained rate; both must be positive.
	Requests int
	Per      time.Duration
	// Burst is how many requests beyond the rate may come at once. 0
	// allows none: requests must come at least Per/Requests apart, and
	// one that comes a little early is refused, so that clients whose
	// requests jitter around the rate get less than it (as with nginx's
	// limit_req without burst); 1 or more absorbs the jitter.
	Burst int
}

// interval is the time one request costs.
func (l Limit) interval() int64 { return int64(l.Per) / int64(l.Requests) }

// Decision is what a Limiter decided for one request.
type Decision struct {
	// Allowed says the request may go.
	Allowed bool
	// Remaining is how many more requests would be allowed right now.
	Remaining int
	// RetryAfter is how long a refused request should wait; 0 when
	// allowed.
	RetryAfter time.Duration
	// Reset is how long until the key's allowance is whole again.
	Reset time.Duration
}

// Limiter decides requests by key. Implementations are safe for
// concurrent use and must not block for long: they run on event loops.
type Limiter interface {
	// Allow decides a request with key (the bytes are not kept) at now
	// (unix nanoseconds) under l.
	Allow(key []byte, l Limit, now int64) Decision
}

// DefaultMaxKeys bounds a Local limiter's table when New is given 0.
const DefaultMaxKeys = 100_000

// shards splits a Local limiter's table, each part under its own lock.
const shards = 64

// Local is a Limiter that keeps its state in memory: one timestamp per
// key (the theoretical arrival time of the next request, GCRA's TAT), at
// most MaxKeys of them. A key whose timestamp has passed holds no
// state worth keeping; when the table is full such keys go first, then
// the key whose timestamp is oldest among a sample (so the least active
// of a few random keys loses its history, and starts again with a full
// allowance).
type Local struct {
	seed   maphash.Seed
	parts  [shards]part
	perKey int // table bound per shard
	// Evicted counts keys dropped for room (not those that expired).
	evicted atomicCounter
}

// part is one shard of the table. Timestamps are held by pointer: a
// known key's is updated through it, since assigning m[string(key)]
// converts (allocates) the key whether or not it is there already.
type part struct {
	mu  sync.Mutex
	tat map[string]*int64
}

// New returns a Local limiter that tracks at most maxKeys keys (0:
// DefaultMaxKeys).
func New(maxKeys int) *Local {
	if maxKeys <= 0 {
		maxKeys = DefaultMaxKeys
	}
	l := &Local{seed: maphash.MakeSeed(), perKey: max(1, (maxKeys+shards-1)/shards)}
	for i := range l.parts {
		l.parts[i].tat = make(map[string]*int64)
	}
	return l
}

// Allow decides a request (Limiter). It allocates only for a key it has
// not seen (or has forgotten).
func (l *Local) Allow(key []byte, lim Limit, now int64) Decision {
	p := &l.parts[maphash.Bytes(l.seed, key)%shards]
	T := lim.interval()
	tau := T * int64(lim.Burst)
	p.mu.Lock()
	slot := p.tat[string(key)]
	tat := now
	if slot != nil && *slot > now {
		tat = *slot
	}
	d := decide(tat, now, T, tau)
	if d.Allowed {
		if slot == nil {
			if len(p.tat) >= l.perKey {
				l.evict(p, now)
			}
			slot = new(int64)
			p.tat[string(key)] = slot
		}
		*slot = tat + T
	}
	p.mu.Unlock()
	return d
}

// decide applies GCRA to a key whose next arrival is tat (not before now).
func decide(tat, now, T, tau int64) Decision {
	allowAt := tat - tau
	if now < allowAt {
		return Decision{RetryAfter: time.Duration(allowAt - now), Reset: time.Duration(tat - now)}
	}
	next := tat + T
	return Decision{
		Allowed:   true,
		Remaining: int((tau - (next - now - T)) / T),
		Reset:     time.Duration(next - now),
	}
}

// evict makes room in p: expired keys first, else the oldest of a
// sample.
func (l *Local) evict(p *part, now int64) {
	const sample = 8
	var oldest string
	oldestTAT := int64(1<<63 - 1)
	n := 0
	for k, slot := range p.tat {
		t := *slot
		if t <= now {
			delete(p.tat, k)
			return
		}
		if t < oldestTAT {
			oldest, oldestTAT = k, t
		}
		if n++; n == sample {
			break
		}
	}
	delete(p.tat, oldest)
	l.evicted.add(1)
}

// Len returns how many keys the limiter holds.
func (l *Local) Len() int {
	n := 0
	for i := range l.parts {
		p := &l.parts[i]
		p.mu.Lock()
		n += len(p.tat)
		p.mu.Unlock()
	}
	return n
}

// Evicted returns how many keys were dropped for room.
func (l *Local) Evicted() uint64 { return l.evicted.load() }
