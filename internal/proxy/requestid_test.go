package proxy

import (
	"regexp"
	"strings"
	"testing"

	"github.com/helios-lb/helios/internal/wire"
)

// detailedExchange is an exchange with an X-Request-Id header.
type detailedExchange struct {
	fakeExchange
	xRequestID []byte
}

func (e *detailedExchange) Header(name string) []byte {
	if strings.EqualFold(name, "X-Request-Id") {
		return e.xRequestID
	}
	return nil
}

// lastID records the request id of the last request.
type lastID struct{ id string }

func (r *lastID) Record(_ wire.Exchange, rec Record) { r.id = string(rec.RequestID.Bytes()) }

var madeID = regexp.MustCompile(`^[0-9a-f]{32}$`)

func TestRequestIDs(t *testing.T) {
	tests := []struct {
		name        string
		ex          wire.Exchange
		clientID    string // "" : the id is made
		wantForward bool
	}{
		{name: "no X-Request-Id: made and forwarded", ex: &detailedExchange{fakeExchange: fakeExchange{method: "GET"}}, wantForward: true},
		{name: "client's id kept", ex: &detailedExchange{fakeExchange: fakeExchange{method: "GET"}, xRequestID: []byte("abc-123")}, clientID: "abc-123"},
		{name: "id with a space replaced", ex: &detailedExchange{fakeExchange: fakeExchange{method: "GET"}, xRequestID: []byte("a b")}, wantForward: true},
		{name: "id too long replaced", ex: &detailedExchange{fakeExchange: fakeExchange{method: "GET"}, xRequestID: []byte(strings.Repeat("x", 201))}, wantForward: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _ := pipelineFor(t, &fakeTransport{}, defaultPolicy(), nil)
			rec := &lastID{}
			p.Graph().Recorder = rec
			f := p.NewFlow()
			forwardOK(f, tt.ex)
			first := rec.id
			switch {
			case tt.clientID != "" && first != tt.clientID:
				t.Errorf("got id %q, want the client's %q", first, tt.clientID)
			case tt.clientID == "" && !madeID.MatchString(first):
				t.Errorf("got id %q, want 32 hex digits", first)
			}
			if d, ok := tt.ex.(*detailedExchange); ok {
				set, _ := d.req.Header.Get("x-request-id")
				forwarded := d.req.Header.Len() == 1 && string(set) == first
				if forwarded != tt.wantForward {
					t.Errorf("forwarded X-Request-Id %q (%d fields): got %v, want %v", set, d.req.Header.Len(), forwarded, tt.wantForward)
				}
			}
			if tt.clientID == "" {
				forwardOK(f, tt.ex)
				if rec.id == first {
					t.Errorf("two requests got the same id %q", first)
				}
			}
		})
	}
}

func TestRequestIDsAllocateNothing(t *testing.T) {
	p, _ := pipelineFor(t, &fakeTransport{}, defaultPolicy(), serverBudget())
	ex := &detailedExchange{fakeExchange: fakeExchange{method: "GET"}}
	f := p.NewFlow()
	forwardOK(f, ex) // the exchange's buffer is made once
	allocs := testing.AllocsPerRun(1000, func() { forwardOK(f, ex) })
	if allocs != 0 {
		t.Errorf("got %v allocations per request with an id made and forwarded, want 0", allocs)
	}
}

// forwardOK drives one request through f as an engine does, every
// attempt answered 200.
func forwardOK(f wire.Flow, ex wire.Exchange) {
	if b, ok := ex.(interface{ begin() }); ok {
		b.begin()
	}
	act := f.Begin(ex)
	for act == wire.ActForward {
		f.Target()
		act = f.Forwarded(200, nil)
	}
	f.Sent(200, 0, nil)
	f.Finish()
}
