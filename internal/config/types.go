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
	// sockets are ready and read them: "native" (the system's own
	// poller: on Linux epoll, with the sockets a batch of events finds
	// readable read in one io_uring call where the kernel allows
	// io_uring, else one read each), "epoll" (Linux's epoll, one read a
	// socket: for a kernel or sandbox whose io_uring should not be used)
	// or "portable" (Go's netpoller, which every system has; slower, and
	// what non-Linux systems get with any value). Default "native".
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
	PollerEpoll    = "epoll"
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
	// Compress compresses the route's answers for clients that accept
	// it; nil sends them as they are. Not on a route with a fixed answer.
	Compress *Compress `yaml:"compress"`
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
	// Precompressed lists the codings (gzip, zstd, br) of files
	// compressed ahead of time that are served in the original's place
	// to clients that accept them: foo.js.gz, foo.js.zst or foo.js.br
	// next to foo.js, chosen by Accept-Encoding (ties going to the order
	// listed), sent with sendfile, with the original's Content-Type and
	// the sibling's own length, ETag and Last-Modified. Every answer from
	// a file then gets Vary: Accept-Encoding. Default none.
	Precompressed []string `yaml:"precompressed"`
}
