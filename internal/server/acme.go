package server

import (
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"slices"
	"strings"

	"github.com/helios-lb/helios/internal/acme"
	"github.com/helios-lb/helios/internal/config"
	"github.com/helios-lb/helios/internal/redisstore"
	"github.com/helios-lb/helios/internal/tlsconf"
)

// newACME makes the ACME manager of a listener whose tls block has acme;
// it issues nothing before startACME.
func (s *Server) newACME(cfg *config.Config, lc config.Listener) (*acme.Manager, error) {
	a := lc.TLS.ACME
	names, _ := cfg.ACMENames(&lc)
	o := acme.Options{
		Listener:   lc.Name,
		CA:         a.CA,
		Email:      a.Email,
		Domains:    names,
		Challenges: a.Challenges,
		KeyType:    a.KeyType,
		StorageDir: a.Storage,
		Default:    len(lc.TLS.Pairs()) == 0,
	}
	if a.CARoot != "" {
		pool, _, err := tlsconf.LoadCAs(a.CARoot)
		if err != nil {
			return nil, fmt.Errorf("listener %s: tls.acme.ca_root: %w", lc.Name, err)
		}
		o.CARoots = pool
	}
	if e := a.EAB; e != nil {
		o.EAB = &acme.EAB{KeyID: e.KeyID, MACKey: e.MACKey}
	}
	if od := a.OnDemand; od != nil {
		o.OnDemand = &acme.OnDemand{Ask: od.Ask, Burst: od.Burst, Interval: od.Interval.D()}
	}
	if config.IsStoreURL(a.Storage) {
		// A fleet's shared storage: the Store goes back to the registry
		// when the manager stops.
		u, err := config.ParseStoreURL(a.Storage)
		if err != nil {
			return nil, fmt.Errorf("listener %s: tls.acme.storage: %w", lc.Name, err)
		}
		so := redisstore.URLOptions(u, a.StoragePassword)
		so.Logger = s.log
		st := s.stores.Get(so)
		o.Storage = st.CertStorage(st.Release)
		o.StorageDir = ""
	} else if err := os.MkdirAll(a.Storage, 0o700); err != nil {
		// Fail at start, not at the first issuance, when the directory
		// cannot be made.
		return nil, fmt.Errorf("listener %s: tls.acme.storage: %w", lc.Name, err)
	}
	env := s.acmeEnv
	if env.Logger == nil {
		env.Logger = s.log
	}
	m, err := acme.New(o, env)
	if err != nil {
		if c, ok := o.Storage.(io.Closer); ok {
			c.Close()
		}
		return nil, fmt.Errorf("listener %s: %w", lc.Name, err)
	}
	return m, nil
}

// sameACME reports whether a reload leaves a listener's acme settings as
// they are, so its manager (and what it has loaded) stays.
func sameACME(oldCfg, newCfg *config.Config, old, cur config.Listener) bool {
	if old.TLS == nil || cur.TLS == nil || old.TLS.ACME == nil || cur.TLS.ACME == nil {
		return false
	}
	on, _ := oldCfg.ACMENames(&old)
	nn, _ := newCfg.ACMENames(&cur)
	return reflect.DeepEqual(old.TLS.ACME, cur.TLS.ACME) && slices.Equal(on, nn) &&
		len(old.TLS.Pairs()) == len(cur.TLS.Pairs()) &&
		// certmagic's solvers were pointed at the HTTP-01 listener's
		// address: a new one needs a new manager.
		addressOf(oldCfg, old.TLS.ACME.HTTPListener) == addressOf(newCfg, cur.TLS.ACME.HTTPListener)
}

// addressOf returns the address of the listener called name, "" when
// there is none.
func addressOf(cfg *config.Config, name string) string {
	for _, l := range cfg.Listeners {
		if name != "" && l.Name == name {
			return l.Address
		}
	}
	return ""
}

// startACME tells a listener's manager where Helios answers its
// challenges and starts it: certificates load from storage, and those
// missing or due are got in the background. ls are the listeners being
// served, by address.
func (s *Server) startACME(bl *boundListener, ls map[string]*boundListener) error {
	a := bl.cfg.TLS.ACME
	httpAddr := ""
	for _, o := range ls {
		if a.HTTPListener != "" && o.cfg.Name == a.HTTPListener {
			httpAddr = o.pool.Addr().String()
		}
	}
	bl.acme.SetChallengeAddrs(httpAddr, bl.pool.Addr().String())
	return bl.acme.Start()
}

// acmeHTTP builds what the pipeline asks of the managers of ls: HTTP-01
// answers and https redirects; nil when no listener uses ACME.
func (s *Server) acmeHTTP(ls map[string]*boundListener) *acme.HTTP {
	var ms []*acme.Manager
	ports := make(map[*acme.Manager]int)
	for _, bl := range ls {
		if bl.acme == nil {
			continue
		}
		ms = append(ms, bl.acme)
		if ta, ok := bl.pool.Addr().(*net.TCPAddr); ok {
			ports[bl.acme] = ta.Port
		}
	}
	if len(ms) == 0 {
		return nil
	}
	// Listeners by address have no order; managers in name order make
	// the first listener for a name the same at every reload.
	slices.SortFunc(ms, func(a, b *acme.Manager) int { return strings.Compare(a.Listener(), b.Listener()) })
	return acme.NewHTTP(ms, ports, s.acmeSolver)
}

// ACMEManagers returns the ACME managers of the listeners that have one
// (metrics.Source).
func (s *Server) ACMEManagers() []*acme.Manager {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*acme.Manager
	for _, bl := range s.listeners {
		if bl.acme != nil {
			out = append(out, bl.acme)
		}
	}
	slices.SortFunc(out, func(a, b *acme.Manager) int { return strings.Compare(a.Listener(), b.Listener()) })
	return out
}

// installACME gives g's graph what the pipeline asks of the managers of
// ls (nothing when none uses ACME) and makes it the solver's.
func (s *Server) installACME(g *generation, ls map[string]*boundListener) {
	if h := s.acmeHTTP(ls); h != nil { // a nil *HTTP in the interface would not be nil
		g.graph.ACME = h
		h.Install()
	}
}
