package proxy

import (
	"strings"
	"testing"

	"github.com/helios-lb/helios/internal/httpmsg"
	"github.com/helios-lb/helios/internal/route"
	"github.com/helios-lb/helios/internal/wire"
)

// acmeExchange is a request for a host and path, over TLS or not.
type acmeExchange struct {
	fakeExchange
	host, path, query []byte
	tls               bool
}

func newACMEExchange(method, host, path, query string, tls bool) *acmeExchange {
	return &acmeExchange{fakeExchange: fakeExchange{method: method}, host: []byte(host), path: []byte(path), query: []byte(query), tls: tls}
}

func (e *acmeExchange) Host() []byte { return e.host }
func (e *acmeExchange) Request() *httpmsg.Request {
	if e.req.Method == nil {
		e.fillRequest(e.Method(), e.host, e.path, e.query)
		if e.tls {
			e.req.Scheme = []byte("https")
		}
	}
	return &e.req
}
func (e *acmeExchange) Path() []byte  { return e.path }
func (e *acmeExchange) Query() []byte { return e.query }
func (e *acmeExchange) TLSVersion() []byte {
	if e.tls {
		return []byte("1.3")
	}
	return nil
}

// fakeACME presented one HTTP-01 challenge, manages two hosts (one on
// port 443) and has a storage solver for them.
type fakeACME struct{ solver *wire.Local }

func (a *fakeACME) Challenge(host, path []byte) ([]byte, bool) {
	if string(host) == "acme.example" && string(path) == "/.well-known/acme-challenge/tok" {
		return []byte("tok.thumb"), true
	}
	return nil, false
}
func (a *fakeACME) Solver(host []byte) *wire.Local {
	if a.HTTPSPort(host) > 0 {
		return a.solver
	}
	return nil
}
func (a *fakeACME) HTTPSPort(host []byte) int {
	switch strings.ToLower(string(host)) {
	case "acme.example":
		return 8443
	case "std.example":
		return 443
	}
	return 0
}

func TestACMEChallengeAndRedirect(t *testing.T) {
	open := &Route{Name: "open", Respond: &Fixed{Status: 200, Body: []byte("served")}, NoHTTPSRedirect: true}
	app := &Route{Name: "app", Respond: &Fixed{Status: 200, Body: []byte("served")}}
	tab, err := route.New([]route.Entry[*Route]{
		{Name: "open", Path: "/open", Value: open},
		{Name: "app", Value: app},
	})
	if err != nil {
		t.Fatal(err)
	}
	solver := &wire.Local{Name: "solver"}
	p := New(&Graph{Routes: tab, RouteList: []*Route{open, app}, ACME: &fakeACME{solver: solver}})
	tests := []struct {
		name              string
		host, path, query string
		tls               bool
		method            string
		act               wire.Action
		status            int
		header, body      string
	}{
		{name: "challenge presented here", host: "acme.example", path: "/.well-known/acme-challenge/tok", act: wire.ActRespond, status: 200, body: "tok.thumb"},
		{name: "challenge over TLS too", host: "acme.example", path: "/.well-known/acme-challenge/tok", tls: true, act: wire.ActRespond, status: 200, body: "tok.thumb"},
		{name: "challenge presented elsewhere: the storage solver", host: "acme.example", path: "/.well-known/acme-challenge/other", act: wire.ActServeHTTP},
		{name: "challenge path for a host ACME does not manage: routed", host: "plain.example", path: "/.well-known/acme-challenge/tok", act: wire.ActRespond, status: 200, body: "served"},
		{name: "cleartext for a managed host: redirected with the port", host: "ACME.example", path: "/a/b", query: "c=d", act: wire.ActRespond, status: 308, header: "Location: https://ACME.example:8443/a/b?c=d\r\n"},
		{name: "on port 443 the port is left out", host: "std.example", path: "/", act: wire.ActRespond, status: 308, header: "Location: https://std.example/\r\n"},
		{name: "POST is redirected too (308 keeps the method)", host: "std.example", path: "/x", method: "POST", act: wire.ActRespond, status: 308, header: "Location: https://std.example/x\r\n"},
		{name: "over TLS: served", host: "acme.example", path: "/a", tls: true, act: wire.ActRespond, status: 200, body: "served"},
		{name: "a host without ACME: served", host: "plain.example", path: "/a", act: wire.ActRespond, status: 200, body: "served"},
		{name: "a route with https_redirect false: served", host: "acme.example", path: "/open", act: wire.ActRespond, status: 200, body: "served"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := tt.method
			if m == "" {
				m = "GET"
			}
			ex := newACMEExchange(m, tt.host, tt.path, tt.query, tt.tls)
			f := p.NewFlow()
			act := f.Begin(ex)
			if act != tt.act {
				t.Fatalf("action: got %v, want %v", act, tt.act)
			}
			switch act {
			case wire.ActServeHTTP:
				if got := f.Handler(); got != solver {
					t.Errorf("handler: got %v, want the solver", got)
				}
			case wire.ActRespond:
				status, hdr, body := f.Answer()
				header := ""
				for _, fl := range hdr.Fields {
					header += string(fl.Name) + ": " + string(fl.Value) + "\r\n"
				}
				if status != tt.status || !strings.Contains(header, tt.header) || tt.body != "" && string(body) != tt.body {
					t.Errorf("got %d %q %q, want %d with %q and body %q", status, header, body, tt.status, tt.header, tt.body)
				}
			}
		})
	}
}

// Checking a cleartext request against the ACME hosts, and redirecting
// it on a kept-alive connection, allocates nothing.
func TestACMERedirectAllocatesNothing(t *testing.T) {
	app := &Route{Name: "app", Respond: &Fixed{Status: 200}}
	tab, err := route.New([]route.Entry[*Route]{{Name: "app", Value: app}})
	if err != nil {
		t.Fatal(err)
	}
	p := New(&Graph{Routes: tab, RouteList: []*Route{app}, ACME: &fakeACME{}})
	f := p.NewFlow()
	for _, host := range []string{"plain.example", "std.example"} {
		ex := newACMEExchange("GET", host, "/x", "", false)
		f.Begin(ex) // the connection's first redirect sizes its buffer
		f.Finish()
		if allocs := testing.AllocsPerRun(100, func() {
			f.Begin(ex)
			f.Finish()
		}); allocs != 0 {
			t.Errorf("%s: %v allocations per request, want 0", host, allocs)
		}
	}
}
