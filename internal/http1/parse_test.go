package http1

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/helios-lb/helios/internal/httpmsg"
)

// statusOf returns the status a parse error asks for: 0 for nil, -1 for an
// error that is not a statusError.
func statusOf(err error) int {
	if err == nil {
		return 0
	}
	var se *httpmsg.StatusError
	if errors.As(err, &se) {
		return se.Status
	}
	return -1
}

// reqSummary is what a test compares after parseRequest.
type reqSummary struct {
	Method, URI, Path, Host, Authority string
	Minor                              byte
	CL                                 int64
	Chunked, KeepAlive, Upgrade        bool
	Expect100, HostOverride            bool
}

func summarize(r *Request) reqSummary {
	return reqSummary{
		Method: string(r.Method), URI: string(r.Target), Path: string(r.Path),
		Host: string(r.Host), Authority: string(r.Authority), Minor: r.Minor,
		CL: r.ContentLength, Chunked: r.Chunked, KeepAlive: r.KeepAlive, Upgrade: (r.Upgrade != nil),
		Expect100: r.Expect100, HostOverride: r.HostOverride,
	}
}

// droppedNames lists the fields marked to drop, lower-cased, in order.
func droppedNames(h *httpmsg.Header) []string {
	var out []string
	for _, f := range h.Fields {
		if f.Drop {
			out = append(out, strings.ToLower(string(f.Name)))
		}
	}
	return out
}

// crlf turns "\n" into "\r\n" so test heads stay readable.
func crlf(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }

// getExample is the summary of "GET uri" to Host example.com.
func getExample(uri string) reqSummary {
	return reqSummary{Method: "GET", URI: uri, Path: uri, Host: "example.com", Authority: "example.com",
		Minor: 1, CL: 0, KeepAlive: true}
}

// requestOKTests are request heads Helios accepts; the fuzz targets start
// from them too.
var requestOKTests = []struct {
	name    string
	head    string
	want    reqSummary
	dropped []string
}{
	{
		name: "simple get",
		head: crlf("GET /a/b HTTP/1.1\nHost: example.com\n\n"),
		want: getExample("/a/b"),
	},
	{
		// Extension methods are tokens, in any case; only the standard
		// methods' other spellings are refused.
		name: "extension method with lower case",
		head: crlf("helloGET /a HTTP/1.1\nHost: example.com\n\n"),
		want: reqSummary{Method: "helloGET", URI: "/a", Path: "/a", Host: "example.com", Authority: "example.com", Minor: 1, CL: 0, KeepAlive: true},
	},
	{
		name: "extension method",
		head: crlf("PROPFIND /a HTTP/1.1\nHost: example.com\n\n"),
		want: reqSummary{Method: "PROPFIND", URI: "/a", Path: "/a", Host: "example.com", Authority: "example.com", Minor: 1, CL: 0, KeepAlive: true},
	},
	{
		name: "bare LF line endings",
		head: "GET /a HTTP/1.1\nHost: example.com\n\n",
		want: getExample("/a"),
	},
	{
		name: "leading empty lines ignored",
		head: crlf("\n\nGET / HTTP/1.1\nHost: example.com\n\n"),
		want: getExample("/"),
	},
	{
		name: "query and fragment cut from path",
		head: crlf("GET /p?x=1#f HTTP/1.1\nHost: example.com\n\n"),
		want: reqSummary{Method: "GET", URI: "/p?x=1#f", Path: "/p", Host: "example.com", Authority: "example.com",
			Minor: 1, CL: 0, KeepAlive: true},
	},
	{
		name: "host port stripped for routing",
		head: crlf("GET / HTTP/1.1\nHost: Example.com:8080\n\n"),
		want: reqSummary{Method: "GET", URI: "/", Path: "/", Host: "Example.com", Authority: "Example.com:8080",
			Minor: 1, CL: 0, KeepAlive: true},
	},
	{
		name: "ipv6 host",
		head: crlf("GET / HTTP/1.1\nHost: [::1]:80\n\n"),
		want: reqSummary{Method: "GET", URI: "/", Path: "/", Host: "[::1]", Authority: "[::1]:80",
			Minor: 1, CL: 0, KeepAlive: true},
	},
	{
		name: "value whitespace trimmed, tab allowed inside",
		head: crlf("GET / HTTP/1.1\nHost: \t example.com \t\nX-A: a\tb\n\n"),
		want: getExample("/"),
	},
	{
		name: "content-length",
		head: crlf("POST /u HTTP/1.1\nHost: example.com\nContent-Length: 42\n\n"),
		want: reqSummary{Method: "POST", URI: "/u", Path: "/u", Host: "example.com", Authority: "example.com",
			Minor: 1, CL: 42, KeepAlive: true},
	},
	{
		name: "identical duplicate content-length",
		head: crlf("POST /u HTTP/1.1\nHost: example.com\nContent-Length: 7\ncontent-length: 7\n\n"),
		want: reqSummary{Method: "POST", URI: "/u", Path: "/u", Host: "example.com", Authority: "example.com",
			Minor: 1, CL: 7, KeepAlive: true},
	},
	{
		name: "content-length zero",
		head: crlf("POST /u HTTP/1.1\nHost: example.com\nContent-Length: 0\n\n"),
		want: reqSummary{Method: "POST", URI: "/u", Path: "/u", Host: "example.com", Authority: "example.com",
			Minor: 1, CL: 0, KeepAlive: true},
	},
	{
		name: "chunked, any case",
		head: crlf("POST /u HTTP/1.1\nHost: example.com\nTransfer-Encoding: Chunked\n\n"),
		want: reqSummary{Method: "POST", URI: "/u", Path: "/u", Host: "example.com", Authority: "example.com",
			Minor: 1, CL: -1, Chunked: true, KeepAlive: true},
	},
	{
		name: "http/1.0 without keep-alive",
		head: crlf("GET / HTTP/1.0\n\n"),
		want: reqSummary{Method: "GET", URI: "/", Path: "/", Minor: 0, CL: 0},
	},
	{
		name: "http/1.0 with keep-alive",
		head: crlf("GET / HTTP/1.0\nConnection: Keep-Alive\n\n"),
		want: reqSummary{Method: "GET", URI: "/", Path: "/", Minor: 0, CL: 0, KeepAlive: true},
	},
	{
		name: "http/1.1 connection close",
		head: crlf("GET / HTTP/1.1\nHost: example.com\nConnection: close\n\n"),
		want: reqSummary{Method: "GET", URI: "/", Path: "/", Host: "example.com", Authority: "example.com", Minor: 1, CL: 0},
	},
	{
		name: "close wins over keep-alive",
		head: crlf("GET / HTTP/1.1\nHost: example.com\nConnection: keep-alive\nConnection: close\n\n"),
		want: reqSummary{Method: "GET", URI: "/", Path: "/", Host: "example.com", Authority: "example.com", Minor: 1, CL: 0},
	},
	{
		name: "connection names headers to drop",
		head: crlf("GET / HTTP/1.1\nHost: example.com\nX-Secret: 1\nConnection: x-secret, , Foo\nfoo: 2\nX-Keep: 3\n\n"),
		want: getExample("/"),
		// Only httpmsg.KindOther fields can be named away; Host can never be.
		dropped: []string{"x-secret", "foo"},
	},
	{
		name:    "connection cannot drop host",
		head:    crlf("GET / HTTP/1.1\nHost: example.com\nConnection: Host, Content-Length\n\n"),
		want:    getExample("/"),
		dropped: nil,
	},
	{
		name: "upgrade",
		head: crlf("GET /ws HTTP/1.1\nHost: example.com\nConnection: Upgrade\nUpgrade: websocket\n\n"),
		want: reqSummary{Method: "GET", URI: "/ws", Path: "/ws", Host: "example.com", Authority: "example.com",
			Minor: 1, CL: 0, KeepAlive: true, Upgrade: true},
	},
	{
		name: "upgrade header without connection token",
		head: crlf("GET /ws HTTP/1.1\nHost: example.com\nUpgrade: websocket\n\n"),
		want: reqSummary{Method: "GET", URI: "/ws", Path: "/ws", Host: "example.com", Authority: "example.com",
			Minor: 1, CL: 0, KeepAlive: true},
	},
	{
		name: "connection upgrade without upgrade header",
		head: crlf("GET /ws HTTP/1.1\nHost: example.com\nConnection: upgrade\n\n"),
		want: reqSummary{Method: "GET", URI: "/ws", Path: "/ws", Host: "example.com", Authority: "example.com",
			Minor: 1, CL: 0, KeepAlive: true},
	},
	{
		name: "upgrade ignored in http/1.0",
		head: crlf("GET /ws HTTP/1.0\nConnection: upgrade\nUpgrade: websocket\n\n"),
		want: reqSummary{Method: "GET", URI: "/ws", Path: "/ws", Minor: 0, CL: 0},
	},
	{
		name: "expect 100-continue",
		head: crlf("PUT /u HTTP/1.1\nHost: example.com\nExpect: 100-Continue\nContent-Length: 3\n\n"),
		want: reqSummary{Method: "PUT", URI: "/u", Path: "/u", Host: "example.com", Authority: "example.com",
			Minor: 1, CL: 3, KeepAlive: true, Expect100: true},
	},
	{
		// RFC 9110 §10.1.1: a server MUST ignore a 100-continue
		// expectation in an HTTP/1.0 request.
		name: "expect ignored in http/1.0",
		head: crlf("PUT /u HTTP/1.0\nExpect: 100-continue\nContent-Length: 3\n\n"),
		want: reqSummary{Method: "PUT", URI: "/u", Path: "/u", Minor: 0, CL: 3},
	},
	{
		name: "absolute-form target names the host",
		head: crlf("GET http://Origin.example:81/p?q HTTP/1.1\nHost: other.example\n\n"),
		want: reqSummary{Method: "GET", URI: "/p?q", Path: "/p", Host: "Origin.example", Authority: "Origin.example:81",
			Minor: 1, CL: 0, KeepAlive: true, HostOverride: true},
	},
	{
		name: "absolute-form without path",
		head: crlf("GET HTTPS://origin.example HTTP/1.1\nHost: origin.example\n\n"),
		want: reqSummary{Method: "GET", URI: "/", Path: "/", Host: "origin.example", Authority: "origin.example",
			Minor: 1, CL: 0, KeepAlive: true, HostOverride: true},
	},
	{
		name: "options asterisk",
		head: crlf("OPTIONS * HTTP/1.1\nHost: example.com\n\n"),
		want: reqSummary{Method: "OPTIONS", URI: "*", Path: "*", Host: "example.com", Authority: "example.com",
			Minor: 1, CL: 0, KeepAlive: true},
	},
}

func TestParseRequestOK(t *testing.T) {
	for _, tt := range requestOKTests {
		t.Run(tt.name, func(t *testing.T) {
			var r Request
			if err := ParseRequest([]byte(tt.head), &r, httpmsg.Limits{}); err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if got := summarize(&r); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
			if got := droppedNames(&r.Header); !slices.Equal(got, tt.dropped) {
				t.Errorf("dropped: got %v, want %v", got, tt.dropped)
			}
		})
	}
}

// requestRejectTests are request heads Helios refuses, with the status they
// get. Their LF line endings become CRLF when used (crlf). The fuzz targets
// start from them too.
var requestRejectTests = []struct {
	name   string
	head   string
	status int
}{
	// Request smuggling defences (RFC 9112 §6.1, §6.3, §11.2).
	{"cl and te", "POST / HTTP/1.1\nHost: a\nContent-Length: 5\nTransfer-Encoding: chunked\n\n", 400},
	{"te and cl", "POST / HTTP/1.1\nHost: a\nTransfer-Encoding: chunked\nContent-Length: 5\n\n", 400},
	{"two different content-lengths", "POST / HTTP/1.1\nHost: a\nContent-Length: 5\nContent-Length: 6\n\n", 400},
	{"content-length with plus", "POST / HTTP/1.1\nHost: a\nContent-Length: +5\n\n", 400},
	{"content-length negative", "POST / HTTP/1.1\nHost: a\nContent-Length: -1\n\n", 400},
	{"content-length inner space", "POST / HTTP/1.1\nHost: a\nContent-Length: 1 2\n\n", 400},
	{"content-length list", "POST / HTTP/1.1\nHost: a\nContent-Length: 5, 5\n\n", 400},
	{"content-length hex", "POST / HTTP/1.1\nHost: a\nContent-Length: 0x10\n\n", 400},
	{"content-length empty", "POST / HTTP/1.1\nHost: a\nContent-Length:\n\n", 400},
	{"content-length too long", "POST / HTTP/1.1\nHost: a\nContent-Length: 1234567890123456789\n\n", 400},
	{"te gzip", "POST / HTTP/1.1\nHost: a\nTransfer-Encoding: gzip\n\n", 501},
	{"te gzip, chunked", "POST / HTTP/1.1\nHost: a\nTransfer-Encoding: gzip, chunked\n\n", 501},
	{"te chunked twice", "POST / HTTP/1.1\nHost: a\nTransfer-Encoding: chunked\nTransfer-Encoding: chunked\n\n", 501},
	{"te chunked with junk", "POST / HTTP/1.1\nHost: a\nTransfer-Encoding: xchunked\n\n", 501},
	{"te in http/1.0", "POST / HTTP/1.0\nTransfer-Encoding: chunked\n\n", 400},
	{"obs-fold", "GET / HTTP/1.1\nHost: a\nX-A: b\n c\n\n", 400},
	{"obs-fold tab", "GET / HTTP/1.1\nHost: a\nX-A: b\n\tc\n\n", 400},
	{"space before colon", "GET / HTTP/1.1\nHost: a\nContent-Length : 5\n\n", 400},
	{"tab before colon", "GET / HTTP/1.1\nHost\t: a\n\n", 400},
	{"no colon", "GET / HTTP/1.1\nHost: a\nJunk\n\n", 400},
	{"empty name", "GET / HTTP/1.1\nHost: a\n: v\n\n", 400},
	{"nul in value", "GET / HTTP/1.1\nHost: a\nX-A: b\x00c\n\n", 400},
	{"cr in value", "GET / HTTP/1.1\nHost: a\nX-A: b\rX-B: c\n\n", 400},
	{"del in value", "GET / HTTP/1.1\nHost: a\nX-A: b\x7fc\n\n", 400},
	{"missing host", "GET / HTTP/1.1\nX-A: b\n\n", 400},
	{"two hosts", "GET / HTTP/1.1\nHost: a\nHost: b\n\n", 400},
	{"two identical hosts", "GET / HTTP/1.1\nHost: a\nHost: a\n\n", 400},
	{"host with slash", "GET / HTTP/1.1\nHost: a/b\n\n", 400},
	{"host with space", "GET / HTTP/1.1\nHost: a b\n\n", 400},
	{"host with at", "GET / HTTP/1.1\nHost: user@a\n\n", 400},
	{"http/2.0", "GET / HTTP/2.0\nHost: a\n\n", 505},
	{"http/1.2", "GET / HTTP/1.2\nHost: a\n\n", 505},
	{"lower-case version", "GET / http/1.1\nHost: a\n\n", 400},
	{"no version", "GET /\nHost: a\n\n", 400},
	{"connect", "CONNECT example.com:443 HTTP/1.1\nHost: example.com:443\n\n", 405},
	{"expect other", "PUT / HTTP/1.1\nHost: a\nExpect: 200-ok\nContent-Length: 1\n\n", 417},
	{"method not a token", "G(T / HTTP/1.1\nHost: a\n\n", 400},
	// Issue 26: a standard method in another case is no method any
	// client sends; Helios and a backend that folds case would disagree
	// on it (TRACE refused, trace forwarded).
	{"lower-case GET", "get / HTTP/1.1\nHost: a\n\n", 400},
	{"capitalised POST", "Post / HTTP/1.1\nHost: a\nContent-Length: 0\n\n", 400},
	{"mixed-case TRACE", "tRaCe / HTTP/1.1\nHost: a\n\n", 400},
	{"lower-case PATCH", "patch / HTTP/1.1\nHost: a\n\n", 400},
	{"empty method", " / HTTP/1.1\nHost: a\n\n", 400},
	{"double space", "GET  / HTTP/1.1\nHost: a\n\n", 400},
	{"control in target", "GET /a\x01b HTTP/1.1\nHost: a\n\n", 400},
	{"relative target", "GET a/b HTTP/1.1\nHost: a\n\n", 400},
	{"asterisk outside options", "GET * HTTP/1.1\nHost: a\n\n", 400},
	{"absolute with userinfo", "GET http://u@a/ HTTP/1.1\nHost: a\n\n", 400},
	{"absolute with empty authority", "GET http:///x HTTP/1.1\nHost: a\n\n", 400},
	{"absolute with bad host", "GET http://a b/ HTTP/1.1\nHost: a\n\n", 400},
	{"too many connection headers", "GET / HTTP/1.1\nHost: a\nConnection: a\nConnection: b\nConnection: c\nConnection: d\nConnection: e\n\n", 400},
	// Issue 9, item 9: bounds and Host rules an adversarial test found missing.
	{"empty host", "GET / HTTP/1.1\nHost:\n\n", 400},
	{"empty host, blank", "GET / HTTP/1.1\nHost:   \n\n", 400},
	{"host with two colons", "GET / HTTP/1.1\nHost: a:1:2\n\n", 400},
	{"host with letters in port", "GET / HTTP/1.1\nHost: a:http\n\n", 400},
	{"host with a bracket inside", "GET / HTTP/1.1\nHost: a]b\n\n", 400},
	{"ipv6 host unclosed", "GET / HTTP/1.1\nHost: [::1\n\n", 400},
	// Found by FuzzParseRequest in CI: net/http decodes "%80" in an
	// absolute-form host and not in a Host field; Helios refuses both.
	{"absolute with percent-encoded host", "0 http://%80 HTTP/1.0\n\n", 400},
	{"host percent-encoded", "GET / HTTP/1.1\nHost: %41\n\n", 400},
	{"host a port alone", "GET / HTTP/1.1\nHost: :80\n\n", 400},
	{"host empty brackets", "GET / HTTP/1.1\nHost: []\n\n", 400},
	{"host empty brackets with a port", "GET / HTTP/1.1\nHost: []:80\n\n", 400},
	{"absolute with a port alone", "GET http://:80/ HTTP/1.1\nHost: x\n\n", 400},
	{"long method", strings.Repeat("A", 10000) + " / HTTP/1.1\nHost: a\n\n", 501},
	{"method one past the limit", strings.Repeat("M", 33) + " / HTTP/1.1\nHost: a\n\n", 501},
	{"too many header lines", "GET / HTTP/1.1\nHost: a\n" + strings.Repeat("X-A: b\n", 10000) + "\n", 431},
	{"one header line past the limit", "GET / HTTP/1.1\nHost: a\n" + strings.Repeat("X-A: b\n", 100) + "\n", 431},
}

func TestParseRequestRejects(t *testing.T) {
	for _, tt := range requestRejectTests {
		t.Run(tt.name, func(t *testing.T) {
			var r Request
			err := ParseRequest([]byte(crlf(tt.head)), &r, httpmsg.Limits{})
			if got := statusOf(err); got != tt.status {
				t.Errorf("got status %v (%v), want %v", got, err, tt.status)
			}
		})
	}
}

// TestParseRequestLimits checks the configurable bounds and the handling
// of header names with underscores (issue 9, item 9).
func TestParseRequestLimits(t *testing.T) {
	hundred := "GET / HTTP/1.1\nHost: a\n" + strings.Repeat("X-A: b\n", 99) + "\n"
	tests := []struct {
		name    string
		head    string
		lim     httpmsg.Limits
		status  int
		dropped []string
	}{
		{name: "100 fields by default", head: hundred},
		{name: "fewer allowed", head: hundred, lim: httpmsg.Limits{MaxFields: 50}, status: 431},
		{name: "32-byte method", head: strings.Repeat("M", 32) + " / HTTP/1.1\nHost: a\n\n"},
		{name: "shorter methods allowed", head: "PROPFIND / HTTP/1.1\nHost: a\n\n", lim: httpmsg.Limits{MaxMethod: 7}, status: 501},
		{
			name: "underscores dropped by default", head: "GET / HTTP/1.1\nHost: a\nX_Forwarded_For: 6.6.6.6\nX-Real: 1\nContent_Length: 5\n\n",
			dropped: []string{"x_forwarded_for", "content_length"},
		},
		{
			name: "underscores kept when allowed", head: "GET / HTTP/1.1\nHost: a\nX_Forwarded_For: 6.6.6.6\n\n",
			lim: httpmsg.Limits{Underscores: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r Request
			err := ParseRequest([]byte(crlf(tt.head)), &r, tt.lim)
			if got := statusOf(err); got != tt.status {
				t.Fatalf("got status %v (%v), want %v", got, err, tt.status)
			}
			if got := droppedNames(&r.Header); strings.Join(got, ",") != strings.Join(tt.dropped, ",") {
				t.Errorf("got dropped %v, want %v", got, tt.dropped)
			}
		})
	}
}

// TestParseRequestReuse checks that a request parsed into a reused struct
// carries nothing over from the previous one.
func TestParseRequestReuse(t *testing.T) {
	var r Request
	first := crlf("POST /a HTTP/1.1\nHost: a\nContent-Length: 5\nConnection: close, X-Y\nX-Y: 1\nExpect: 100-continue\n\n")
	if err := ParseRequest([]byte(first), &r, httpmsg.Limits{}); err != nil {
		t.Fatal(err)
	}
	if err := ParseRequest([]byte(crlf("GET /b HTTP/1.1\nHost: b\n\n")), &r, httpmsg.Limits{}); err != nil {
		t.Fatal(err)
	}
	want := reqSummary{Method: "GET", URI: "/b", Path: "/b", Host: "b", Authority: "b", Minor: 1, CL: 0, KeepAlive: true}
	if got := summarize(&r); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if got := len(r.Header.Fields); got != 1 {
		t.Errorf("fields: got %v, want %v", got, 1)
	}
}

type respSummary struct {
	Status     int
	Minor      byte
	Reason     string
	CL         int64
	Chunked    bool
	UntilClose bool
	KeepAlive  bool
}

// responseTests are response heads Helios accepts. Their LF line endings
// become CRLF when used (crlf). The fuzz targets start from them too.
var responseTests = []struct {
	name    string
	head    string
	forHEAD bool // answers a HEAD request
	want    respSummary
}{
	{"200 with length", "HTTP/1.1 200 OK\nContent-Length: 5\n\n", false,
		respSummary{Status: 200, Minor: 1, Reason: "OK", CL: 5, KeepAlive: true}},
	{"no reason phrase", "HTTP/1.1 204\n\n", false,
		respSummary{Status: 204, Minor: 1, CL: 0, KeepAlive: true}},
	{"empty reason phrase", "HTTP/1.1 200 \nContent-Length: 0\n\n", false,
		respSummary{Status: 200, Minor: 1, CL: 0, KeepAlive: true}},
	{"reason with spaces", "HTTP/1.1 404 Not Found Here\nContent-Length: 0\n\n", false,
		respSummary{Status: 404, Minor: 1, Reason: "Not Found Here", CL: 0, KeepAlive: true}},
	{"bare LF", "HTTP/1.1 200 OK\nContent-Length: 1\n\n", false,
		respSummary{Status: 200, Minor: 1, Reason: "OK", CL: 1, KeepAlive: true}},
	{"chunked", "HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n", false,
		respSummary{Status: 200, Minor: 1, Reason: "OK", CL: -1, Chunked: true, KeepAlive: true}},
	{"chunked beats length, no reuse", "HTTP/1.1 200 OK\nContent-Length: 10\nTransfer-Encoding: chunked\n\n", false,
		respSummary{Status: 200, Minor: 1, Reason: "OK", CL: -1, Chunked: true}},
	{"gzip, chunked", "HTTP/1.1 200 OK\nTransfer-Encoding: gzip, chunked\n\n", false,
		respSummary{Status: 200, Minor: 1, Reason: "OK", CL: -1, Chunked: true, KeepAlive: true}},
	{"te not ending in chunked runs until close", "HTTP/1.1 200 OK\nTransfer-Encoding: gzip\n\n", false,
		respSummary{Status: 200, Minor: 1, Reason: "OK", CL: -1, UntilClose: true}},
	{"no framing runs until close", "HTTP/1.1 200 OK\n\n", false,
		respSummary{Status: 200, Minor: 1, Reason: "OK", CL: -1, UntilClose: true}},
	{"connection close", "HTTP/1.1 200 OK\nContent-Length: 0\nConnection: close\n\n", false,
		respSummary{Status: 200, Minor: 1, Reason: "OK", CL: 0}},
	{"http/1.0 closes", "HTTP/1.0 200 OK\nContent-Length: 0\n\n", false,
		respSummary{Status: 200, Minor: 0, Reason: "OK", CL: 0}},
	{"http/1.0 keep-alive", "HTTP/1.0 200 OK\nContent-Length: 0\nConnection: keep-alive\n\n", false,
		respSummary{Status: 200, Minor: 0, Reason: "OK", CL: 0, KeepAlive: true}},
	{
		// RFC 9112 §6.1: an HTTP/1.0 message with Transfer-Encoding has
		// faulty framing; the connection must close after it.
		"http/1.0 with chunked closes", "HTTP/1.0 200 OK\nTransfer-Encoding: chunked\nConnection: keep-alive\n\n", false,
		respSummary{Status: 200, Minor: 0, Reason: "OK", CL: -1, Chunked: true},
	},
	{"100 has no body", "HTTP/1.1 100 Continue\n\n", false,
		respSummary{Status: 100, Minor: 1, Reason: "Continue", CL: 0, KeepAlive: true}},
	{"101 has no body", "HTTP/1.1 101 Switching Protocols\nUpgrade: websocket\nConnection: Upgrade\n\n", false,
		respSummary{Status: 101, Minor: 1, Reason: "Switching Protocols", CL: 0, KeepAlive: true}},
	{"204 ignores framing", "HTTP/1.1 204 No Content\nTransfer-Encoding: chunked\n\n", false,
		respSummary{Status: 204, Minor: 1, Reason: "No Content", CL: 0, KeepAlive: true}},
	{"304 ignores length", "HTTP/1.1 304 Not Modified\nContent-Length: 100\n\n", false,
		respSummary{Status: 304, Minor: 1, Reason: "Not Modified", CL: 0, KeepAlive: true}},
	{"head ignores length", "HTTP/1.1 200 OK\nContent-Length: 100\n\n", true,
		respSummary{Status: 200, Minor: 1, Reason: "OK", CL: 0, KeepAlive: true}},
	{"head ignores chunked", "HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n", true,
		respSummary{Status: 200, Minor: 1, Reason: "OK", CL: 0, KeepAlive: true}},
	{"head without framing keeps alive", "HTTP/1.1 200 OK\n\n", true,
		respSummary{Status: 200, Minor: 1, Reason: "OK", CL: 0, KeepAlive: true}},
	{"identical duplicate lengths", "HTTP/1.1 200 OK\nContent-Length: 3\nContent-Length: 3\n\n", false,
		respSummary{Status: 200, Minor: 1, Reason: "OK", CL: 3, KeepAlive: true}},
}

func TestParseResponse(t *testing.T) {
	for _, tt := range responseTests {
		t.Run(tt.name, func(t *testing.T) {
			var r Response
			if err := ParseResponse([]byte(crlf(tt.head)), &r, tt.forHEAD); err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			got := respSummary{Status: r.Status, Minor: r.Minor, Reason: string(r.Reason), CL: r.ContentLength,
				Chunked: r.Chunked, UntilClose: r.UntilClose, KeepAlive: r.KeepAlive}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// responseRejectTests are response heads Helios refuses. Their LF line
// endings become CRLF when used (crlf). The fuzz targets start from them too.
var responseRejectTests = []struct {
	name string
	head string
}{
	{"http/2", "HTTP/2.0 200 OK\n\n"},
	{"http/1.2", "HTTP/1.2 200 OK\n\n"},
	{"short status", "HTTP/1.1 20 OK\n\n"},
	{"status 600", "HTTP/1.1 600 OK\n\n"},
	{"status 099", "HTTP/1.1 099 OK\n\n"},
	{"letters in status", "HTTP/1.1 2x0 OK\n\n"},
	{"no space after status", "HTTP/1.1 200OK\n\n"},
	{"two spaces after version", "HTTP/1.1  200 OK\n\n"},
	{"lower-case", "http/1.1 200 OK\n\n"},
	{"conflicting lengths", "HTTP/1.1 200 OK\nContent-Length: 1\nContent-Length: 2\n\n"},
	{"bad length", "HTTP/1.1 200 OK\nContent-Length: -1\n\n"},
	{"obs-fold", "HTTP/1.1 200 OK\nX-A: b\n c\n\n"},
	{"space before colon", "HTTP/1.1 200 OK\nX-A : b\n\n"},
	{"nul in value", "HTTP/1.1 200 OK\nX-A: b\x00\n\n"},
	{"no colon", "HTTP/1.1 200 OK\nX-A\n\n"},
	// Issue 10: FuzzParseResponse found controls in the reason phrase
	// relayed to clients as they came.
	{"cr in reason", "HTTP/1.1 200 O\rX-Injected: 1\n\n"},
	{"nul in reason", "HTTP/1.1 200 O\x00K\n\n"},
	{"del in reason", "HTTP/1.1 200 O\x7fK\n\n"},
}

func TestParseResponseRejects(t *testing.T) {
	for _, tt := range responseRejectTests {
		t.Run(tt.name, func(t *testing.T) {
			var r Response
			err := ParseResponse([]byte(crlf(tt.head)), &r, false)
			if !errors.Is(err, ErrMalformedResponse) {
				t.Errorf("got %v, want %v", err, ErrMalformedResponse)
			}
		})
	}
}

// headEndTests are complete heads; the fuzz targets start from them too.
var headEndTests = []struct {
	name string
	head string
}{
	{"crlf", "GET / HTTP/1.1\r\nHost: a\r\nX-Long: " + strings.Repeat("v", 300) + "\r\n\r\n"},
	{"bare lf", "GET / HTTP/1.1\nHost: a\n\n"},
	{"lf then crlf", "GET / HTTP/1.1\nHost: a\n\r\n"},
	{"crlf then lf", "GET / HTTP/1.1\r\nHost: a\r\n\n"},
	{"response", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"},
	{"lone cr inside", "GET / HTTP/1.1\r\nX: a\rb\r\n\r\n"},
}

func TestFindHeadEnd(t *testing.T) {
	const tail = "BODYBYTES\r\n\r\n"
	rng := rand.New(rand.NewPCG(1, 2))
	for _, h := range headEndTests {
		t.Run(h.name+"/whole", func(t *testing.T) {
			b := []byte(h.head + tail)
			if end, _ := FindHeadEnd(b, 0); end != len(h.head) {
				t.Errorf("got %v, want %v", end, len(h.head))
			}
		})
		t.Run(h.name+"/byte by byte", func(t *testing.T) {
			if got := feedHead(h.head+tail, func(int) int { return 1 }); got != len(h.head) {
				t.Errorf("got %v, want %v", got, len(h.head))
			}
		})
		t.Run(h.name+"/random splits", func(t *testing.T) {
			for i := 0; i < 200; i++ {
				if got := feedHead(h.head+tail, func(left int) int { return 1 + rng.IntN(left) }); got != len(h.head) {
					t.Fatalf("got %v, want %v", got, len(h.head))
				}
			}
		})
	}
	t.Run("incomplete", func(t *testing.T) {
		for _, s := range []string{"", "\r", "GET / HTTP/1.1\r\n", "GET / HTTP/1.1\r\nHost: a\r\n", "GET / HTTP/1.1\r\nHost: a\r\n\r", "GET /\n\r"} {
			if end, sc := FindHeadEnd([]byte(s), 0); end != -1 || sc < 0 || sc > len(s) {
				t.Errorf("%q: got (%v, %v), want (-1, 0..%v)", s, end, sc, len(s))
			}
		}
	})
}

// feedHead grows a buffer by the step sizes next returns, calling
// findHeadEnd incrementally as the engine does, and returns the end found
// (-1 if none).
func feedHead(s string, next func(left int) int) int {
	scanned, n := 0, 0
	for n < len(s) {
		n += next(len(s) - n)
		if n > len(s) {
			n = len(s)
		}
		end, sc := FindHeadEnd([]byte(s[:n]), scanned)
		if end > 0 {
			return end
		}
		if sc < scanned {
			return -2 // scanning must not go backwards
		}
		scanned = sc
	}
	return -1
}

func TestParseContentLength(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want int64
		ok   bool
	}{
		{"zero", "0", 0, true},
		{"leading zeros", "007", 7, true},
		{"18 digits", "999999999999999999", 999999999999999999, true},
		{"19 digits", "1000000000000000000", 0, false},
		{"empty", "", 0, false},
		{"sign", "+1", 0, false},
		{"space", " 1", 0, false},
		{"decimal point", "1.0", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := httpmsg.ParseContentLength([]byte(tt.in))
			if got != tt.want || ok != tt.ok {
				t.Errorf("got (%v, %v), want (%v, %v)", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		want httpmsg.Kind
	}{
		{"Host", httpmsg.KindHost}, {"HOST", httpmsg.KindHost}, {"content-length", httpmsg.KindContentLength},
		{"Transfer-Encoding", httpmsg.KindTransferEncoding}, {"Connection", httpmsg.KindConnection},
		{"Keep-Alive", httpmsg.KindKeepAlive}, {"Proxy", httpmsg.KindProxy}, {"Proxy-Connection", httpmsg.KindProxy},
		{"proxy-authorization", httpmsg.KindProxy}, {"TE", httpmsg.KindTE}, {"Trailer", httpmsg.KindTrailer}, {"Upgrade", httpmsg.KindUpgrade},
		{"Expect", httpmsg.KindExpect}, {"X-Forwarded-For", httpmsg.KindXForwardedFor}, {"x-forwarded-proto", httpmsg.KindXForwardedProto},
		{"X-Forwarded-Host", httpmsg.KindXForwardedHost}, {"Hosts", httpmsg.KindOther}, {"Proxy-", httpmsg.KindOther}, {"X-Other", httpmsg.KindOther},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := httpmsg.Classify([]byte(tt.name)); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

const typicalHead = "GET /api/v1/items?id=42 HTTP/1.1\r\n" +
	"Host: api.example.com\r\n" +
	"User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36\r\n" +
	"Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8\r\n" +
	"Accept-Encoding: gzip, deflate, br\r\n" +
	"Accept-Language: en-US,en;q=0.9\r\n" +
	"Cookie: session=abcdef0123456789; theme=dark\r\n" +
	"X-Forwarded-For: 203.0.113.7\r\n" +
	"Connection: keep-alive\r\n" +
	"\r\n"

func TestParseRequestAllocs(t *testing.T) {
	head := []byte(typicalHead)
	var r Request
	allocs := testing.AllocsPerRun(100, func() {
		if err := ParseRequest(head, &r, httpmsg.Limits{}); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("got %v allocs per parse, want 0", allocs)
	}
}

func BenchmarkParseRequest(b *testing.B) {
	head := []byte(typicalHead)
	var r Request
	b.ReportAllocs()
	b.SetBytes(int64(len(head)))
	for b.Loop() {
		if err := ParseRequest(head, &r, httpmsg.Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}
