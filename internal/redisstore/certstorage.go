package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/redis/go-redis/v9"
)

// CertStorage is certmagic's Storage in a Store: the ACME account,
// certificates, keys and challenge tokens of every instance using the
// same Redis, with a lock per name so that one instance orders a
// certificate and the others load it.
//
// Layout, under helios:acme: (every key of the storage is a path such as
// certificates/ISSUER/NAME/NAME.crt):
//
//   - v:KEY, a hash: the value (v) and when it was stored (m, unix ns);
//   - index, a sorted set of every KEY (all scored 0, so ordered by
//     bytes): List and the directories of Stat, Exists and Delete read
//     ranges of it;
//   - lock:NAME, a random token while an instance holds the lock; it
//     expires after lockTTL unless its holder refreshes it, so a lock of
//     an instance that died frees itself.
//
// While Redis cannot be reached its operations fail: certmagic retries
// issuance and renewal with its backoff, and the certificates already
// loaded keep being served.
type CertStorage struct {
	store  *Store
	prefix string
	// release gives the Store back when the storage closes (once).
	release     func()
	releaseOnce sync.Once

	// ttl is how long a lock outlives a holder that stopped refreshing
	// it: lockTTL (tests shorten it).
	ttl time.Duration

	mu    sync.Mutex
	locks map[string]*heldLock
}

// heldLock is a lock this process holds: its token, and the refresher's
// stop.
type heldLock struct {
	token string
	stop  chan struct{}
	done  chan struct{}
}

// Lock timing, with why.
const (
	// lockTTL is how long a lock outlives a holder that stopped
	// refreshing it (died, or lost Redis).
	lockTTL = 10 * time.Second
	// lockPoll is how often a waiter tries again.
	lockPoll = 200 * time.Millisecond
)

// CertStorage returns the ACME storage in s. Its Close calls release
// (nil: nothing).
func (s *Store) CertStorage(release func()) *CertStorage {
	return &CertStorage{store: s, prefix: "helios:acme:", release: release, ttl: lockTTL, locks: make(map[string]*heldLock)}
}

var _ certmagic.Storage = (*CertStorage)(nil)

func (c *CertStorage) valueKey(key string) string { return c.prefix + "v:" + key }
func (c *CertStorage) indexKey() string           { return c.prefix + "index" }
func (c *CertStorage) lockKey(name string) string { return c.prefix + "lock:" + name }

// notExist wraps fs.ErrNotExist, as certmagic expects of a missing key.
func notExist(key string) error { return fmt.Errorf("%s: %w", key, fs.ErrNotExist) }

// Store saves value at key (certmagic.Storage).
func (c *CertStorage) Store(ctx context.Context, key string, value []byte) error {
	_, err := c.store.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, c.valueKey(key), "v", value, "m", time.Now().UnixNano())
		p.ZAdd(ctx, c.indexKey(), redis.Z{Member: key})
		return nil
	})
	return err
}

// Load returns the value at key; an error wrapping fs.ErrNotExist when
// there is none (certmagic.Storage).
func (c *CertStorage) Load(ctx context.Context, key string) ([]byte, error) {
	b, err := c.store.client.HGet(ctx, c.valueKey(key), "v").Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, notExist(key)
	}
	return b, err
}

// under returns the keys below the directory dir ("" for every key), at
// most limit of them (0: all).
func (c *CertStorage) under(ctx context.Context, dir string, limit int64) ([]string, error) {
	min, max := "-", "+"
	if dir != "" {
		dir = strings.TrimSuffix(dir, "/")
		// [dir/ .. (dir0: '0' is the byte after '/'.
		min, max = "["+dir+"/", "("+dir+"0"
	}
	by := &redis.ZRangeBy{Min: min, Max: max}
	if limit > 0 {
		by.Count = limit
	}
	return c.store.client.ZRangeByLex(ctx, c.indexKey(), by).Result()
}

// Delete removes key and, as for a directory, every key below it
// (certmagic.Storage). Deleting what does not exist is not an error.
func (c *CertStorage) Delete(ctx context.Context, key string) error {
	keys, err := c.under(ctx, key, 0)
	if err != nil {
		return err
	}
	keys = append(keys, key)
	_, err = c.store.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		members := make([]any, len(keys))
		for i, k := range keys {
			p.Del(ctx, c.valueKey(k))
			members[i] = k
		}
		p.ZRem(ctx, c.indexKey(), members...)
		return nil
	})
	return err
}

// Exists reports whether key holds a value or keys below it
// (certmagic.Storage). An error answers false.
func (c *CertStorage) Exists(ctx context.Context, key string) bool {
	n, err := c.store.client.Exists(ctx, c.valueKey(key)).Result()
	if err == nil && n > 0 {
		return true
	}
	below, err := c.under(ctx, key, 1)
	return err == nil && len(below) > 0
}

// List returns the keys below path: its direct children (values and
// directories), or with recursive every key and directory below it, as
// certmagic's file storage does (certmagic.Storage). A path with nothing
// below it is an error wrapping fs.ErrNotExist.
func (c *CertStorage) List(ctx context.Context, path string, recursive bool) ([]string, error) {
	keys, err := c.under(ctx, path, 0)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, notExist(path)
	}
	base := strings.TrimSuffix(path, "/")
	if base != "" {
		base += "/"
	}
	seen := make(map[string]bool)
	var out []string
	add := func(k string) {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	for _, k := range keys {
		rest := strings.TrimPrefix(k, base)
		parts := strings.Split(rest, "/")
		if !recursive {
			add(base + parts[0])
			continue
		}
		for i := range parts {
			add(base + strings.Join(parts[:i+1], "/"))
		}
	}
	return out, nil
}

// Stat describes key: a value (its size and when it was stored) or a
// directory (certmagic.Storage).
func (c *CertStorage) Stat(ctx context.Context, key string) (certmagic.KeyInfo, error) {
	p := c.store.client.Pipeline()
	m := p.HGet(ctx, c.valueKey(key), "m")
	size := p.HStrLen(ctx, c.valueKey(key), "v")
	if _, err := p.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return certmagic.KeyInfo{}, err
	}
	if ns, err := m.Result(); err == nil {
		n, _ := strconv.ParseInt(ns, 10, 64)
		return certmagic.KeyInfo{Key: key, Modified: time.Unix(0, n), Size: size.Val(), IsTerminal: true}, nil
	}
	below, err := c.under(ctx, key, 1)
	if err != nil {
		return certmagic.KeyInfo{}, err
	}
	if len(below) == 0 {
		return certmagic.KeyInfo{}, notExist(key)
	}
	return certmagic.KeyInfo{Key: key, IsTerminal: false}, nil
}

// extendScript extends a lock still held by the token ARGV[1] to ARGV[2]
// ms; 0 when the lock is someone else's (or gone).
var extendScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`)

// unlockScript deletes a lock still held by the token ARGV[1].
var unlockScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`)

// Lock waits until this process holds the lock called name, or ctx ends
// (certmagic.Locker). The lock is refreshed while held.
func (c *CertStorage) Lock(ctx context.Context, name string) error {
	var tok [16]byte
	rand.Read(tok[:])
	token := hex.EncodeToString(tok[:])
	for {
		ok, err := c.store.client.SetNX(ctx, c.lockKey(name), token, c.ttl).Result()
		if err != nil {
			return fmt.Errorf("taking lock %s: %w", name, err)
		}
		if ok {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(lockPoll):
		}
	}
	h := &heldLock{token: token, stop: make(chan struct{}), done: make(chan struct{})}
	c.mu.Lock()
	if old := c.locks[name]; old != nil {
		close(old.stop) // a lock this process lost and took again
	}
	c.locks[name] = h
	c.mu.Unlock()
	go c.refresh(name, h)
	return nil
}

// refresh extends a held lock every third of its time to live until it
// is unlocked.
func (c *CertStorage) refresh(name string, h *heldLock) {
	defer close(h.done)
	t := time.NewTicker(c.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.store.timeout)
		extendScript.Run(ctx, c.store.client, []string{c.lockKey(name)}, h.token, c.ttl.Milliseconds())
		cancel()
	}
}

// Unlock releases the lock called name if this process holds it
// (certmagic.Locker).
func (c *CertStorage) Unlock(ctx context.Context, name string) error {
	c.mu.Lock()
	h := c.locks[name]
	delete(c.locks, name)
	c.mu.Unlock()
	if h == nil {
		return fmt.Errorf("unlocking %s: not held by this process", name)
	}
	close(h.stop)
	<-h.done
	return unlockScript.Run(ctx, c.store.client, []string{c.lockKey(name)}, h.token).Err()
}

// Close stops refreshing the locks still held (they expire) and gives
// the Store back; closing again does nothing more.
func (c *CertStorage) Close() error {
	c.mu.Lock()
	for name, h := range c.locks {
		close(h.stop)
		<-h.done
		delete(c.locks, name)
	}
	c.mu.Unlock()
	if c.release != nil {
		c.releaseOnce.Do(c.release)
	}
	return nil
}

// String names the storage in certmagic's logs.
func (c *CertStorage) String() string { return "redis " + c.store.Name() }
