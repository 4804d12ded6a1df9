package http1

import (
	"bytes"

	"github.com/helios-lb/helios/internal/httpmsg"
)

// Request is a parsed request head: the protocol-neutral head (whose
// ContentLength is -1 for a chunked body and 0 for none), and what only
// HTTP/1.1 has. Slices point into the connection's read buffer (pinned
// until the exchange ends). An HTTP/2 stream's request fills the neutral
// head and leaves the rest zero (h2conn.go).
type Request struct {
	httpmsg.Request
	RawTarget []byte // request-target as received
	Minor     byte   // HTTP/1.minor
	// HostOverride is set when an absolute-form target named the host;
	// it replaces the Host header when forwarding (RFC 9112 §3.2.2).
	HostOverride bool
	// HasHost: the request had a Host field (HTTP/1.0 ones may not).
	HasHost bool

	Chunked   bool
	KeepAlive bool
}

func (r *Request) Reset() {
	r.Request.Reset()
	r.RawTarget, r.Minor, r.HostOverride, r.HasHost = nil, 0, false, false
	r.Chunked, r.KeepAlive = false, false
}

// Rebase points the slices of r that lie in from at the same offsets in
// to (httpmsg.Request.Rebase), RawTarget included.
func (r *Request) Rebase(from, to []byte) {
	r.Request.Rebase(from, to)
	r.RawTarget = httpmsg.RebaseSlice(r.RawTarget, from, to)
}

// FindHeadEnd returns the length of the head (through the empty line) in
// b, or -1 when b does not yet hold a complete head. from is where a
// previous call stopped scanning, so slow clients cost linear time.
func FindHeadEnd(b []byte, from int) (end int, scanned int) {
	i := from
	for {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			// Resume at the last byte: it may be the '\r' before a '\n'.
			s := len(b) - 1
			if s < 0 {
				s = 0
			}
			return -1, s
		}
		i += j + 1
		if i < len(b) && b[i] == '\n' {
			return i + 1, i + 1
		}
		if i+1 < len(b) && b[i] == '\r' && b[i+1] == '\n' {
			return i + 2, i + 2
		}
		if i >= len(b) || (b[i] == '\r' && i+1 >= len(b)) {
			return -1, i - 1
		}
	}
}

// nextLine splits the first line (without CRLF or LF) off b.
func nextLine(b []byte) (line, rest []byte) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return b, nil
	}
	line = b[:i]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	return line, b[i+1:]
}

// ParseRequest parses a complete request head (as found by
// FindHeadEnd). It enforces the framing rules that keep a request from
// meaning two different things to Helios and the backend (RFC 9112 §6.3,
// §11.2), and the bounds of lim.
func ParseRequest(head []byte, r *Request, lim httpmsg.Limits) error {
	r.Reset()
	r.Scheme = httpmsg.SchemeHTTP
	// RFC 9112 §2.2: ignore empty lines before the request line.
	for len(head) > 0 && (head[0] == '\r' || head[0] == '\n') {
		head = head[1:]
	}
	line, rest := nextLine(head)
	sp1 := bytes.IndexByte(line, ' ')
	if sp1 <= 0 {
		return httpmsg.BadRequest("malformed request line")
	}
	r.Method = line[:sp1]
	if err := lim.CheckMethod(r.Method); err != nil {
		return err
	}
	line = line[sp1+1:]
	sp2 := bytes.LastIndexByte(line, ' ')
	if sp2 <= 0 {
		return httpmsg.BadRequest("malformed request line")
	}
	r.RawTarget = line[:sp2]
	version := line[sp2+1:]
	switch string(version) {
	case "HTTP/1.1":
		r.Minor = 1
		r.Proto = httpmsg.HTTP11
	case "HTTP/1.0":
		r.Minor = 0
		r.Proto = httpmsg.HTTP10
	default:
		if len(version) > 5 && string(version[:5]) == "HTTP/" {
			return httpmsg.NewStatusError(505, "HTTP version not supported")
		}
		return httpmsg.BadRequest("malformed HTTP version")
	}
	if err := httpmsg.CheckTarget(r.RawTarget); err != nil {
		return err
	}
	if err := r.splitTarget(); err != nil {
		return err
	}

	var (
		hostSeen, clSeen, teSeen int
		conn                     connFields
		teValue                  []byte
	)
	for {
		var name, value []byte
		var problem string
		name, value, rest, problem = nextField(rest)
		if name == nil {
			if problem != "" {
				return httpmsg.BadRequest(problem)
			}
			break
		}
		k, err := lim.AddField(&r.Header, name, value)
		if err != nil {
			return err
		}
		switch k {
		case httpmsg.KindHost:
			hostSeen++
			if !r.HostOverride {
				r.Authority = value
			}
		case httpmsg.KindContentLength:
			n, ok := httpmsg.ParseContentLength(value)
			if !ok {
				return httpmsg.BadRequest("invalid Content-Length")
			}
			if clSeen > 0 && n != r.ContentLength {
				return httpmsg.BadRequest("conflicting Content-Length headers")
			}
			clSeen++
			r.ContentLength = n
		case httpmsg.KindTransferEncoding:
			teSeen++
			teValue = value
		case httpmsg.KindConnection:
			if !conn.add(value) {
				return httpmsg.BadRequest("too many Connection headers")
			}
		case httpmsg.KindExpect:
			if !httpmsg.EqualFold(value, "100-continue") {
				return httpmsg.NewStatusError(417, "unsupported expectation")
			}
			// RFC 9110 §10.1.1: a server must ignore a 100-continue
			// expectation in an HTTP/1.0 request (the client cannot parse
			// an interim response).
			r.Expect100 = r.Minor == 1
		}
	}

	if r.Minor == 1 && hostSeen == 0 && !r.HostOverride {
		return httpmsg.BadRequest("missing Host header")
	}
	if hostSeen > 1 {
		return httpmsg.BadRequest("multiple Host headers")
	}
	r.HasHost = hostSeen == 1
	if r.HasHost && len(r.Authority) == 0 {
		// RFC 9112 §3.2 allows an empty Host only for a target without
		// an authority, which a proxy has no use for: every route and
		// every backend wants a host.
		return httpmsg.BadRequest("empty Host")
	}
	if !httpmsg.ValidHost(r.Authority) {
		return httpmsg.BadRequest("invalid Host")
	}
	r.Host = httpmsg.StripPort(r.Authority)

	if teSeen > 0 {
		if r.Minor == 0 {
			return httpmsg.BadRequest("Transfer-Encoding in an HTTP/1.0 request")
		}
		if clSeen > 0 {
			// RFC 9112 §6.1: a sender must not send both; a request with
			// both is the classic smuggling vector, so refuse it.
			return httpmsg.BadRequest("both Content-Length and Transfer-Encoding")
		}
		if teSeen > 1 || !httpmsg.EqualFold(teValue, "chunked") {
			return httpmsg.NewStatusError(501, "unsupported Transfer-Encoding")
		}
		r.Chunked = true
		r.ContentLength = -1
	} else if clSeen == 0 {
		r.ContentLength = 0
	}

	closeTok, keepTok, upTok := conn.mark(&r.Header)
	r.KeepAlive = !closeTok && (r.Minor == 1 || keepTok)
	if upTok {
		if v, ok := r.Header.GetKind(httpmsg.KindUpgrade); ok && r.Minor == 1 {
			r.Upgrade = v
		}
	}
	return nil
}

// nextField takes the next field line off rest (RFC 9112 §5): its name
// and value (nil at the empty line that ends the head, or at rest's end)
// and what follows, or what is wrong with the line (fieldLine).
func nextField(rest []byte) (name, value, after []byte, problem string) {
	if len(rest) == 0 {
		return nil, nil, nil, ""
	}
	line, after := nextLine(rest)
	if len(line) == 0 {
		return nil, nil, after, ""
	}
	name, value, problem = fieldLine(line)
	return name, value, after, problem
}

// connFields gathers a head's Connection fields (four at most: more is
// refused) until the head is read, when their options mark the fields
// they name as hop-by-hop.
type connFields struct {
	v [4][]byte
	n int
}

// add keeps a Connection field's value; false: one too many.
func (c *connFields) add(v []byte) bool {
	if c.n == len(c.v) {
		return false
	}
	c.v[c.n] = v
	c.n++
	return true
}

// mark marks in h the fields the options name and reports the close,
// keep-alive and upgrade options.
func (c *connFields) mark(h *httpmsg.Header) (closeTok, keepTok, upTok bool) {
	for _, v := range c.v[:c.n] {
		cl, k, u := h.MarkConnectionOptions(v)
		closeTok, keepTok, upTok = closeTok || cl, keepTok || k, upTok || u
	}
	return closeTok, keepTok, upTok
}

// fieldLine splits a field line of a head (RFC 9112 §5) into its name and
// value, or says what is wrong with it: obsolete line folding (§5.2), no
// colon, or a name that is no token, which includes white space before the
// colon (§5.1). The value is not checked.
func fieldLine(line []byte) (name, value []byte, problem string) {
	if len(line) > 0 && (line[0] == ' ' || line[0] == '\t') {
		return nil, nil, "obsolete line folding"
	}
	colon := bytes.IndexByte(line, ':')
	if colon <= 0 {
		return nil, nil, "malformed header line"
	}
	name = line[:colon]
	if !httpmsg.IsToken(name) {
		return nil, nil, "malformed header name"
	}
	return name, httpmsg.TrimOWS(line[colon+1:]), ""
}

// splitTarget derives uri, path and (for absolute-form) the host.
func (r *Request) splitTarget() error {
	t := r.RawTarget
	switch {
	case len(t) > 0 && t[0] == '/':
		r.Target = t
	case len(t) == 1 && t[0] == '*':
		if !httpmsg.EqualFold(r.Method, "options") {
			return httpmsg.BadRequest("asterisk target outside OPTIONS")
		}
		r.Target = t
		r.Path = t
		return nil
	case httpmsg.HasPrefixFold(t, "http://") || httpmsg.HasPrefixFold(t, "https://"):
		rest := t[bytes.IndexByte(t, ':')+3:]
		slash := bytes.IndexByte(rest, '/')
		auth := rest
		r.Target = []byte("/")
		if slash >= 0 {
			auth = rest[:slash]
			r.Target = rest[slash:]
		} else if q := bytes.IndexByte(rest, '?'); q >= 0 {
			return httpmsg.BadRequest("malformed absolute target")
		}
		if len(auth) == 0 || bytes.IndexByte(auth, '@') >= 0 {
			return httpmsg.BadRequest("malformed absolute target")
		}
		r.Authority = auth
		r.HostOverride = true
	default:
		if httpmsg.EqualFold(r.Method, "connect") {
			return httpmsg.NewStatusError(405, "CONNECT is not supported")
		}
		return httpmsg.BadRequest("malformed request target")
	}
	r.Path = httpmsg.PathOf(r.Target)
	return nil
}
