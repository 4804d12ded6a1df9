package config

import (
	"net"
	"net/netip"
	"strings"
	"time"
)

// An upstream's configuration: its backends, how they are found, and how
// Helios talks to them, checks them and retries them.

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
