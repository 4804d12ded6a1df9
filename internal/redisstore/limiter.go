package redisstore

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/helios-lb/helios/internal/ratelimit"
)

// A Limiter shares a rate limit through a Store. Redis holds each key's
// GCRA state (the theoretical arrival time, as ratelimit.Local keeps it
// in memory), on Redis's clock; an instance does not ask it for each
// request, but takes tokens in small batches and spends them locally:
//
//   - A request spends a token the instance holds: decided at once, with
//     no I/O (the event loop never waits for Redis).
//   - When the tokens run low, a batch is asked for off the loop: one
//     script call for every key that needs tokens, granting at most what
//     GCRA allows now. Tokens left unused for a while go back.
//   - A key the instance holds no tokens for may go ahead by up to
//     Burst+1 requests (at most 64) while its tokens are asked for; what
//     it took ahead is repaid from the next grants, refusing meanwhile;
//     the key stays known while it owes, or while the store says it has
//     no token yet, so that going quiet earns no second head start.
//   - While the store is down, or slow to grant (a batch waiting longer
//     than Slow), requests are decided by a ratelimit.Local with this
//     instance's share: Requests per Per x Instances, Burst / Instances.
//     No request fails because of the store.
//
// Accuracy: the instances together never get more tokens than GCRA
// grants (Requests per Per, Burst more at once); each may hold a batch
// (Requests x 20 ms, at most Burst+1) unused, and be up to its head
// start ahead, so over a window W the requests allowed are within
// rate x W + Burst + instances x (batch + head start) above, and the
// unused batches below.
type Limiter struct {
	store     *Store
	prefix    string
	instances int
	slow      int64
	fallback  *ratelimit.Local
	seed      maphash.Seed
	parts     [shards]part
	perPart   int

	// queue holds the keys waiting for tokens; spare is the slice the
	// last flush emptied, reused so that queueing does not allocate.
	qmu          sync.Mutex
	queue, spare []*entry
	wake         chan struct{}

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	now    func() int64
}

// LimiterOptions configure a Limiter. The zero value of each field is
// noted.
type LimiterOptions struct {
	// Name makes the keys in Redis the limit's own: helios:rl:NAME:KEY.
	// Every instance sharing the limit uses the same Name (the route's).
	Name string
	// Instances is how many instances share the limit: the fallback
	// share is the limit divided by it. Zero: 1.
	Instances int
	// MaxKeys bounds the keys held in memory. Zero:
	// ratelimit.DefaultMaxKeys.
	MaxKeys int
	// Slow is how long a key may wait for tokens before its requests are
	// decided by the fallback share. Zero: 100 ms.
	Slow time.Duration
}

// shards splits a Limiter's table, each part under its own lock.
const shards = 64

type part struct {
	mu   sync.Mutex
	keys map[string]*entry
}

// entry is one key's tokens. Guarded by its part's lock.
type entry struct {
	key string
	lim ratelimit.Limit
	// tokens are granted and not spent; negative: spent ahead.
	tokens int64
	// queued: waiting for the batch goroutine since asked.
	queued bool
	asked  int64
	// notBefore: the store ran short at its last answer, and has no
	// token before then (unix ns); 0: it granted all that was asked (or
	// was not asked yet), and the key may go ahead of its tokens.
	notBefore int64
	// remaining is what the store said was left after its last grant.
	remaining int64
	// used is when a request last came; granted, the last grant.
	used, granted int64
}

// Tunables, with why.
const (
	// batchWindow sizes a batch: the tokens of 20 ms of the rate, so an
	// instance holds little that others cannot use.
	batchWindow = 20 * time.Millisecond
	// maxAhead bounds the head start of a key without tokens.
	maxAhead = 64
	// idleReturn: tokens unused this long go back to the store.
	idleReturn = time.Second
	// sweepEvery is how often idle keys are looked for.
	sweepEvery = 250 * time.Millisecond
	// maxBatch bounds the keys of one script call.
	maxBatch = 256
	// defaultSlow is LimiterOptions.Slow's default.
	defaultSlow = 100 * time.Millisecond
)

// Limiter returns a Limiter sharing limits through s; Close stops it.
func (s *Store) Limiter(o LimiterOptions) *Limiter {
	if o.Instances < 1 {
		o.Instances = 1
	}
	if o.MaxKeys <= 0 {
		o.MaxKeys = ratelimit.DefaultMaxKeys
	}
	if o.Slow <= 0 {
		o.Slow = defaultSlow
	}
	l := &Limiter{
		store:     s,
		prefix:    "helios:rl:" + o.Name + ":",
		instances: o.Instances,
		slow:      int64(o.Slow),
		fallback:  ratelimit.New(o.MaxKeys),
		seed:      maphash.MakeSeed(),
		perPart:   max(1, (o.MaxKeys+shards-1)/shards),
		wake:      make(chan struct{}, 1),
		done:      make(chan struct{}),
		now:       func() int64 { return time.Now().UnixNano() },
	}
	for i := range l.parts {
		l.parts[i].keys = make(map[string]*entry)
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	go l.run()
	return l
}

// Store returns the Limiter's store.
func (l *Limiter) Store() *Store { return l.store }

// share is this instance's part of lim while the store cannot help.
func (l *Limiter) share(lim ratelimit.Limit) ratelimit.Limit {
	return ratelimit.Limit{Requests: lim.Requests, Per: lim.Per * time.Duration(l.instances), Burst: lim.Burst / l.instances}
}

// batch is how many tokens a key asks for at once.
func batch(lim ratelimit.Limit) int64 {
	n := int64(math.Ceil(float64(lim.Requests) * float64(batchWindow) / float64(lim.Per)))
	return min(max(n, 1), int64(lim.Burst)+1)
}

// interval is the time one request costs under lim.
func interval(lim ratelimit.Limit) int64 { return int64(lim.Per) / int64(lim.Requests) }

// ahead is how many requests a key may go ahead of its tokens.
func ahead(lim ratelimit.Limit) int64 { return min(int64(lim.Burst)+1, maxAhead) }

// Allow decides a request (ratelimit.Limiter): from the tokens the
// instance holds, never waiting for the store. It allocates only for a
// key it does not hold.
func (l *Limiter) Allow(key []byte, lim ratelimit.Limit, now int64) ratelimit.Decision {
	p := &l.parts[maphash.Bytes(l.seed, key)%shards]
	p.mu.Lock()
	e := p.keys[string(key)]
	if e == nil {
		if len(p.keys) >= l.perPart {
			l.evict(p)
		}
		e = &entry{key: string(key)}
		p.keys[e.key] = e
	}
	e.lim, e.used = lim, now
	var d ratelimit.Decision
	switch {
	case e.tokens > 0:
		e.tokens--
		d = ratelimit.Decision{Allowed: true, Remaining: int(e.tokens + max(e.remaining, 0))}
	case l.store.Down() || e.queued && now-e.asked > l.slow:
		// The store cannot say: this instance's share decides.
		p.mu.Unlock()
		return l.fallback.Allow(key, l.share(lim), now)
	case e.tokens > -ahead(lim) && e.notBefore == 0:
		e.tokens--
		d = ratelimit.Decision{Allowed: true}
	default:
		wait := max(e.notBefore-now, interval(lim))
		d = ratelimit.Decision{RetryAfter: time.Duration(wait), Reset: time.Duration(wait)}
	}
	if e.tokens <= batch(lim)/2 && !e.queued && e.notBefore <= now {
		e.queued, e.asked = true, now
		l.qmu.Lock()
		l.queue = append(l.queue, e)
		l.qmu.Unlock()
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
	p.mu.Unlock()
	return d
}

// evict makes room in p: a key with no tokens and nothing asked first,
// else the least recently used of a sample (its tokens are lost to the
// fleet until they would have been spent).
func (l *Limiter) evict(p *part) {
	const sample = 8
	var victim *entry
	n := 0
	for _, e := range p.keys {
		if e.tokens == 0 && !e.queued {
			victim = e
			break
		}
		if !e.queued && (victim == nil || e.used < victim.used) {
			victim = e
		}
		if n++; n == sample && victim != nil {
			break
		}
	}
	if victim != nil {
		delete(p.keys, victim.key)
	}
}

// run asks for batches as Allow queues keys, and every sweepEvery gives
// idle keys' tokens back.
func (l *Limiter) run() {
	defer close(l.done)
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-l.ctx.Done():
			// On a context of its own: the Limiter's is cancelled.
			ctx, cancel := context.WithTimeout(context.Background(), l.store.timeout)
			l.giveBack(ctx, l.now(), true)
			cancel()
			return
		case <-l.wake:
			l.flush()
		case <-t.C:
			l.flush()
			l.giveBack(l.ctx, l.now(), false)
		}
	}
}

// ask is one key of a script call: want tokens (negative: give back).
type ask struct {
	e    *entry
	key  string
	want int64
	lim  ratelimit.Limit
}

// flush asks the store for the tokens of the queued keys.
func (l *Limiter) flush() {
	l.qmu.Lock()
	q := l.queue
	l.queue, l.spare = l.spare[:0], nil
	l.qmu.Unlock()
	if len(q) == 0 {
		return
	}
	defer func() {
		clear(q)
		l.qmu.Lock()
		l.spare = q[:0]
		l.qmu.Unlock()
	}()
	asks := make([]ask, 0, len(q))
	for _, e := range q {
		p := &l.parts[maphash.String(l.seed, e.key)%shards]
		p.mu.Lock()
		b := batch(e.lim)
		want := b - e.tokens // repays what went ahead
		if e.tokens > b/2 {
			want = 0
		}
		lim := e.lim
		if want <= 0 || l.store.Down() {
			e.queued = false
			p.mu.Unlock()
			continue
		}
		p.mu.Unlock()
		asks = append(asks, ask{e: e, key: l.prefix + e.key, want: want, lim: lim})
	}
	l.call(l.ctx, asks, func(a ask, granted, remaining, wait int64, err error) {
		p := &l.parts[maphash.String(l.seed, a.e.key)%shards]
		now := l.now()
		p.mu.Lock()
		a.e.queued = false
		if err == nil {
			a.e.tokens += granted
			a.e.remaining = remaining
			if granted > 0 {
				a.e.granted = now
			}
			a.e.notBefore = 0
			if granted < a.want {
				a.e.notBefore = now + wait
			}
		}
		p.mu.Unlock()
	})
}

// giveBack returns the tokens of keys unused for idleReturn (all of them
// when all), and forgets keys that hold nothing and have been idle.
func (l *Limiter) giveBack(ctx context.Context, now int64, all bool) {
	var asks []ask
	for i := range l.parts {
		p := &l.parts[i]
		p.mu.Lock()
		for k, e := range p.keys {
			if e.queued || !all && now-e.used < int64(idleReturn) {
				continue
			}
			if e.tokens > 0 {
				asks = append(asks, ask{e: e, key: l.prefix + k, want: -e.tokens, lim: e.lim})
				e.tokens = 0
			}
			// Forgotten, a key would get a head start again: keep one
			// the store said was short until its next token, and one that
			// went ahead until what it owes would have grown back.
			if !all && (e.notBefore > now || e.tokens < 0 && now-e.used < -e.tokens*interval(e.lim)) {
				continue
			}
			delete(p.keys, k)
		}
		p.mu.Unlock()
	}
	if len(asks) > 0 && !l.store.Down() {
		l.call(ctx, asks, func(ask, int64, int64, int64, error) {})
	}
}

// leaseScript takes or gives back tokens of several keys under one limit,
// on Redis's clock (so that instances' clocks need not agree), in
// microseconds. KEYS are the keys; ARGV[1] is the interval T, ARGV[2] the
// burst tolerance tau (T x Burst), ARGV[2+i] what key i wants (negative:
// gives back). Each key answers {granted, remaining, wait}: wait is how
// long until its next token.
var leaseScript = redis.NewScript(`
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local T = tonumber(ARGV[1])
local tau = tonumber(ARGV[2])
local out = {}
for i, key in ipairs(KEYS) do
  local want = tonumber(ARGV[i + 2])
  local tat = tonumber(redis.call('GET', key) or 0)
  if tat < now then tat = now end
  local granted = 0
  if want > 0 then
    local n = math.floor((now + tau - tat) / T) + 1
    if n < 0 then n = 0 end
    granted = math.min(want, n)
    tat = tat + granted * T
  elseif want < 0 then
    tat = math.max(now, tat + want * T)
  end
  local remaining = math.floor((now + tau - tat) / T) + 1
  if remaining < 0 then remaining = 0 end
  local wait = tat - tau - now
  if wait < 0 then wait = 0 end
  redis.call('SET', key, string.format('%.0f', tat), 'PX', math.floor((tat - now) / 1000) + 1000)
  out[i] = {granted, remaining, math.floor(wait)}
end
return out
`)

// call runs leaseScript for asks, grouped by limit and maxBatch keys at
// a time, and hands each key's answer to done. A failure marks the store
// down.
func (l *Limiter) call(ctx context.Context, asks []ask, done func(a ask, granted, remaining, wait int64, err error)) {
	for len(asks) > 0 {
		n := 1
		for n < len(asks) && n < maxBatch && asks[n].lim == asks[0].lim {
			n++
		}
		group := asks[:n]
		asks = asks[n:]
		lim := group[0].lim
		T := float64(lim.Per) / float64(lim.Requests) / 1e3
		keys := make([]string, len(group))
		args := make([]any, 2, 2+len(group))
		args[0] = strconv.FormatFloat(T, 'f', -1, 64)
		args[1] = strconv.FormatFloat(T*float64(lim.Burst), 'f', -1, 64)
		for i, a := range group {
			keys[i] = a.key
			args = append(args, a.want)
		}
		res, err := leaseScript.Run(ctx, l.store.client, keys, args...).Slice()
		if err == nil && len(res) != len(group) {
			err = fmt.Errorf("the lease script answered %d keys of %d", len(res), len(group))
		}
		if err != nil && ctx.Err() == nil {
			l.store.failed(err)
		}
		for i, a := range group {
			if err != nil {
				done(a, 0, 0, 0, err)
				continue
			}
			g, r, w := triple(res[i])
			done(a, g, r, w*1e3, nil)
		}
	}
}

// triple reads a key's {granted, remaining, wait} answer.
func triple(v any) (a, b, c int64) {
	xs, _ := v.([]any)
	get := func(i int) int64 {
		if i < len(xs) {
			n, _ := xs[i].(int64)
			return n
		}
		return 0
	}
	return get(0), get(1), get(2)
}

// Close stops the Limiter, giving back the tokens it holds (bounded by
// the store's timeout). The Store stays open.
func (l *Limiter) Close() {
	l.cancel()
	<-l.done
}
