package httpmsg

import (
	"net/netip"
	"strings"
	"testing"
)

// lines renders what a FieldSink gets as "Name: value" lines.
type lines []string

func (l *lines) Field(name, value []byte) { *l = append(*l, string(name)+": "+string(value)) }

func TestClassify(t *testing.T) {
	for name, want := range map[string]Kind{
		"Host": KindHost, "content-length": KindContentLength, "TRANSFER-ENCODING": KindTransferEncoding,
		"Connection": KindConnection, "Keep-Alive": KindKeepAlive, "Proxy": KindProxy, "Proxy-Authorization": KindProxy,
		"TE": KindTE, "Trailer": KindTrailer, "Upgrade": KindUpgrade, "Expect": KindExpect,
		"X-Forwarded-For": KindXForwardedFor, "X-Forwarded-Proto": KindXForwardedProto, "X-Forwarded-Host": KindXForwardedHost,
		"Cookie": KindCookie, "Set-Cookie": KindSetCookie, "Content-Type": KindContentType,
		"Accept-Encoding": KindAcceptEncoding, "Content-Encoding": KindContentEncoding, "X-Request-Id": KindXRequestID,
		"Forwarded": KindForwarded, "X-Real-IP": KindXRealIP,
		"X-Other": KindOther, "Proxy-": KindOther, "Hosts": KindOther, "": KindOther,
	} {
		if got := Classify([]byte(name)); got != want {
			t.Errorf("Classify(%q): got %d, want %d", name, got, want)
		}
	}
}

func TestAllowedInTrailer(t *testing.T) {
	for name, want := range map[string]bool{
		"X-Checksum": true, "Grpc-Status": true, "Server-Timing": true, "X-Forwarded-For": true,
		"Set-Cookie": false, "Content-Length": false, "Content-Type": false, "Content-Encoding": false,
		"Transfer-Encoding": false, "Host": false, "Authorization": false, "Cache-Control": false,
		"Proxy-Authenticate": false, "Trailer": false, "TE": false, "Range": false, "Max-Forwards": false,
		"WWW-Authenticate": false, "Pragma": false, "Content-Range": false, "Expect": false, "Connection": false,
	} {
		if got := AllowedInTrailer([]byte(name), Classify([]byte(name))); got != want {
			t.Errorf("AllowedInTrailer(%q): got %v, want %v", name, got, want)
		}
	}
}

func TestHeader(t *testing.T) {
	h := HeaderOf("A", "1", "B", "2", "a", "3")
	if v, ok := h.Get("a"); !ok || string(v) != "1" {
		t.Errorf("Get: got %q %v, want 1 true", v, ok)
	}
	if n := h.Del([]byte("A")); n != 2 {
		t.Errorf("Del: got %d, want 2", n)
	}
	if _, ok := h.Get("a"); ok {
		t.Errorf("Get after Del: found a dropped field")
	}
	h.Set([]byte("B"), []byte("4"))
	var l lines
	h.Emit(&l)
	if strings.Join(l, "|") != "B: 4" || h.Len() != 1 {
		t.Errorf("after Set: got %q (%d), want [B: 4] (1)", l, h.Len())
	}
	h2 := HeaderOf("Connection", "close, X-Hop, keep-alive", "X-Hop", "1", "X-Keep", "2", "Host", "a")
	closeTok, keep, up := h2.MarkConnectionOptions([]byte("close, X-Hop, keep-alive, upgrade, Host"))
	if !closeTok || !keep || !up || !h2.Fields[1].Drop || h2.Fields[2].Drop || h2.Fields[3].Drop {
		t.Errorf("MarkConnectionOptions: got %v %v %v, drops %v %v %v", closeTok, keep, up, h2.Fields[1].Drop, h2.Fields[2].Drop, h2.Fields[3].Drop)
	}
}

func TestForwarderFields(t *testing.T) {
	r := &Request{Method: []byte("GET"), Authority: []byte("front.example"), Target: []byte("/"), Path: []byte("/")}
	r.Header = *HeaderOf(
		"Host", "front.example", "Connection", "keep-alive", "Keep-Alive", "5", "TE", "trailers",
		"X-Forwarded-For", "203.0.113.1", "Cookie", "a=1", "X-Forwarded-Proto", "https", "Accept", "*/*",
		"x-forwarded-for", "198.51.100.2", "Cookie", "b=2", "Upgrade", "websocket", "Content-Length", "0", "Expect", "100-continue")
	// From a client: its forwarding fields are replaced (issue 20).
	hop := &Hop{Peer: netip.MustParseAddr("192.0.2.9"), TLS: true}
	var fw Forwarder
	var l lines
	fw.Fields(&l, r, hop)
	want := "Cookie: a=1; b=2|Accept: */*|X-Forwarded-For: 192.0.2.9|X-Forwarded-Proto: https|X-Forwarded-Host: front.example"
	if got := strings.Join(l, "|"); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	// From a trusted proxy: passed on, X-Forwarded-For appended to.
	l = nil
	fw.Fields(&l, r, &Hop{Peer: hop.Peer, Trusted: true})
	want = "Cookie: a=1; b=2|X-Forwarded-Proto: https|Accept: */*|X-Forwarded-For: 203.0.113.1, 198.51.100.2, 192.0.2.9|X-Forwarded-Host: front.example"
	if got := strings.Join(l, "|"); got != want {
		t.Errorf("trusted: got\n%s\nwant\n%s", got, want)
	}
	r.Upgrade = []byte("websocket")
	l = nil
	fw.Fields(&l, r, &Hop{Peer: hop.Peer, Local: true})
	want = "X-Forwarded-For: 203.0.113.1|Cookie: a=1; b=2|X-Forwarded-Proto: https|Accept: */*|x-forwarded-for: 198.51.100.2|Upgrade: websocket"
	if got := strings.Join(l, "|"); got != want {
		t.Errorf("local hop: got\n%s\nwant\n%s", got, want)
	}
	if got := string(Authority(&Request{}, &Hop{Backend: "10.0.0.1:80"})); got != "10.0.0.1:80" {
		t.Errorf("Authority without one: got %q, want the backend's", got)
	}
}

func TestResponseFields(t *testing.T) {
	h := *HeaderOf("Content-Type", "text/plain", "Content-Length", "5", "Connection", "close", "Trailer", "X-Sum", "Upgrade", "h2c", "Set-Cookie", "a=1")
	for _, tt := range []struct {
		name     string
		status   int
		length   int64
		trailers bool
		want     string
	}{
		{"known length", 200, 5, false, "Content-Type: text/plain|Content-Length: 5|Set-Cookie: a=1"},
		{"unknown length, trailers", 200, -1, true, "Content-Type: text/plain|Trailer: X-Sum|Set-Cookie: a=1"},
		{"204", 204, 0, false, "Content-Type: text/plain|Set-Cookie: a=1"},
		{"304 keeps its length", 304, 0, false, "Content-Type: text/plain|Content-Length: 5|Set-Cookie: a=1"},
		{"101 keeps Upgrade", 101, 0, false, "Content-Type: text/plain|Upgrade: h2c|Set-Cookie: a=1"},
	} {
		r := &Response{Status: tt.status, ContentLength: tt.length, Header: h}
		var l lines
		ResponseFields(&l, r, tt.trailers)
		if got := strings.Join(l, "|"); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestTokens(t *testing.T) {
	if !HasToken([]byte("gzip, Trailers , x"), "trailers") || HasToken([]byte("trailersx"), "trailers") {
		t.Errorf("HasToken: wrong")
	}
	if !IsToken("GET") || IsToken("a b") || IsToken("") {
		t.Errorf("IsToken: wrong")
	}
	if ValidValue("a\rb") || !ValidValue("a\tb") {
		t.Errorf("ValidValue: wrong")
	}
}

func TestForwarderAllocatesNothing(t *testing.T) {
	r := &Request{Authority: []byte("a")}
	r.Header = *HeaderOf("X-Forwarded-For", "1.1.1.1", "Cookie", "a=1", "Cookie", "b=2", "Accept", "*/*")
	hop := &Hop{Peer: netip.MustParseAddr("192.0.2.9"), Trusted: true}
	var fw Forwarder
	var s discard
	fw.Fields(&s, r, hop)
	if n := testing.AllocsPerRun(100, func() { fw.Fields(&s, r, hop) }); n != 0 {
		t.Errorf("got %v allocations, want 0", n)
	}
}

type discard struct{}

func (discard) Field(name, value []byte) {}
