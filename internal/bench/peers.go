package bench

import (
	"bytes"
	"fmt"
	"io/fs"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"

	benchfiles "github.com/helios-lb/helios/bench"
)

// Timeouts are the timeouts every proxy gets, in whole seconds, so that no
// proxy wins by giving up sooner.
type Timeouts struct {
	// ClientHeader bounds reading a request head (nginx
	// client_header_timeout, haproxy timeout http-request).
	ClientHeader int
	// ClientIdle closes an idle client keep-alive connection.
	ClientIdle int
	// Send bounds one blocked write to a client (nginx send_timeout).
	Send int
	// Connect bounds connecting to a backend.
	Connect int
	// UpstreamRead bounds each wait for a backend's answer.
	UpstreamRead int
	// UpstreamIdle closes an idle pooled backend connection.
	UpstreamIdle int
}

// DefaultTimeouts are the timeouts of every rendered config.
var DefaultTimeouts = Timeouts{ClientHeader: 10, ClientIdle: 60, Send: 60, Connect: 2, UpstreamRead: 30, UpstreamIdle: 90}

// PeerData is what a peer config template is rendered with.
type PeerData struct {
	// Dir is the proxy's own directory for pid, log and temp files.
	Dir string
	// Listen is the host:port of the plain HTTP listener.
	Listen string
	// TLSListen is the host:port of the HTTPS (HTTP/2) listener; "" when
	// the case does not use TLS.
	TLSListen string
	// CertFile, KeyFile and CertKeyFile (both in one PEM, for haproxy)
	// are the TLS certificate files.
	CertFile, KeyFile, CertKeyFile string
	// Backends are the three backends' host:port.
	Backends []string
	// CPUs is the number of CPUs (workers, threads, GOMAXPROCS).
	CPUs int
	// Strategy is the balancing strategy as Helios names it.
	Strategy string
	// HashHeader is the request header consistent_hash hashes (nginx
	// hash $http_..., HAProxy balance hdr(...), Caddy lb_policy header);
	// "" for the other strategies. HashBalance bounds each backend's load
	// in percent of the mean (Helios bounded_load, HAProxy
	// hash-balance-factor; nginx and Caddy have no bound).
	HashHeader  string
	HashBalance int
	// StaticRoot is the directory /static/ is served from.
	StaticRoot string
	// RespondBody is the fixed answer of /respond.
	RespondBody string
	// Features turns on what the proxy has of health checks, breakers,
	// metrics and a file access log.
	Features bool
	// Policy turns on the edge policy on the proxied route (the policy
	// scenario): a trusted X-Forwarded-For from TrustedProxies, headers set
	// and removed both ways, a rate limit far above the load, an allow
	// list.
	Policy bool
	// Resolver, when set, is the DNS server (host:port) Helios finds its
	// backends on, by SRV lookups of SRV (the discovery scenario);
	// Backends are then only the other proxies'.
	Resolver, SRV string
	// RateLimit puts a rate limit far above the load on the proxied
	// route (the shared-limit scenario), kept in RateLimitStore (a
	// redis:// URL) when that is set, in the process otherwise.
	RateLimit      bool
	RateLimitStore string
	// AdminListen is the host:port of the metrics/status listener.
	AdminListen string
	// AccessLog is the access log file when Features is on.
	AccessLog string
	// TraceEndpoint, when set, turns Helios's tracing on, its spans
	// going over OTLP/gRPC to this URL at TraceRatio.
	TraceEndpoint string
	TraceRatio    float64
	// User and Group are set when running as root, for nginx's user
	// directive (its workers would otherwise switch to nobody).
	User, Group string
	// NoFile is the descriptor limit the proxy runs with.
	NoFile int
	// MaxConnections caps client connections (nginx worker_connections,
	// Helios max_connections).
	MaxConnections int
	// PairedConnections is MaxConnections bounded by what NoFile allows a
	// single process that needs two descriptors per proxied connection:
	// haproxy's maxconn, which it refuses to start with otherwise.
	PairedConnections int
	// UpstreamKeepalive is the idle backend connections kept (nginx
	// keepalive per worker, Helios max_idle_per_backend).
	UpstreamKeepalive int
	// RetryAttempts is the number of retries after the first try.
	RetryAttempts int
	// T are the timeouts.
	T Timeouts
	// GRPCBackends are the h2c gRPC backends' host:port, and GRPCPrefix
	// the path prefix routed to them; nil when the case has no gRPC.
	GRPCBackends []string
	GRPCPrefix   string
	// NginxHTTP2On says the nginx under test spells HTTP/2 as the
	// `http2 on` directive (1.25.1 and later) rather than a listen
	// parameter.
	NginxHTTP2On bool
	// Compress is the coding (gzip, zstd, br) the proxy compresses the
	// backends' JSON answers with; "" for none. CompressLevel is gzip's
	// level, the case's gzip_level (zstd and brotli keep each proxy's
	// default; the templates need a level even then).
	Compress      string
	CompressLevel int
}

// nginxHasHTTP2Directive reads `nginx -v`'s "nginx version: nginx/1.22.1"
// and says whether that nginx has `http2 on` (1.25.1 and later).
func nginxHasHTTP2Directive(version string) bool {
	_, v, ok := strings.Cut(version, "nginx/")
	if !ok {
		return false
	}
	var maj, mnr, patch int
	fmt.Sscanf(v, "%d.%d.%d", &maj, &mnr, &patch)
	return maj > 1 || maj == 1 && (mnr > 25 || mnr == 25 && patch >= 1)
}

// Peer is a proxy the benchmark can run.
type Peer struct {
	// Name is the stable name: helios, nginx, haproxy.
	Name string
	// Label is how reports name it.
	Label string
	// Template is the config template under bench/peers.
	Template string
	// ConfigFile is the rendered config's file name.
	ConfigFile string
	// Tool is the executable looked up in PATH; "" for Helios, which is
	// the running binary (or --helios).
	Tool string
	// Go marks a proxy written in Go: it runs with GOMAXPROCS set to its
	// CPU count, as Helios does.
	Go bool
	// Unsupported returns why the peer cannot run a case, or "".
	Unsupported func(c Case) string
}

// Peers are the proxies `helios bench` knows, Helios first.
var Peers = []Peer{
	{Name: "helios", Label: "Helios", Template: "helios.yaml.tmpl", ConfigFile: "helios.yaml", Go: true,
		Unsupported: func(Case) string { return "" }},
	{Name: "nginx", Label: "nginx", Template: "nginx.conf.tmpl", ConfigFile: "nginx.conf", Tool: "nginx",
		Unsupported: func(c Case) string {
			if c.Compress != "" && c.Compress != "gzip" {
				return "nginx compresses with gzip only (brotli and zstd are third-party modules)"
			}
			return ""
		}},
	{Name: "haproxy", Label: "HAProxy", Template: "haproxy.cfg.tmpl", ConfigFile: "haproxy.cfg", Tool: "haproxy",
		Unsupported: func(c Case) string {
			if strings.HasPrefix(c.Path, "/static/") {
				return "HAProxy does not serve files from disk"
			}
			if c.Compress != "" && c.Compress != "gzip" {
				return "HAProxy compresses with gzip and deflate only"
			}
			return ""
		}},
	{Name: "caddy", Label: "Caddy", Template: "Caddyfile.tmpl", ConfigFile: "Caddyfile", Tool: "caddy", Go: true,
		Unsupported: func(c Case) string {
			if c.Policy {
				return "Caddy has no rate limit without a plugin"
			}
			if c.Compress == "br" {
				return "Caddy's encode has gzip and zstd (brotli needs a plugin)"
			}
			return ""
		}},
}

// peerNames returns the names of the peers Helios is compared with, in
// order: every peer but Helios.
func peerNames() []string {
	var names []string
	for _, p := range Peers[1:] {
		names = append(names, p.Name)
	}
	return names
}

// peerByName returns the peer called name.
func peerByName(name string) (Peer, bool) {
	for _, p := range Peers {
		if p.Name == name {
			return p, true
		}
	}
	return Peer{}, false
}

// templateFuncs are the helpers the peer templates use.
var templateFuncs = template.FuncMap{
	"quote": strconv.Quote,
	"add":   func(a, b int) int { return a + b },
	"nginxBalance": func(s, header string) string {
		switch s {
		case "least_conn":
			return "least_conn"
		case "p2c":
			return "random two least_conn"
		case "consistent_hash":
			// Ketama points, without a bound on load.
			return "hash $http_" + strings.ReplaceAll(strings.ToLower(header), "-", "_") + " consistent"
		}
		return ""
	},
	"caddyBalance": func(s, header string) string {
		switch s {
		case "least_conn":
			return "least_conn"
		case "p2c":
			// Caddy's random_choose 2 picks the less loaded of two at
			// random: power of two choices.
			return "random_choose 2"
		case "consistent_hash":
			// Rendezvous hashing of the header, without a bound on load.
			return "header " + header
		}
		return "round_robin"
	},
	// boundedLoad writes a percentage as Helios's bounded_load factor.
	"boundedLoad": func(percent int) string { return strconv.FormatFloat(float64(percent)/100, 'f', -1, 64) },
	"host":        func(hostport string) string { h, _, _ := net.SplitHostPort(hostport); return h },
	"port":        func(hostport string) string { _, p, _ := net.SplitHostPort(hostport); return p },
	"haproxyBalance": func(s, header string) string {
		switch s {
		case "least_conn":
			return "leastconn"
		case "p2c":
			return "random(2)"
		case "consistent_hash":
			// With hash-type consistent and hash-balance-factor (the
			// template adds them).
			return "hdr(" + header + ")"
		}
		return "roundrobin"
	},
}

// Render renders the peer's config template with d.
func (p Peer) Render(d PeerData) (string, error) {
	src, err := fs.ReadFile(benchfiles.Files, "peers/"+p.Template)
	if err != nil {
		return "", err
	}
	t, err := template.New(p.Template).Funcs(templateFuncs).Option("missingkey=error").Parse(string(src))
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, d); err != nil {
		return "", fmt.Errorf("rendering %s: %w", p.Template, err)
	}
	return b.String(), nil
}

// Command returns the command line that runs the peer with its config at
// cfg; bin is the executable.
func (p Peer) Command(bin, dir, cfg string) []string {
	switch p.Name {
	case "helios":
		return []string{bin, "serve", "-c", cfg, "--shutdown-timeout", "2s"}
	case "nginx":
		// -e: nginx opens its error log before reading the config.
		return []string{bin, "-e", filepath.Join(dir, "error.log"), "-p", dir, "-c", cfg}
	case "haproxy":
		return []string{bin, "-db", "-f", cfg}
	case "caddy":
		return []string{bin, "run", "--config", cfg, "--adapter", "caddyfile"}
	}
	return nil
}

// Env returns the environment the peer runs with, added to the
// benchmark's: GOMAXPROCS for a Go proxy, and for Caddy its data and config
// directories inside dir (it would otherwise write under $HOME).
func (p Peer) Env(dir string, cpus int) []string {
	var env []string
	if p.Go {
		env = append(env, "GOMAXPROCS="+strconv.Itoa(cpus))
	}
	if p.Name == "caddy" {
		env = append(env, "XDG_DATA_HOME="+filepath.Join(dir, "data"), "XDG_CONFIG_HOME="+filepath.Join(dir, "config"))
	}
	return env
}

// variant names a rendered config by what sets it apart from the base
// one: "nginx", "nginx-least_conn", "helios-features", "helios-tls",
// "caddy-zstd".
func variant(peer string, d PeerData) string {
	parts := []string{peer}
	if d.Strategy != "round_robin" {
		parts = append(parts, d.Strategy)
	}
	if d.Features {
		parts = append(parts, "features")
	}
	if d.TraceEndpoint != "" {
		parts = append(parts, "tracing")
	}
	if d.Policy {
		parts = append(parts, "policy")
	}
	if d.SRV != "" {
		parts = append(parts, "discovery")
	}
	switch {
	case d.RateLimitStore != "":
		parts = append(parts, "shared-limit")
	case d.RateLimit:
		parts = append(parts, "local-limit")
	}
	if d.TLSListen != "" {
		parts = append(parts, "tls")
	}
	if d.Compress != "" {
		parts = append(parts, d.Compress)
		if d.Compress == "gzip" && d.CompressLevel != defaultGzipLevel {
			parts = append(parts, strconv.Itoa(d.CompressLevel))
		}
	}
	return strings.Join(parts, "-")
}
