package config

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"
)

// The "what is allowed" parts of messages used in more than one place.
const (
	hostPortAllowed = "host:port such as :8080, 127.0.0.1:8080 or [::1]:8080; port 1-65535"
	hostAllowed     = "an exact hostname such as example.com, *.example.com, or *; no port"
	statusAllowed   = "codes 100-599 and lo-hi ranges, comma-separated, such as 200-399 or 200,204,300-399"
	retryOnAllowed  = "connect_error, reset, timeout, or a status 500-599"
)

// strategies are the Upstream.Strategy values, in documentation order; they
// are the names package balancer implements.
var strategies = []string{"round_robin", "weighted_round_robin", "least_conn", StrategyConsistentHash, StrategyIPHash, "random", "p2c"}

// Validate reports every problem with c, sorted by line and key path, as
// Problems; it returns nil when c is valid. It expects SetDefaults to have
// run, as Parse does: on a Config built in code, call SetDefaults first or
// every unset number is out of range. Problems carry lines for a Config from
// Parse or Load and line 0 for one built in code. Validate reads the file
// system to check that static roots are directories, and changes nothing.
func (c *Config) Validate() error {
	problems, _ := c.validate()
	return problems.err()
}

// validate returns c's problems and warnings, unsorted.
func (c *Config) validate() (problems, warnings Problems) {
	v := validator{file: c.File, meta: c.meta, stat: os.Stat, writable: writable, now: time.Now, lookupEnv: c.meta.lookup()}
	v.listeners(c.Listeners)
	upstreams := v.upstreams(c.Upstreams, &c.Discovery)
	v.discovery(&c.Discovery)
	v.routes(c.Routes, upstreams)
	v.acme(c)
	v.admin(&c.Admin)
	v.logging(&c.Logging)
	v.requestBuffers(&c.RequestBuffers)
	v.responseBuffers(&c.ResponseBuffers)
	v.tracing(c.Tracing)
	return v.problems, v.warnings
}

// requestBuffers checks the request-buffering budgets.
func (v *validator) requestBuffers(rb *RequestBuffers) {
	if rb.ConnectionBytes < 65536 {
		v.addf("request_buffers.connection_bytes", "%d is out of range (at least 65536)", rb.ConnectionBytes)
	}
	if rb.MemoryBytes < 0 {
		v.addf("request_buffers.memory_bytes", "%d is out of range (0 keeps no body in memory, or more)", rb.MemoryBytes)
	}
	if rb.FileBytes < 0 {
		v.addf("request_buffers.file_bytes", "%d is out of range (0 writes no body to a file, or more)", rb.FileBytes)
	}
}

// validator collects the problems of one Config.
type validator struct {
	file     string
	meta     *meta
	stat     func(string) (fs.FileInfo, error)
	writable func(string) error // nil when this process may write the file or directory
	now      func() time.Time
	// lookupEnv reads the variables *_password_env keys name.
	lookupEnv func(string) (string, bool)
	problems  Problems
	warnings  Problems
}

// addf reports a problem at path, unless decoding already reported the value
// at path (or a value enclosing it) as being of the wrong type.
func (v *validator) addf(path, format string, args ...any) {
	if v.meta.isBad(path) {
		return
	}
	v.problems = append(v.problems, problemf(v.file, v.meta.line(path), path, format, args...))
}

// warnf reports something worth fixing at path that does not make the
// config invalid.
func (v *validator) warnf(path, format string, args ...any) {
	w := problemf(v.file, v.meta.line(path), path, format, args...)
	w.Warning = true
	v.warnings = append(v.warnings, w)
}

// name checks that name, at path, is set, printable and not already in
// seen, which maps names to the path of the item that used them first. A
// name goes into log lines, metric labels and admin API paths, so a line
// break or other control character in it is refused (YAML folds a plain
// scalar over a blank line into one with a line break).
func (v *validator) name(seen map[string]string, path, owner, name, kind string) {
	switch first, dup := seen[name]; {
	case name == "":
		v.addf(path, "missing (a name, unique among %s)", kind)
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		v.addf(path, "%q has a control character such as a line break (a name is printable text on one line)", name)
	case dup:
		v.addf(path, "%q is already used by %s (names must be unique)", name, first)
	default:
		seen[name] = owner
	}
}

// intRange checks lo <= n <= hi.
func (v *validator) intRange(path string, n, lo, hi int) {
	if n < lo || n > hi {
		v.addf(path, "%d is out of range (%d-%d)", n, lo, hi)
	}
}

// atLeast checks n >= lo.
func (v *validator) atLeast(path string, n, lo int) {
	if n < lo {
		v.addf(path, "%d is out of range (at least %d)", n, lo)
	}
}

// positive checks d > 0.
func (v *validator) positive(path string, d Duration) {
	if d <= 0 {
		v.addf(path, "%s is out of range (more than 0, such as 2s)", d)
	}
}

// nonNegative checks d >= 0.
func (v *validator) nonNegative(path string, d Duration) {
	if d < 0 {
		v.addf(path, "%s is out of range (0 for no limit, or more)", d)
	}
}

// ratio checks 0 <= f <= 1, NaN excluded.
func (v *validator) ratio(path string, f float64, zero string) {
	if !(f >= 0 && f <= 1) {
		v.addf(path, "%g is out of range (0-1; %s)", f, zero)
	}
}

// hostPort checks that addr, at path, is host:port and reports whether it is.
func (v *validator) hostPort(path, addr, allowed string) bool {
	if addr == "" {
		v.addf(path, "missing (%s)", allowed)
		return false
	}
	if why := hostPortError(addr); why != "" {
		v.addf(path, "%q %s (%s)", addr, why, allowed)
		return false
	}
	return true
}

func (v *validator) listeners(ls []Listener) {
	if len(ls) == 0 {
		v.addf("listeners", "no listeners (at least one is required)")
	}
	names := make(map[string]string)
	addrs := make(map[string]string)
	for i := range ls {
		l, p := &ls[i], indexPath("listeners", i)
		v.name(names, p+".name", p, l.Name, "listeners")
		v.uniqueAddress(addrs, p, l.Address, "")
		v.intRange(p+".sockets", l.Sockets, 1, maxSockets)
		v.intRange(p+".backlog", l.Backlog, 1, 65535)
		v.atLeast(p+".max_connections", l.MaxConnections, 1)
		v.nonNegative(p+".read_header_timeout", l.ReadHeaderTimeout)
		v.nonNegative(p+".read_timeout", l.ReadTimeout)
		v.nonNegative(p+".write_timeout", l.WriteTimeout)
		v.nonNegative(p+".idle_timeout", l.IdleTimeout)
		v.intRange(p+".max_header_bytes", l.MaxHeaderBytes, 1024, 1<<20)
		v.intRange(p+".max_header_count", l.MaxHeaderCount, 1, 10000)
		v.intRange(p+".max_method_bytes", l.MaxMethodBytes, 1, 1024)
		v.intRange(p+".output_buffer_bytes", l.OutputBufferBytes, 4096, 64<<20)
		v.poller(l, p)
		v.listenerTLS(l, p)
		v.listenerPolicy(ls, i, p)
	}
}

func (v *validator) routes(rs []Route, upstreams []string) {
	if len(rs) == 0 {
		v.addf("routes", "no routes (at least one is required)")
	}
	names := make(map[string]string)
	for i := range rs {
		r, p := &rs[i], indexPath("routes", i)
		v.name(names, p+".name", p, r.Name, "routes")
		v.match(&r.Match, p+".match")

		var actions []string
		if r.Upstream != "" {
			actions = append(actions, "upstream")
			v.upstreamRef(p+".upstream", r.Upstream, upstreams)
		}
		if r.Split != nil {
			actions = append(actions, "split")
		}
		v.split(r, p, upstreams)
		v.mirror(r, p, upstreams)
		if r.Respond != nil {
			actions = append(actions, "respond")
			v.respond(r.Respond, p+".respond")
		}
		if r.Static != nil {
			actions = append(actions, "static")
			v.static(r.Static, p+".static")
		}
		if r.Redirect != nil {
			actions = append(actions, "redirect")
		}
		v.routePolicy(r, p)
		v.upgrades(r, p)
		v.buffering(r, p)
		v.compress(r, p)
		for j, m := range r.AllowMethods {
			if m != MethodTrace && m != MethodConnect {
				v.addf(indexPath(p+".allow_methods", j), "%q is not a method this key allows (%s, %s; other methods need no allowing)", m, MethodTrace, MethodConnect)
			}
		}
		switch len(actions) {
		case 0:
			v.addf(p, "no action (exactly one of upstream, split, respond, static, redirect)")
		case 1:
		case 2:
			v.addf(p, "%s and %s are both set (exactly one of upstream, split, respond, static, redirect)", actions[0], actions[1])
		default:
			last := len(actions) - 1
			v.addf(p, "%s and %s are all set (exactly one of them)", strings.Join(actions[:last], ", "), actions[last])
		}
	}
}

// upgrades checks a route's Upgrades: protocol names (tokens), never h2c,
// and set explicitly only on a route that forwards.
func (v *validator) upgrades(r *Route, p string) {
	if !r.Forwards() && v.meta.present(p+".upgrades") && len(r.Upgrades) > 0 {
		v.addf(p+".upgrades", "set on a route without an upstream (only forwarded requests can be upgraded)")
	}
	for j, u := range r.Upgrades {
		up := indexPath(p+".upgrades", j)
		switch {
		case strings.EqualFold(u, "h2c"):
			v.addf(up, "h2c is never forwarded (a cleartext HTTP/2 tunnel would bypass routing; use a listener with h2c instead)")
		case !isToken(u):
			v.addf(up, "%q is not a protocol name (a token such as websocket)", u)
		}
	}
}

// buffering checks a route's body keys: set explicitly only on a route
// that forwards, and in range.
func (v *validator) buffering(r *Route, p string) {
	if !r.Forwards() {
		for _, k := range []string{"request_buffering", "max_body_bytes", "request_buffer_memory_bytes", "request_buffer_file_bytes"} {
			if v.meta.present(p + "." + k) {
				v.addf(p+"."+k, "set on a route without an upstream (only forwarded requests carry bodies on)")
			}
		}
		for _, k := range []string{"response_buffering", "response_buffer_memory_bytes", "response_buffer_file_bytes"} {
			if v.meta.present(p + "." + k) {
				v.addf(p+"."+k, "set on a route without an upstream (only answers from a backend are buffered)")
			}
		}
		return
	}
	switch r.RequestBuffering {
	case BufferingAuto, BufferingOn, BufferingOff:
	default:
		v.addf(p+".request_buffering", "%q is not a buffering mode (%s, %s, %s)", r.RequestBuffering, BufferingAuto, BufferingOn, BufferingOff)
	}
	if r.MaxBodyBytes < 0 {
		v.addf(p+".max_body_bytes", "%d is out of range (0 for no limit, or more)", r.MaxBodyBytes)
	}
	v.intRange(p+".request_buffer_memory_bytes", r.RequestBufferMemoryBytes, 0, 64<<20)
	if r.RequestBufferFileBytes < 0 {
		v.addf(p+".request_buffer_file_bytes", "%d is out of range (0 keeps bodies in memory only, or more)", r.RequestBufferFileBytes)
	}
	switch r.ResponseBuffering {
	case BufferingAuto, BufferingOff:
	default:
		v.addf(p+".response_buffering", "%q is not a response buffering mode (%s, %s)", r.ResponseBuffering, BufferingAuto, BufferingOff)
	}
	v.intRange(p+".response_buffer_memory_bytes", r.ResponseBufferMemoryBytes, 0, 64<<20)
	if r.ResponseBufferFileBytes < 0 {
		v.addf(p+".response_buffer_file_bytes", "%d is out of range (0 keeps answers in memory only, or more)", r.ResponseBufferFileBytes)
	}
}

// responseBuffers checks the process's caps on response buffering.
func (v *validator) responseBuffers(b *ResponseBuffers) {
	if b.MemoryBytes < 0 {
		v.addf("response_buffers.memory_bytes", "%d is out of range (0 or more)", b.MemoryBytes)
	}
	if b.FileBytes < 0 {
		v.addf("response_buffers.file_bytes", "%d is out of range (0 or more)", b.FileBytes)
	}
}

func (v *validator) match(m *Match, p string) {
	if !isHostPattern(m.Host) {
		v.addf(p+".host", "%q is not a host (%s)", m.Host, hostAllowed)
	}
	if m.Path != "" && !strings.HasPrefix(m.Path, "/") {
		v.addf(p+".path", "%q does not start with / (a path such as /api)", m.Path)
	}
	if m.PathPrefix != "" && !strings.HasPrefix(m.PathPrefix, "/") {
		v.addf(p+".path_prefix", "%q does not start with / (a path such as /api/)", m.PathPrefix)
	}
	if m.Path != "" && m.PathPrefix != "" {
		v.addf(p, "path and path_prefix are both set (at most one)")
	}
	v.matchConditions(m, p)
}

func (v *validator) respond(r *Respond, p string) {
	v.intRange(p+".status", r.Status, minStatus, maxStatus)
	v.headers(p+".headers", r.Headers)
}

// headers checks a map of header fields at p: names are tokens, set once
// (case-insensitively), values on one line.
func (v *validator) headers(p string, h map[string]string) {
	// In file order, so that a repeated name is reported where it repeats.
	names := slices.Collect(maps.Keys(h))
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(cmp.Compare(v.meta.line(childPath(p, a)), v.meta.line(childPath(p, b))), cmp.Compare(a, b))
	})
	seen := make(map[string]string, len(names))
	for _, name := range names {
		hp := childPath(p, name)
		if !isToken(name) {
			v.addf(hp, "%q is not a header name (letters, digits and !#$%%&'*+-.^_`|~)", name)
		}
		if first, dup := seen[strings.ToLower(name)]; dup {
			v.addf(hp, "%q repeats header %q (names are case-insensitive; set each once)", name, first)
		}
		seen[strings.ToLower(name)] = name
		if value := h[name]; strings.ContainsAny(value, "\r\n\x00") {
			v.addf(hp, "%q has a line break or NUL (a value on one line)", value)
		}
	}
}

func (v *validator) static(s *Static, p string) {
	const dirAllowed = "an existing directory"
	if s.Root == "" {
		v.addf(p+".root", "missing (%s)", dirAllowed)
	} else {
		v.dir(p+".root", s.Root, dirAllowed)
	}
	if s.Index == "" || s.Index == "." || s.Index == ".." || strings.ContainsAny(s.Index, "/\x00") {
		v.addf(p+".index", "%q is not a file name (a plain file name such as index.html, without /)", s.Index)
	}
	if s.StripPrefix != "" && !strings.HasPrefix(s.StripPrefix, "/") {
		v.addf(p+".strip_prefix", "%q does not start with / (a path such as /static/)", s.StripPrefix)
	}
	v.precompressed(s, p)
}

// dir checks that the directory dir, at path, exists.
func (v *validator) dir(path, dir, allowed string) {
	switch fi, err := v.stat(dir); {
	case errors.Is(err, fs.ErrNotExist):
		v.addf(path, "%q does not exist (%s)", dir, allowed)
	case err != nil:
		v.addf(path, "%q cannot be read: %v (%s)", dir, unwrapPathError(err), allowed)
	case !fi.IsDir():
		v.addf(path, "%q is not a directory (%s)", dir, allowed)
	}
}

// admin checks the admin listener, and that it is never open to other
// hosts by accident (issue 9 item 8): a token whose variable is unset, or
// a non-loopback address without a token, is a problem, not a quiet "no
// authentication".
func (v *validator) admin(a *Admin) {
	if a.Address != AdminOff {
		v.hostPort("admin.address", a.Address, hostPortAllowed+", or off")
	}
	if a.Token != "" {
		if a.InsecureNoToken {
			v.addf("admin.insecure_no_token", "true but admin.token is set (one or the other)")
		}
		v.tokenStrength(a.Token)
		return
	}
	if name, line := v.meta.emptyRef("admin.token"); name != "" {
		v.problems = append(v.problems, problemf(v.file, line, "admin.token",
			"${%s} expanded to nothing, which would turn authentication off (set %s, or remove the key)", name, name))
		return
	}
	if v.meta.present("admin.token") {
		v.addf("admin.token", "empty, which would turn authentication off (a token, or remove the key)")
		return
	}
	if a.Enabled() && !a.InsecureNoToken && hostPortError(a.Address) == "" && !a.LoopbackOnly() {
		v.addf("admin.address", "%q is reachable from other hosts and admin.token is not set: anyone could reload Helios "+
			"(set admin.token, bind a loopback address such as 127.0.0.1:9901, or set admin.insecure_no_token: true)", a.Address)
	}
}

// accessLogFile checks that the access log file can be opened for
// appending, as serve will do at start: its directory exists and this
// process may create or write the file (issue 18 item 4: validate said ok,
// then serve failed without a line).
func (v *validator) accessLogFile(file string) {
	const path, allowed = "logging.access_log", "a file in an existing directory this user may write, or off, stdout, stderr"
	fi, err := v.stat(file)
	switch {
	case err == nil && fi.IsDir():
		v.addf(path, "%q is a directory (%s)", file, allowed)
		return
	case err == nil:
		if err := v.writable(file); err != nil {
			v.addf(path, "%q cannot be written: %v (%s)", file, err, allowed)
		}
		return
	case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR):
		v.addf(path, "%q cannot be read: %v (%s)", file, unwrapPathError(err), allowed)
		return
	}
	dir := filepath.Dir(file)
	switch di, err := v.stat(dir); {
	case errors.Is(err, fs.ErrNotExist):
		v.addf(path, "%q: the directory %q does not exist (%s)", file, dir, allowed)
	case err != nil:
		v.addf(path, "%q: the directory %q cannot be read: %v (%s)", file, dir, unwrapPathError(err), allowed)
	case !di.IsDir():
		v.addf(path, "%q: %q is not a directory (%s)", file, dir, allowed)
	default:
		if err := v.writable(dir); err != nil {
			v.addf(path, "%q cannot be created in %q: %v (%s)", file, dir, err, allowed)
		}
	}
}

// MinTokenBytes is the shortest admin.token accepted.
const MinTokenBytes = 16

// placeholderTokens are the admin tokens the deployment examples ship
// (deploy/systemd/helios.env, deploy/kubernetes/secret.yaml): a service
// started with one would answer anyone who read the repository.
var placeholderTokens = []string{"change-me-to-a-long-random-string"}

// tokenStrength refuses an admin token that guards nothing: a shipped
// placeholder, or one short enough to guess (issue 18 item 5).
func (v *validator) tokenStrength(token string) {
	const how = "make one with: openssl rand -hex 32"
	switch {
	case slices.Contains(placeholderTokens, token):
		v.addf("admin.token", "is the placeholder the examples ship, which anyone can read (%s)", how)
	case len(token) < MinTokenBytes:
		v.addf("admin.token", "is %d bytes, too short to guess safely (at least %d; %s)", len(token), MinTokenBytes, how)
	}
}

func (v *validator) logging(l *Logging) {
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, l.Level) {
		v.addf("logging.level", "%q is not a level (debug, info, warn, error)", l.Level)
	}
	if l.Format != "json" && l.Format != "console" {
		v.addf("logging.format", "%q is not a format (json, console)", l.Format)
	}
	switch l.AccessLog {
	case "":
		v.addf("logging.access_log", "missing (off, stdout, stderr, or a file path)")
	case AccessLogOff, AccessLogStdout, AccessLogStderr:
	default:
		v.accessLogFile(l.AccessLog)
	}
	if !slices.Contains([]string{"", "json", "console", "combined"}, l.AccessFormat) {
		v.addf("logging.access_format", "%q is not an access log format (json, console, combined)", l.AccessFormat)
	}
}

// hostPortError returns "" when s is host:port with a port 1-65535 and a host
// that is empty, an IP address (bracketed if IPv6) or a hostname, and
// otherwise what is wrong, as a predicate for s.
func hostPortError(s string) string {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "is not host:port"
	}
	n, err := strconv.Atoi(port)
	switch {
	case port == "":
		return "has no port"
	case err != nil || strings.Trim(port, "0123456789") != "":
		return fmt.Sprintf("has port %q, not a number", port)
	case n < 1 || n > 65535:
		return fmt.Sprintf("has port %s, out of range", port)
	}
	if host == "" || isHostname(host) {
		return ""
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return ""
	}
	if looksNumeric(host) {
		// 192.168.1.300 once validated as a host name and failed every
		// request with "no such host" (issue 18 item 4).
		return fmt.Sprintf("has host %q, not an IP address (an IPv4 address is four numbers 0-255, such as 192.168.1.30)", host)
	}
	return fmt.Sprintf("has host %q, not an IP address or hostname", host)
}

// looksNumeric reports whether s is dot-separated digits, as an IPv4
// address is.
func looksNumeric(s string) bool {
	return s != "" && strings.Trim(s, "0123456789.") == ""
}

// canonicalHostPort returns a valid host:port in one spelling per address,
// so that 127.0.0.1:080 and 127.0.0.1:80 count as the same.
func canonicalHostPort(s string) string {
	host, port, _ := net.SplitHostPort(s)
	n, _ := strconv.Atoi(port)
	if a, err := netip.ParseAddr(host); err == nil {
		host = a.String()
	}
	return net.JoinHostPort(strings.ToLower(host), strconv.Itoa(n))
}

// isHostname reports whether s is a DNS name: dot-separated labels of 1-63
// letters, digits and hyphens, not starting or ending with a hyphen, at most
// 253 bytes in all, the last not all digits (RFC 3696 section 2: no top-level
// domain is, so 10.0.0.256 is a mistyped address, not a name).
func isHostname(s string) bool {
	last := s[strings.LastIndexByte(s, '.')+1:]
	return isDNSName(s) && strings.Trim(last, "0123456789") != ""
}

// isDNSName reports whether s is dot-separated labels of 1-63 letters,
// digits and hyphens, not starting or ending with a hyphen, at most 253
// bytes in all.
func isDNSName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// isServiceName reports whether s is an SRV owner name: DNS labels of
// letters, digits, hyphens and underscores (_service._proto.name), at most
// 253 bytes in all.
func isServiceName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// isHostPattern reports whether s is a valid Match.Host.
func isHostPattern(s string) bool {
	if s == "" || s == "*" {
		return true
	}
	// A Host header may be an IP address, so a route may match one.
	return isDNSName(strings.TrimPrefix(s, "*."))
}

// isToken reports whether s is an HTTP token (RFC 9110, section 5.6.2), the
// syntax of a header name.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 || !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// unwrapPathError drops the path from an *fs.PathError, which the message
// already shows.
func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// poller checks a listener's poller, and its deprecated spelling engine.
func (v *validator) poller(l *Listener, p string) {
	switch l.Engine {
	case "":
	case EngineLoop, EnginePortable:
		want := PollerNative
		if l.Engine == EnginePortable {
			want = PollerPortable
		}
		if l.Poller != want {
			v.addf(p+".engine", "%q says another poller than poller %q (engine is poller's old name: keep poller only)", l.Engine, l.Poller)
		} else {
			v.warnf(p+".engine", "engine is deprecated: write poller: %s", want)
		}
	case "goroutine":
		v.addf(p+".engine", "goroutine was removed: every connection runs on the event loops (poller: %s, or %s for Go's netpoller)", PollerNative, PollerPortable)
	default:
		v.addf(p+".engine", "%q is not an engine (engine is deprecated: write poller: %s or %s)", l.Engine, PollerNative, PollerPortable)
	}
	switch l.Poller {
	case PollerNative, PollerEpoll, PollerPortable:
	case "":
		// Left empty by an engine value that is wrong; said above.
	default:
		v.addf(p+".poller", "%q is not a poller (%s, %s, %s)", l.Poller, PollerNative, PollerEpoll, PollerPortable)
	}
}
