package tlsconf

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
)

// The ALPN protocol names.
const (
	ALPNHTTP2 = "h2"
	ALPNHTTP1 = "http/1.1"
)

// ClientOptions are an upstream's TLS settings towards its backends. The
// zero value of each field is noted.
type ClientOptions struct {
	// CAFile holds the PEM CA certificates backends are verified against.
	// Empty: the system's roots.
	CAFile string
	// ServerName is the name sent in SNI and verified in the backend's
	// certificate. Empty: the host of each backend's address (an IP
	// address is then verified against the certificate's IP SANs).
	ServerName string
	// CertFile and KeyFile are a client certificate presented to
	// backends that ask for one. Empty: none.
	CertFile, KeyFile string
	// MinVersion is the oldest TLS version spoken. Zero: TLS 1.2.
	MinVersion uint16
	// InsecureSkipVerify accepts any certificate a backend presents.
	// Anyone on the path can then impersonate the backend; it exists for
	// backends with throwaway certificates on a trusted network.
	InsecureSkipVerify bool
	// HTTP2 offers only h2 in ALPN (protocol h2); the backend must select
	// it, which CheckALPN verifies. False: http/1.1 only.
	HTTP2 bool
	// SessionCacheSize is how many sessions are kept for resumption,
	// one per backend, across the upstream's backends. Zero: 1024.
	SessionCacheSize int
}

// defaultClientSessions is the default ClientOptions.SessionCacheSize.
const defaultClientSessions = 1024

// Client is the TLS configuration of one upstream's connections to its
// backends. It is safe for concurrent use.
type Client struct {
	opts  ClientOptions
	print [32]byte // options and file contents; equal prints share a cache
	base  *tls.Config
	cache tls.ClientSessionCache // shared by every backend's config
	// perAddr caches the config of each backend address.
	perAddr sync.Map // string -> *tls.Config
}

// NewClient loads o's files and returns the configuration. prev, when not
// nil, is the same upstream's Client before a reload: if nothing changed
// (options and file contents), its session cache is kept, so connections
// made after the reload still resume. A changed CA or client certificate
// starts a new cache, so no session verified under the old trust resumes.
func NewClient(o ClientOptions, prev *Client) (*Client, error) {
	c := &Client{opts: o}
	cfg := &tls.Config{
		ServerName:         o.ServerName,
		MinVersion:         o.MinVersion,
		InsecureSkipVerify: o.InsecureSkipVerify,
		NextProtos:         []string{ALPNHTTP1},
	}
	if cfg.MinVersion == 0 {
		cfg.MinVersion = tls.VersionTLS12
	}
	if o.HTTP2 {
		cfg.NextProtos = []string{ALPNHTTP2}
	}
	h := sha256.New()
	fmt.Fprintf(h, "%q %q %q %q %d %t %t %d\n", o.CAFile, o.ServerName, o.CertFile, o.KeyFile, o.MinVersion, o.InsecureSkipVerify, o.HTTP2, o.SessionCacheSize)
	if o.CAFile != "" {
		pool, cas, err := LoadCAs(o.CAFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
		for _, ca := range cas {
			writeBlob(h, ca.Raw)
		}
	}
	if o.CertFile != "" || o.KeyFile != "" {
		cert, err := LoadKeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{*cert}
		for _, der := range cert.Certificate {
			writeBlob(h, der)
		}
	}
	h.Sum(c.print[:0])
	if prev != nil && prev.print == c.print {
		c.cache = prev.cache
	} else {
		size := o.SessionCacheSize
		if size <= 0 {
			size = defaultClientSessions
		}
		c.cache = tls.NewLRUClientSessionCache(size)
	}
	c.base = cfg
	return c, nil
}

// writeBlob writes b to h with its length, so that two blobs cannot run
// together into the same bytes.
func writeBlob(h interface{ Write([]byte) (int, error) }, b []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(b)))
	h.Write(n[:])
	h.Write(b)
}

// Config returns the configuration for connecting to the backend at addr
// (host:port): ServerName is ClientOptions.ServerName or, when that is
// empty, addr's host. Sessions are cached per backend address (crypto/tls
// would key them by server name alone, and backends that share a name
// would keep replacing each other's sessions, which only the backend that
// issued one can resume). The result must not be modified.
func (c *Client) Config(addr string) *tls.Config {
	if cfg, ok := c.perAddr.Load(addr); ok {
		return cfg.(*tls.Config)
	}
	cfg := c.base.Clone()
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		cfg.ServerName = host
	}
	cfg.ClientSessionCache = backendCache{addr: addr, shared: c.cache}
	actual, _ := c.perAddr.LoadOrStore(addr, cfg)
	return actual.(*tls.Config)
}

// backendCache is one backend's view of an upstream's session cache.
type backendCache struct {
	addr   string
	shared tls.ClientSessionCache
}

// Get returns the session cached for key at this backend.
func (b backendCache) Get(key string) (*tls.ClientSessionState, bool) {
	return b.shared.Get(b.addr + "\x00" + key)
}

// Put caches cs for key at this backend (nil cs removes it).
func (b backendCache) Put(key string, cs *tls.ClientSessionState) {
	b.shared.Put(b.addr+"\x00"+key, cs)
}

// ErrNoH2 is CheckALPN's error for a backend that did not agree to speak
// HTTP/2.
var ErrNoH2 = errors.New("backend did not select h2 in ALPN")

// CheckALPN reports whether a connection's negotiated protocol is what the
// Client asked for: with HTTP2, the backend must have selected h2 (a
// backend that ignores ALPN would otherwise be sent HTTP/2 frames it
// cannot read). Without it anything goes: HTTP/1.1 needs no agreement.
func (c *Client) CheckALPN(cs tls.ConnectionState) error {
	if c.opts.HTTP2 && cs.NegotiatedProtocol != ALPNHTTP2 {
		return ErrNoH2
	}
	return nil
}

// InsecureSkipVerify reports whether backends' certificates go unchecked
// (for a warning at every start and reload).
func (c *Client) InsecureSkipVerify() bool { return c.opts.InsecureSkipVerify }
