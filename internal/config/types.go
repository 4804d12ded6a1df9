// Package config defines Helios's YAML configuration: the structs, their
// defaults, strict decoding with line numbers, and validation that reports
// every problem at once as FILE:LINE: key.path: what is wrong (what is allowed).
//
// The package holds data only; internal/server turns a Config into running
// objects.
//
// # Reading a file
//
// Parse (and Load, which reads a file and calls Parse) runs four steps and
// reports every problem it finds, not just the first:
//
//  1. Environment expansion. ${NAME} is replaced by the value of the
//     environment variable NAME, and ${NAME:-default} by its value or, when
//     NAME is unset or empty, by default. An unset NAME without a default
//     expands to the empty string. $$ is a literal $. Any other $ is kept as
//     is. Expansion happens on the raw text, before YAML parsing, anywhere in
//     the file (comments included), so a value is pasted as written: quote
//     the reference ("${TOKEN}") when a value may hold YAML punctuation.
//     A value may not contain a line break, which keeps line numbers right.
//     A key whose value expands to nothing (key: ${UNSET}) is null, which is
//     the same as leaving the key out.
//  2. Strict decoding. Unknown keys, duplicate keys, values of the wrong
//     type and YAML syntax errors are problems. A null value is the same as
//     an absent key. Quoted numbers ("2") are strings, not integers, and
//     booleans are true or false only. Anchors and aliases work; merge keys
//     (<<) are not supported.
//  3. Defaults (SetDefaults). A default fills a key that is absent; a key
//     that is present keeps its value, so weight: 0 is reported as an error
//     rather than silently becoming 1.
//  4. Validation (Config.Validate).
//
// The default of every key is documented on its field below.
package config

import (
	"net"
	"net/netip"
	"strings"
	"time"
)

// Config is a whole Helios configuration file.
type Config struct {
	// Listeners are the addresses Helios serves. At least one is required.
	Listeners []Listener `yaml:"listeners"`
	// Routes map requests to actions, tried in order. At least one is
	// required.
	Routes []Route `yaml:"routes"`
	// Upstreams are the backend pools routes forward to. Required only
	// when a route names one.
	Upstreams []Upstream `yaml:"upstreams"`
	// Admin configures the admin listener; the zero Admin gets the
	// defaults documented on its fields.
	Admin Admin `yaml:"admin"`
	// Logging configures the logs; the zero Logging gets the defaults
	// documented on its fields.
	Logging Logging `yaml:"logging"`
	// Discovery configures DNS lookups of dns and srv backends and the
	// checks of backends files; the zero Discovery gets the defaults
	// documented on its fields.
	Discovery Discovery `yaml:"discovery"`
	// RequestBuffers bounds what request buffering (routes[].
	// request_buffering) holds across routes: per client connection and
	// for the whole process. The zero RequestBuffers gets the defaults
	// documented on its fields.
	RequestBuffers RequestBuffers `yaml:"request_buffers"`
	// ResponseBuffers caps what response buffering holds across the
	// process; the zero ResponseBuffers gets the defaults documented on
	// its fields.
	ResponseBuffers ResponseBuffers `yaml:"response_buffers"`
	// Tracing exports OpenTelemetry traces of the requests; nil (the
	// default) traces nothing.
	Tracing *Tracing `yaml:"tracing"`

	// File is the path the configuration was read from ("" when parsed
	// from memory). Not a YAML key.
	File string `yaml:"-"`
	// Warnings are what Parse found worth fixing that does not make the
	// config invalid (a certificate that expires within 14 days); nil when
	// there is nothing to say, and for a Config built in code. Not a YAML
	// key.
	Warnings Problems `yaml:"-"`

	// meta records which keys the YAML held and on which lines. It is nil
	// for a Config built in code.
	meta *meta
}

// IsSet reports whether the file gave the key at path (a key path as
// problems name them, such as listeners[0].max_connections) a value, rather
// than leaving it to its default. It is false for a Config built in code.
func (c *Config) IsSet(path string) bool { return c.meta.present(path) }

// Listener is one listening address served by a pool of SO_REUSEPORT sockets.
type Listener struct {
	// Name identifies the listener in logs and metrics. Required, unique
	// among listeners.
	Name string `yaml:"name"`
	// Address is host:port. The host may be empty (all interfaces), an IP
	// ([::1] for IPv6) or a hostname; the port is a number 1-65535.
	// Required, unique among listeners.
	Address string `yaml:"address"`
	// Sockets is the number of SO_REUSEPORT sockets, 1-1024. Default: the
	// number of CPUs the Go runtime may use (runtime.GOMAXPROCS, which
	// follows a container's CPU limit; at most 1024).
	Sockets int `yaml:"sockets"`
	// Backlog is the listen(2) backlog of each socket, 1-65535. Default 4096.
	Backlog int `yaml:"backlog"`
	// MaxConnections caps concurrently open client connections across the
	// listener's sockets; at least 1. Default 20000.
	MaxConnections int `yaml:"max_connections"`
	// ReadHeaderTimeout bounds reading a request's headers. 0 means no
	// limit. Default 10s.
	ReadHeaderTimeout Duration `yaml:"read_header_timeout"`
	// ReadTimeout bounds reading a whole request, body included. 0 means no
	// limit. Default 0.
	ReadTimeout Duration `yaml:"read_timeout"`
	// WriteTimeout bounds how long one write of a response to the client
	// may block, like nginx's send_timeout: a client that stops reading is
	// dropped. 0 means no limit. Default 60s.
	WriteTimeout Duration `yaml:"write_timeout"`
	// IdleTimeout bounds the wait for the next request on a keep-alive
	// connection. 0 means no limit. Default 60s.
	IdleTimeout Duration `yaml:"idle_timeout"`
	// MaxHeaderBytes caps the size of a request's headers, 1024-1048576.
	// Default 65536.
	MaxHeaderBytes int `yaml:"max_header_bytes"`
	// MaxHeaderCount caps the number of header fields in a request head,
	// 1-10000; more get 431. Default 100.
	MaxHeaderCount int `yaml:"max_header_count"`
	// MaxMethodBytes caps the length of a request method, 1-1024; longer
	// ones get 501. Default 32.
	MaxMethodBytes int `yaml:"max_method_bytes"`
	// UnderscoresInHeaders forwards request header fields whose names
	// contain an underscore. Off (the default, as nginx's
	// underscores_in_headers), they are dropped: CGI, WSGI and PHP read
	// X_Forwarded_For as X-Forwarded-For, so such a field could forge
	// one that Helios sets.
	UnderscoresInHeaders bool `yaml:"underscores_in_headers"`
	// OutputBufferBytes bounds the answer that may wait for a client that
	// reads slowly, 4096-67108864; past it Helios stops reading from the
	// backend until the client catches up. Default 65536.
	OutputBufferBytes int `yaml:"output_buffer_bytes"`
	// Poller is how the event loops serving the listener learn which
	// sockets are ready: "native" (the system's own poller: epoll on
	// Linux) or "portable" (Go's netpoller, which every system has;
	// slower, and what non-Linux systems get with either value). Default
	// "native".
	Poller string `yaml:"poller"`
	// Engine is Poller's old name, read when Poller is not set ("loop"
	// for "native"; "portable"); validate warns that it is deprecated.
	Engine string `yaml:"engine"`
	// TLS makes the listener speak TLS; nil means cleartext.
	TLS *ListenerTLS `yaml:"tls"`
	// HTTP2 offers HTTP/2 (ALPN h2, then http/1.1) on a TLS listener;
	// false offers HTTP/1.1 only. Only with TLS. Default true with TLS
	// (OffersHTTP2 reads it).
	HTTP2 *bool `yaml:"http2"`
	// H2C accepts cleartext HTTP/2 with prior knowledge on a listener
	// without TLS, beside HTTP/1.1. Default false.
	H2C bool `yaml:"h2c"`
	// TrustedProxies lists the peers (CIDRs or addresses) whose
	// forwarding field (ClientIPHeader) is believed: a request from one
	// has the right-most address of that field that is not itself
	// trusted as its client, and its X-Forwarded-* fields are passed on
	// (X-Forwarded-For appended to). A request from any other peer has
	// the peer as its client, and its X-Forwarded-For, X-Forwarded-Proto,
	// X-Forwarded-Host, Forwarded and X-Real-IP are replaced or dropped,
	// never passed on. Only they may send a PROXY header. Default none.
	TrustedProxies []string `yaml:"trusted_proxies"`
	// ClientIPHeader is the field trusted proxies name the client in:
	// x-forwarded-for, forwarded (RFC 7239's for=) or x-real-ip. Only
	// with TrustedProxies. Default x-forwarded-for (with TrustedProxies).
	ClientIPHeader string `yaml:"client_ip_header"`
	// ProxyProtocol makes connections start with a PROXY protocol header
	// (from an L4 load balancer), whose source is then the connection's
	// address: v1 (text) or v2 (binary) requires that version, optional
	// takes either or none. A connection without a valid header where one
	// is required, with a header from a peer not in TrustedProxies, or
	// whose header does not come within ReadHeaderTimeout (10s when that
	// is 0) is closed and counted. Needs TrustedProxies. "" (the default)
	// means off.
	ProxyProtocol string `yaml:"proxy_protocol"`
	// RedirectHTTPS answers the listener's cleartext requests with 308 to
	// the same host, path and query over HTTPS (the port of the first TLS
	// listener, left out when 443), but for routes with https_redirect
	// false; a trusted proxy's X-Forwarded-Proto: https counts as HTTPS.
	// Only on a listener without TLS. Default false.
	RedirectHTTPS bool `yaml:"redirect_https"`
	// MaxConnectionsPerIP caps the open connections of one client address
	// (after its PROXY header); more are closed at once and counted. 0
	// means no cap. Default 0.
	MaxConnectionsPerIP int `yaml:"max_connections_per_ip"`
}

// The Listener.ClientIPHeader values.
const (
	ClientIPXForwardedFor = "x-forwarded-for"
	ClientIPForwarded     = "forwarded"
	ClientIPXRealIP       = "x-real-ip"
)

// The Listener.ProxyProtocol and Transport.ProxyProtocol values.
const (
	ProxyProtocolV1       = "v1"
	ProxyProtocolV2       = "v2"
	ProxyProtocolOptional = "optional"
)

// The Listener.Poller values.
const (
	PollerNative   = "native"
	PollerPortable = "portable"
)

// The Listener.Engine values, the old names of the pollers.
const (
	EngineLoop     = "loop"
	EnginePortable = "portable"
)

// Route maps matching requests to exactly one action: Upstream, Split,
// Respond or Static. Action reports which.
type Route struct {
	// Name identifies the route in logs and metrics. Required, unique
	// among routes.
	Name string `yaml:"name"`
	// Match selects the requests of the route; the zero Match matches
	// every request.
	Match Match `yaml:"match"`
	// Upstream names the upstream that requests are forwarded to; "" means
	// the route has another action.
	Upstream string `yaml:"upstream"`
	// Split shares the route's requests among upstreams by weight (a
	// canary release), with variants a header or cookie can pin; nil (or
	// empty) means the route has another action.
	Split []SplitTarget `yaml:"split"`
	// Mirror sends a copy of a share of the route's requests to a shadow
	// upstream and drops its answers; nil means no mirroring. Only for
	// routes that forward.
	Mirror *Mirror `yaml:"mirror"`
	// SplitKey makes a split's choice a function of the request's key, in
	// the syntax of Upstream.HashKey, so that a client stays on its
	// variant; requests without the key, and every request when SplitKey
	// is "", are shared out at random. Only with Split. Default "".
	SplitKey string `yaml:"split_key"`
	// Respond answers with a fixed response; nil means the route has
	// another action.
	Respond *Respond `yaml:"respond"`
	// Static serves files from a directory; nil means the route has
	// another action.
	Static *Static `yaml:"static"`
	// Redirect answers with a redirect; nil means the route has another
	// action.
	Redirect *Redirect `yaml:"redirect"`
	// Upgrades lists the protocols a client may switch to through this
	// route (the Upgrade header, such as websocket), compared without
	// case and without a version. A request asking for any other
	// protocol is served as a plain request, its Upgrade and Connection
	// tokens removed. h2c is never allowed: a tunnel past the proxy
	// would reach paths other routes guard. Absent: [websocket]; []
	// allows none. Only for routes that forward (upstream or split; the
	// default is filled in only there).
	Upgrades []string `yaml:"upgrades"`
	// AllowMethods lists the methods refused by default that this route
	// accepts: TRACE and CONNECT (with a path; Helios is not a forward
	// proxy). Others get 405. Default none.
	AllowMethods []string `yaml:"allow_methods"`
	// RequestBuffering says whether a request body is read before a
	// backend is chosen, so that a slow client costs a backend nothing:
	// auto (buffer up to RequestBufferMemoryBytes in memory, then up to
	// RequestBufferFileBytes in a temporary file, and stream the rest of
	// a larger body), on (buffer whole bodies; larger ones get 413) or
	// off (stream every body as it arrives). Default auto. Only for routes
	// that forward (the defaults are filled in only there).
	RequestBuffering string `yaml:"request_buffering"`
	// MaxBodyBytes bounds request bodies; larger ones get 413. 0 means no
	// limit. Default 104857600 (100 MiB).
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// RequestBufferMemoryBytes is how much of a body request buffering
	// keeps in memory, 0-67108864. Default 65536.
	RequestBufferMemoryBytes int `yaml:"request_buffer_memory_bytes"`
	// RequestBufferFileBytes is how much more it keeps in a temporary
	// file (in $TMPDIR, unlinked at once), 0 or more. Default 16777216.
	RequestBufferFileBytes int64 `yaml:"request_buffer_file_bytes"`
	// HTTPSRedirect redirects (308) the route's cleartext requests for a
	// host whose certificate a listener gets through ACME, and every
	// cleartext request on a listener with redirect_https, to the same
	// URL over HTTPS; false serves them over cleartext too. Hosts without
	// an ACME certificate are never redirected by it. nil means the
	// default, true; HTTPSRedirects reads it.
	HTTPSRedirect *bool `yaml:"https_redirect"`
	// Rewrite changes the path of the requests the route forwards or
	// serves from files; nil means none.
	Rewrite *Rewrite `yaml:"rewrite"`
	// RequestHeaders edit the head of the requests the route forwards;
	// nil means none.
	RequestHeaders *HeaderRules `yaml:"request_headers"`
	// ResponseHeaders edit the head of every answer the route gives:
	// a backend's, a fixed or static one, a redirect, an error; nil means
	// none.
	ResponseHeaders *HeaderRules `yaml:"response_headers"`
	// Allow lists the client addresses (CIDRs or addresses) the route
	// serves; others get 403. nil (or empty) means every client.
	Allow []string `yaml:"allow"`
	// Deny lists client addresses the route answers 403, whatever Allow
	// says. nil means none.
	Deny []string `yaml:"deny"`
	// BasicAuth asks for HTTP Basic credentials; nil means none.
	BasicAuth *BasicAuth `yaml:"basic_auth"`
	// ForwardAuth asks an authentication service about each request; nil
	// means none.
	ForwardAuth *ForwardAuth `yaml:"forward_auth"`
	// RateLimit limits the route's requests; nil means no limit.
	RateLimit *RateLimit `yaml:"rate_limit"`
	// ResponseBuffering says what happens to an answer whose client reads
	// it more slowly than the backend sends it: auto (it is read into a
	// buffer, up to ResponseBufferMemoryBytes in memory, then up to
	// ResponseBufferFileBytes in a temporary file, within the process's
	// ResponseBuffers, so that the backend connection is let go as soon
	// as the whole answer is in; answers that say they are streams are
	// never buffered) or off (the backend waits for the client). Default
	// auto. Only for routes with an upstream (the defaults are filled in
	// only there).
	ResponseBuffering string `yaml:"response_buffering"`
	// ResponseBufferMemoryBytes is how much of one answer response
	// buffering keeps in memory, 0-67108864. Default 65536.
	ResponseBufferMemoryBytes int `yaml:"response_buffer_memory_bytes"`
	// ResponseBufferFileBytes is how much more of one answer it keeps in
	// a temporary file (in $TMPDIR, unlinked at once), 0 or more. An
	// answer of known length that does not fit is not buffered. Default
	// 67108864.
	ResponseBufferFileBytes int64 `yaml:"response_buffer_file_bytes"`
}

// The Route.ResponseBuffering values are BufferingAuto and BufferingOff.

// ResponseBuffers caps what response buffering holds across the process,
// all routes' answers together; an answer that would pass a cap is not
// buffered further (it waits for its client, as with response_buffering
// off).
type ResponseBuffers struct {
	// MemoryBytes caps the bytes held in memory, 0 or more (0: none).
	// Default 67108864.
	MemoryBytes int64 `yaml:"memory_bytes"`
	// FileBytes caps the bytes held in temporary files, 0 or more (0:
	// none). Default 1073741824.
	FileBytes int64 `yaml:"file_bytes"`
}

// SplitTarget is one upstream of a route's split.
type SplitTarget struct {
	// Upstream names the upstream. Required; each upstream at most once
	// per split.
	Upstream string `yaml:"upstream"`
	// Weight is the upstream's share of the requests no match decides,
	// relative to the other weights, 0-1000000; 0 means only requests that
	// match reach it. Default 0.
	Weight int `yaml:"weight"`
	// Match pins requests that carry a header or cookie to this upstream,
	// whatever the weights (so testers can force the canary); the first
	// target whose match fits wins. nil means no pinning.
	Match *SplitMatch `yaml:"match"`
}

// SplitMatch selects requests by a header or a cookie: exactly one of
// Header and Cookie is set.
type SplitMatch struct {
	// Header is a header name (compared without case).
	Header string `yaml:"header"`
	// Cookie is a cookie name (compared exactly).
	Cookie string `yaml:"cookie"`
	// Value is what the header or cookie must equal exactly; "" matches
	// any non-empty value. Default "".
	Value string `yaml:"value"`
}

// The Route.RequestBuffering values.
const (
	BufferingAuto = "auto"
	BufferingOn   = "on"
	BufferingOff  = "off"
)

// DefaultUpgrades is the Route.Upgrades of a route that does not set it.
// Read only: SetDefaults copies it.
var DefaultUpgrades = []string{"websocket"}

// The methods Route.AllowMethods may list.
const (
	MethodTrace   = "TRACE"
	MethodConnect = "CONNECT"
)

// Action is the kind of a route's action.
type Action int

// The route actions. ActionNone is only seen on a Route that failed
// validation.
const (
	ActionNone Action = iota
	ActionUpstream
	ActionRespond
	ActionStatic
	ActionSplit
	ActionRedirect
)

// String returns the YAML key of the action ("upstream", "split",
// "respond", "static"), or "none".
func (a Action) String() string {
	switch a {
	case ActionUpstream:
		return "upstream"
	case ActionSplit:
		return "split"
	case ActionRespond:
		return "respond"
	case ActionStatic:
		return "static"
	case ActionRedirect:
		return "redirect"
	}
	return "none"
}

// Action reports the route's action. On a validated route exactly one of
// Upstream, Split, Respond, Static and Redirect is set; if several are
// set, Action reports the first in that order, and ActionNone if none is.
func (r Route) Action() Action {
	switch {
	case r.Upstream != "":
		return ActionUpstream
	case len(r.Split) > 0:
		return ActionSplit
	case r.Respond != nil:
		return ActionRespond
	case r.Static != nil:
		return ActionStatic
	case r.Redirect != nil:
		return ActionRedirect
	}
	return ActionNone
}

// Forwards reports whether the route sends requests to backends (an
// upstream or a split), which is what the body, buffering and upgrade keys
// are about.
func (r Route) Forwards() bool { return r.Upstream != "" || len(r.Split) > 0 }

// Match selects requests by host and path. Empty fields match everything.
type Match struct {
	// Host is "" or "*" (any host), an exact hostname such as example.com,
	// or *.example.com (any subdomain of example.com, not example.com
	// itself). No port. Validation does not change its case; compare
	// hostnames case-insensitively.
	Host string `yaml:"host"`
	// Path matches the request path exactly; "" means any path. Starts
	// with "/". At most one of Path and PathPrefix is set.
	Path string `yaml:"path"`
	// PathPrefix matches request paths that start with it; "" means any
	// path. Starts with "/".
	PathPrefix string `yaml:"path_prefix"`
	// Methods lists the request methods that match (exactly: methods are
	// case-sensitive); nil (or empty) means any method.
	Methods []string `yaml:"methods"`
	// Headers are request header fields that must be present, by name
	// (any case): "*" (present, any value), "~" and a regular expression
	// (RE2, unanchored: write ^ and $), or the exact value; nil means no
	// condition.
	Headers map[string]string `yaml:"headers"`
	// Query are query parameters that must be present, by name (exact),
	// their values compared after percent-decoding, as Headers; nil means
	// no condition.
	Query map[string]string `yaml:"query"`
	// ClientCIDRs lists the client addresses that match, as CIDRs or
	// single addresses (the client address the listener found, through
	// its trusted_proxies and proxy_protocol); nil means any client.
	ClientCIDRs []string `yaml:"client_cidrs"`
	// Not is a match that must fail: a request it matches (all of its
	// keys) does not match the route. Nil means none.
	Not *Match `yaml:"not"`
}

// Respond is a fixed answer, like nginx's `return`.
type Respond struct {
	// Status is the response status, 100-599. Default 200.
	Status int `yaml:"status"`
	// Body is the response body; "" means an empty body.
	Body string `yaml:"body"`
	// Headers are added to the response; nil means none. Names are HTTP
	// tokens; values are single lines.
	Headers map[string]string `yaml:"headers"`
}

// Static serves files from a directory.
type Static struct {
	// Root is the directory files are served from. Required; it must exist
	// when the configuration is validated. A relative root is relative to
	// the directory of the configuration file (Parse and Load make it so),
	// not to the working directory of the process.
	Root string `yaml:"root"`
	// Index is the file served for a directory: a plain file name without
	// "/". Default "index.html".
	Index string `yaml:"index"`
	// StripPrefix is removed from the request path before it is joined to
	// Root; "" removes nothing. Starts with "/".
	StripPrefix string `yaml:"strip_prefix"`
}

// Upstream is a named pool of backends with a balancing strategy.
type Upstream struct {
	// Name is what routes refer to. Required, unique among upstreams.
	Name string `yaml:"name"`
	// Strategy is one of round_robin, weighted_round_robin, least_conn,
	// consistent_hash, ip_hash (consistent_hash on client_ip), random, p2c
	// (the names of package balancer). Default round_robin.
	Strategy string `yaml:"strategy"`
	// HashKey is where consistent_hash reads a request's key: client_ip,
	// header:NAME, cookie:NAME, path, or query:NAME. Only with
	// consistent_hash; ip_hash always hashes client_ip. Default client_ip.
	// ParseHashKey parses it.
	HashKey string `yaml:"hash_key"`
	// HashFallback is the strategy for a request without the key: any
	// strategy but consistent_hash and ip_hash. Only with consistent_hash.
	// Default round_robin.
	HashFallback string `yaml:"hash_fallback"`
	// BoundedLoad, 1-100, bounds consistent_hash (and ip_hash): a backend
	// that would carry more than this times its weighted share of the
	// requests in flight (rounded up) passes the key to its next choice;
	// 1.25 is a common setting. 0 turns the bound off. Default 0.
	BoundedLoad float64 `yaml:"bounded_load"`
	// SlowStart is how long a backend that comes back into rotation (up
	// from down, at the end of an ejection, or added by a reload) takes
	// to reach its full share, its effective weight growing linearly,
	// 0-1h; 0 turns slow start off. Default 0.
	SlowStart Duration `yaml:"slow_start"`
	// Sticky keeps each client on one backend with a cookie; nil (the
	// key absent) means no sticky sessions.
	Sticky *Sticky `yaml:"sticky"`
	// Backends are the origin servers: addresses, and DNS names that
	// stand for several (dns, srv) and are looked up again while Helios
	// runs. At least one backend, or a BackendsFile, is required.
	Backends []Backend `yaml:"backends"`
	// BackendsFile is a file listing more backends, YAML or JSON: a list
	// of {address, weight} as in Backends. It is read when the
	// configuration is loaded and again whenever it changes (checked
	// every discovery.file_refresh); a file that cannot be read or has a
	// problem keeps the backends it listed last. "" means none. A
	// relative path is relative to the directory of the configuration
	// file.
	BackendsFile string `yaml:"backends_file"`
	// AllowEmpty lets a discovery source (a dns or srv backend, the
	// BackendsFile) that answers with no backends take its backends out of
	// the upstream. False, the default: an empty answer counts as a failed
	// lookup and the source keeps the backends it gave last, so that a
	// DNS or file glitch cannot empty the upstream.
	AllowEmpty bool `yaml:"allow_empty"`
	// Transport tunes connections to the backends; the zero Transport gets
	// the defaults documented on its fields.
	Transport Transport `yaml:"transport"`
	// HealthCheck configures active health checks; nil (the key absent)
	// means no active checks and every backend counts as healthy.
	HealthCheck *HealthCheck `yaml:"health_check"`
	// Passive configures ejection of failing backends; nil (the key absent)
	// means no passive ejection.
	Passive *Passive `yaml:"passive"`
	// CircuitBreaker configures a per-backend breaker; nil (the key absent)
	// means no breaker.
	CircuitBreaker *CircuitBreaker `yaml:"circuit_breaker"`
	// Retries configures retrying failed requests. Unlike the blocks above,
	// an absent retries key does not turn retries off: SetDefaults gives
	// the upstream the default policy (attempts 2, on connect_error, reset,
	// 502, 503, 504, idempotent_only true, budget_ratio 0.2, no backoff, no
	// per-try timeout), because operators expect a refused connection to be
	// retried. Write retries: {attempts: 0} to disable retries. Never nil
	// after SetDefaults.
	Retries *Retries `yaml:"retries"`
}

// Backend is one origin server, or a DNS name standing for several that
// Helios looks up again while it runs: exactly one of Address, DNS and SRV
// is set.
type Backend struct {
	// Address is host:port, as for Listener.Address. Unique within the
	// upstream. A host name here is looked up by the event loops (every
	// 30s, first address only); use DNS for a name that stands for
	// several backends.
	Address string `yaml:"address"`
	// Weight is the backend's share under weighted strategies
	// (weighted_round_robin, least_conn, consistent_hash, p2c), 1-1000;
	// with DNS, the share of each of its addresses. Default 1 (not with
	// SRV, whose records carry their own weights). Strategies that ignore
	// weights ignore it.
	Weight int `yaml:"weight"`
	// DNS is a host name whose A and AAAA records are backends, each at
	// Port, looked up again every Refresh (a Kubernetes headless
	// Service, Consul, Docker's DNS). "" means the entry is not one.
	DNS string `yaml:"dns"`
	// Port is the port of DNS's addresses, 1-65535. Required with DNS;
	// not allowed otherwise.
	Port int `yaml:"port"`
	// SRV is a service name (such as _http._tcp.app.internal) whose SRV
	// records are backends: each target's addresses at the record's port,
	// with the record's weight (scaled into 1-1000 when larger, 0 read as
	// 1); only the records of the lowest priority are used. "" means the
	// entry is not one.
	SRV string `yaml:"srv"`
	// Refresh is how often DNS or SRV is looked up again; a record's
	// shorter TTL brings the next lookup forward, but never below
	// discovery.min_refresh. At least discovery.min_refresh. Default 5s.
	// Only with DNS or SRV.
	Refresh Duration `yaml:"refresh"`
}

// Kind reports which of Address, DNS and SRV the entry sets: "address",
// "dns" or "srv"; "" when it sets none (which Validate rejects). When
// several are set, the first in that order.
func (b Backend) Kind() string {
	switch {
	case b.Address != "":
		return "address"
	case b.DNS != "":
		return "dns"
	case b.SRV != "":
		return "srv"
	}
	return ""
}

// Discovery configures how dns and srv backends are looked up and how
// often backends files are checked.
type Discovery struct {
	// Resolver is the DNS server that dns and srv backends are looked up
	// on: an IP address, with a port (default 53). "" means the name
	// servers of /etc/resolv.conf, with its search list and ndots.
	// Either way lookups go to DNS only (not /etc/hosts).
	Resolver string `yaml:"resolver"`
	// Timeout bounds one lookup, its retries over TCP and on other
	// servers included; more than 0. Default 5s.
	Timeout Duration `yaml:"timeout"`
	// MinRefresh is the shortest time between two lookups of one name,
	// whatever a record's TTL says; more than 0. Default 1s.
	MinRefresh Duration `yaml:"min_refresh"`
	// FileRefresh is how often backends files are checked for changes;
	// more than 0. Default 1s.
	FileRefresh Duration `yaml:"file_refresh"`
}

// Transport tunes the keep-alive connections to an upstream's backends.
type Transport struct {
	// MaxIdlePerBackend caps idle keep-alive connections kept per backend,
	// 0-100000; 0 keeps none. Default 256.
	MaxIdlePerBackend int `yaml:"max_idle_per_backend"`
	// IdleTimeout closes a keep-alive connection idle for this long; more
	// than 0. Default 90s.
	IdleTimeout Duration `yaml:"idle_timeout"`
	// DialTimeout bounds connecting to a backend; more than 0. Default 2s.
	DialTimeout Duration `yaml:"dial_timeout"`
	// ResponseHeaderTimeout bounds the wait for a backend's response
	// headers after the request is written; more than 0. Default 30s.
	ResponseHeaderTimeout Duration `yaml:"response_header_timeout"`
	// ReadTimeout bounds each wait for response body bytes from a backend,
	// like nginx's proxy_read_timeout; 0 means no limit. Default 60s.
	ReadTimeout Duration `yaml:"read_timeout"`
	// MaxConnsPerBackend caps the connections (busy and idle) open to one
	// backend, like net/http's MaxConnsPerHost; it is shared out among the
	// event loops (as nginx's max_conns among its workers). Requests over
	// it wait in order for a connection. 0 means no cap. Default 0.
	MaxConnsPerBackend int `yaml:"max_conns_per_backend"`
	// MaxQueuePerBackend bounds the requests waiting for a connection to
	// one backend at its cap; more get 503 at once (or another backend).
	// 0-1000000. Default 256.
	MaxQueuePerBackend int `yaml:"max_queue_per_backend"`
	// QueueTimeout bounds one request's wait for a connection at the cap;
	// then 503 (or another backend). More than 0. Default 10s.
	QueueTimeout Duration `yaml:"queue_timeout"`
	// Protocol is what is spoken to the backends: http1 (HTTP/1.1, over
	// TLS when TLS is set), h2 (HTTP/2 over TLS, agreed through ALPN; TLS
	// gets its defaults when absent) or h2c (cleartext HTTP/2 with prior
	// knowledge). Default http1.
	Protocol string `yaml:"protocol"`
	// TLS makes connections to the backends use TLS; nil means cleartext
	// (except with Protocol h2).
	TLS *TransportTLS `yaml:"tls"`
	// ProxyProtocol sends a PROXY protocol header (v1 or v2) at the start
	// of every connection to a backend, naming the client (the address
	// the listener found) and the address it reached Helios at; a
	// connection then carries only that client's requests. "" (the
	// default) sends none.
	ProxyProtocol string `yaml:"proxy_protocol"`
}

// HealthCheck configures active health checks: a GET of Path on every
// backend each Interval. A present but empty block (health_check: {}) turns
// checks on with every default.
type HealthCheck struct {
	// Path is requested on each backend; starts with "/". Default /healthz.
	Path string `yaml:"path"`
	// Interval is the time between checks of one backend; more than 0.
	// Default 2s.
	Interval Duration `yaml:"interval"`
	// Timeout bounds one check; more than 0 and at most Interval.
	// Default 1s.
	Timeout Duration `yaml:"timeout"`
	// Fails is the number of failed checks in a row that marks a healthy
	// backend down; at least 1. Default 2.
	Fails int `yaml:"fails"`
	// Passes is the number of passed checks in a row that marks a down
	// backend up; at least 1. Default 2.
	Passes int `yaml:"passes"`
	// ExpectStatus lists the statuses that pass, as codes and lo-hi ranges
	// separated by commas ("200-399", "200,204,300-399"), codes 100-599.
	// Default "200-399". Expect returns it parsed.
	ExpectStatus string `yaml:"expect_status"`
}

// Expect returns ExpectStatus parsed by ParseStatusRanges. On a validated
// HealthCheck it cannot fail; on an invalid one it returns the empty set, so
// that no status passes.
func (h *HealthCheck) Expect() StatusSet {
	s, err := ParseStatusRanges(h.ExpectStatus)
	if err != nil {
		return StatusSet{}
	}
	return s
}

// Passive configures passive ejection on observed failures: a backend that
// fails MaxFails requests within FailWindow is ejected for EjectFor, and for
// longer after each further ejection, up to MaxEjectFor. A present but empty
// block (passive: {}) turns ejection on with every default.
type Passive struct {
	// MaxFails is the number of failures within FailWindow that ejects the
	// backend; at least 1. Default 3.
	MaxFails int `yaml:"max_fails"`
	// FailWindow is the window failures are counted in; more than 0.
	// Default 10s.
	FailWindow Duration `yaml:"fail_window"`
	// EjectFor is the length of a first ejection; more than 0. Default 30s.
	EjectFor Duration `yaml:"eject_for"`
	// MaxEjectFor caps the length of repeated ejections; at least EjectFor.
	// Default 300s.
	MaxEjectFor Duration `yaml:"max_eject_for"`
}

// CircuitBreaker configures the per-backend breaker. It opens when either
// trigger fires: ConsecutiveFailures failures in a row, or a failure ratio of
// at least FailureRatio over at least MinRequests requests within Interval.
// A present but empty block (circuit_breaker: {}) turns the breaker on with
// every default.
type CircuitBreaker struct {
	// ConsecutiveFailures is the number of failures in a row that opens the
	// breaker; 0 turns this trigger off. Default 5.
	ConsecutiveFailures int `yaml:"consecutive_failures"`
	// FailureRatio, 0-1, is the share of failed requests within Interval
	// that opens the breaker; 0 turns this trigger off. At most one of the
	// two triggers may be off. Default 0.5.
	FailureRatio float64 `yaml:"failure_ratio"`
	// MinRequests is the number of requests within Interval below which the
	// ratio trigger does not fire; at least 1. Default 20.
	MinRequests int `yaml:"min_requests"`
	// Interval is the window the ratio is measured over; more than 0.
	// Default 10s.
	Interval Duration `yaml:"interval"`
	// OpenFor is how long the breaker stays open before letting trial
	// requests through (half-open); more than 0. Default 10s.
	OpenFor Duration `yaml:"open_for"`
	// HalfOpenRequests is the number of trial requests let through while
	// half-open, 1-1000. Default 1.
	HalfOpenRequests int `yaml:"half_open_requests"`
}

// Retries configures retrying a failed request on another backend. See
// Upstream.Retries for what an absent block means.
type Retries struct {
	// Attempts is the number of tries after the first, 0-10; 0 disables
	// retries. Default 2.
	Attempts int `yaml:"attempts"`
	// On lists what is retried: connect_error (the backend could not be
	// reached, always safe to retry), reset (for idempotent methods only:
	// the backend closed or reset the connection, or sent something
	// unparsable, before its response head was complete, so nothing of its
	// answer reached the client), timeout (no response head in time,
	// response_header_timeout or per_try_timeout), or a status 500-599
	// written as a string or a number. Default [connect_error, reset,
	// "502", "503", "504"]. Conditions returns it parsed.
	On []string `yaml:"on"`
	// IdempotentOnly restricts retries after the request was sent (timeout
	// and statuses) to idempotent methods; connect errors are retried for
	// every method. nil means the default, true.
	IdempotentOnly *bool `yaml:"idempotent_only"`
	// BudgetRatio caps retries at this share of requests, 0-1; 0 turns the
	// budget off, leaving retries bounded by Attempts alone. Default 0.2.
	BudgetRatio float64 `yaml:"budget_ratio"`
	// Backoff spaces retries out; nil (the key absent) retries at once.
	// A present but empty block (backoff: {}) gets every default.
	Backoff *Backoff `yaml:"backoff"`
	// PerTryTimeout bounds each attempt, from its start to the response
	// head (connecting and waiting for a connection included), 0-1h; an
	// attempt cut short is a timeout. 0 means no bound but the transport's.
	// Default 0.
	PerTryTimeout Duration `yaml:"per_try_timeout"`
}

// Backoff is the wait before each retry: a random time ("full jitter")
// between 0 and Base doubled for each retry before it, at most Max.
type Backoff struct {
	// Base is the ceiling of the wait before the first retry, 1ms-1m.
	// Default 25ms.
	Base Duration `yaml:"base"`
	// Max caps the ceiling as it doubles, Base-1m. Default 250ms.
	Max Duration `yaml:"max"`
}

// The retry conditions other than status codes, as written in Retries.On.
const (
	RetryOnConnectError = "connect_error"
	RetryOnReset        = "reset"
	RetryOnTimeout      = "timeout"
)

// RetryConditions is Retries.On parsed.
type RetryConditions struct {
	// ConnectError retries requests whose backend could not be reached.
	ConnectError bool
	// Reset retries idempotent requests whose backend broke the
	// connection before its response head was complete.
	Reset bool
	// Timeout retries requests that timed out waiting for a response.
	Timeout bool
	// Statuses retries responses with these status codes; the zero set
	// retries none.
	Statuses StatusSet
}

// Conditions returns On parsed. Entries that are not valid conditions (which
// Validate rejects) are ignored.
func (r *Retries) Conditions() RetryConditions {
	var c RetryConditions
	for _, on := range r.On {
		switch on {
		case RetryOnConnectError:
			c.ConnectError = true
		case RetryOnReset:
			c.Reset = true
		case RetryOnTimeout:
			c.Timeout = true
		default:
			if code, ok := retryStatus(on); ok {
				c.Statuses.add(code)
			}
		}
	}
	return c
}

// Idempotent reports IdempotentOnly, reading nil as the default, true.
func (r *Retries) Idempotent() bool {
	return r.IdempotentOnly == nil || *r.IdempotentOnly
}

// RequestBuffers bounds request buffering beyond each route's caps
// (request_buffer_memory_bytes, request_buffer_file_bytes), so that many
// bodies at once, the streams of one HTTP/2 connection or the
// connections of many clients, cannot make Helios hold more than this. A
// body that finds no room left is treated as one past its route's caps:
// with request_buffering auto what was buffered is forwarded and the rest
// streams; with on the request gets 503 (the buffers are full for now).
type RequestBuffers struct {
	// ConnectionBytes bounds what request buffering holds for one client
	// connection, in memory and in temporary files together; the streams
	// of an HTTP/2 connection share it. At least 65536. Default 33554432
	// (32 MiB).
	ConnectionBytes int64 `yaml:"connection_bytes"`
	// MemoryBytes bounds the request bodies held in memory across the
	// process; past it, bodies go to their temporary files. 0 or more
	// (0 keeps none in memory). Default 268435456 (256 MiB).
	MemoryBytes int64 `yaml:"memory_bytes"`
	// FileBytes bounds the request bodies held in temporary files
	// across the process. 0 or more (0 writes none). Default 1073741824
	// (1 GiB).
	FileBytes int64 `yaml:"file_bytes"`
}

// Admin configures the admin listener.
type Admin struct {
	// Address is host:port, or "off" to disable the admin listener.
	// Default 127.0.0.1:9901. Enabled reports whether it is on.
	Address string `yaml:"address"`
	// Token, when set, must be sent as "Authorization: Bearer TOKEN" to
	// use the admin API; absent means no authentication, which validation
	// allows only on a loopback Address or with InsecureNoToken. A token
	// key that is present but empty (as when its ${VAR} is unset) is a
	// problem, never a quiet "no authentication".
	Token string `yaml:"token"`
	// Pprof serves net/http/pprof under /debug/pprof/ on the admin
	// listener. Default false.
	Pprof bool `yaml:"pprof"`
	// InsecureNoToken allows an Address reachable from other hosts without
	// a Token; Helios then warns at every start. Default false.
	InsecureNoToken bool `yaml:"insecure_no_token"`
}

// LoopbackOnly reports whether the admin Address can only be reached from
// this host: a loopback IP address or localhost. An empty host (all
// interfaces) and other host names are not.
func (a Admin) LoopbackOnly() bool {
	host, _, err := net.SplitHostPort(a.Address)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// AdminOff is the Admin.Address that disables the admin listener.
const AdminOff = "off"

// Enabled reports whether the admin listener should run: Address is not
// "off". A zero Admin (defaults not applied) counts as enabled.
func (a Admin) Enabled() bool { return a.Address != AdminOff }

// Logging configures the process log and the access log.
type Logging struct {
	// Level is debug, info, warn or error. Default info.
	Level string `yaml:"level"`
	// Format is json or console. Default json.
	Format string `yaml:"format"`
	// AccessLog is off, stdout, stderr, or the path of a file to append
	// to (any other value; a relative path is relative to the directory of
	// the configuration file). Default off.
	AccessLog string `yaml:"access_log"`
	// AccessFormat is the access log's line format: json, console, or
	// combined (nginx's combined format); "" means the same as Format.
	// AccessLineFormat resolves it. Default "".
	AccessFormat string `yaml:"access_format"`
}

// AccessLineFormat returns the access log's format: AccessFormat, or
// Format when AccessFormat is empty.
func (l Logging) AccessLineFormat() string {
	if l.AccessFormat != "" {
		return l.AccessFormat
	}
	return l.Format
}

// The special values of Logging.AccessLog; anything else is a file path.
const (
	AccessLogOff    = "off"
	AccessLogStdout = "stdout"
	AccessLogStderr = "stderr"
)

// Duration is a time.Duration written in YAML as a Go duration string ("2s",
// "500ms", "1m30s"). The zero Duration is 0; a bare 0 is accepted in YAML.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String returns d formatted as time.Duration does ("1m30s").
func (d Duration) String() string { return time.Duration(d).String() }
