package upstream

// Key carries what a strategy may use about the request being balanced.
// The zero Key is valid: no hash, nothing excluded.
type Key struct {
	// Hash is the hash of the request's key (its client address, a
	// header, a cookie...) for consistent_hash; meaningful only when
	// Hashed is set.
	Hash uint64
	// Hashed says the request has a key and Hash holds its hash; false
	// makes consistent_hash use its fallback strategy.
	Hashed bool
	// Exclude lists backends already tried for this request, so that a
	// retry goes elsewhere.
	Exclude Set
}

// Set is a small bitset of backend indexes. Pools of more than 64 backends
// share bits (index modulo 64), so excluding one such backend may also
// exclude another; a retry then picks among fewer, never more.
type Set uint64

// Has reports whether index i is in the set.
func (s Set) Has(i int) bool { return s&(1<<(uint(i)&63)) != 0 }

// Add puts index i into the set.
func (s *Set) Add(i int) { *s |= 1 << (uint(i) & 63) }

// Picker chooses a backend for one request from the backends it was built
// with. Pick returns nil when no backend is usable. Implementations are safe
// for concurrent use, take no lock and allocate nothing.
type Picker interface {
	Pick(k Key) *Backend
}
