// Package server turns a configuration into a running object graph and
// manages its life: Start, Reload (an atomic swap that keeps unchanged
// listeners and backend state) and Shutdown (drain).
package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/helios-lb/helios/internal/acme"
	"github.com/helios-lb/helios/internal/admin"
	"github.com/helios-lb/helios/internal/bodybuf"
	"github.com/helios-lb/helios/internal/clock"
	"github.com/helios-lb/helios/internal/config"
	"github.com/helios-lb/helios/internal/engine"
	"github.com/helios-lb/helios/internal/h2"
	"github.com/helios-lb/helios/internal/listener"
	"github.com/helios-lb/helios/internal/metrics"
	"github.com/helios-lb/helios/internal/netpoll"
	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/redisstore"
	"github.com/helios-lb/helios/internal/shadow"
	"github.com/helios-lb/helios/internal/tlsconf"
	"github.com/helios-lb/helios/internal/tracing/otlp"
)

// Options are the parts of a Server that do not come from the config
// file. The zero value of each field is noted.
type Options struct {
	// Logger receives the process log. Nil: no logging.
	Logger *zap.Logger
	// Recorder receives a record of every request after the metrics do
	// (the access log). Nil: nothing more is recorded.
	Recorder proxy.Recorder
	// Clock is used for health, ejection and breaker timing. Nil: real.
	Clock clock.Clock
	// Registry is where metrics are registered and what the admin
	// listener's /metrics serves. Nil: a new registry.
	Registry *prometheus.Registry
	// ConfigPath is the file the admin reload and ReloadFile read. Empty:
	// reloading from a file is refused.
	ConfigPath string
	// Rlimit reads and raises the descriptor limit. Zero: the process's
	// own (listener.SystemRlimit).
	Rlimit listener.Rlimit
	// Sockets hands over listening sockets that exist already (binary
	// upgrade, socket activation). Nil: every listener binds its address.
	Sockets Sockets
	// OnReload is told the outcome of every ReloadFile (SIGHUP or the
	// admin API): the configuration now served, or the error. Nil:
	// nobody is told.
	OnReload func(cfg *config.Config, err error)
	// ACME is what the listeners' ACME managers take from outside the
	// config (how often they check for renewals). Zero: the defaults;
	// the log is Logger's.
	ACME acme.Env
}

// Server is a running Helios: listeners, pipeline, upstreams.
type Server struct {
	log        *zap.Logger
	recorder   proxy.Recorder
	clock      clock.Clock
	pipeline   *proxy.Pipeline
	registry   *prometheus.Registry
	metrics    *metrics.Metrics
	configPath string
	rlimit     listener.Rlimit
	fds        listener.DescriptorPlan // caps client connections below the descriptor limit
	// fdBudget is the descriptors every listener's clients and every
	// backend connection share, as the plan sets it.
	fdBudget   listener.Descriptors
	acceptErrs *listener.AcceptErrors // failed accepts, from every engine
	reqBufs    *requestBuffers        // request buffering's budgets, shared by the listeners
	nofile     atomic.Uint64          // the soft descriptor limit, for the accept warning
	sockets    Sockets
	onReload   func(*config.Config, error)
	draining   atomic.Bool
	cur        atomic.Pointer[generation] // the generation being served
	acmeEnv    acme.Env
	acmeSolver *acme.Solver // answers HTTP-01 from shared storage, for the process's life
	// stickySecret keys the sticky cookies of upstreams without a
	// sticky.secret, for the process's life (kept across reloads).
	stickySecret []byte
	// shadows sends the copies of mirrored routes (made on first use).
	shadows *shadow.Pool
	// respBufs is what response buffering may hold across the process
	// (every route's answers share it); reloads change its caps.
	respBufs *bodybuf.Budget
	// spans exports sampled requests' spans (tracing.go); spanSettings
	// are its exporter's (nil: tracing off); exportErrAt rate-limits the
	// log of failed exports.
	spans        otlp.Switch
	spanSettings *otlp.Settings
	exportErrAt  atomic.Int64
	stores       *redisstore.Registry // the Redis stores of shared rate limits and ACME storage, by server

	mu        sync.Mutex                      // serialises Start, Reload and Shutdown
	engines   map[netpoll.Kind]*engine.Engine // the event loops, by poller, made when a listener needs them (written under engMu too)
	engMu     sync.Mutex                      // guards engines for retireBackend, which runs without mu
	gen       *generation
	listeners map[string]*boundListener // by address
	admin     *admin.Server
	started   bool
	stopped   bool
}

// boundListener is a socket pool and the event loops serving its
// connections.
type boundListener struct {
	cfg  config.Listener
	pool *listener.Pool
	loop *engine.LoopListener // nil before start
	// tls serves the listener's handshakes (tls.TLSConfig(), with
	// BeginHandshake, Record and EndHandshake around each); nil without a
	// tls block. It lives as long as the listener: reloads change what it
	// serves in place.
	tls *tlsconf.Provider
	// h2 counts what the listener's HTTP/2 connections saw (abuse
	// limits tripped, streams refused...), for /metrics; it lives as long
	// as the listener.
	h2 *h2.Stats
	// reqBufs are the request-buffering budgets every listener shares.
	reqBufs *requestBuffers
	// acme gets and renews the certificates of a listener with
	// tls.acme; nil otherwise. A reload that changes the acme block
	// replaces it.
	acme *acme.Manager
	// stats counts what the listener's client policy refused (PROXY
	// headers, max_connections_per_ip); it lives as long as the listener.
	stats *engine.ListenerStats
	// httpsPort is where redirect_https sends the listener's clients
	// (setHTTPSPorts).
	httpsPort int
}

// stop stops accepting and closes the listener's sockets.
func (bl *boundListener) stop() {
	if bl.loop != nil {
		bl.loop.Stop()
	}
	bl.pool.Close()
	if bl.tls != nil {
		bl.tls.Close()
	}
	if bl.acme != nil {
		bl.acme.Stop()
	}
}

// drain waits for the listener's connections to finish (closing idle
// ones), up to ctx.
func (bl *boundListener) drain(ctx context.Context) error {
	var err error
	if bl.loop != nil {
		err = bl.loop.Shutdown(ctx)
	}
	return err
}

// New builds the object graph for cfg and binds its listeners. Nothing is
// served until Start. cfg must have passed validation.
func New(cfg *config.Config, o Options) (*Server, error) {
	s := &Server{
		log:        o.Logger,
		clock:      o.Clock,
		registry:   o.Registry,
		configPath: o.ConfigPath,
		rlimit:     o.Rlimit,
		sockets:    o.Sockets,
		onReload:   o.OnReload,
		listeners:  make(map[string]*boundListener),
		reqBufs:    newRequestBuffers(cfg.RequestBuffers),
		acmeEnv:    o.ACME,
		acmeSolver: acme.NewSolver(),
		stores:     redisstore.NewRegistry(),
	}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	if s.clock == nil {
		s.clock = clock.Real{}
	}
	if s.rlimit.Get == nil {
		s.rlimit = listener.SystemRlimit()
	}
	s.acceptErrs = s.newAcceptErrors()
	s.stickySecret = newStickySecret()
	s.respBufs = bodybuf.NewBudget(cfg.ResponseBuffers.MemoryBytes, cfg.ResponseBuffers.FileBytes)
	s.fds = s.planDescriptors(cfg)
	s.fds.Budget(&s.fdBudget)
	if s.registry == nil {
		s.registry = prometheus.NewRegistry()
	}
	m, err := metrics.New(s.registry, s)
	if err != nil {
		return nil, fmt.Errorf("registering metrics: %w", err)
	}
	s.metrics = m
	if err := s.registry.Register(metrics.NewTracing(s.spans.Stats)); err != nil {
		return nil, fmt.Errorf("registering metrics: %w", err)
	}
	s.recorder = proxy.Recorders{m, &s.spans}
	if o.Recorder != nil {
		s.recorder = proxy.Recorders{m, &s.spans, o.Recorder}
	}
	g, err := s.build(cfg, nil)
	if err != nil {
		return nil, err
	}
	s.gen = g
	s.pipeline = proxy.New(g.graph)
	for _, lc := range cfg.Listeners {
		bl, err := s.bind(cfg, lc)
		if err != nil {
			s.closeListeners()
			g.close()
			return nil, err
		}
		s.listeners[lc.Address] = bl
	}
	s.installACME(g, s.listeners)
	s.setHTTPSPorts(cfg, s.listeners)
	if cfg.Admin.Enabled() {
		ln, err := s.adminListener(cfg.Admin.Address)
		if err != nil {
			s.closeListeners()
			g.close()
			return nil, err
		}
		a, err := admin.Listen(cfg.Admin.Address, adminSource{s}, admin.Options{
			Token: cfg.Admin.Token, Pprof: cfg.Admin.Pprof, Gatherer: s.registry, Listener: ln,
			ErrorLog: func(msg string, err error) { s.log.Warn(msg, zap.Error(err)) },
		})
		if err != nil {
			s.closeListeners()
			g.close()
			return nil, fmt.Errorf("admin listener: binding %s: %w", cfg.Admin.Address, err)
		}
		s.admin = a
	}
	if err := s.applyTracing(cfg.Tracing); err != nil {
		s.closeListeners()
		g.close()
		if s.admin != nil {
			s.admin.Shutdown(context.Background())
		}
		return nil, err
	}
	s.cur.Store(g)
	return s, nil
}

func engineOptions(lc config.Listener) engine.Options {
	h2Write := lc.WriteTimeout.D()
	if h2Write <= 0 {
		h2Write = -1 // no limit, as for HTTP/1.1
	}
	return engine.Options{
		ReadHeaderTimeout: lc.ReadHeaderTimeout.D(),
		IdleTimeout:       lc.IdleTimeout.D(),
		ReadTimeout:       lc.ReadTimeout.D(),
		WriteTimeout:      lc.WriteTimeout.D(),
		MaxHeaderBytes:    lc.MaxHeaderBytes,
		MaxHeaderCount:    lc.MaxHeaderCount,
		MaxMethodBytes:    lc.MaxMethodBytes,

		UnderscoresInHeaders: lc.UnderscoresInHeaders,
		OutputBufferBytes:    lc.OutputBufferBytes,
		H2C:                  lc.H2C,
		HTTP2: h2.Config{
			MaxHeaderListSize: uint32(lc.MaxHeaderBytes),
			Limits:            h2.Limits{WriteTimeout: h2Write},
		},
	}
}

// engineOptions are the engine's options for the listener configured as
// lc: engineOptions(lc) and the listener's TLS provider.
func (bl *boundListener) engineOptions(lc config.Listener) engine.Options {
	o := engineOptions(lc)
	if bl.tls != nil { // a nil *Provider in the interface would not be nil
		o.TLS = bl.tls
	}
	o.HTTP2.Stats = bl.h2
	o.RequestBuffers = bl.reqBufs.budget
	o.RequestBufferConnBytes = bl.reqBufs.connBytes.Load()
	clientPolicy(&o, lc, bl.stats, bl.httpsPort)
	return o
}

// requestBuffers are the budgets of request buffering that every
// listener's connections draw on: the process's, in memory and in
// temporary files, and each connection's cap. A reload changes them in
// place; what is held stays held.
type requestBuffers struct {
	budget    *bodybuf.Budget
	connBytes atomic.Int64
	cfg       config.RequestBuffers
}

func newRequestBuffers(rb config.RequestBuffers) *requestBuffers {
	r := &requestBuffers{budget: bodybuf.NewBudget(rb.MemoryBytes, rb.FileBytes)}
	r.set(rb)
	return r
}

// set applies rb; it returns what was set before (for a reload that
// fails to put back).
func (r *requestBuffers) set(rb config.RequestBuffers) config.RequestBuffers {
	prev := r.cfg
	r.cfg = rb
	r.budget.SetCaps(rb.MemoryBytes, rb.FileBytes)
	r.connBytes.Store(rb.ConnectionBytes)
	return prev
}

// RequestBuffers returns what request buffering holds across the
// process, in memory and in temporary files.
func (s *Server) RequestBuffers() bodybuf.BudgetStats { return s.reqBufs.budget.Stats() }

func (s *Server) bind(cfg *config.Config, lc config.Listener) (*boundListener, error) {
	var (
		tp *tlsconf.Provider
		am *acme.Manager
	)
	if lc.TLS != nil {
		var err error
		if lc.TLS.ACME != nil {
			if am, err = s.newACME(cfg, lc); err != nil {
				return nil, err
			}
		}
		if tp, err = s.newTLSProvider(cfg, lc, am); err != nil {
			if am != nil {
				am.Stop()
			}
			return nil, err
		}
	}
	pool, err := s.openPool(lc, listener.Config{
		Name:           lc.Name,
		Address:        lc.Address,
		Sockets:        lc.Sockets,
		Backlog:        lc.Backlog,
		MaxConnections: s.fds.Cap(lc.MaxConnections),
	})
	if err != nil {
		if tp != nil {
			tp.Close()
		}
		if am != nil {
			am.Stop()
		}
		return nil, err
	}
	pool.SetDescriptors(&s.fdBudget)
	return &boundListener{cfg: lc, pool: pool, tls: tp, h2: new(h2.Stats), acme: am, reqBufs: s.reqBufs, stats: new(engine.ListenerStats), httpsPort: 443}, nil
}

// Start begins accepting on every listener. An error (the event loops
// could not be made, or could not take a socket) leaves nothing serving.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return nil
	}
	for _, bl := range s.listeners {
		if err := s.startListener(bl); err != nil {
			for _, started := range s.listeners {
				if started.loop != nil {
					started.loop.Stop()
				}
			}
			return fmt.Errorf("listener %s: %w", bl.cfg.Name, err)
		}
	}
	for _, bl := range s.listeners {
		if bl.acme != nil {
			if err := s.startACME(bl, s.listeners); err != nil {
				return err
			}
		}
	}
	s.started = true
	s.gen.commit(nil)
	if s.admin != nil {
		s.admin.Start()
		s.log.Debug("admin listening", zap.String("address", s.admin.Addr().String()))
		s.warnInsecureAdmin(s.gen.cfg.Admin)
	}
	// Debug: the daemon opens the log with one line that says what is
	// served where (Summary); what each listener's connections may hold
	// in memory is in helios validate's output and /api/v1/listeners
	// (issue 18 item 7: a newcomer read these lines as alarms).
	for _, bl := range s.listeners {
		m := ListenerMemory(bl.cfg, s.fds.Cap(bl.cfg.MaxConnections))
		s.log.Debug("listening", zap.String("listener", bl.cfg.Name), zap.String("address", bl.pool.Addr().String()),
			zap.Int("sockets", bl.pool.Sockets()), zap.String("poller", string(pollerOf(bl.cfg))),
			zap.Int("memory_worst_kib", m.WorstKiB), zap.Int("memory_slow_reader_kib", m.SlowReaderKiB),
			zap.Int("connection_cap", m.Connections), zap.Int("memory_worst_total_mib", m.WorstTotalMiB))
	}
	return nil
}

// Addr returns the bound address of the named listener (with the real
// port when the config asked for port 0), or nil.
func (s *Server) Addr(name string) net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, bl := range s.listeners {
		if bl.cfg.Name == name {
			return bl.pool.Addr()
		}
	}
	return nil
}

// Pipeline returns the request pipeline (for the admin API and tests).
func (s *Server) Pipeline() *proxy.Pipeline { return s.pipeline }

// Config returns the configuration being served.
func (s *Server) Config() *config.Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen.cfg
}

// Reload replaces the running configuration with cfg, which must have
// passed validation. Everything that can fail (building upstreams,
// binding new listeners) happens before the swap, so an error leaves the
// old configuration serving untouched. Listeners whose address, sockets
// and backlog did not change keep their sockets; backends present before
// and after keep their health and breaker state; requests in flight
// finish on the graph they started with.
func (s *Server) Reload(cfg *config.Config) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return errors.New("server is shutting down")
	}
	old := s.gen
	g, err := s.build(cfg, old)
	if err != nil {
		return err
	}
	// Load the certificates of the listeners that stay before anything
	// starts: a bad one refuses the reload.
	tlsr, err := s.prepareTLS(cfg)
	if err != nil {
		g.close()
		return err
	}
	oldFDs := s.fds
	s.fds = s.planDescriptors(cfg)
	// The listeners started below take the new budgets; a reload that
	// fails puts the old ones back.
	oldBufs := s.reqBufs.set(cfg.RequestBuffers)
	// Bind what is new before touching anything.
	keep := make(map[string]*boundListener)
	fresh := make(map[string]*boundListener)
	for _, lc := range cfg.Listeners {
		if bl := s.findListener(lc.Address); bl != nil {
			keep[lc.Address] = bl
			continue
		}
		bl, err := s.bind(cfg, lc)
		if err == nil && s.started {
			// Serving a new listener before the swap is harmless (its
			// first requests see the old graph); failing to, after it,
			// would leave half a reload.
			if err = s.startListener(bl); err != nil {
				bl.stop()
				err = fmt.Errorf("listener %s: %w", lc.Name, err)
			}
		}
		if err != nil {
			for _, f := range fresh {
				f.stop()
			}
			tlsr.abort()
			g.close()
			s.fds = oldFDs
			s.reqBufs.set(oldBufs)
			return err
		}
		fresh[lc.Address] = bl
	}

	// Commit: swap the graph, hand health over, then adjust listeners.
	s.fds.Budget(&s.fdBudget)
	startACME := tlsr.commit()
	next := make(map[string]*boundListener, len(keep)+len(fresh))
	for a, bl := range keep {
		next[a] = bl
	}
	for a, bl := range fresh {
		next[a] = bl
		if bl.acme != nil {
			startACME = append(startACME, bl)
		}
	}
	s.installACME(g, next)
	s.respBufs.SetCaps(cfg.ResponseBuffers.MemoryBytes, cfg.ResponseBuffers.FileBytes)
	if err := s.applyTracing(cfg.Tracing); err != nil {
		// Validated already: only a URL the exporter refuses gets here.
		s.log.Error("tracing: the exporter could not be made; spans go where they went", zap.Error(err))
	}
	s.pipeline.Swap(g.graph)
	s.cur.Store(g)
	s.gen = g
	if s.started {
		g.commit(old)
	} else {
		g.adopt(old) // Start commits g
	}
	s.applyAdmin(old.cfg.Admin, cfg.Admin)
	var retired []*boundListener
	for _, bl := range s.listeners {
		kept := false
		for _, k := range keep {
			kept = kept || k == bl
		}
		if !kept {
			retired = append(retired, bl)
		}
	}
	for _, lc := range cfg.Listeners {
		if bl, ok := keep[lc.Address]; ok {
			s.updateListener(bl, lc)
		}
	}
	s.listeners = next
	s.setHTTPSPorts(cfg, next)
	for _, bl := range fresh {
		if s.started {
			s.log.Info("listening", zap.String("listener", bl.cfg.Name), zap.String("address", bl.pool.Addr().String()))
		}
	}
	if s.started {
		for _, bl := range startACME {
			if err := s.startACME(bl, next); err != nil {
				s.log.Error("ACME could not start; the listener serves what it has", zap.String("listener", bl.cfg.Name), zap.Error(err))
			}
		}
	}
	// Retired listeners stop accepting now and drain in the background;
	// the old generation closes once requests started on it are done.
	go s.retire(old, retired)
	s.log.Info("configuration reloaded", zap.String("file", cfg.File), zap.String("serving", g.describe()))
	return nil
}

// startListener begins accepting on the event loops of the engine for the
// listener's poller, starting that engine on first use.
func (s *Server) startListener(bl *boundListener) error {
	kind := pollerOf(bl.cfg)
	eng := s.engines[kind]
	if eng == nil {
		var err error
		if eng, err = engine.NewEngine(s.pipeline, engine.EngineOptions{Poller: kind, Descriptors: &s.fdBudget}); err != nil {
			return err
		}
		eng.SetErrorLog(func(msg string, err error) { s.log.Warn(msg, zap.Error(err)) })
		if on, _, err := eng.BatchReads(); err != nil {
			msg := "io_uring is not available: the event loops read each ready socket with its own read(2) (poller: native works as poller: epoll)"
			if on {
				msg = "io_uring is available to some event loops only (the locked-memory limit?): the others read each ready socket with its own read(2)"
			}
			s.log.Warn(msg, zap.Error(err))
		}
		eng.SetAcceptErrorHook(s.acceptErrs.Observe)
		s.engMu.Lock()
		if s.engines == nil {
			s.engines = make(map[netpoll.Kind]*engine.Engine)
		}
		s.engines[kind] = eng
		s.engMu.Unlock()
	}
	fds, err := bl.pool.FDs()
	if err != nil {
		return err
	}
	ll, err := eng.Attach(bl.cfg.Name, fds, bl.engineOptions(bl.cfg), bl.pool.Admit, bl.pool.Release)
	if err != nil {
		return err
	}
	bl.loop = ll
	return nil
}

// retireBackend makes every engine drain its connections to backend addr
// of upstream name (engine.Engine.RetireBackend): the backend left the
// upstream, or an operator drains it. It does not wait, and takes no lock
// that a reload holds, so discovery's goroutines may call it.
func (s *Server) retireBackend(name, addr string) {
	s.engMu.Lock()
	defer s.engMu.Unlock()
	for _, eng := range s.engines {
		eng.RetireBackend(name, addr)
	}
}

// pollerOf returns the poller a listener's engine setting asks for.
func pollerOf(lc config.Listener) netpoll.Kind {
	switch lc.Poller {
	case config.PollerPortable:
		return netpoll.KindPortable
	case config.PollerEpoll:
		return netpoll.KindEpoll
	}
	return netpoll.Native()
}

// findListener returns the running listener for a configured address:
// the same address as configured, or the address a port-0 listener was
// given.
func (s *Server) findListener(addr string) *boundListener {
	if bl, ok := s.listeners[addr]; ok {
		return bl
	}
	for _, bl := range s.listeners {
		if bl.pool.Addr().String() == addr {
			return bl
		}
	}
	return nil
}

// updateListener applies a reload to a listener that keeps its sockets.
// Closing a SO_REUSEPORT socket resets the connections queued on it, so a
// kept listener never loses a socket: the backlog is changed in place, and
// a different socket count waits for a restart (and says so).
func (s *Server) updateListener(bl *boundListener, lc config.Listener) {
	if lc.Poller != bl.cfg.Poller {
		s.log.Warn("listeners[].poller changes need a restart; keeping the running poller",
			zap.String("listener", lc.Name), zap.String("running", bl.cfg.Poller), zap.String("configured", lc.Poller))
		lc.Poller = bl.cfg.Poller
	}
	if bl.loop != nil {
		bl.loop.SetOptions(bl.engineOptions(lc))
	}
	bl.pool.SetMaxConnections(s.fds.Cap(lc.MaxConnections))
	if lc.Backlog != bl.cfg.Backlog {
		if err := bl.pool.SetBacklog(lc.Backlog); err != nil {
			s.log.Warn("could not change the backlog", zap.String("listener", lc.Name), zap.Error(err))
			lc.Backlog = bl.cfg.Backlog
		}
	}
	if lc.Sockets != bl.cfg.Sockets {
		s.log.Warn("listeners[].sockets changes need a restart; keeping the running sockets",
			zap.String("listener", lc.Name), zap.Int("running", bl.pool.Sockets()), zap.Int("configured", lc.Sockets))
		lc.Sockets = bl.cfg.Sockets
	}
	bl.cfg = lc
}

// retire drains listeners that a reload dropped, then closes the old
// generation. Requests may still be running on the old graph for a while
// (a slow backend): its transports keep working for them and only stop
// pooling once closed, so the wait is bounded rather than exact.
func (s *Server) retire(old *generation, listeners []*boundListener) {
	for _, bl := range listeners {
		bl.stop()
	}
	ctx, cancel := context.WithTimeout(context.Background(), retireGrace)
	defer cancel()
	for _, bl := range listeners {
		if err := bl.drain(ctx); err != nil {
			s.log.Warn("retired listener did not drain in time", zap.String("listener", bl.cfg.Name), zap.Error(err))
		}
	}
	// Give requests that picked up the old graph just before the swap
	// time to finish before its pools stop taking connections back.
	time.Sleep(oldGraphLinger)
	old.close()
}

const (
	retireGrace    = 30 * time.Second
	oldGraphLinger = 5 * time.Second
)

// Shutdown drains: it stops accepting, lets requests in flight finish and
// closes keep-alive connections after their current response. It returns
// nil when everything drained, or ctx's error after closing what was
// left.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return nil
	}
	s.stopped = true
	s.draining.Store(true)
	listeners := make([]*boundListener, 0, len(s.listeners))
	for _, bl := range s.listeners {
		listeners = append(listeners, bl)
	}
	g := s.gen
	s.mu.Unlock()

	for _, bl := range listeners {
		bl.stop()
	}
	var (
		wg   sync.WaitGroup
		errs = make([]error, len(listeners))
	)
	for i, bl := range listeners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = bl.drain(ctx)
		}()
	}
	wg.Wait()
	for _, eng := range s.engines {
		eng.Close()
	}
	s.closeTracing()
	if s.shadows != nil {
		s.shadows.Close()
	}
	g.close()
	if s.admin != nil {
		actx, cancel := context.WithTimeout(context.Background(), time.Second)
		s.admin.Shutdown(actx)
		cancel()
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("drain cut short: %w", err)
	}
	return nil
}

func (s *Server) closeListeners() {
	for _, bl := range s.listeners {
		bl.stop()
	}
}

// applyAdmin takes what a reload can change of the admin listener: the
// token. A new address or pprof setting needs a restart, and says so.
func (s *Server) applyAdmin(old, cur config.Admin) {
	if s.admin == nil {
		if cur.Enabled() {
			s.log.Warn("admin listener was off at start; turning it on needs a restart")
		}
		return
	}
	s.admin.SetToken(cur.Token)
	s.warnInsecureAdmin(cur)
	if old.Address != cur.Address || old.Pprof != cur.Pprof {
		s.log.Warn("admin.address and admin.pprof changes need a restart; the admin listener keeps its old settings",
			zap.String("address", s.admin.Addr().String()))
	}
}

// warnInsecureAdmin says, at every start and reload, that the admin API
// takes no token because admin.insecure_no_token asked for it.
func (s *Server) warnInsecureAdmin(a config.Admin) {
	if a.InsecureNoToken && a.Token == "" {
		s.log.Warn("admin API has no token (admin.insecure_no_token: true): whoever reaches it can reload Helios and read its metrics and profiles",
			zap.String("address", s.admin.Addr().String()))
	}
}

// AdminAddr returns the admin listener's address, or nil when it is off.
func (s *Server) AdminAddr() net.Addr {
	if s.admin == nil {
		return nil
	}
	return s.admin.Addr()
}

// Registry returns the registry the metrics are registered on.
func (s *Server) Registry() *prometheus.Registry { return s.registry }
