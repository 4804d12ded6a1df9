package http1

import (
	"bufio"
	"bytes"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/helios-lb/helios/internal/httpmsg"
)

// requestVectors are request heads built on known smuggling and spoofing
// vectors: Content-Length and Transfer-Encoding together and in disguise,
// obs-fold, bare CR, NUL, LF-only framing, absolute-form targets, IPv6 and
// empty hosts, underscores, fields that Connection names away, and forged
// X-Forwarded-* fields.
var requestVectors = []string{
	"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity\r\nContent-Length: 5\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, identity\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity, chunked\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: \"chunked\"\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\tcHuNkEd\t\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\x00\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\x0bchunked\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding : chunked\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\n Transfer-Encoding: chunked\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nX: y\r\n Transfer-Encoding: chunked\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer_Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nContent_Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
	"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 05\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nContent-Length:5\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 9223372036854775807\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nConnection: Content-Length\r\n\r\nabcGET / HTTP/1.1\r\n\r\n",
	"GET / HTTP/1.1\rHost: a\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\rX: b\r\n\r\n",
	"GET / HTTP/1.1\r\r\nHost: a\r\n\r\n",
	"GET /\x00 HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\x00b\r\n\r\n",
	"GET / HTTP/1.1\nHost: a\n\r\n",
	"\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
	"\rGET / HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET http://a.example/p?q HTTP/1.1\r\nHost: b.example\r\n\r\n",
	"GET HTTP://A.example:80 HTTP/1.0\r\n\r\n",
	"GET http://a.example?q HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET https://[::1]:443/x HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET http://u:p@a/ HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET http://a%2fb/ HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET ftp://a/ HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET //a/b HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET /%zz HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: [::1]\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: [fe80::1%25eth0]:80\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: ::1\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: [::1]x\r\n\r\n",
	"GET / HTTP/1.1\r\nHost:\r\n\r\n",
	"GET / HTTP/1.0\r\nHost: \r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a_b.example\r\nX_Forwarded_For: 6.6.6.6\r\nX-Real_IP: 6.6.6.6\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nX-Forwarded-Host: evil\r\nX-Forwarded-Proto: https\r\nX-Forwarded-For: 1.1.1.1\r\nx-forwarded-for: 2.2.2.2, \r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nConnection: close, X-Forwarded-For, Host, x-a\r\nX-A: 1\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nProxy: http://evil\r\nProxy-Authorization: x\r\nTE: trailers\r\nKeep-Alive: 5\r\nTrailer: X\r\n\r\n",
	"GET /ws HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n\r\n",
	"PUT / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nx",
	"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
	"GET / HTTP/1.1 \r\nHost: a\r\n\r\n",
	"GET\t/ HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET / HTTP/1.10\r\nHost: a\r\n\r\n",
	"get /a#frag HTTP/1.1\r\nHost: a\r\n\r\n",
	"DELETE / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n",
}

// Where the fuzzed requests come from and go to.
var (
	fuzzClient  = netip.MustParseAddr("192.0.2.7")
	fuzzBackend = "backend.example:8080"
)

// FuzzParseRequest parses request heads as the engines do (leading empty
// lines dropped, findHeadEnd, parseRequestLimits). A head either fails with
// a 4xx or 5xx statusError or parses into a request that is consistent (one
// framing, never both Content-Length and Transfer-Encoding), that
// writeRequestHead forwards as a clean head parsing back to the same
// method, target, host and framing with no field the parser marked to
// drop, and that net/http's ReadRequest agrees with: what net/http refuses
// Helios refuses too, but for the documented netHTTPExceptions.
func FuzzParseRequest(f *testing.F) {
	f.Add([]byte(typicalHead), false)
	for _, tt := range requestOKTests {
		f.Add([]byte(tt.head), false)
	}
	for _, tt := range requestRejectTests {
		// Heads of 10,000 lines, which other rows cover at a hundred, slow
		// every mutation down.
		if len(tt.head) <= 4<<10 {
			f.Add([]byte(crlf(tt.head)), false)
		}
	}
	for _, s := range requestVectors {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, in []byte, underscores bool) {
		lim := httpmsg.Limits{Underscores: underscores}
		var r Request
		// Whatever the bytes, parsing must not panic, and fail only with
		// an error status.
		checkRequestError(t, in, ParseRequest(in, &r, lim))
		// RFC 9112 §2.2: the engines drop empty lines before a request.
		b := bytes.TrimLeft(in, "\r\n")
		end, _ := FindHeadEnd(b, 0)
		if end < 0 {
			return // the engines wait for more
		}
		head := b[:end]
		err := ParseRequest(head, &r, lim)
		compareRequestWithNetHTTP(t, head, &r, err)
		if err != nil {
			checkRequestError(t, head, err)
			return
		}
		checkRequest(t, head, &r, lim)
		checkForwardedRequest(t, &r, -1, false)
		checkForwardedRequest(t, &r, -1, true)
		if r.HasBody() {
			// A body buffered whole goes with its length.
			checkForwardedRequest(t, &r, 3, false)
		}
	})
}

// checkRequestError checks that err is nil or a statusError with a 4xx or
// 5xx status.
func checkRequestError(t *testing.T, head []byte, err error) {
	t.Helper()
	if s := statusOf(err); s != 0 && (s < 400 || s > 599) {
		t.Fatalf("%q: got status %d for %v, want a 4xx or 5xx statusError", head, s, err)
	}
}

// checkRequest checks what parseRequestLimits made of head on its own
// terms.
func checkRequest(t *testing.T, head []byte, r *Request, lim httpmsg.Limits) {
	t.Helper()
	if !httpmsg.IsToken(r.Method) || r.Minor > 1 {
		t.Fatalf("%q: got method %q, HTTP/1.%d", head, r.Method, r.Minor)
	}
	if len(r.Target) == 0 || (r.Target[0] != '/' && string(r.Target) != "*") || !bytes.HasPrefix(r.Target, r.Path) {
		t.Fatalf("%q: got uri %q, path %q; want origin-form or *, and a path that starts it", head, r.Target, r.Path)
	}
	if !httpmsg.ValidHost(r.Authority) || !bytes.HasPrefix(r.Authority, r.Host) {
		t.Fatalf("%q: got host %q, authority %q", head, r.Host, r.Authority)
	}
	n := countKinds(r.Header.Fields)
	if n[httpmsg.KindContentLength] > 0 && n[httpmsg.KindTransferEncoding] > 0 {
		t.Fatalf("%q: accepted with both Content-Length and Transfer-Encoding", head)
	}
	if n[httpmsg.KindHost] > 1 || n[httpmsg.KindHost] == 0 && r.Minor == 1 && !r.HostOverride {
		t.Fatalf("%q: accepted with %d Host fields", head, n[httpmsg.KindHost])
	}
	if !r.HostOverride && n[httpmsg.KindHost] == 1 {
		if v, _ := r.Header.Get("host"); !bytes.Equal(v, r.Authority) || len(v) == 0 {
			t.Fatalf("%q: got authority %q, want the Host field %q, not empty", head, r.Authority, v)
		}
	}
	switch {
	case r.Chunked:
		if r.ContentLength != -1 || r.Minor != 1 || n[httpmsg.KindTransferEncoding] != 1 {
			t.Fatalf("%q: chunked with length %d, HTTP/1.%d, %d Transfer-Encoding fields", head, r.ContentLength, r.Minor, n[httpmsg.KindTransferEncoding])
		}
	case n[httpmsg.KindTransferEncoding] > 0:
		t.Fatalf("%q: accepted with a Transfer-Encoding other than chunked", head)
	case n[httpmsg.KindContentLength] == 0:
		if r.ContentLength != 0 {
			t.Fatalf("%q: got length %d without a Content-Length field", head, r.ContentLength)
		}
	}
	for _, f := range r.Header.Fields {
		if !httpmsg.IsToken(f.Name) || !httpmsg.ValidValue(f.Value) || !bytes.Equal(httpmsg.TrimOWS(f.Value), f.Value) {
			t.Fatalf("%q: field %q: %q accepted", head, f.Name, f.Value)
		}
		if cl, ok := httpmsg.ParseContentLength(f.Value); f.Kind == httpmsg.KindContentLength && (!ok || cl != r.ContentLength) {
			t.Fatalf("%q: got length %d, want %q", head, r.ContentLength, f.Value)
		}
		if !lim.Underscores && bytes.IndexByte(f.Name, '_') >= 0 && !f.Drop {
			t.Fatalf("%q: field %q kept, want it dropped (underscores_in_headers off)", head, f.Name)
		}
	}
	closeTok, keepTok := connectionTokens(r.Header.Fields)
	if r.KeepAlive != (!closeTok && (r.Minor == 1 || keepTok)) {
		t.Fatalf("%q: got keep-alive %v with close %v, keep-alive %v in HTTP/1.%d", head, r.KeepAlive, closeTok, keepTok, r.Minor)
	}
	if r.Expect100 && r.Minor != 1 || (r.Upgrade != nil) && r.Minor != 1 {
		t.Fatalf("%q: got expect %v, upgrade %v in HTTP/1.%d", head, r.Expect100, (r.Upgrade != nil), r.Minor)
	}
}

// checkForwardedRequest renders r for the backend as the engines do
// (bodyLen as writeRequestHead takes it), from a peer that is a trusted
// proxy or not, and checks the result on the wire and parsed again.
func checkForwardedRequest(t *testing.T, r *Request, bodyLen int64, trusted bool) {
	t.Helper()
	var fw httpmsg.Forwarder
	hop := httpmsg.Hop{Peer: fuzzClient, Trusted: trusted, Backend: fuzzBackend}
	out := renderHead(t, func(w Sink) { WriteRequestHead(w, &fw, &r.Request, &hop, bodyLen) })
	checkWireHead(t, out)
	var r2 Request
	if err := ParseRequest(out, &r2, httpmsg.Limits{Underscores: true, MaxFields: 1 << 20}); err != nil {
		t.Fatalf("forwarded head %q: got %v, want it parsed", out, err)
	}
	if !bytes.Equal(r2.Method, r.Method) || !bytes.Equal(r2.RawTarget, r.Target) || r2.Minor != 1 || r2.HostOverride {
		t.Fatalf("forwarded head %q: got %q %q HTTP/1.%d, want %q %q HTTP/1.1 in origin-form", out, r2.Method, r2.RawTarget, r2.Minor, r.Method, r.Target)
	}
	wantAuthority := string(r.Authority)
	if !r.HasHost && !r.HostOverride {
		wantAuthority = fuzzBackend
	}
	if string(r2.Authority) != wantAuthority {
		t.Fatalf("forwarded head %q: got host %q, want %q", out, r2.Authority, wantAuthority)
	}
	wantCL := r.ContentLength
	switch {
	case bodyLen >= 0:
		wantCL = bodyLen
	}
	if r2.Chunked != (r.Chunked && bodyLen < 0) || r2.ContentLength != wantCL {
		t.Fatalf("forwarded head %q: got chunked %v, length %d; want %v, %d", out, r2.Chunked, r2.ContentLength, r.Chunked && bodyLen < 0, wantCL)
	}
	if (r2.Upgrade != nil) != (r.Upgrade != nil) || !r2.KeepAlive {
		t.Fatalf("forwarded head %q: got upgrade %v, keep-alive %v; want %v, true", out, (r2.Upgrade != nil), r2.KeepAlive, (r.Upgrade != nil))
	}
	// Fields: the end-to-end ones in order, none the parser marked to
	// drop, and only the hop-by-hop and X-Forwarded-* ones Helios writes.
	var dropped, kept []httpmsg.Field
	for _, f := range r.Header.Fields {
		switch {
		case f.Drop:
			dropped = append(dropped, f)
		case f.Kind == httpmsg.KindOther || f.Kind == httpmsg.KindTrailer:
			kept = append(kept, f)
		}
	}
	var ends []httpmsg.Field
	for _, f := range r2.Header.Fields {
		if f.Kind == httpmsg.KindOther || f.Kind == httpmsg.KindTrailer {
			ends = append(ends, f)
		}
		for _, d := range dropped {
			if httpmsg.EqualFoldBytes(f.Name, d.Name) {
				t.Fatalf("forwarded head %q: has %q, which the parser marked to drop", out, f.Name)
			}
		}
	}
	if got, want := fieldLines(ends), fieldLines(kept); !slices.Equal(got, want) {
		t.Fatalf("forwarded head %q: got end-to-end fields %q, want %q", out, got, want)
	}
	n := countKinds(r2.Header.Fields)
	up := 0
	if r.Upgrade != nil {
		up = 1
	}
	// A trusted proxy's fields go on as it sent them (the parser may
	// have marked some to drop); anyone else's are replaced.
	sent := map[httpmsg.Kind][]string{}
	for _, f := range r.Header.Fields {
		if !f.Drop {
			sent[f.Kind] = append(sent[f.Kind], string(f.Value))
		}
	}
	protos, hosts, fwds, reals := 1, 0, 0, 0
	if len(r.Authority) > 0 {
		hosts = 1
	}
	if trusted {
		protos = max(1, len(sent[httpmsg.KindXForwardedProto]))
		hosts = max(hosts, len(sent[httpmsg.KindXForwardedHost]))
		fwds, reals = len(sent[httpmsg.KindForwarded]), len(sent[httpmsg.KindXRealIP])
	}
	for _, c := range []struct {
		name string
		k    httpmsg.Kind
		want int
	}{
		{"Host", httpmsg.KindHost, 1}, {"X-Forwarded-For", httpmsg.KindXForwardedFor, 1}, {"X-Forwarded-Proto", httpmsg.KindXForwardedProto, protos},
		{"X-Forwarded-Host", httpmsg.KindXForwardedHost, hosts}, {"Forwarded", httpmsg.KindForwarded, fwds}, {"X-Real-IP", httpmsg.KindXRealIP, reals},
		{"Upgrade", httpmsg.KindUpgrade, up}, {"Connection", httpmsg.KindConnection, up},
		{"Keep-Alive", httpmsg.KindKeepAlive, 0}, {"Proxy-*", httpmsg.KindProxy, 0}, {"TE", httpmsg.KindTE, 0}, {"Expect", httpmsg.KindExpect, 0},
	} {
		if n[c.k] != c.want {
			t.Fatalf("forwarded head %q (trusted %v): got %d %s fields, want %d", out, trusted, n[c.k], c.name, c.want)
		}
	}
	var prior []string
	if trusted {
		for _, v := range sent[httpmsg.KindXForwardedFor] {
			if len(v) > 0 {
				prior = append(prior, v)
			}
		}
	}
	wantXFF := strings.Join(append(prior, fuzzClient.String()), ", ")
	if v, _ := r2.Header.Get("x-forwarded-for"); string(v) != wantXFF {
		t.Fatalf("forwarded head %q (trusted %v): got X-Forwarded-For %q, want %q", out, trusted, v, wantXFF)
	}
	wantProto, wantHost := "http", string(r.Authority)
	if trusted && len(sent[httpmsg.KindXForwardedProto]) > 0 {
		wantProto = sent[httpmsg.KindXForwardedProto][0]
	}
	if trusted && len(sent[httpmsg.KindXForwardedHost]) > 0 {
		wantHost = sent[httpmsg.KindXForwardedHost][0]
	}
	if v, _ := r2.Header.Get("x-forwarded-proto"); string(v) != wantProto {
		t.Fatalf("forwarded head %q (trusted %v): got X-Forwarded-Proto %q, want %q", out, trusted, v, wantProto)
	}
	if v, _ := r2.Header.Get("x-forwarded-host"); string(v) != wantHost {
		t.Fatalf("forwarded head %q (trusted %v): got X-Forwarded-Host %q, want %q", out, trusted, v, wantHost)
	}
}

// netHTTPExceptions are the heads Helios accepts although net/http's
// ReadRequest refuses them, on purpose. None of them can make Helios and a
// backend disagree on where a request ends: Helios forwards a framing it
// writes itself.
var netHTTPExceptions = []struct {
	name, why string
	applies   func(r *Request) bool
}{
	{
		name: "Content-Length fields with the same value, spelled differently",
		why: "RFC 9110 §8.6 lets a recipient accept several Content-Length values that are the same decimal " +
			"number (5 and 05); net/http compares their spellings. Helios forwards one Content-Length of its own.",
		applies: func(r *Request) bool {
			var first []byte
			for _, f := range r.Header.Fields {
				if f.Kind == httpmsg.KindContentLength {
					if first != nil && !bytes.Equal(f.Value, first) {
						return true
					}
					first = f.Value
				}
			}
			return false
		},
	},
	{
		name: "a target net/url cannot parse",
		why: "Helios checks a target only for bytes that would break the request line and forwards it as " +
			"received, as nginx does; net/http parses it as a URL and refuses, for example, a bad percent-escape.",
		applies: func(r *Request) bool {
			_, err := url.ParseRequestURI(string(r.RawTarget))
			return err != nil
		},
	},
}

// compareRequestWithNetHTTP reads head with net/http's ReadRequest. When
// net/http refuses a head that Helios accepted, one of netHTTPExceptions
// must say why; when both accept it, they must agree on the method,
// target, host, framing and keep-alive. Helios refusing what net/http
// accepts is allowed: it is stricter by design (obs-fold, whitespace
// before the colon, Transfer-Encoding in HTTP/1.0, both Content-Length and
// Transfer-Encoding, empty Host, and more).
func compareRequestWithNetHTTP(t *testing.T, head []byte, r *Request, err error) {
	t.Helper()
	goReq, goErr := http.ReadRequest(bufio.NewReader(bytes.NewReader(head)))
	if err != nil {
		return
	}
	if goErr != nil {
		for _, e := range netHTTPExceptions {
			if e.applies(r) {
				return
			}
		}
		t.Fatalf("%q: net/http refuses it (%v), Helios accepts it", head, goErr)
	}
	goChunked := len(goReq.TransferEncoding) > 0
	wantCL := max(r.ContentLength, 0)
	if r.Chunked {
		wantCL = -1
	}
	if goReq.Method != string(r.Method) || goReq.RequestURI != string(r.RawTarget) || goReq.Host != string(r.Authority) ||
		goChunked != r.Chunked || goReq.ContentLength != wantCL || goReq.Close == r.KeepAlive {
		t.Fatalf("%q: net/http got %s %s host %q, chunked %v, length %d, close %v; Helios %s %s host %q, chunked %v, length %d, keep-alive %v",
			head, goReq.Method, goReq.RequestURI, goReq.Host, goChunked, goReq.ContentLength, goReq.Close,
			r.Method, r.RawTarget, r.Authority, r.Chunked, r.ContentLength, r.KeepAlive)
	}
}
