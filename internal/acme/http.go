package acme

import (
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/caddyserver/certmagic"
	mzacme "github.com/mholt/acmez/v3/acme"

	"github.com/helios-lb/helios/internal/wire"
)

// ChallengePrefix is the path under which HTTP-01 challenges are asked
// (RFC 8555, section 8.3).
const ChallengePrefix = "/.well-known/acme-challenge/"

// HTTP is what the request pipeline asks of the running Managers
// (proxy.ACME): challenge answers and where a name's HTTPS is. It never
// changes once built; a reload builds another.
type HTTP struct {
	managers []*Manager
	// ports maps a managed name to the port of its TLS listener.
	ports map[string]int
	// onDemand: some Manager gets certificates for names it does not
	// list, so any host may have a challenge in shared storage.
	onDemand bool
	solver   *Solver
}

// NewHTTP returns the pipeline's view of managers; ports maps each
// Manager to the port its listener is bound to, and solver answers from
// storage once Install makes h current.
func NewHTTP(managers []*Manager, ports map[*Manager]int, solver *Solver) *HTTP {
	h := &HTTP{managers: managers, ports: make(map[string]int), solver: solver}
	for _, m := range managers {
		for n := range m.names {
			if _, dup := h.ports[n]; !dup {
				h.ports[n] = ports[m]
			}
		}
		h.onDemand = h.onDemand || m.OnDemand()
	}
	return h
}

// Install makes h the one whose Managers the solver asks.
func (h *HTTP) Install() { h.solver.cur.Store(h) }

// Solver is the in-process handler that answers HTTP-01 requests from
// shared storage. The engine keeps a handler's server by the handler's
// pointer, so there is one Solver for the process's life; each reload's
// HTTP installs itself in it.
type Solver struct {
	local wire.Local
	cur   atomic.Pointer[HTTP]
}

// NewSolver returns a Solver with no Managers: it answers 404 until an
// HTTP is installed.
func NewSolver() *Solver {
	s := &Solver{}
	s.local = wire.Local{Name: "acme-http-01", Handler: http.HandlerFunc(s.serve)}
	return s
}

// serve answers a challenge from the current Managers' storage, 404 when
// none has it.
func (s *Solver) serve(w http.ResponseWriter, r *http.Request) {
	if h := s.cur.Load(); h != nil {
		for _, m := range h.managers {
			if m.issuer.HandleHTTPChallenge(w, r) {
				return
			}
		}
	}
	http.NotFound(w, r)
}

// Challenge returns the key authorization that answers an HTTP-01
// request for host and path, when this process presented the challenge
// (certmagic keeps them in memory; the lookup is one map read under a
// short lock, fit for an event loop).
func (h *HTTP) Challenge(host, path []byte) ([]byte, bool) {
	chal, ok := certmagic.GetACMEChallenge(strings.ToLower(string(host)))
	if !ok || chal.Type != mzacme.ChallengeTypeHTTP01 || chal.HTTP01ResourcePath() != string(path) {
		return nil, false
	}
	return []byte(chal.KeyAuthorization), true
}

// Solver returns the handler answering HTTP-01 requests for host from
// shared storage (a challenge another instance presented); it reads
// storage, so the engine runs it off the loop. Nil when no Manager may
// have a challenge for host.
func (h *HTTP) Solver(host []byte) *wire.Local {
	if _, ok := h.ports[lower(host)]; ok || h.onDemand {
		return &h.solver.local
	}
	return nil
}

// HTTPSPort returns the port of the TLS listener whose ACME certificates
// carry host, 0 when none does. It does not allocate.
func (h *HTTP) HTTPSPort(host []byte) int {
	if len(h.ports) == 0 {
		return 0
	}
	var buf [253]byte
	if len(host) > len(buf) {
		return 0
	}
	n := copy(buf[:], host)
	for i := range n {
		if c := buf[i]; 'A' <= c && c <= 'Z' {
			buf[i] = c + 'a' - 'A'
		}
	}
	return h.ports[string(buf[:n])]
}

func lower(b []byte) string { return strings.ToLower(string(b)) }
