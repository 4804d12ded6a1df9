package balancer

import (
	"math"

	"github.com/helios-lb/helios/internal/upstream"
)

// ipHash maps clients to backends by weighted rendezvous (highest random
// weight) hashing: every backend scores every client with a hash of the pair
// and the usable backend with the highest score wins.
//
// A backend's score for a client does not depend on the other backends, so
// when a backend becomes unusable (or is removed) only the clients it won
// move, each to its runner-up, and when it comes back exactly those clients
// return; the ~(N-1)/N others never notice. Unlike a hash ring it needs no
// virtual nodes to spread load evenly, at the cost of O(n) per pick, which is
// small for the pool sizes a proxy has.
type ipHash struct {
	backends []*upstream.Backend
	// addrHash[i] identifies backends[i] by its address, so that a client
	// maps to the same backend across reloads, restarts and every Helios
	// instance, whatever the order of the configured backends.
	addrHash []uint64
	// weights[i] is backends[i].Weight as float64; nil when all weights
	// are equal, in which case the raw hash is the score.
	weights []float64
}

func newIPHash(bs []*upstream.Backend) *ipHash {
	h := &ipHash{backends: bs, addrHash: make([]uint64, len(bs))}
	seen := make(map[string]uint64, len(bs))
	equal := true
	for i, b := range bs {
		// A repeated address would score exactly like its first
		// occurrence and never win; salting it by its occurrence
		// count gives each copy its share and keeps the mapping stable.
		dup := seen[b.Addr]
		seen[b.Addr] = dup + 1
		h.addrHash[i] = mix(fnv1a(b.Addr) + dup*0x9e3779b97f4a7c15)
		equal = equal && b.Weight == bs[0].Weight
	}
	if !equal {
		h.weights = make([]float64, len(bs))
		for i, b := range bs {
			h.weights[i] = float64(b.Weight)
		}
	}
	return h
}

// Pick returns the usable backend with the highest score for k.Hash, or nil
// when none is usable.
func (h *ipHash) Pick(k upstream.Key) *upstream.Backend {
	if h.weights == nil {
		return h.pickEqual(k)
	}
	return h.pickWeighted(k)
}

// pickEqual compares the pair hashes directly: with equal weights every
// monotone function of the hash, including the weighted score below, ranks
// the backends the same way.
func (h *ipHash) pickEqual(k upstream.Key) *upstream.Backend {
	var best *upstream.Backend
	var bestScore uint64
	for i, b := range h.backends {
		s := mix(k.Hash ^ h.addrHash[i])
		// Score first: it is cheaper than Usable's atomic load, and
		// most backends lose on score alone.
		if best != nil && s <= bestScore {
			continue
		}
		if b.Usable(k) {
			best, bestScore = b, s
		}
	}
	return best
}

// pickWeighted scores with weight / -ln(u), u uniform in (0,1) from the pair
// hash. That is the logarithm method of weighted rendezvous hashing
// (Schindelhauer and Schomaker): a backend wins a client with probability
// weight/sum(weights), and the score still depends only on the pair, so
// consistency is kept.
func (h *ipHash) pickWeighted(k upstream.Key) *upstream.Backend {
	var best *upstream.Backend
	var bestScore float64
	for i, b := range h.backends {
		s := h.weights[i] / -math.Log(unit(mix(k.Hash^h.addrHash[i])))
		if best != nil && s <= bestScore {
			continue
		}
		if b.Usable(k) {
			best, bestScore = b, s
		}
	}
	return best
}

// unit maps a 64-bit hash to a float64 strictly inside (0,1), so that its
// logarithm is finite and negative. It keeps 52 bits, not 53, so that adding
// the half is exact: with 53, the top value would round up to exactly 1.
func unit(x uint64) float64 {
	return (float64(x>>12) + 0.5) / (1 << 52)
}

// mix is the splitmix64 finalizer: a bijection whose every output bit
// depends on every input bit, so that the pair hashes of one client are
// independent across backends even when client hashes are sequential.
func mix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// fnv1a is the 64-bit FNV-1a hash of s. It is fixed by specification, unlike
// hash/maphash, whose seed changes per process and would remap clients on
// every restart and differ between Helios instances.
func fnv1a(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}
