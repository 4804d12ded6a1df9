package balancer

import "github.com/helios-lb/helios/internal/upstream"

// maxCycle bounds the length of a weighted round robin schedule (before the
// one-slot minimum below is applied). Weights whose sum, after division by
// their greatest common divisor, exceeds it are scaled down in proportion to
// fit, each backend keeping at least one slot. Shares are then exact to
// within one slot in maxCycle (about 0.006%) instead of exactly, and the
// schedule holds at most maxCycle+n entries: 64 KiB plus 4 bytes per backend.
const maxCycle = 1 << 14

// maxFollow bounds how many entries of the schedule a pick walks when the
// scheduled backend is unusable. Past it, the pick chooses by weight among
// the backends themselves (see weighted.pickByWeight), so a pick costs at
// most maxFollow+2n checks however long the schedule is.
const maxFollow = 64

// weighted is nginx's smooth weighted round robin made lock-free.
//
// nginx keeps a running "current weight" per backend and updates all of them
// under a lock on every pick. The sequence it produces depends only on the
// weights and repeats after sum(weights) picks, so New computes one full
// cycle and Pick indexes it with an atomic counter: the same interleaving
// (weights 5,1,1 give a,a,b,a,c,a,a, never five a's in a row) and exact
// ratios over whole cycles, with one atomic add per pick.
type weighted struct {
	backends []*upstream.Backend
	total    int64 // sum of weights, for slow start
	// cycle holds one period of the smooth schedule as positions in
	// backends. Every backend appears in it at least once.
	cycle []int32
	// turn is the position in cycle of the next pick.
	turn counter
	// spare is the position in cycle of the next turn to hand out in
	// place of one whose backend is unusable (see Pick).
	spare counter
}

func newWeighted(bs []*upstream.Backend) *weighted {
	return &weighted{backends: bs, total: sumWeights(bs), cycle: smoothCycle(cycleWeights(bs))}
}

// Pick returns the scheduled backend or, when it is unusable, the next
// usable entry of a second walk through the schedule; nil when no backend is
// usable.
//
// The second walk, with its own cursor, is what keeps the shares right while
// a backend is out. Taking the entry right after the unusable one instead
// would hand all of its turns to whichever backends happen to follow it in
// the schedule (with weights 2,3,3 and the first out, 5:3 instead of 1:1);
// the second cursor sweeps the whole schedule, so the freed turns go to the
// usable backends in proportion to their weights, and interleaved. A
// backend in slow start that gives its turn up (see slowstart.go) hands it
// to the second walk too, which then skips backends in slow start.
func (w *weighted) Pick(k upstream.Key) *upstream.Backend {
	t := w.turn.next()
	if b := w.backends[w.cycle[t%uint64(len(w.cycle))]]; b.Usable(k) && keeps(b, int64(b.Weight), w.total, t) {
		return b
	}
	if b := w.pickSpare(filter{k: k, skip: -1, warm: true}); b != nil {
		return b
	}
	// Every usable backend is in slow start (or none is usable).
	return w.pickSpare(filter{k: k, skip: -1})
}

// pickSpare returns the first entry f lets through from the spare cursor
// on, walking at most maxFollow entries and consuming those it walks past,
// so that (without concurrent pickers) every entry of the second walk is
// handed out exactly once. Concurrent misses may walk overlapping entries;
// that only blurs the shares of freed turns a little.
func (w *weighted) pickSpare(f filter) *upstream.Backend {
	n := len(w.cycle)
	start := w.spare.next()
	pos := int(start % uint64(n))
	follow := min(n, maxFollow)
	for m := range follow {
		if i := w.cycle[pos]; f.ok(int(i), w.backends[i]) {
			b := w.backends[i]
			if m > 0 {
				w.spare.n.Add(uint64(m))
			}
			return b
		}
		pos++
		if pos == n {
			pos = 0
		}
	}
	if follow == n {
		// The whole cycle was checked, and it names every backend.
		return nil
	}
	w.spare.n.Add(uint64(follow - 1))
	return w.pickByWeight(f, start)
}

// pickByWeight is the last resort of a long schedule in which only rare
// (light) backends are usable: it draws a backend f lets through with
// probability proportional to its weight, using a hash of seed as the draw
// so that it needs no random source. It reads every backend twice; if
// usability changes between the passes it returns the last usable backend
// of the second, or nil when there is none.
func (w *weighted) pickByWeight(f filter, seed uint64) *upstream.Backend {
	var total uint64
	for i, b := range w.backends {
		if f.ok(i, b) {
			total += uint64(b.Weight)
		}
	}
	if total == 0 {
		return nil
	}
	r := mix(seed) % total
	var last *upstream.Backend
	for i, b := range w.backends {
		if !f.ok(i, b) {
			continue
		}
		if r < uint64(b.Weight) {
			return b
		}
		r -= uint64(b.Weight)
		last = b
	}
	return last
}

// cycleWeights returns the backends' weights divided by their greatest common
// divisor (so 10,20 schedules like 1,2, with a cycle of 3 rather than 30) and,
// if their sum still exceeds maxCycle, scaled down to fit.
func cycleWeights(bs []*upstream.Backend) []int {
	w := make([]int, len(bs))
	for i, b := range bs {
		w[i] = b.Weight
	}
	reduce(w)
	total := 0
	for _, x := range w {
		total += x
	}
	if total <= maxCycle {
		return w
	}
	for i, x := range w {
		// MaxWeight*maxCycle is far below the int64 limit.
		w[i] = max(1, x*maxCycle/total)
	}
	reduce(w)
	return w
}

// reduce divides w by the greatest common divisor of its elements.
func reduce(w []int) {
	g := 0
	for _, x := range w {
		g = gcd(g, x)
	}
	if g <= 1 {
		return
	}
	for i := range w {
		w[i] /= g
	}
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// smoothCycle runs nginx's smooth weighted round robin for one full period
// of sum(w) picks and returns the positions picked. In each step every
// current weight grows by its weight, the largest (first on ties) is picked
// and lowered by the total; after sum(w) steps every current weight is back
// at zero, so the sequence repeats exactly. It costs O(sum(w) × len(w)) once,
// at construction; equal weights, the common case, take the direct path.
func smoothCycle(w []int) []int32 {
	total := 0
	equal := true
	for _, x := range w {
		total += x
		equal = equal && x == w[0]
	}
	cycle := make([]int32, 0, total)
	if equal {
		// After reduce, equal weights are all 1 and the smooth
		// sequence is simply 0..n-1.
		for i := range w {
			cycle = append(cycle, int32(i))
		}
		return cycle
	}
	cur := make([]int, len(w))
	for range total {
		best := 0
		for i, x := range w {
			cur[i] += x
			if cur[i] > cur[best] {
				best = i
			}
		}
		cur[best] -= total
		cycle = append(cycle, int32(best))
	}
	return cycle
}
