package bench

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	benchfiles "github.com/helios-lb/helios/bench"
)

// The tools a scenario can drive.
const (
	ToolWrk      = "wrk"
	ToolH2load   = "h2load"
	ToolOpenLoop = "open-loop"
	// ToolWebSocket is `helios bench wsload`: WebSocket echo messages.
	ToolWebSocket = "websocket"
	// ToolTLS is `helios bench tlsload`: a TLS handshake per request.
	ToolTLS = "tls-handshake"
	// ToolIdle is `helios bench idleconns`: idle connections held open.
	ToolIdle = "idle"
)

// tools are the tools a scenario may name.
var tools = []string{ToolWrk, ToolH2load, ToolOpenLoop, ToolWebSocket, ToolTLS, ToolIdle}

// The capabilities a scenario can require of Helios.
const (
	RequireTLS      = "tls"
	RequireFeatures = "features"
	// RequireGRPC is HTTP/2 to the backends (upstreams[].transport.protocol
	// h2c) for gRPC.
	RequireGRPC = "grpc"
)

// Scenario is one entry of bench/scenarios.yaml; the file's header
// documents each key.
type Scenario struct {
	Name     string   `yaml:"name" json:"name"`
	Seed     string   `yaml:"seed" json:"seed,omitempty"`
	What     string   `yaml:"what" json:"what"`
	Tool     string   `yaml:"tool" json:"tool"`
	Requires []string `yaml:"requires" json:"requires,omitempty"`
	// Duration, when set, is the scenario's fixed run length, used unless
	// --duration is given.
	Duration Duration `yaml:"duration" json:"duration,omitempty"`
	Quick    []string `yaml:"quick" json:"-"`
	Defaults Case     `yaml:"defaults" json:"-"`
	Cases    []Case   `yaml:"cases" json:"-"`
}

// Case is one run of a scenario: what the load generator sends and how the
// proxies and backends are set up. Zero fields take the scenario's
// Defaults, then the values documented on them.
type Case struct {
	Name string `yaml:"name" json:"name"`
	// Connections is the number of concurrent connections. Default 100.
	Connections int `yaml:"connections" json:"connections"`
	// Path is requested on the proxy. Default "/" (proxied).
	Path string `yaml:"path" json:"path"`
	// Headers are added to every request; nil adds none.
	Headers map[string]string `yaml:"headers" json:"headers,omitempty"`
	// Pipeline is the HTTP/1.1 pipelining depth; 0 or 1 means none.
	Pipeline int `yaml:"pipeline" json:"pipeline,omitempty"`
	// Streams is h2load's concurrent streams per connection; 0 means 1.
	Streams int `yaml:"streams" json:"streams,omitempty"`
	// Strategy is the balancing strategy, as Helios names it. Default
	// round_robin.
	Strategy string `yaml:"strategy" json:"strategy"`
	// SlowBackend delays every answer of the third backend; 0 means none.
	SlowBackend Duration `yaml:"slow_backend" json:"slow_backend,omitempty"`
	// KillBackendAt kills the third backend after this fraction (0-1) of
	// the measured run; 0 means never.
	KillBackendAt float64 `yaml:"kill_backend_at" json:"kill_backend_at,omitempty"`
	// Features turns on health checks, breakers, metrics and a file
	// access log in every proxy (what each has of them).
	Features bool `yaml:"features" json:"features,omitempty"`
	// FeaturesOffBaseline adds Helios with features off as a contender.
	FeaturesOffBaseline bool `yaml:"features_off_baseline" json:"features_off_baseline,omitempty"`
	// TraceRatio turns Helios's tracing on at this sample_ratio, its
	// spans going to a collector the bench runs (a sink that counts
	// them); 0 leaves tracing off. Other proxies are not traced.
	TraceRatio float64 `yaml:"trace_ratio" json:"trace_ratio,omitempty"`
	// TracingOffBaseline adds Helios with the same features and tracing
	// off as a contender: what tracing costs, in interleaved rounds.
	TracingOffBaseline bool `yaml:"tracing_off_baseline" json:"tracing_off_baseline,omitempty"`
	// Policy turns on the edge policy on the proxied route in every proxy
	// (what each has of it: bench/scenarios.yaml lists it).
	Policy bool `yaml:"policy" json:"policy,omitempty"`
	// PolicyOffBaseline adds Helios with the policy off as a contender.
	PolicyOffBaseline bool `yaml:"policy_off_baseline" json:"policy_off_baseline,omitempty"`
	// Discovery makes Helios find the backends with an SRV lookup on a
	// DNS server the bench runs, looked up again every second (a backends
	// entry `srv:`); the other proxies are not run: the case compares
	// Helios with itself.
	Discovery bool `yaml:"discovery" json:"discovery,omitempty"`
	// FixedBaseline adds Helios with the backends' fixed addresses as a
	// contender.
	FixedBaseline bool `yaml:"fixed_baseline" json:"fixed_baseline,omitempty"`
	// SharedLimit puts a rate limit far above the load on the proxied
	// route, kept in a Redis the bench runs (redis-server on loopback);
	// the other proxies are not run.
	SharedLimit bool `yaml:"shared_limit" json:"shared_limit,omitempty"`
	// LocalLimitBaseline adds Helios with the same limit kept in the
	// process as a contender.
	LocalLimitBaseline bool `yaml:"local_limit_baseline" json:"local_limit_baseline,omitempty"`
	// RateOfPeak is the open-loop rate as a fraction of nginx's peak.
	RateOfPeak float64 `yaml:"rate_of_peak" json:"rate_of_peak,omitempty"`
	// BodyBytes is the POST body of each request (wrk), or the message
	// size (websocket); 0 means GET (or 128-byte messages).
	BodyBytes int `yaml:"body_bytes" json:"body_bytes,omitempty"`
	// Chunked sends the body with Transfer-Encoding: chunked instead of a
	// Content-Length.
	Chunked bool `yaml:"chunked" json:"chunked,omitempty"`
	// Requests, for h2load, is a fixed number of requests per run instead
	// of a duration; 0 means timed.
	Requests int `yaml:"requests" json:"requests,omitempty"`
	// Resume, for tls-handshake, resumes TLS sessions instead of full
	// handshakes.
	Resume bool `yaml:"resume" json:"resume,omitempty"`
	// Protocol, for idle, is the connections' protocol: http/1.1 (the
	// default) or h2.
	Protocol string `yaml:"protocol" json:"protocol,omitempty"`
	// HashUsers, for wrk, gives every request an X-User header (HashHeader)
	// naming one of this many users, drawn from a Zipf distribution
	// (ZipfS), as consistent_hash on a header needs: a few hot keys and a
	// long tail. 0 sends none.
	HashUsers int `yaml:"hash_users" json:"hash_users,omitempty"`
	// ZipfS is the Zipf exponent of HashUsers: user k is drawn with
	// weight 1/k^ZipfS. Default 1.1 when HashUsers is set.
	ZipfS float64 `yaml:"zipf_s" json:"zipf_s,omitempty"`
	// Compress is the coding (gzip, zstd or br) every proxy compresses
	// the backends' JSON answers with, and that the load generator asks
	// for (Accept-Encoding); "" compresses nothing.
	Compress string `yaml:"compress" json:"compress,omitempty"`
	// GzipLevel is the gzip level every proxy that has levels compresses
	// with (nginx gzip_comp_level, Caddy's encode gzip, Helios's
	// compress.level; HAProxy's libslz has none), 1-9. Default 5 when
	// Compress is gzip.
	GzipLevel int `yaml:"gzip_level" json:"gzip_level,omitempty"`
}

// HashHeader is the header a hash case's requests carry their user in,
// and what consistent_hash hashes in every proxy.
const HashHeader = "X-User"

// hashBalance is the load bound of consistent_hash in every proxy that
// has one, in percent of the mean: Helios bounded_load 1.25, HAProxy
// hash-balance-factor 125.
const hashBalance = 125

// defaultZipfS is the default Case.ZipfS.
const defaultZipfS = 1.1

// defaultGzipLevel is the default Case.GzipLevel: nginx's
// gzip_comp_level 5, a common production setting.
const defaultGzipLevel = 5

// The codings a case may compress with.
var codings = []string{"gzip", "zstd", "br"}

// Duration is a time.Duration written as a Go duration string in YAML and
// JSON ("30s"); zero means unset.
type Duration time.Duration

// UnmarshalYAML parses "30s".
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = Duration(v)
	return nil
}

// MarshalText writes "30s".
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// merged returns c with its zero fields taken from def, then defaults.
func (c Case) merged(def Case) Case {
	if c.Connections == 0 {
		c.Connections = def.Connections
	}
	if c.Path == "" {
		c.Path = def.Path
	}
	if c.Headers == nil {
		c.Headers = def.Headers
	}
	if c.Pipeline == 0 {
		c.Pipeline = def.Pipeline
	}
	if c.Streams == 0 {
		c.Streams = def.Streams
	}
	if c.Strategy == "" {
		c.Strategy = def.Strategy
	}
	if c.SlowBackend == 0 {
		c.SlowBackend = def.SlowBackend
	}
	if c.KillBackendAt == 0 {
		c.KillBackendAt = def.KillBackendAt
	}
	c.Features = c.Features || def.Features
	c.FeaturesOffBaseline = c.FeaturesOffBaseline || def.FeaturesOffBaseline
	if c.TraceRatio == 0 {
		c.TraceRatio = def.TraceRatio
	}
	c.TracingOffBaseline = c.TracingOffBaseline || def.TracingOffBaseline
	c.Policy = c.Policy || def.Policy
	c.PolicyOffBaseline = c.PolicyOffBaseline || def.PolicyOffBaseline
	c.Discovery = c.Discovery || def.Discovery
	c.FixedBaseline = c.FixedBaseline || def.FixedBaseline
	c.SharedLimit = c.SharedLimit || def.SharedLimit
	c.LocalLimitBaseline = c.LocalLimitBaseline || def.LocalLimitBaseline
	if c.RateOfPeak == 0 {
		c.RateOfPeak = def.RateOfPeak
	}
	if c.BodyBytes == 0 {
		c.BodyBytes = def.BodyBytes
	}
	c.Chunked = c.Chunked || def.Chunked
	if c.Requests == 0 {
		c.Requests = def.Requests
	}
	c.Resume = c.Resume || def.Resume
	if c.Protocol == "" {
		c.Protocol = def.Protocol
	}
	if c.HashUsers == 0 {
		c.HashUsers = def.HashUsers
	}
	if c.ZipfS == 0 {
		c.ZipfS = def.ZipfS
	}
	if c.ZipfS == 0 && c.HashUsers > 0 {
		c.ZipfS = defaultZipfS
	}
	if c.Compress == "" {
		c.Compress = def.Compress
	}
	if c.GzipLevel == 0 {
		c.GzipLevel = def.GzipLevel
	}
	if c.GzipLevel == 0 && c.Compress == "gzip" {
		c.GzipLevel = defaultGzipLevel
	}
	if c.Compress != "" {
		// The load generator asks for the coding the proxies use.
		h := maps.Clone(c.Headers)
		if h == nil {
			h = map[string]string{}
		}
		h["Accept-Encoding"] = c.Compress
		c.Headers = h
	}
	if c.Connections == 0 {
		c.Connections = 100
	}
	if c.Path == "" {
		c.Path = "/"
	}
	if c.Strategy == "" {
		c.Strategy = "round_robin"
	}
	return c
}

// strategies are the balancing strategies a case may name.
var strategies = []string{"round_robin", "least_conn", "p2c", "consistent_hash"}

// LoadScenarios reads and checks the embedded bench/scenarios.yaml.
func LoadScenarios() ([]Scenario, error) {
	b, err := fs.ReadFile(benchfiles.Files, "scenarios.yaml")
	if err != nil {
		return nil, err
	}
	return ParseScenarios(b)
}

// ParseScenarios decodes scenario definitions strictly, fills each case
// from its scenario's defaults and checks the result.
func ParseScenarios(b []byte) ([]Scenario, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var ss []Scenario
	if err := dec.Decode(&ss); err != nil {
		return nil, fmt.Errorf("scenarios.yaml: %w", err)
	}
	seen := map[string]bool{}
	var errs []error
	for i := range ss {
		s := &ss[i]
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("scenarios.yaml: scenario %q: %s", s.Name, fmt.Sprintf(format, args...)))
		}
		if s.Name == "" || seen[s.Name] {
			bad("missing or duplicate name")
		}
		seen[s.Name] = true
		if s.Tool == "" {
			s.Tool = ToolWrk
		}
		if !slices.Contains(tools, s.Tool) {
			bad("unknown tool %q", s.Tool)
		}
		for _, r := range s.Requires {
			if r != RequireTLS && r != RequireFeatures && r != RequireGRPC {
				bad("unknown requirement %q", r)
			}
		}
		if (s.Tool == ToolTLS || s.Tool == ToolIdle || slices.Contains(s.Requires, RequireGRPC)) && !slices.Contains(s.Requires, RequireTLS) {
			bad("tool %s and grpc need requires: [tls]", s.Tool)
		}
		if len(s.Cases) == 0 {
			bad("no cases")
		}
		names := map[string]bool{}
		for j := range s.Cases {
			c := s.Cases[j].merged(s.Defaults)
			s.Cases[j] = c
			if c.Name == "" || names[c.Name] {
				bad("case %d: missing or duplicate name", j+1)
			}
			names[c.Name] = true
			if !slices.Contains(strategies, c.Strategy) {
				bad("case %s: unknown strategy %q", c.Name, c.Strategy)
			}
			if !strings.HasPrefix(c.Path, "/") {
				bad("case %s: path must start with /", c.Name)
			}
			if c.KillBackendAt < 0 || c.KillBackendAt >= 1 {
				bad("case %s: kill_backend_at must be in [0, 1)", c.Name)
			}
			if (s.Tool == ToolOpenLoop) != (c.RateOfPeak > 0) {
				bad("case %s: rate_of_peak is for open-loop scenarios and required there", c.Name)
			}
			if c.BodyBytes < 0 || c.BodyBytes > 0 && s.Tool != ToolWrk && s.Tool != ToolWebSocket {
				bad("case %s: body_bytes is for wrk (POST bodies) and websocket (message size), at least 0", c.Name)
			}
			if c.Chunked && (c.BodyBytes == 0 || s.Tool != ToolWrk) {
				bad("case %s: chunked needs a body_bytes to send with wrk", c.Name)
			}
			if c.Requests < 0 || c.Requests > 0 && s.Tool != ToolH2load {
				bad("case %s: requests is for h2load", c.Name)
			}
			if c.Resume && s.Tool != ToolTLS {
				bad("case %s: resume is for tls-handshake", c.Name)
			}
			if !slices.Contains([]string{"", "http/1.1", "h2"}, c.Protocol) || c.Protocol != "" && s.Tool != ToolIdle {
				bad("case %s: protocol is http/1.1 or h2, for idle", c.Name)
			}
			if c.HashUsers < 0 || c.HashUsers > 0 && (s.Tool != ToolWrk || c.BodyBytes > 0 || c.Pipeline > 1) {
				bad("case %s: hash_users is for wrk cases without body_bytes or pipeline, at least 0", c.Name)
			}
			if (c.Strategy == "consistent_hash") != (c.HashUsers > 0) {
				bad("case %s: strategy consistent_hash and hash_users go together (the requests need keys to hash)", c.Name)
			}
			if c.ZipfS < 0 || c.ZipfS > 0 && c.HashUsers == 0 {
				bad("case %s: zipf_s is for hash_users, above 0", c.Name)
			}
			if c.Compress != "" && (!slices.Contains(codings, c.Compress) || s.Tool != ToolWrk && s.Tool != ToolH2load) {
				bad("case %s: compress is gzip, zstd or br, for wrk and h2load", c.Name)
			}
			if c.GzipLevel != 0 && (c.Compress != "gzip" || c.GzipLevel < 1 || c.GzipLevel > 9) {
				bad("case %s: gzip_level is 1 to 9, for compress: gzip", c.Name)
			}
		}
		for _, q := range s.Quick {
			if !names[q] {
				bad("quick names unknown case %q", q)
			}
		}
	}
	return ss, errors.Join(errs...)
}

// Selection is a scenario with the cases chosen to run.
type Selection struct {
	Scenario
	Run []Case
}

// Select picks the scenarios and cases to run. specs are names from
// --scenarios: "proxy-ka" (every case) or "proxy-ka/c100" (one case); none
// means every scenario, or with quick, the quick cases of the scenarios
// that have them. With quick, a named scenario runs its quick cases when it
// has them and all of its cases otherwise. The order is the file's.
func Select(all []Scenario, specs []string, quick bool) ([]Selection, error) {
	want := map[string][]string{} // scenario -> cases; nil means default
	for _, spec := range specs {
		name, c, hasCase := strings.Cut(strings.TrimSpace(spec), "/")
		if name == "" {
			continue
		}
		i := slices.IndexFunc(all, func(s Scenario) bool { return s.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("unknown scenario %q (have %s)", name, strings.Join(scenarioNames(all), ", "))
		}
		if _, ok := want[name]; !ok {
			want[name] = nil
		}
		if hasCase {
			if !slices.ContainsFunc(all[i].Cases, func(x Case) bool { return x.Name == c }) {
				return nil, fmt.Errorf("scenario %s has no case %q", name, c)
			}
			want[name] = append(want[name], c)
		}
	}
	var out []Selection
	for _, s := range all {
		cases, named := want[s.Name]
		if len(want) > 0 && !named {
			continue
		}
		if len(want) == 0 && quick && len(s.Quick) == 0 {
			continue
		}
		if cases == nil && quick && len(s.Quick) > 0 {
			cases = s.Quick
		}
		sel := Selection{Scenario: s}
		for _, c := range s.Cases {
			if cases == nil || slices.Contains(cases, c.Name) {
				sel.Run = append(sel.Run, c)
			}
		}
		out = append(out, sel)
	}
	return out, nil
}

func scenarioNames(ss []Scenario) []string {
	names := make([]string, len(ss))
	for i, s := range ss {
		names[i] = s.Name
	}
	return names
}
