package balancer

import (
	"math"
	"math/bits"
	"slices"

	"github.com/helios-lb/helios/internal/upstream"
)

// consistentHash maps request keys to backends: a Maglev lookup table for
// the first choice, weighted rendezvous hashing for the next ones, and an
// optional bound on load (consistent hashing with bounded loads).
//
// Why Maglev (Eisenbud et al., NSDI 2016) for the first choice rather than a
// ring of virtual nodes: a pick is one multiply and one table read, O(1)
// whatever the pool, where a ring is a binary search over 100-200 points per
// backend; every backend owns its weighted share of the table to within one
// entry (a ring's shares vary by several percent even with hundreds of
// points per backend); and when a backend joins or leaves, the table moves
// barely more than the 1/N of keys that must move. The table is built once
// per configuration generation, with backends ordered by address hash, so a
// key maps to the same address whatever the order of the configured
// backends, across reloads, restarts and every Helios instance.
//
// Why rendezvous for the next choices: a table is built for one set of
// backends, but backends come and go at run time (health checks, ejection,
// breakers, a retry's exclusions, slow start, the load bound), and
// rebuilding on each change would need a writer on the request path. A
// key whose first choice cannot take it goes to the backend that scores
// highest for it, a hash of the pair: each key has its own order over the
// backends, so the keys of a backend that is out spread evenly over the
// others (a ring hands them all to its neighbour), and come back when it
// returns. Only its keys move.
//
// Bounded load (Mirrokni, Thorup and Zadimoghaddam, "Consistent Hashing
// with Bounded Loads", as HAProxy's hash-balance-factor and Envoy's
// hash_balance_factor): with a bound c, a backend whose in-flight requests
// would exceed c times its weighted share of all in-flight requests
// (rounded up) passes the key to its next choice. The first choice is O(1);
// with a bound, a pick also reads every backend's in-flight count, O(N).
type consistentHash struct {
	backends []*upstream.Backend
	// addrHash[i] identifies backends[i] by its address.
	addrHash []uint64
	// weight[i] is the weight of backends[i] as float64, for the
	// weighted rendezvous score.
	weight []float64
	// table maps a key's slot to a backend position (Maglev).
	table []uint32
	// total is the sum of the weights, for slow start.
	total int64
	// bound is the load factor c; 0 means no bound.
	bound float64
	// fallback picks for requests without a key.
	fallback upstream.Picker
}

// Salts that keep the hashes drawn from one key independent of each other:
// its table slot, its rendezvous scores and its slow-start draws.
const (
	saltSlot = 0x6a09e667f3bcc909
	saltRamp = 0xbb67ae8584caa73b
	saltSkip = 0x3c6ef372fe94f82b
)

func newConsistentHash(bs []*upstream.Backend, fallback upstream.Picker, bound float64) *consistentHash {
	h := &consistentHash{
		backends: bs,
		addrHash: make([]uint64, len(bs)),
		weight:   make([]float64, len(bs)),
		total:    sumWeights(bs),
		bound:    bound,
		fallback: fallback,
	}
	seen := make(map[string]uint64, len(bs))
	for i, b := range bs {
		// A repeated address would hash like its first occurrence and
		// never win a tie; salting it by its occurrence count gives each
		// copy its share and keeps the mapping stable.
		dup := seen[b.Addr]
		seen[b.Addr] = dup + 1
		h.addrHash[i] = mix(upstream.HashString(b.Addr) + dup*0x9e3779b97f4a7c15)
		h.weight[i] = float64(b.Weight)
	}
	h.table = maglev(h.addrHash, bs)
	return h
}

// Pick returns the key's first choice when it can take the request, its
// next choice otherwise, the fallback strategy's pick for a request
// without a key, and nil when no backend is usable.
func (h *consistentHash) Pick(k upstream.Key) *upstream.Backend {
	if !k.Hashed {
		return h.fallback.Pick(k)
	}
	first := h.table[fastrange(mix(k.Hash^saltSlot), len(h.table))]
	b := h.backends[first]
	var ld load
	if h.bound > 0 {
		ld = h.measure()
	}
	if b.Usable(k) && h.keeps(int(first), k.Hash) && (h.bound == 0 || h.fits(b, ld)) {
		return b
	}
	return h.next(k, int(first), ld)
}

// keeps reports whether backends[i], when in slow start, keeps the key
// (slowstart.go): the draw is a hash of the key and the backend, so a key
// stays once the ramp has passed it.
func (h *consistentHash) keeps(i int, hash uint64) bool {
	b := h.backends[i]
	return keeps(b, int64(b.Weight), h.total, hash^h.addrHash[i]^saltRamp)
}

// load is what the bound compares against: the requests in flight to the
// available backends and the sum of their effective weights.
type load struct {
	inflight int64
	weight   float64
}

// measure reads the load of the available backends.
func (h *consistentHash) measure() load {
	var ld load
	for _, b := range h.backends {
		if b.Available() {
			ld.inflight += b.Inflight()
			ld.weight += float64(b.Weight) * float64(b.Ramp())
		}
	}
	return ld
}

// fits reports whether b may take one more request under the bound: its
// in-flight count after it would be at most c times its effective share of
// all the in-flight requests, this one included, rounded up.
func (h *consistentHash) fits(b *upstream.Backend, ld load) bool {
	if ld.weight <= 0 {
		return true // nothing available is weighed: no share to exceed
	}
	share := float64(b.Weight) * float64(b.Ramp()) / ld.weight
	return float64(b.Inflight()+1) <= math.Ceil(h.bound*float64(ld.inflight+1)*share)
}

// next returns the key's best choice other than its unusable or refused
// first choice: the usable backend with the highest rendezvous score that
// keeps the key (slow start) and fits the bound; failing that, the first
// choice if usable and fitting, or the best usable one that fits; failing
// that, the first choice if usable, or the best usable one. So a key moves
// off its backend only when another can take it, and the bound gives way
// before a request fails.
func (h *consistentHash) next(k upstream.Key, first int, ld load) *upstream.Backend {
	const (
		tierKeep = iota // usable, keeps the key, fits
		tierFit         // usable, fits
		tierAny         // usable
		tiers
	)
	var best [tiers]int
	var score [tiers]float64
	for t := range best {
		best[t] = -1
	}
	for i, b := range h.backends {
		if !b.Usable(k) {
			continue
		}
		// The first choice ranks above every other backend; the
		// others by the weighted rendezvous score: weight / -ln(u), u
		// uniform in (0,1) from a hash of the pair (the logarithm
		// method of Schindelhauer and Schomaker), with which a backend
		// is a key's next choice in proportion to its weight.
		s := math.Inf(1)
		if i != first {
			s = h.weight[i] / -math.Log(unit(mix(k.Hash^h.addrHash[i])))
		}
		fit := h.bound == 0 || h.fits(b, ld)
		if fit && i != first && h.keeps(i, k.Hash) && (best[tierKeep] < 0 || s > score[tierKeep]) {
			best[tierKeep], score[tierKeep] = i, s
		}
		if fit && (best[tierFit] < 0 || s > score[tierFit]) {
			best[tierFit], score[tierFit] = i, s
		}
		if best[tierAny] < 0 || s > score[tierAny] {
			best[tierAny], score[tierAny] = i, s
		}
	}
	for _, i := range best {
		if i >= 0 {
			return h.backends[i]
		}
	}
	return nil
}

// maglevSize returns the length of the lookup table for n backends: a
// prime (so that every skip visits every slot) with at least 100 slots per
// backend, as the Maglev paper advises: 65537 up to 655 backends, then the
// first prime above ten times as many, and so on. The size must not follow
// n more closely than that: a table of another size maps almost every key
// elsewhere, so only a pool that crosses one of these steps (655, 6553...)
// remaps its keys. With 65537 slots shares are exact to within 0.01%, a
// 5th backend joining 4 moves 20.1% of keys (the minimum is 20%), and the
// table takes 256 KiB per upstream.
func maglevSize(n int) int {
	m := 65537
	for m < 100*n {
		m *= 10
	}
	for !isPrime(m) {
		m++
	}
	return m
}

func isPrime(m int) bool {
	if m < 2 {
		return false
	}
	for d := 2; d*d <= m; d++ {
		if m%d == 0 {
			return false
		}
	}
	return true
}

// maglev builds the lookup table (Maglev's population, weighted as
// Envoy's is): each backend has its own permutation of the slots,
// (offset + j·skip) mod m, from two hashes of its address, and the
// backends take turns claiming the next free slot of their permutation, a
// backend of weight w taking a turn in w of every max-weight rounds, until
// the table is full. Backends take their turns in the order of their
// address hashes, so the table does not depend on the configured order.
func maglev(addrHash []uint64, bs []*upstream.Backend) []uint32 {
	n := len(bs)
	m := maglevSize(n)
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case addrHash[a] < addrHash[b]:
			return -1
		case addrHash[a] > addrHash[b]:
			return 1
		}
		return 0
	})
	offset := make([]uint64, n)
	skip := make([]uint64, n)
	next := make([]uint64, n)
	target := make([]uint64, n)
	maxW := uint64(1)
	for i, b := range bs {
		offset[i] = addrHash[i] % uint64(m)
		skip[i] = mix(addrHash[i]^saltSkip)%uint64(m-1) + 1
		maxW = max(maxW, uint64(b.Weight))
	}
	const empty = math.MaxUint32
	table := make([]uint32, m)
	for i := range table {
		table[i] = empty
	}
	filled := 0
	for round := uint64(1); filled < m; round++ {
		for _, i := range order {
			if filled == m {
				break
			}
			// A backend of weight maxW claims a slot every round; one
			// of weight maxW/3 every third round.
			if round*uint64(bs[i].Weight) < target[i] {
				continue
			}
			target[i] += maxW
			c := (offset[i] + skip[i]*next[i]) % uint64(m)
			for table[c] != empty {
				next[i]++
				c = (offset[i] + skip[i]*next[i]) % uint64(m)
			}
			table[c] = uint32(i)
			next[i]++
			filled++
		}
	}
	return table
}

// fastrange maps a uniform 64-bit x onto [0, n) with a multiply and a
// shift (Lemire), without a division.
func fastrange(x uint64, n int) uint64 {
	hi, _ := bits.Mul64(x, uint64(n))
	return hi
}

// unit maps a 64-bit hash to a float64 strictly inside (0,1), so that its
// logarithm is finite and negative. It keeps 52 bits, not 53, so that adding
// the half is exact: with 53, the top value would round up to exactly 1.
func unit(x uint64) float64 {
	return (float64(x>>12) + 0.5) / (1 << 52)
}

// mix is upstream.Mix, under a short name for the many hashes here.
func mix(z uint64) uint64 { return upstream.Mix(z) }
