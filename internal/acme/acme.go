// Package acme gets and renews the certificates of the TLS listeners that
// have an acme block (RFC 8555), through caddyserver/certmagic and
// mholt/acmez: account keys, orders, locking per name in shared storage,
// renewal a third of the lifetime before expiry or when the CA's renewal
// information (ARI, RFC 9773) says so, and a backoff after failures.
//
// A Manager serves one listener. The engine answers the challenges itself,
// without a second server: TLS-ALPN-01 in the listener's own handshakes
// (tlsconf asks ChallengeCertificate for a ClientHello that offers only
// ALPN acme-tls/1), HTTP-01 in the request pipeline before routing
// (HTTP.Challenge from memory on the loop, HTTP.Solver from shared storage
// on a goroutine when another instance started the challenge).
//
// certmagic's own challenge solvers try to bind the challenge ports
// before they present a challenge; a Manager points them at the addresses
// Helios's listeners already hold (SetChallengeAddrs), so that bind fails,
// certmagic sees something already listening there and leaves the
// answering to Helios.
package acme

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/certmagic"
	mzacme "github.com/mholt/acmez/v3/acme"
	"go.uber.org/zap"
)

// Well-known directories of Let's Encrypt's CA.
const (
	// LetsEncrypt is Let's Encrypt's production directory.
	LetsEncrypt = "https://acme-v02.api.letsencrypt.org/directory"
	// LetsEncryptStaging is Let's Encrypt's staging directory: the same
	// protocol and much higher rate limits, with certificates that no
	// client trusts.
	LetsEncryptStaging = "https://acme-staging-v02.api.letsencrypt.org/directory"
)

// The challenge types a Manager can answer.
const (
	HTTP01    = "http-01"
	TLSALPN01 = "tls-alpn-01"
)

// The key types of certificates.
const (
	KeyP256    = "p256"
	KeyRSA2048 = "rsa2048"
)

// Options configure a Manager. The zero value of each field is noted.
type Options struct {
	// Listener names the listener, for logs and metrics.
	Listener string
	// CA is the ACME directory URL. Empty: LetsEncrypt.
	CA string
	// Email is the account's contact. Empty: an account without one.
	Email string
	// Domains are the names to get certificates for at start; one
	// certificate per name. Empty: none (with OnDemand, names come from
	// handshakes).
	Domains []string
	// Challenges are the challenge types offered to the CA (HTTP01,
	// TLSALPN01). Empty: both.
	Challenges []string
	// KeyType is the certificates' key type (KeyP256, KeyRSA2048). Empty:
	// KeyP256.
	KeyType string
	// Storage holds accounts, certificates, keys and the per-name locks;
	// Stop closes it when it is an io.Closer. Nil: a directory,
	// StorageDir.
	Storage certmagic.Storage
	// StorageDir is the directory of the default storage. Required when
	// Storage is nil.
	StorageDir string
	// CARoots are the roots trusted for the CA's own HTTPS endpoint. Nil:
	// the system's.
	CARoots *x509.CertPool
	// EAB binds the account to an account the CA knows already (external
	// account binding). Nil: none.
	EAB *EAB
	// OnDemand gets certificates at the first handshake for names an ask
	// endpoint approves. Nil: only Domains.
	OnDemand *OnDemand
	// Default makes the Manager serve clients that send no SNI (the first
	// of Domains). False: they get the listener's other certificates.
	Default bool
}

// EAB is an external account binding: the CA's key identifier and its
// base64url-encoded MAC key.
type EAB struct {
	KeyID  string
	MACKey string
}

// OnDemand configures on-demand certificates. The zero value of each
// field is noted.
type OnDemand struct {
	// Ask is the URL asked, with ?domain=NAME, whether NAME may have a
	// certificate: a 200 answer says yes, anything else no. Required.
	Ask string
	// Burst is how many certificates may be requested in one Interval.
	// Zero: 10.
	Burst int
	// Interval is the rate limit's window. Zero: a minute.
	Interval time.Duration
}

// Env is what a Manager takes from its surroundings rather than from
// configuration. The zero value of each field is noted.
type Env struct {
	// Logger receives the Manager's and certmagic's log. Nil: none.
	Logger *zap.Logger
	// RenewCheckInterval is how often certificates are checked for
	// renewal. Zero: certmagic's default, ten minutes.
	RenewCheckInterval time.Duration
	// AskClient asks the on-demand endpoint. Nil: a client with a
	// 5-second timeout.
	AskClient *http.Client
}

// Stats count what a Manager did. Safe for concurrent use.
type Stats struct {
	// Obtained and ObtainFailed count first issuances by result.
	Obtained, ObtainFailed atomic.Uint64
	// Renewed and RenewFailed count renewals by result.
	Renewed, RenewFailed atomic.Uint64
	// AskRefused counts on-demand names the ask endpoint refused (or
	// could not be asked about); RateLimited, names past the rate limit.
	AskRefused, RateLimited atomic.Uint64
}

// ErrRefused is the error of an on-demand name that may not have a
// certificate.
var ErrRefused = errors.New("refused by the on_demand ask endpoint")

// ErrRateLimited is the error of an on-demand name past the rate limit.
var ErrRateLimited = errors.New("on-demand certificates are over their rate limit")

// Manager gets, renews and serves one listener's ACME certificates.
type Manager struct {
	opts   Options
	log    *zap.Logger
	cache  *certmagic.Cache
	cfg    *certmagic.Config
	issuer *certmagic.ACMEIssuer
	names  map[string]struct{}
	ask    *http.Client
	limit  *certmagic.RingBufferRateLimiter
	stats  Stats

	ctx    context.Context
	cancel context.CancelFunc

	// missing rate-limits the log line of a handshake for a name without
	// a certificate: name -> when it was last logged.
	missingMu sync.Mutex
	missing   map[string]time.Time

	// demand holds the names got on demand, for Certificates.
	demandMu sync.Mutex
	demand   map[string]struct{}
}

// missingLogEvery is how often a handshake for a name that has no
// certificate yet is logged, per name.
const missingLogEvery = time.Minute

// New returns a Manager for o. Nothing is issued before Start.
func New(o Options, env Env) (*Manager, error) {
	if o.CA == "" {
		o.CA = LetsEncrypt
	}
	if len(o.Challenges) == 0 {
		o.Challenges = []string{HTTP01, TLSALPN01}
	}
	if o.Storage == nil {
		if o.StorageDir == "" {
			return nil, errors.New("acme: no storage directory")
		}
		o.Storage = &certmagic.FileStorage{Path: o.StorageDir}
	}
	log := env.Logger
	if log == nil {
		log = zap.NewNop()
	}
	log = log.Named("acme").With(zap.String("listener", o.Listener))
	m := &Manager{opts: o, log: log, names: make(map[string]struct{}), missing: make(map[string]time.Time), demand: make(map[string]struct{}), ask: env.AskClient}
	if m.ask == nil {
		m.ask = &http.Client{Timeout: 5 * time.Second}
	}
	for _, d := range o.Domains {
		m.names[strings.ToLower(d)] = struct{}{}
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	var cfg *certmagic.Config
	m.cache = certmagic.NewCache(certmagic.CacheOptions{
		GetConfigForCert:   func(certmagic.Certificate) (*certmagic.Config, error) { return cfg, nil },
		RenewCheckInterval: env.RenewCheckInterval,
		Logger:             log,
	})
	tmpl := certmagic.Config{
		Storage:   o.Storage,
		Logger:    log,
		KeySource: certmagic.StandardKeyGenerator{KeyType: keyType(o.KeyType)},
		OnEvent:   m.onEvent,
		// Only what onEvent reads: building the others' data (one per
		// handshake for tls_get_certificate) is not free.
		ShouldEmitFunc: func(event string) bool {
			return event == "cert_obtained" || event == "cert_failed" || event == "cached_managed_cert"
		},
	}
	if o.Default && len(o.Domains) > 0 {
		tmpl.DefaultServerName = o.Domains[0]
	}
	if od := o.OnDemand; od != nil {
		burst, every := od.Burst, od.Interval
		if burst <= 0 {
			burst = 10
		}
		if every <= 0 {
			every = time.Minute
		}
		m.limit = certmagic.NewRateLimiter(burst, every)
		tmpl.OnDemand = &certmagic.OnDemandConfig{DecisionFunc: m.decide}
	}
	cfg = certmagic.New(m.cache, tmpl)
	iss := certmagic.ACMEIssuer{
		CA:                      o.CA,
		Email:                   o.Email,
		Agreed:                  true,
		TrustedRoots:            o.CARoots,
		DisableHTTPChallenge:    !slices.Contains(o.Challenges, HTTP01),
		DisableTLSALPNChallenge: !slices.Contains(o.Challenges, TLSALPN01),
		Logger:                  log,
	}
	if o.EAB != nil {
		iss.ExternalAccount = &mzacme.EAB{KeyID: o.EAB.KeyID, MACKey: o.EAB.MACKey}
	}
	// With Let's Encrypt's production CA, certmagic tries a failed
	// order again against the staging CA first (its rate limits are
	// far higher) and goes back to production once that succeeds.
	m.issuer = certmagic.NewACMEIssuer(cfg, iss)
	cfg.Issuers = []certmagic.Issuer{m.issuer}
	m.cfg = cfg
	return m, nil
}

func keyType(k string) certmagic.KeyType {
	if k == KeyRSA2048 {
		return certmagic.RSA2048
	}
	return certmagic.P256
}

// SetChallengeAddrs tells the Manager where Helios answers the
// challenges: httpAddr, the bound address of the cleartext listener the
// CA's HTTP-01 requests reach ("" when there is none), and tlsAddr, the
// TLS listener's own. certmagic's solvers try to bind these before each
// challenge; Helios holding them makes that fail, so no second server is
// started. Call it before Start.
func (m *Manager) SetChallengeAddrs(httpAddr, tlsAddr string) {
	hh, hp := splitAddr(httpAddr)
	th, tp := splitAddr(tlsAddr)
	host := th
	if httpAddr != "" && hh != th {
		host = "" // one host for both solvers: the wildcard address conflicts with either
	}
	m.issuer.ListenHost = host
	if hp > 0 {
		m.issuer.AltHTTPPort = hp
	} else if !m.issuer.DisableHTTPChallenge {
		// No listener answers HTTP-01 here: do not offer it, or
		// certmagic would serve it from a listener of its own.
		m.issuer.DisableHTTPChallenge = true
	}
	if tp > 0 {
		m.issuer.AltTLSALPNPort = tp
	}
}

func splitAddr(a string) (string, int) {
	if a == "" {
		return "", 0
	}
	h, p, err := net.SplitHostPort(a)
	if err != nil {
		return "", 0
	}
	n, _ := strconv.Atoi(p)
	if ip := net.ParseIP(h); ip != nil && ip.IsUnspecified() {
		h = ""
	}
	return h, n
}

// storedLoadTimeout bounds how long Start waits for storage while it
// loads the stored certificates.
const storedLoadTimeout = 15 * time.Second

// Start loads the certificates of Domains from storage before it returns,
// so that a restart serves them from its first handshake, and, in the
// background, gets those that are missing and renews those due. A name
// without a certificate fails its handshakes until it has one; the others
// are served meanwhile. (certmagic's ManageAsync alone loads the stored
// ones in goroutines of its own: the first handshakes after a restart
// were refused until they had run.)
func (m *Manager) Start() error {
	if len(m.opts.Domains) == 0 {
		return nil
	}
	loaded := 0
	if m.opts.OnDemand == nil { // on-demand names load at their first handshake
		ctx, cancel := context.WithTimeout(m.ctx, storedLoadTimeout)
		for _, d := range m.opts.Domains {
			_, err := m.cfg.CacheManagedCertificate(ctx, d)
			switch {
			case err == nil:
				loaded++
			case !errors.Is(err, fs.ErrNotExist):
				m.log.Warn("loading the stored certificate failed; it is tried again in the background",
					zap.String("name", d), zap.Error(err))
			}
		}
		cancel()
	}
	// Names loaded above are managed already: ManageAsync leaves them to
	// the renewal checks and gets the others.
	if err := m.cfg.ManageAsync(m.ctx, m.opts.Domains); err != nil {
		return fmt.Errorf("acme: listener %s: %w", m.opts.Listener, err)
	}
	if loaded > 0 {
		// What ManageAsync did for a stored certificate it loaded: renew
		// it now if it is due, not at the first periodic check.
		go func() {
			if err := m.cache.RenewManagedCertificates(m.ctx); err != nil && m.ctx.Err() == nil {
				m.log.Error("renewing the stored certificates", zap.Error(err))
			}
		}()
	}
	return nil
}

// Stop ends the background work: renewal checks, issuance in progress
// and the on-demand rate limiter. Certificates already loaded keep being
// served.
func (m *Manager) Stop() {
	m.cancel()
	m.cache.Stop()
	if m.limit != nil {
		m.limit.Stop()
	}
	if c, ok := m.opts.Storage.(io.Closer); ok {
		c.Close()
	}
}

// Listener returns the name of the listener the Manager serves.
func (m *Manager) Listener() string { return m.opts.Listener }

// CA returns the ACME directory URL the Manager gets certificates from.
func (m *Manager) CA() string { return m.opts.CA }

// Stats returns the Manager's counters.
func (m *Manager) Stats() *Stats { return &m.stats }

// Manages reports whether the Manager serves name (lower case; "" for a
// client that sent no SNI).
func (m *Manager) Manages(name string) bool {
	if name == "" {
		return m.opts.Default && len(m.opts.Domains) > 0
	}
	_, ok := m.names[name]
	return ok
}

// OnDemand reports whether names no other certificate of the listener
// carries are offered to the Manager (on-demand TLS).
func (m *Manager) OnDemand() bool { return m.opts.OnDemand != nil }

// Certificate returns the certificate for hello's name, getting it first
// when it is an on-demand name the ask endpoint approves (the handshake
// waits). Nil when there is none: the handshake then fails (tlsconf sends
// unrecognized_name), and the name is logged, at most once a minute.
func (m *Manager) Certificate(hello *tls.ClientHelloInfo) *tls.Certificate {
	c, err := m.cfg.GetCertificate(hello)
	if err == nil && c != nil && len(c.Certificate) > 0 {
		return c
	}
	m.logMissing(strings.ToLower(hello.ServerName), err)
	return nil
}

func (m *Manager) logMissing(name string, err error) {
	now := time.Now()
	m.missingMu.Lock()
	last, seen := m.missing[name]
	log := !seen || now.Sub(last) >= missingLogEvery
	if log {
		if len(m.missing) > 10000 { // on-demand names are not bounded
			clear(m.missing)
		}
		m.missing[name] = now
	}
	m.missingMu.Unlock()
	if log {
		m.log.Warn("TLS handshake refused: no certificate for this name yet (issuance pending or failing; see the ACME log lines above)",
			zap.String("name", name), zap.Error(err))
	}
}

// ChallengeCertificate answers a TLS-ALPN-01 validation (RFC 8737): the
// CA's ClientHello offers only ALPN acme-tls/1, and gets the challenge
// certificate for its SNI, presented by this process or, from shared
// storage, by another instance.
func (m *Manager) ChallengeCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	return m.cfg.GetCertificate(hello)
}

// decide is certmagic's on-demand DecisionFunc: the ask endpoint, then
// the rate limit.
func (m *Manager) decide(ctx context.Context, name string) error {
	od := m.opts.OnDemand
	if err := m.askFor(ctx, od.Ask, name); err != nil {
		m.stats.AskRefused.Add(1)
		m.log.Info("on-demand certificate refused", zap.String("name", name), zap.Error(err))
		return err
	}
	if !m.limit.Allow() {
		m.stats.RateLimited.Add(1)
		m.log.Warn("on-demand certificate refused: rate limit reached", zap.String("name", name))
		return ErrRateLimited
	}
	return nil
}

func (m *Manager) askFor(ctx context.Context, ask, name string) error {
	sep := "?"
	if strings.Contains(ask, "?") {
		sep = "&"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ask+sep+"domain="+queryEscape(name), nil)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrRefused, err)
	}
	resp, err := m.ask.Do(req)
	if err != nil {
		return fmt.Errorf("%w: asking: %v", ErrRefused, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: it answered %d", ErrRefused, resp.StatusCode)
	}
	return nil
}

// queryEscape escapes a host name for a query (names are ASCII letters,
// digits, '-' and '.', so only the odd one needs it).
func queryEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// onEvent counts and logs certmagic's issuance events.
func (m *Manager) onEvent(_ context.Context, event string, data map[string]any) error {
	renewal, _ := data["renewal"].(bool)
	name, _ := data["identifier"].(string)
	switch event {
	case "cert_obtained":
		if renewal {
			m.stats.Renewed.Add(1)
		} else {
			m.stats.Obtained.Add(1)
		}
		m.log.Info("certificate issued", zap.String("name", name), zap.Bool("renewal", renewal))
	case "cached_managed_cert":
		if m.opts.OnDemand == nil {
			break
		}
		sans, _ := data["sans"].([]string)
		m.demandMu.Lock()
		for _, n := range sans {
			if n = strings.ToLower(n); !m.Manages(n) {
				m.demand[n] = struct{}{}
			}
		}
		m.demandMu.Unlock()
	case "cert_failed":
		if renewal {
			m.stats.RenewFailed.Add(1)
		} else {
			m.stats.ObtainFailed.Add(1)
		}
		err, _ := data["error"].(error)
		m.log.Warn("certificate issuance failed; retrying with backoff (a certificate still valid keeps being served)",
			zap.String("name", name), zap.Bool("renewal", renewal), zap.Error(err))
	}
	return nil
}

// CertInfo describes a certificate a Manager serves.
type CertInfo struct {
	// Name is the managed name.
	Name string
	// NotAfter is when the certificate expires; zero when the name has
	// no certificate yet.
	NotAfter time.Time
	// Serial is the certificate's serial number, hex; "" with none.
	Serial string
}

// Certificates describes the certificates of Domains, in their order,
// then those got on demand, by name.
func (m *Manager) Certificates() []CertInfo {
	out := make([]CertInfo, 0, len(m.opts.Domains))
	for _, d := range m.opts.Domains {
		out = append(out, m.info(strings.ToLower(d)))
	}
	m.demandMu.Lock()
	extra := make([]string, 0, len(m.demand))
	for n := range m.demand {
		extra = append(extra, n)
	}
	m.demandMu.Unlock()
	slices.Sort(extra)
	for _, n := range extra {
		out = append(out, m.info(n))
	}
	return out
}

func (m *Manager) info(name string) CertInfo {
	ci := CertInfo{Name: name}
	for _, c := range m.cache.AllMatchingCertificates(name) {
		if c.Leaf != nil && c.Leaf.NotAfter.After(ci.NotAfter) {
			ci.NotAfter = c.Leaf.NotAfter
			ci.Serial = c.Leaf.SerialNumber.Text(16)
		}
	}
	return ci
}
