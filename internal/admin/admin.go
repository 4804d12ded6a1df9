// Package admin serves Helios's admin listener: Prometheus metrics,
// liveness and readiness, the upstreams view, reload, and (when enabled)
// pprof. It is a plain net/http server: nothing here is on the request
// path.
//
//	GET  /healthz           200 while the process runs
//	GET  /readyz            200 when ready to take traffic, 503 with the reason otherwise
//	GET  /metrics           Prometheus metrics
//	GET  /api/v1/upstreams  every backend's state, as JSON
//	GET  /api/v1/listeners  every listener: address, connections, memory, as JSON
//	POST /api/v1/reload     re-read the config file; 200, or 422 with the problems
//	     /debug/pprof/...   when pprof is enabled
//
// and the runtime control of one backend ({backend} is its address as
// /api/v1/upstreams shows it, percent-encoded where a client needs it),
// each answering with the backend as /api/v1/upstreams describes it, or
// 404 when the upstream has no such backend:
//
//	GET    /api/v1/upstreams/{upstream}/backends/{backend}
//	POST   /api/v1/upstreams/{upstream}/backends/{backend}/drain    no new requests; those in flight finish
//	POST   /api/v1/upstreams/{upstream}/backends/{backend}/disable  the same, and no health checks
//	POST   /api/v1/upstreams/{upstream}/backends/{backend}/enable   back in rotation
//	PUT    /api/v1/upstreams/{upstream}/backends/{backend}/weight   {"weight": N}, 1-1000
//	DELETE /api/v1/upstreams/{upstream}/backends/{backend}/weight   back to the configured weight
//
// With a token set, everything but /healthz and /readyz needs
// "Authorization: Bearer TOKEN" (compared in constant time); probes stay
// open because they reveal nothing.
package admin

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Source is the running proxy as the admin API sees it.
type Source interface {
	// Ready reports whether Helios should get traffic, and why not.
	Ready() (bool, string)
	// Upstreams describes every upstream and backend.
	Upstreams() []Upstream
	// Listeners describes every listener.
	Listeners() []Listener
	// Reload re-reads and applies the config file. On a config problem it
	// returns the problems as lines.
	Reload() (problems []string, err error)
	// ChangeBackend applies c to the backend at addr of the named
	// upstream (the zero c changes nothing) and describes the backend
	// after. An unknown upstream or backend is an error wrapping
	// ErrNotFound.
	ChangeBackend(upstreamName, addr string, c BackendChange) (Backend, error)
}

// ErrNotFound is wrapped by Source.ChangeBackend's error for an upstream
// or backend that does not exist.
var ErrNotFound = errors.New("not found")

// BackendChange is an operator's change to one backend. The zero value
// changes nothing.
type BackendChange struct {
	// State is StateDrain, StateDisable, StateEnable, or "" for no change.
	State string
	// Weight, when more than 0, replaces the backend's configured (or
	// discovered) weight; ResetWeight goes back to it.
	Weight      int
	ResetWeight bool
}

// The BackendChange.State values.
const (
	StateDrain   = "drain"
	StateDisable = "disable"
	StateEnable  = "enable"
)

// maxWeight is the largest weight a backend may be given (as in the
// configuration).
const maxWeight = 1000

// Upstream is one upstream in the /api/v1/upstreams answer.
type Upstream struct {
	Name     string    `json:"name"`
	Strategy string    `json:"strategy"`
	Checked  bool      `json:"health_checked"`
	Backends []Backend `json:"backends"`
	// Discovery describes the upstream's discovery sources; absent when
	// it has none.
	Discovery []DiscoverySource `json:"discovery,omitempty"`
}

// DiscoverySource is one discovery source of an upstream (a dns or srv
// backend, a backends file).
type DiscoverySource struct {
	Source string `json:"source"`
	// Backends is how many backends its last good answer gave.
	Backends int `json:"backends"`
	// Answered says a lookup has worked since the source was set up.
	Answered   bool       `json:"answered"`
	LastLookup *time.Time `json:"last_lookup,omitempty"`
	LastChange *time.Time `json:"last_change,omitempty"`
	// LastError is the last lookup's error; absent when it worked.
	LastError string `json:"last_error,omitempty"`
	// Errors counts failed lookups.
	Errors uint64 `json:"errors"`
}

// Backend is one backend in the /api/v1/upstreams answer.
type Backend struct {
	Address string `json:"address"`
	// Source is where the backend came from: config, or a discovery
	// source as DiscoverySource names it.
	Source string `json:"source"`
	// Weight is the weight in force; ConfiguredWeight is the configured
	// (or discovered) one while the admin API overrides it, absent
	// otherwise.
	Weight           int `json:"weight"`
	ConfiguredWeight int `json:"configured_weight,omitempty"`
	// AdminState is enabled, draining or disabled.
	AdminState     string     `json:"admin_state"`
	Available      bool       `json:"available"`
	Health         string     `json:"health"` // up, down, or unchecked
	LastCheck      *time.Time `json:"last_check,omitempty"`
	LastCheckError string     `json:"last_check_error,omitempty"`
	Ejected        bool       `json:"ejected"`
	EjectedUntil   *time.Time `json:"ejected_until,omitempty"`
	Ejections      int        `json:"ejections"`
	Breaker        string     `json:"breaker,omitempty"` // closed, half-open, open; absent without a breaker
	Inflight       int64      `json:"inflight"`
	Requests       uint64     `json:"requests"`
	Failures       uint64     `json:"failures"`
}

// Listener is one listener in the /api/v1/listeners answer.
type Listener struct {
	Name    string `json:"name"`
	Address string `json:"address"` // as bound: the real port when the config said 0
	TLS     bool   `json:"tls"`
	HTTP2   bool   `json:"http2"` // HTTP/2 offered through ALPN (TLS listeners)
	H2C     bool   `json:"h2c"`
	Sockets int    `json:"sockets"`
	// MaxConnections is the configured cap, ConnectionCap the one in
	// force: lower when the descriptor limit cannot hold MaxConnections.
	MaxConnections  int   `json:"max_connections"`
	ConnectionCap   int   `json:"connection_cap"`
	OpenConnections int64 `json:"open_connections"`
	// Memory is what the listener's connections may hold, at
	// ConnectionCap of them.
	Memory Memory `json:"memory"`
}

// Memory is what a listener's client connections may hold in memory
// (README, "Memory per connection"): per connection in the worst case and
// while streaming to a slow reader, and that times a number of
// connections. The kernel's socket buffers come on top.
type Memory struct {
	WorstKiB            int `json:"worst_kib"`
	SlowReaderKiB       int `json:"slow_reader_kib"`
	Connections         int `json:"connections"`
	WorstTotalMiB       int `json:"worst_total_mib"`
	SlowReadersTotalMiB int `json:"slow_readers_total_mib"`
}

// Options configure the admin server.
type Options struct {
	// Token, when not empty, is required as a bearer token.
	Token string
	// Pprof serves /debug/pprof/.
	Pprof bool
	// Gatherer is what /metrics serves; nil serves no /metrics.
	Gatherer prometheus.Gatherer
	// ErrorLog receives errors writing answers; nil drops them.
	ErrorLog func(msg string, err error)
	// Listener, when set, is served instead of binding the address: a
	// socket handed over by a binary upgrade or by systemd.
	Listener net.Listener
}

// Server is the admin listener.
type Server struct {
	src   Source
	token atomic.Pointer[string]
	ln    net.Listener
	http  *http.Server
	log   func(string, error)
}

// Listen binds addr and prepares the handlers; nothing is served before
// Start.
func Listen(addr string, src Source, o Options) (*Server, error) {
	ln := o.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", addr); err != nil {
			return nil, err
		}
	}
	s := &Server{src: src, ln: ln, log: o.ErrorLog}
	s.SetToken(o.Token)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", s.readyz)
	if o.Gatherer != nil {
		mux.Handle("GET /metrics", s.auth(promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{
			// Exemplars (a sampled request's trace id on its duration
			// bucket) exist only in OpenMetrics, served to a scraper whose
			// Accept asks for it; others get the text format.
			EnableOpenMetrics: true,
		})))
	}
	mux.Handle("GET /api/v1/upstreams", s.auth(http.HandlerFunc(s.upstreams)))
	mux.Handle("GET /api/v1/listeners", s.auth(http.HandlerFunc(s.listeners)))
	mux.Handle("/api/v1/reload", s.auth(http.HandlerFunc(s.reload)))
	const backend = "/api/v1/upstreams/{upstream}/backends/{backend}"
	for pattern, c := range map[string]BackendChange{
		"GET " + backend:                {},
		"POST " + backend + "/drain":    {State: StateDrain},
		"POST " + backend + "/disable":  {State: StateDisable},
		"POST " + backend + "/enable":   {State: StateEnable},
		"DELETE " + backend + "/weight": {ResetWeight: true},
	} {
		mux.Handle(pattern, s.auth(s.changeBackend(func(*http.Request) (BackendChange, error) { return c, nil })))
	}
	mux.Handle("PUT "+backend+"/weight", s.auth(s.changeBackend(weightChange)))
	if o.Pprof {
		mux.Handle("/debug/pprof/", s.auth(http.HandlerFunc(pprof.Index)))
		mux.Handle("/debug/pprof/cmdline", s.auth(http.HandlerFunc(pprof.Cmdline)))
		mux.Handle("/debug/pprof/profile", s.auth(http.HandlerFunc(pprof.Profile)))
		mux.Handle("/debug/pprof/symbol", s.auth(http.HandlerFunc(pprof.Symbol)))
		mux.Handle("/debug/pprof/trace", s.auth(http.HandlerFunc(pprof.Trace)))
	}
	s.http = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       60 * time.Second,
	}
	return s, nil
}

// Addr returns the bound address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// SetToken replaces the bearer token ("" turns authentication off).
func (s *Server) SetToken(token string) { s.token.Store(&token) }

// Start serves in the background.
func (s *Server) Start() {
	go func() {
		if err := s.http.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) && s.log != nil {
			s.log("admin listener stopped", err)
		}
	}()
}

// Shutdown stops the admin listener, letting running calls finish.
func (s *Server) Shutdown(ctx context.Context) error { return s.http.Shutdown(ctx) }

// auth requires the bearer token when one is set.
func (s *Server) auth(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		want := *s.token.Load()
		if want != "" {
			got, ok := bearer(r.Header.Get("Authorization"))
			if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="helios admin"`)
				s.json(w, http.StatusUnauthorized, map[string]string{"error": "a valid bearer token is required"})
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// bearer returns the credentials of an Authorization header with the
// Bearer scheme. The scheme is case-insensitive and followed by one or
// more spaces (RFC 9110, section 11.1 and 11.4).
func bearer(h string) (string, bool) {
	scheme, cred, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimLeft(cred, " "), true
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if ok, why := s.src.Ready(); !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte("not ready: " + why + "\n"))
		return
	}
	w.Write([]byte("ready\n"))
}

func (s *Server) upstreams(w http.ResponseWriter, _ *http.Request) {
	s.json(w, http.StatusOK, map[string]any{"upstreams": s.src.Upstreams()})
}

func (s *Server) listeners(w http.ResponseWriter, _ *http.Request) {
	s.json(w, http.StatusOK, map[string]any{"listeners": s.src.Listeners()})
}

func (s *Server) reload(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		s.json(w, http.StatusMethodNotAllowed, map[string]string{"error": "use POST"})
		return
	}
	problems, err := s.src.Reload()
	if err != nil {
		s.json(w, http.StatusUnprocessableEntity, map[string]any{
			"error":    "reload refused; the running config stays: " + err.Error(),
			"problems": problems,
		})
		return
	}
	s.json(w, http.StatusOK, map[string]string{"status": "reloaded"})
}

// changeBackend serves the runtime control of one backend: change reads
// the change the request asks for (an error is the client's: 400).
func (s *Server) changeBackend(change func(*http.Request) (BackendChange, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, err := change(r)
		if err != nil {
			s.json(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		b, err := s.src.ChangeBackend(r.PathValue("upstream"), r.PathValue("backend"), c)
		if err != nil {
			status := http.StatusInternalServerError
			if errors.Is(err, ErrNotFound) {
				status = http.StatusNotFound
			}
			s.json(w, status, map[string]string{"error": err.Error()})
			return
		}
		s.json(w, http.StatusOK, b)
	}
}

// weightChange reads a PUT .../weight body: {"weight": N}, N 1-1000.
func weightChange(r *http.Request) (BackendChange, error) {
	var body struct {
		Weight *int `json:"weight"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 4096))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		return BackendChange{}, fmt.Errorf(`the body is not {"weight": N}: %w`, err)
	}
	if body.Weight == nil || *body.Weight < 1 || *body.Weight > maxWeight {
		return BackendChange{}, fmt.Errorf(`the body needs {"weight": N} with N 1-%d (DELETE goes back to the configured weight; drain takes a backend out)`, maxWeight)
	}
	return BackendChange{Weight: *body.Weight}, nil
}

func (s *Server) json(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil && s.log != nil {
		s.log("writing admin answer", err)
	}
}
