package server

import (
	"crypto/tls"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/helios-lb/helios/internal/acme"
	"github.com/helios-lb/helios/internal/config"
	"github.com/helios-lb/helios/internal/h2"
	"github.com/helios-lb/helios/internal/tlsconf"
	"github.com/helios-lb/helios/internal/wire"
)

// wireProtocol maps a transport's validated protocol onto the engine's.
func wireProtocol(p string) wire.Protocol {
	switch p {
	case config.ProtocolH2C:
		return wire.ProtoH2C
	case config.ProtocolH2:
		return wire.ProtoH2
	}
	return wire.ProtoHTTP1
}

// tlsVersion maps a validated min_version to crypto/tls's constant.
func tlsVersion(v string) uint16 {
	if v == config.TLS13 {
		return tls.VersionTLS13
	}
	return tls.VersionTLS12
}

// serverTLSOptions maps a listener's tls block onto tlsconf; m is its
// ACME manager, nil without acme.
func serverTLSOptions(cfg *config.Config, lc config.Listener, m *acme.Manager) tlsconf.ServerOptions {
	t := lc.TLS
	o := tlsconf.ServerOptions{
		MinVersion:            tlsVersion(t.MinVersion),
		HTTP2:                 lc.OffersHTTP2(),
		DisableSessionTickets: !t.Tickets(),
		HandshakeTimeout:      t.HandshakeTimeout.D(),
		ClientHelloTimeout:    t.ClientHelloTimeout.D(),
		MaxHandshakes:         t.MaxHandshakes,
	}
	if t.ClientCAFile != "" {
		o.ClientCAFile = t.ClientCAFile
	}
	for _, p := range t.Pairs() {
		o.Certificates = append(o.Certificates, tlsconf.KeyPairFiles{CertFile: p.CertFile, KeyFile: p.KeyFile})
	}
	if m != nil { // a nil *Manager in the interface would not be nil
		o.Managed = m
	}
	return o
}

// clientTLSOptions maps an upstream transport's tls block onto tlsconf.
func clientTLSOptions(cfg *config.Config, t config.Transport) tlsconf.ClientOptions {
	c := t.TLS
	o := tlsconf.ClientOptions{
		ServerName:         c.ServerName,
		MinVersion:         tlsVersion(c.MinVersion),
		InsecureSkipVerify: c.InsecureSkipVerify,
		HTTP2:              t.Protocol == config.ProtocolH2,
	}
	if c.CAFile != "" {
		o.CAFile = c.CAFile
	}
	if c.CertFile != "" {
		o.CertFile, o.KeyFile = c.CertFile, c.KeyFile
	}
	return o
}

// newTLSProvider builds the TLS provider of a listener with a tls block.
func (s *Server) newTLSProvider(cfg *config.Config, lc config.Listener, m *acme.Manager) (*tlsconf.Provider, error) {
	log := s.log.With(zap.String("listener", lc.Name))
	p, err := tlsconf.NewProvider(lc.Name, serverTLSOptions(cfg, lc, m), tlsconf.Env{
		OnStaple: func(file string, next time.Time, err error) {
			if err != nil {
				log.Warn("OCSP staple not refreshed; serving the last valid one, if any", zap.String("certificate", file), zap.Error(err))
				return
			}
			log.Debug("OCSP staple refreshed", zap.String("certificate", file), zap.Time("next_update", next))
		},
	})
	if err != nil {
		return nil, fmt.Errorf("listener %s: tls: %w", lc.Name, err)
	}
	return p, nil
}

// tlsReload is what a reload changes of the TLS of the listeners it
// keeps: their providers' updates and, where the acme block changed, a
// new ACME manager for the old one.
type tlsReload struct {
	updates []*tlsconf.Update
	swaps   []acmeSwap
}

// acmeSwap replaces a listener's ACME manager (prev or next may be nil:
// acme turned on or off).
type acmeSwap struct {
	bl         *boundListener
	prev, next *acme.Manager
}

// commit makes the updates live and hands each listener its new manager;
// the managers it returns are to be started, those it stopped are done.
func (r *tlsReload) commit() (start []*boundListener) {
	for _, u := range r.updates {
		u.Commit()
	}
	for _, sw := range r.swaps {
		sw.bl.acme = sw.next
		if sw.prev != nil {
			sw.prev.Stop()
		}
		if sw.next != nil {
			start = append(start, sw.bl)
		}
	}
	return start
}

// abort drops the managers a failed reload made.
func (r *tlsReload) abort() {
	for _, sw := range r.swaps {
		if sw.next != nil {
			sw.next.Stop()
		}
	}
}

// prepareTLS loads the new TLS settings of every listener a reload keeps
// (s.mu is held), without changing what they serve, and returns what makes
// them live. A certificate that cannot be loaded, or a listener turning
// TLS on or off (which needs a restart: its sockets would otherwise serve
// the wrong protocol), fails the whole reload.
func (s *Server) prepareTLS(cfg *config.Config) (_ *tlsReload, err error) {
	r := &tlsReload{}
	defer func() {
		if err != nil {
			r.abort()
		}
	}()
	for _, lc := range cfg.Listeners {
		bl := s.findListener(lc.Address)
		if bl == nil {
			continue
		}
		switch {
		case (lc.TLS != nil) != (bl.tls != nil):
			return nil, fmt.Errorf("listener %s: turning tls on or off needs a restart (the running listener keeps its protocol)", lc.Name)
		case lc.TLS == nil:
			continue
		}
		m := bl.acme
		if lc.TLS.ACME != nil && !sameACME(s.gen.cfg, cfg, bl.cfg, lc) || lc.TLS.ACME == nil && m != nil {
			var next *acme.Manager
			if lc.TLS.ACME != nil {
				if next, err = s.newACME(cfg, lc); err != nil {
					return nil, err
				}
			}
			r.swaps = append(r.swaps, acmeSwap{bl: bl, prev: m, next: next})
			m = next
		}
		u, err := bl.tls.Prepare(serverTLSOptions(cfg, lc, m))
		if err != nil {
			return nil, fmt.Errorf("listener %s: tls: %w", lc.Name, err)
		}
		r.updates = append(r.updates, u)
	}
	return r, nil
}

// buildClientTLS makes the TLS config of an upstream whose transport has
// a tls block, keeping the session cache of prev's when nothing changed.
func (s *Server) buildClientTLS(g, prev *generation, uc config.Upstream) error {
	if uc.Transport.TLS == nil {
		return nil
	}
	var old *tlsconf.Client
	if prev != nil {
		old = prev.clientTLS[uc.Name]
	}
	c, err := tlsconf.NewClient(clientTLSOptions(g.cfg, uc.Transport), old)
	if err != nil {
		return fmt.Errorf("upstream %s: transport.tls: %w", uc.Name, err)
	}
	if c.InsecureSkipVerify() {
		s.log.Warn("backends' certificates are not verified (transport.tls.insecure_skip_verify): anyone on the network path can impersonate them",
			zap.String("upstream", uc.Name))
	}
	g.clientTLS[uc.Name] = c
	return nil
}

// TLSProviders returns the TLS providers of the listeners that have one
// (metrics.Source).
func (s *Server) TLSProviders() []*tlsconf.Provider {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*tlsconf.Provider
	for _, bl := range s.listeners {
		if bl.tls != nil {
			out = append(out, bl.tls)
		}
	}
	return out
}

// HTTP2Stats returns the HTTP/2 counters of each listener, by name
// (metrics.Source).
func (s *Server) HTTP2Stats() map[string]*h2.Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]*h2.Stats, len(s.listeners))
	for _, bl := range s.listeners {
		if bl.cfg.H2C || bl.tls != nil && bl.cfg.OffersHTTP2() {
			out[bl.cfg.Name] = bl.h2
		}
	}
	return out
}

// TLSProvider returns the TLS provider of the named listener: what the
// engine serves its handshakes with. Nil when the listener has no tls
// block or does not exist.
func (s *Server) TLSProvider(listener string) *tlsconf.Provider {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, bl := range s.listeners {
		if bl.cfg.Name == listener {
			return bl.tls
		}
	}
	return nil
}

// UpstreamTLS returns the TLS config of the named upstream's connections
// to its backends, or nil when they are cleartext.
func (s *Server) UpstreamTLS(upstream string) *tlsconf.Client {
	return s.cur.Load().clientTLS[upstream]
}
