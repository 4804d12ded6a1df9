package tlsconf

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/ocsp"

	"github.com/helios-lb/helios/internal/certgen"
)

// fakeResponder is an OCSP responder on loopback that answers for the
// certificates of one issuer, signing with the issuer's key.
type fakeResponder struct {
	srv      *httptest.Server
	issuer   *certgen.Cert
	status   atomic.Int64 // ocsp.Good, ocsp.Revoked...
	requests atomic.Int64
}

func newFakeResponder(t *testing.T, issuer *certgen.Cert) *fakeResponder {
	t.Helper()
	r := &fakeResponder{issuer: issuer}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serveHTTP))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *fakeResponder) serveHTTP(w http.ResponseWriter, req *http.Request) {
	r.requests.Add(1)
	body, err := io.ReadAll(req.Body)
	if err != nil || req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/ocsp-request" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	q, err := ocsp.ParseRequest(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	now := time.Now()
	tmpl := ocsp.Response{
		Status:       int(r.status.Load()),
		SerialNumber: q.SerialNumber,
		ThisUpdate:   now.Add(-time.Minute),
		NextUpdate:   now.Add(time.Hour),
	}
	if tmpl.Status == ocsp.Revoked {
		tmpl.RevokedAt = now.Add(-time.Hour)
	}
	der, err := ocsp.CreateResponse(r.issuer.Leaf, r.issuer.Leaf, tmpl, r.issuer.Key)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/ocsp-response")
	w.Write(der)
}

// stapleEvent is one OnStaple call.
type stapleEvent struct {
	file string
	next time.Time
	err  error
}

// stapleEvents returns an Env whose OnStaple reports to the returned
// channel.
func stapleEvents() (Env, chan stapleEvent) {
	ch := make(chan stapleEvent, 16)
	return Env{OnStaple: func(file string, next time.Time, err error) { ch <- stapleEvent{file, next, err} }}, ch
}

// nextEvent waits for an OnStaple call.
func nextEvent(t *testing.T, ch chan stapleEvent) stapleEvent {
	t.Helper()
	select {
	case ev := <-ch:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatalf("no OCSP fetch within 10s")
		return stapleEvent{}
	}
}

func TestOCSPStapling(t *testing.T) {
	k := newPKI(t)
	responder := newFakeResponder(t, k.inter)
	// A port nothing listens on: a responder that cannot be reached.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	unreachable := "http://" + ln.Addr().String() + "/"
	ln.Close()

	tests := []struct {
		name       string
		url        string
		status     int
		wantStaple bool
		wantErr    error // nil: any error is fine when wantStaple is false
	}{
		{name: "good", url: responder.srv.URL, status: ocsp.Good, wantStaple: true},
		{name: "revoked", url: responder.srv.URL, status: ocsp.Revoked, wantErr: errNotGood},
		{name: "unreachable responder", url: unreachable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			responder.status.Store(int64(tt.status))
			leaf, files := k.issue(t, "site", certgen.Request{Hosts: []string{"site.example"}, OCSPServer: []string{tt.url}})
			env, events := stapleEvents()
			p := newTestProvider(t, ServerOptions{Certificates: []KeyPairFiles{files}}, env)
			addr := serve(t, p)
			ev := nextEvent(t, events)
			if (ev.err == nil) != tt.wantStaple || (tt.wantErr != nil && !errors.Is(ev.err, tt.wantErr)) {
				t.Fatalf("fetch: got %v, want success %v (%v)", ev.err, tt.wantStaple, tt.wantErr)
			}
			s := mustDial(t, addr, k.clientConfig("site.example"))
			staple := s.conn.ConnectionState().OCSPResponse
			if got := len(staple) > 0; got != tt.wantStaple {
				t.Fatalf("staple present: got %v, want %v", got, tt.wantStaple)
			}
			if got := p.Certificates()[0].Stapled; got != tt.wantStaple {
				t.Errorf("Certificates()[0].Stapled: got %v, want %v", got, tt.wantStaple)
			}
			if !tt.wantStaple {
				return
			}
			resp, err := ocsp.ParseResponseForCert(staple, leaf.Leaf, k.inter.Leaf)
			if err != nil || resp.Status != ocsp.Good {
				t.Errorf("staple: got %v, status %d, want a good response for the certificate", err, resp.Status)
			}
			if !ev.next.Equal(resp.NextUpdate) {
				t.Errorf("OnStaple next update: got %v, want %v", ev.next, resp.NextUpdate)
			}
		})
	}
}

func TestOCSPStapleSurvivesReload(t *testing.T) {
	k := newPKI(t)
	responder := newFakeResponder(t, k.inter)
	_, files := k.issue(t, "site", certgen.Request{Hosts: []string{"site.example"}, OCSPServer: []string{responder.srv.URL}})
	env, events := stapleEvents()
	p := newTestProvider(t, ServerOptions{Certificates: []KeyPairFiles{files}}, env)
	addr := serve(t, p)
	if ev := nextEvent(t, events); ev.err != nil {
		t.Fatalf("fetch: got %v, want nil", ev.err)
	}
	if err := p.Reload(ServerOptions{Certificates: []KeyPairFiles{files}, HTTP2: true}); err != nil {
		t.Fatal(err)
	}
	// The same certificate keeps its staple at once; the next fetch is
	// due halfway through the staple's hour, not now.
	if len(mustDial(t, addr, k.clientConfig("site.example")).conn.ConnectionState().OCSPResponse) == 0 {
		t.Errorf("after reload: got no staple, want the one fetched before")
	}
	if got := responder.requests.Load(); got != 1 {
		t.Errorf("responder requests: got %d, want 1", got)
	}
}

func TestNoStaplingWithoutResponderOrIssuer(t *testing.T) {
	k := newPKI(t)
	responder := newFakeResponder(t, k.inter)
	// Issued by the root, whose certificate is not in the chain file: the
	// OCSP request cannot be built without it.
	rootIssued, err := k.root.Issue(certgen.Request{Hosts: []string{"a.example"}, OCSPServer: []string{responder.srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	_, noURL := k.issue(t, "b", certgen.Request{Hosts: []string{"b.example"}})
	env, events := stapleEvents()
	p := newTestProvider(t, ServerOptions{Certificates: []KeyPairFiles{writePair(t, k.dir, "a", rootIssued), noURL}}, env)
	addr := serve(t, p)
	for _, name := range []string{"a.example", "b.example"} {
		if len(mustDial(t, addr, k.clientConfig(name)).conn.ConnectionState().OCSPResponse) != 0 {
			t.Errorf("%s: got a staple, want none", name)
		}
	}
	p.Close()
	select {
	case ev := <-events:
		t.Errorf("got an OCSP fetch for %s, want none", ev.file)
	default:
	}
	if got := responder.requests.Load(); got != 0 {
		t.Errorf("responder requests: got %d, want 0", got)
	}
}

func TestRefreshIn(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name       string
		this, next time.Time
		want       time.Duration
	}{
		{name: "halfway", this: now, next: now.Add(4 * time.Hour), want: 2 * time.Hour},
		{name: "halfway already passed", this: now.Add(-3 * time.Hour), next: now.Add(time.Hour), want: stapleMinRefresh},
		{name: "no next update", this: now, want: stapleNoNextUpdate},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := refreshIn(tt.this, tt.next, now); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}
