package tlsconf

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// ServerOptions are a listener's TLS settings. The zero value of each
// field is noted.
type ServerOptions struct {
	// Certificates are the certificates served, chosen by SNI; at least
	// one. The first is the default: it is served to clients that send no
	// SNI, or a name no certificate carries.
	Certificates []KeyPairFiles
	// MinVersion is the oldest TLS version accepted, tls.VersionTLS12 or
	// tls.VersionTLS13. Zero: TLS 1.2.
	MinVersion uint16
	// ClientCAFile, when set, makes client certificates required and
	// verified against the CAs in this PEM file (mutual TLS). Empty: none
	// asked for.
	ClientCAFile string
	// HTTP2 offers h2 before http/1.1 in ALPN. False: http/1.1 only.
	HTTP2 bool
	// DisableSessionTickets turns session resumption off: every
	// connection pays a full handshake. False: tickets are issued.
	DisableSessionTickets bool
	// HandshakeTimeout is how long the engine lets a handshake take,
	// from the connection's accept; the Provider only carries it, so that
	// a reload changes it. Zero: no limit.
	HandshakeTimeout time.Duration
	// ClientHelloTimeout is how long the engine waits, from the
	// connection's accept, for the client's ClientHello, before which
	// the connection holds no place among MaxHandshakes; carried like
	// HandshakeTimeout. Zero: HandshakeTimeout bounds the wait.
	ClientHelloTimeout time.Duration
	// MaxHandshakes caps the handshakes in progress at once on the
	// listener (BeginHandshake, which sheds the oldest stalled one at the
	// cap). Zero: no cap.
	MaxHandshakes int
	// Managed serves the names whose certificates get and renew
	// themselves (ACME), and answers TLS-ALPN-01 validations; with it,
	// Certificates may be empty. Nil: the files only.
	Managed Managed
}

// Env is what a Provider takes from its surroundings rather than from
// configuration. The zero value of each field is noted.
type Env struct {
	// Now tells the time. Nil: time.Now.
	Now func() time.Time
	// HTTPClient fetches OCSP responses. Nil: a client with a 10-second
	// timeout over http.DefaultTransport (which honours HTTP_PROXY).
	HTTPClient *http.Client
	// TicketRotation is how often a new session ticket key takes over.
	// Zero: an hour.
	TicketRotation time.Duration
	// TicketKeys is how many keys are kept: the current one, which
	// encrypts new tickets, and the previous ones, which still decrypt
	// theirs, so a ticket resumes for TicketKeys-1 to TicketKeys
	// rotations. Zero: 4 (three to four hours with hourly rotation).
	TicketKeys int
	// OnStaple is called after each OCSP fetch for the certificate in
	// file: with the response's next update and a nil error, or with the
	// error (a staple still valid keeps being served). Nil: not called.
	OnStaple func(file string, nextUpdate time.Time, err error)
}

// Default Env values.
const (
	defaultTicketRotation = time.Hour
	defaultTicketKeys     = 4
	defaultOCSPTimeout    = 10 * time.Second
)

func (e Env) now() time.Time {
	if e.Now == nil {
		return time.Now()
	}
	return e.Now()
}

// Provider serves one listener's TLS. Its TLSConfig stays the same for
// the listener's life; reloads (Prepare, then Commit) change what that
// config hands to each new handshake: certificates, client CAs, versions,
// ALPN. Handshakes in progress finish on what they started with, and open
// connections are never touched. All of a listener's sockets and event
// loops share the Provider, and with it the session ticket keys. It is
// safe for concurrent use.
type Provider struct {
	name string
	env  Env
	base *tls.Config
	cur  atomic.Pointer[snapshot]
	gate Gate

	mu     sync.Mutex // serialises Commit, RotateTicketKeys and Close
	keys   [][32]byte // session ticket keys, the current one first
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed bool
}

// snapshot is one set of settings and certificates, as one commit made
// them live.
type snapshot struct {
	opts   ServerOptions
	config *tls.Config
	set    *certSet
	// trust fingerprints what decides which sessions may resume: the
	// client CAs. When it changes, ticket keys start over.
	trust [32]byte
	// challenge serves TLS-ALPN-01 validations; nil without
	// opts.Managed.
	challenge *tls.Config
	// stop ends the snapshot's OCSP fetching; nil before Commit.
	stop context.CancelFunc
}

// NewProvider loads o's files and returns a running Provider for the
// listener called name (the name is for metrics and messages). It starts
// the background work (ticket key rotation, OCSP fetching) that Close
// stops.
func NewProvider(name string, o ServerOptions, env Env) (*Provider, error) {
	if env.TicketRotation <= 0 {
		env.TicketRotation = defaultTicketRotation
	}
	if env.TicketKeys <= 0 {
		env.TicketKeys = defaultTicketKeys
	}
	if env.HTTPClient == nil {
		env.HTTPClient = &http.Client{Timeout: defaultOCSPTimeout}
	}
	p := &Provider{name: name, env: env}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	// Every handshake gets the current snapshot's config; the session
	// ticket keys stay here, on the config the engine holds, which
	// crypto/tls consults when the snapshot's config sets none.
	p.base = &tls.Config{
		MinVersion:         tls.VersionTLS12,
		GetConfigForClient: p.configForClient,
	}
	u, err := p.Prepare(o)
	if err != nil {
		p.cancel()
		return nil, err
	}
	u.Commit()
	p.wg.Add(1)
	go p.rotate()
	return p, nil
}

// Name returns the listener's name.
func (p *Provider) Name() string { return p.name }

// TLSConfig returns the configuration to serve the listener's
// connections with (tls.Server, tls.NewListener). It is the same for the
// Provider's life and must be used as is: not modified, and not copied
// with Clone, since key rotation updates this config's session ticket
// keys (a clone would keep issuing tickets under a key that ages out).
func (p *Provider) TLSConfig() *tls.Config { return p.base }

func (p *Provider) configForClient(hello *tls.ClientHelloInfo) (*tls.Config, error) {
	s := p.cur.Load()
	if s.challenge != nil && isACMEChallenge(hello) {
		return s.challenge, nil
	}
	return s.config, nil
}

// Update is a loaded set of settings and certificates, ready to replace
// a Provider's. Nothing changes until Commit; an Update that is never
// committed holds nothing that needs releasing.
type Update struct {
	p    *Provider
	snap *snapshot
}

// Prepare loads and checks everything o names (certificates and keys,
// client CAs) without changing what is served. A file that cannot be read,
// a key that does not match its certificate, or a certificate already
// expired is an error, and the running settings stay as they are.
func (p *Provider) Prepare(o ServerOptions) (*Update, error) {
	set := emptyCertSet()
	switch {
	case len(o.Certificates) > 0:
		var err error
		if set, err = loadCertSet(o.Certificates); err != nil {
			return nil, err
		}
	case o.Managed == nil:
		return nil, errors.New("no certificate")
	}
	now := p.env.now()
	for _, e := range set.entries {
		if now.After(e.leaf.NotAfter) {
			return nil, &KeyPairError{Part: PartCert, File: e.file, Err: &ExpiredError{NotAfter: e.leaf.NotAfter}}
		}
	}
	cfg := &tls.Config{
		GetCertificate:         chooser(set, o.Managed),
		MinVersion:             o.MinVersion,
		NextProtos:             []string{"http/1.1"},
		SessionTicketsDisabled: o.DisableSessionTickets,
		Time:                   p.env.Now,
	}
	if cfg.MinVersion == 0 {
		cfg.MinVersion = tls.VersionTLS12
	}
	if o.HTTP2 {
		cfg.NextProtos = []string{"h2", "http/1.1"}
	}
	snap := &snapshot{opts: o, config: cfg, set: set}
	if o.Managed != nil {
		snap.challenge = challengeConfig(o.Managed)
	}
	if o.ClientCAFile != "" {
		pool, cas, err := LoadCAs(o.ClientCAFile)
		if err != nil {
			return nil, err
		}
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		cfg.ClientCAs = pool
		h := sha256.New()
		for _, c := range cas {
			h.Write(c.Raw)
		}
		h.Sum(snap.trust[:0])
	}
	return &Update{p: p, snap: snap}, nil
}

// ExpiredError is the error of a certificate past its notAfter time.
type ExpiredError struct {
	// NotAfter is when the certificate stopped being valid.
	NotAfter time.Time
}

// Error says when the certificate expired.
func (e *ExpiredError) Error() string {
	return "certificate expired on " + e.NotAfter.UTC().Format("2006-01-02 15:04 MST")
}

// Commit makes u what new handshakes get. Certificates whose OCSP staple
// is still valid keep it; the previous settings' background fetching
// stops. When the client CAs changed, session ticket keys start over, so
// that no session established under the old trust resumes. Committing to
// a closed Provider does nothing.
func (u *Update) Commit() {
	p := u.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	old := p.cur.Load()
	if old == nil || old.trust != u.snap.trust {
		p.resetTicketKeysLocked()
	}
	if old != nil {
		carryStaples(old.set, u.snap.set, p.env.now())
	}
	ctx, stop := context.WithCancel(p.ctx)
	u.snap.stop = stop
	p.cur.Store(u.snap)
	if old != nil {
		old.stop()
	}
	p.startStaplers(ctx, u.snap.set)
}

// Reload prepares o and commits it: the Provider's settings become o, or
// stay as they were when o cannot be loaded.
func (p *Provider) Reload(o ServerOptions) error {
	u, err := p.Prepare(o)
	if err != nil {
		return err
	}
	u.Commit()
	return nil
}

// Close stops the background work (key rotation, OCSP fetching) and waits
// for it. Handshakes still work afterwards, with what was current; Close
// is for a listener that has stopped accepting.
func (p *Provider) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.cancel()
	p.mu.Unlock()
	p.wg.Wait()
}

// HandshakeTimeout returns the current handshake time limit, from the
// connection's accept; 0 means none.
func (p *Provider) HandshakeTimeout() time.Duration { return p.cur.Load().opts.HandshakeTimeout }

// ClientHelloTimeout returns the current limit on the wait for a
// ClientHello, from the connection's accept; 0 means HandshakeTimeout's.
func (p *Provider) ClientHelloTimeout() time.Duration {
	return p.cur.Load().opts.ClientHelloTimeout
}

// BeginHandshake admits a handshake whose client has sent its
// ClientHello, under MaxHandshakes (Gate.Begin): at the cap the oldest
// handshake waiting for its client is shed (its stop called) to make
// room. It returns nil when none could be shed: the caller closes the
// connection (counted as refused). Otherwise the caller ends the
// handshake with End, however it ends.
func (p *Provider) BeginHandshake(stop func()) *Handshake {
	return p.gate.Begin(p.cur.Load().opts.MaxHandshakes, stop)
}

// NoHello counts a connection closed before its ClientHello arrived.
func (p *Provider) NoHello() { p.gate.NoHello() }

// HandshakesInProgress returns how many handshakes are between
// BeginHandshake and their End, shed ones aside.
func (p *Provider) HandshakesInProgress() int64 { return p.gate.InProgress() }

// HandshakesWaiting returns how many handshakes in progress wait for
// their client (those BeginHandshake sheds at the cap).
func (p *Provider) HandshakesWaiting() int { return p.gate.Waiting() }

// Stats returns the listener's handshake counters.
func (p *Provider) Stats() *HandshakeStats { return p.gate.Stats() }

// CertInfo describes a served certificate.
type CertInfo struct {
	// File is the certificate file, as configured.
	File string
	// Names are the DNS names it serves (from its SANs, lower case).
	Names []string
	// NotAfter is when it expires.
	NotAfter time.Time
	// Stapled reports whether an OCSP response is being stapled.
	Stapled bool
}

// Certificates describes the certificates being served, in configuration
// order.
func (p *Provider) Certificates() []CertInfo {
	set := p.cur.Load().set
	out := make([]CertInfo, len(set.entries))
	for i, e := range set.entries {
		out[i] = CertInfo{File: e.file, Names: e.names, NotAfter: e.leaf.NotAfter, Stapled: e.served.Load().stapled()}
	}
	return out
}
