// Package redisstore keeps what a fleet of Helios instances shares in a
// Redis server: rate limits (Limiter, a ratelimit.Limiter whose instances
// take tokens from Redis in batches, off the event loops) and ACME
// certificates with their per-name locks (CertStorage, a
// certmagic.Storage).
//
// The client is github.com/redis/go-redis/v9: the Redis project's own Go
// client, with connection pooling, timeouts on every operation and Lua
// scripts (EVALSHA with a fall back to EVAL after a restart empties the
// script cache), which is all this package asks of it.
//
// A Store is one server (address, database, credentials). A Registry
// hands out one Store per server to everything that names it, and closes
// it when the last user releases it.
package redisstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"go.uber.org/zap"

	"github.com/helios-lb/helios/internal/config"
)

// Options say which Redis server a Store talks to. The zero value of each
// field is noted.
type Options struct {
	// Addr is the server's HOST:PORT. Required.
	Addr string
	// TLS connects with TLS, checking the server's certificate against
	// RootCAs for ServerName.
	TLS bool
	// ServerName is the name the certificate must carry. Empty: Addr's
	// host.
	ServerName string
	// RootCAs are the roots trusted for the server. Nil: the system's.
	RootCAs *x509.CertPool
	// DB is the database number. Zero: database 0.
	DB int
	// Username and Password authenticate. Empty: no AUTH (Password alone:
	// AUTH with the password, as for requirepass).
	Username, Password string
	// Name names the store in logs and metrics (a URL without its
	// password). Empty: Addr.
	Name string
	// Timeout bounds each operation (dial, read, write). Zero: 1 s.
	Timeout time.Duration
	// Logger receives the outage lines. Nil: none.
	Logger *zap.Logger
}

// URLOptions are the options of a store URL (validated), with password
// (from a *_password_env key) replacing the URL's when set.
func URLOptions(u config.StoreURL, password string) Options {
	o := Options{Addr: u.Addr, TLS: u.TLS, ServerName: u.Host, DB: u.DB, Username: u.Username, Password: u.Password, Name: u.Redacted()}
	if password != "" {
		o.Password = password
	}
	return o
}

// defaultTimeout is Options.Timeout's default.
const defaultTimeout = time.Second

// probeEvery is how often a Store that is down asks the server whether
// it is back.
const probeEvery = 250 * time.Millisecond

// Store is one Redis server. It knows whether the server can be reached:
// a failed operation of a Limiter marks it down (logged once), and from
// then on a probe asks the server every 250 ms until it answers (logged
// once more). Safe for concurrent use.
type Store struct {
	client  *redis.Client
	name    string
	timeout time.Duration
	log     *zap.Logger

	errors atomic.Uint64
	down   atomic.Bool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// refs counts the users a Registry handed the Store to.
	refs int
	key  Options
	reg  *Registry
}

// Open returns a Store for o. Nothing is dialled before the first
// operation.
func Open(o Options) *Store {
	if o.Timeout <= 0 {
		o.Timeout = defaultTimeout
	}
	if o.Name == "" {
		o.Name = o.Addr
	}
	ro := &redis.Options{
		Addr:         o.Addr,
		DB:           o.DB,
		Username:     o.Username,
		Password:     o.Password,
		DialTimeout:  o.Timeout,
		ReadTimeout:  o.Timeout,
		WriteTimeout: o.Timeout,
		// One retry on a new connection: a pooled connection that a
		// server restart closed fails once, and that is not an outage.
		MaxRetries: 1,
		// Plain Redis: no client-name commands, no Redis Enterprise
		// maintenance notifications.
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		PoolSize:                 8,
	}
	if o.TLS {
		sn := o.ServerName
		if sn == "" {
			sn = hostOf(o.Addr)
		}
		ro.TLSConfig = &tls.Config{ServerName: sn, RootCAs: o.RootCAs, MinVersion: tls.VersionTLS12}
	}
	quietLibrary()
	log := o.Logger
	if log == nil {
		log = zap.NewNop()
	}
	s := &Store{client: redis.NewClient(ro), name: o.Name, timeout: o.Timeout, log: log.With(zap.String("store", o.Name))}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

// quietLibrary turns go-redis's own log off, once: it writes to stderr
// for the whole process (a package-level logger), and a Store reports
// what matters itself, once per outage.
var quietOnce sync.Once

func quietLibrary() { quietOnce.Do(func() { redis.SetLogger(voidLogger{}) }) }

type voidLogger struct{}

func (voidLogger) Printf(context.Context, string, ...any) {}

func hostOf(addr string) string {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			h := addr[:i]
			if len(h) > 1 && h[0] == '[' && h[len(h)-1] == ']' {
				h = h[1 : len(h)-1]
			}
			return h
		}
	}
	return addr
}

// Name returns the store's name for logs and metrics.
func (s *Store) Name() string { return s.name }

// Errors returns how many operations of the store's Limiters failed
// (could not reach the server, or it answered with an error).
func (s *Store) Errors() uint64 { return s.errors.Load() }

// Down reports whether the server is taken as unreachable: the Limiters
// decide alone, each with its share of the limit.
func (s *Store) Down() bool { return s.down.Load() }

// failed records a failed operation: counted, and the first of an outage
// marks the store down (logged) and starts the probe.
func (s *Store) failed(err error) {
	s.errors.Add(1)
	if !s.down.CompareAndSwap(false, true) {
		return
	}
	s.log.Warn("shared store unreachable: rate limits fall back to this instance's share (limit / instances) until it answers; no request fails for it",
		zap.Error(err))
	s.wg.Add(1)
	go s.probe()
}

// probe asks the server every probeEvery until it answers, then marks the
// store up.
func (s *Store) probe() {
	defer s.wg.Done()
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	started := time.Now()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		if err := s.client.Ping(s.ctx).Err(); err != nil {
			s.errors.Add(1)
			continue
		}
		s.down.Store(false)
		s.log.Info("shared store reachable again: rate limits are shared again", zap.Duration("outage", time.Since(started).Round(time.Millisecond)))
		return
	}
}

// Close stops the probe and closes the connections. A Store from a
// Registry is closed by its last Release instead.
func (s *Store) Close() error {
	s.cancel()
	s.wg.Wait()
	return s.client.Close()
}

// Registry hands out one Store per server (address, TLS, database and
// credentials), counting its users. Safe for concurrent use.
type Registry struct {
	mu     sync.Mutex
	stores map[Options]*Store
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry { return &Registry{stores: make(map[Options]*Store)} }

// Get returns the Store of o's server, opening it for its first user.
// Each Get is paired with a Release.
func (r *Registry) Get(o Options) *Store {
	k := o
	k.Logger, k.RootCAs = nil, nil
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stores[k]
	if s == nil {
		s = Open(o)
		s.key, s.reg = k, r
		r.stores[k] = s
	}
	s.refs++
	return s
}

// Release gives back a Store got from a Registry; the last user's
// Release closes it.
func (s *Store) Release() {
	r := s.reg
	if r == nil {
		s.Close()
		return
	}
	r.mu.Lock()
	s.refs--
	last := s.refs == 0
	if last {
		delete(r.stores, s.key)
	}
	r.mu.Unlock()
	if last {
		s.Close()
	}
}

// Stores returns the Stores in use.
func (r *Registry) Stores() []*Store {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*Store, 0, len(r.stores))
	for _, s := range r.stores {
		out = append(out, s)
	}
	return out
}

// errClosed is the error of an operation on a closed Limiter.
var errClosed = errors.New("redisstore: closed")
