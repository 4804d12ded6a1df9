package proxy

import (
	"fmt"
	"testing"

	"github.com/helios-lb/helios/internal/upstream"
	"github.com/helios-lb/helios/internal/wire"
)

// swappingTransport fails its first attempt with a refused connection and
// swaps the upstream's members while it does, as discovery would between
// two attempts of one request.
type swappingTransport struct {
	fakeTransport
	up   *Upstream
	next *Members
}

func (t *swappingTransport) attempt(fe *fakeExchange, b *upstream.Backend) (int, error) {
	if t.next != nil {
		t.up.SetMembers(t.next)
		t.next = nil
	}
	return t.fakeTransport.attempt(fe, b)
}

// TestMembersSwapMidRequest checks that a request keeps the members it
// started with, retries included (Key.Exclude names backends by their
// index in those members), and that the next request picks among the new
// ones.
func TestMembersSwapMidRequest(t *testing.T) {
	refused := fmt.Errorf("%w: connection refused", wire.ErrConnect)
	tr := &swappingTransport{fakeTransport: fakeTransport{script: map[string]any{"b1": refused, "b2": 200, "b3": 200, "n1": 200}}}
	p, up := pipelineFor(t, &tr.fakeTransport, defaultPolicy(), nil)
	n1 := &upstream.Backend{State: upstream.NewState(nil), Addr: "n1", Weight: 1, Index: 0}
	tr.up, tr.next = up, &Members{Backends: []*upstream.Backend{n1}, Picker: firstAvailable{n1}}

	ex := &fakeExchange{method: "GET"}
	serve(p.NewFlow(), tr, ex)
	if got := fmt.Sprint(tr.tried); got != "[b1 b2]" || ex.status != 200 {
		t.Fatalf("first request: got tried %s, status %d, want [b1 b2], 200", got, ex.status)
	}
	tr.tried = nil
	ex = &fakeExchange{method: "GET"}
	serve(p.NewFlow(), tr, ex)
	if got := fmt.Sprint(tr.tried); got != "[n1]" || ex.status != 200 {
		t.Errorf("second request: got tried %s, status %d, want [n1], 200", got, ex.status)
	}
	if got := up.Members().Backends; len(got) != 1 || got[0] != n1 {
		t.Errorf("got members %v, want [n1]", got)
	}
}

// TestMembersOfAnUpstreamBuiltInCode checks that an upstream whose
// members were given in its fields serves them, and that the pick path
// allocates nothing once it has (issue 23: updating the backend set must
// not cost the request path).
func TestMembersOfAnUpstreamBuiltInCode(t *testing.T) {
	b := &upstream.Backend{State: upstream.NewState(nil), Addr: "b1", Weight: 1}
	up := &Upstream{Backends: []*upstream.Backend{b}, Picker: firstAvailable{b}}
	m := up.Members()
	if len(m.Backends) != 1 || m.Backends[0] != b || m != up.Members() {
		t.Fatalf("got %+v, want the fields' backends, the same Members every call", m)
	}
	if n := testing.AllocsPerRun(100, func() { up.Members().Picker.Pick(upstream.Key{}) }); n != 0 {
		t.Errorf("got %v allocations per pick, want 0", n)
	}
}
