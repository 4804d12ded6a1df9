package proxy

import (
	"net/netip"
	"testing"

	"github.com/helios-lb/helios/internal/route"
	"github.com/helios-lb/helios/internal/upstream"
	"github.com/helios-lb/helios/internal/wire"
)

func TestCookieValue(t *testing.T) {
	tests := []struct {
		header, name string
		want         string
		found        bool
	}{
		{header: "session=abc", name: "session", want: "abc", found: true},
		{header: "a=1; session=abc; b=2", name: "session", want: "abc", found: true},
		{header: "a=1;session=abc", name: "session", want: "abc", found: true},
		{header: "a=1;  session = abc ;b=2", name: "session", want: "abc", found: true},
		{header: `session="quoted value"`, name: "session", want: "quoted value", found: true},
		{header: "mysession=x; session=y", name: "session", want: "y", found: true},
		{header: "session=first; session=second", name: "session", want: "first", found: true},
		{header: "Session=abc", name: "session"},
		{header: "sessionabc; other=1", name: "session"},
		{header: "session=", name: "session"},
		{header: "", name: "session"},
		{header: ";;; =x; session", name: "session"},
	}
	for _, tt := range tests {
		t.Run(tt.header, func(t *testing.T) {
			got := cookieValue([]byte(tt.header), tt.name)
			if string(got) != tt.want || (got != nil) != tt.found {
				t.Errorf("got %q (found %v), want %q (found %v)", got, got != nil, tt.want, tt.found)
			}
		})
	}
}

func TestQueryValue(t *testing.T) {
	tests := []struct {
		query, name string
		want        string
		found       bool
	}{
		{query: "user=42", name: "user", want: "42", found: true},
		{query: "a=1&user=42&b=2", name: "user", want: "42", found: true},
		{query: "user=1&user=2", name: "user", want: "1", found: true},
		{query: "username=x&user=y", name: "user", want: "y", found: true},
		{query: "user", name: "user", want: "", found: true},
		{query: "user=%41", name: "user", want: "%41", found: true},
		{query: "User=1", name: "user"},
		{query: "", name: "user"},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			got := queryValue([]byte(tt.query), tt.name)
			if string(got) != tt.want || (got != nil) != tt.found {
				t.Errorf("got %q (found %v), want %q (found %v)", got, got != nil, tt.want, tt.found)
			}
		})
	}
}

// TestRequestKeyHash checks where each kind of key is read, that equal
// values hash alike and different ones not, and that a request without the
// key (or with an empty one) has none.
func TestRequestKeyHash(t *testing.T) {
	ex := &fakeExchange{
		method: "GET",
		hdr: []field{
			{"x-user", []byte("alice")},
			{"Cookie", []byte("theme=dark; sid=s-123")},
			{"X-Empty", []byte("")},
		},
		path:  []byte("/cart/42"),
		query: []byte("page=2&user=alice"),
		addr:  netip.MustParseAddr("198.51.100.7"),
	}
	tests := []struct {
		name string
		key  RequestKey
		want uint64 // 0: no key
	}{
		{name: "none", key: RequestKey{}},
		{name: "client_ip", key: RequestKey{Kind: KeyClientIP}, want: hashAddr(ex.addr)},
		{name: "header, any case", key: RequestKey{Kind: KeyHeader, Name: "X-User"}, want: upstream.HashString("alice")},
		{name: "header absent", key: RequestKey{Kind: KeyHeader, Name: "X-Other"}},
		{name: "header empty", key: RequestKey{Kind: KeyHeader, Name: "X-Empty"}},
		{name: "cookie", key: RequestKey{Kind: KeyCookie, Name: "sid"}, want: upstream.HashString("s-123")},
		{name: "cookie absent", key: RequestKey{Kind: KeyCookie, Name: "user"}},
		{name: "path", key: RequestKey{Kind: KeyPath}, want: upstream.HashString("/cart/42")},
		{name: "query", key: RequestKey{Kind: KeyQuery, Name: "user"}, want: upstream.HashString("alice")},
		{name: "query absent", key: RequestKey{Kind: KeyQuery, Name: "sid"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.key.hash(ex)
			if ok != (tt.want != 0) || got != tt.want {
				t.Errorf("got %#x (key %v), want %#x (key %v)", got, ok, tt.want, tt.want != 0)
			}
			if allocs := testing.AllocsPerRun(100, func() { tt.key.hash(ex) }); allocs != 0 {
				t.Errorf("allocations: got %v, want 0", allocs)
			}
		})
	}
	// IPv4 and IPv4-mapped IPv6 are one client.
	mapped := &fakeExchange{addr: netip.MustParseAddr("::ffff:198.51.100.7")}
	if a, _ := (RequestKey{Kind: KeyClientIP}).hash(mapped); a != hashAddr(ex.addr) {
		t.Errorf("IPv4-mapped address: got %#x, want %#x", a, hashAddr(ex.addr))
	}
}

// keyRecorder is a picker that records the key of each pick and picks
// the first backend.
type keyRecorder struct {
	bs   []*upstream.Backend
	keys []upstream.Key
}

func (r *keyRecorder) Pick(k upstream.Key) *upstream.Backend {
	r.keys = append(r.keys, k)
	return r.bs[0]
}

// TestPipelineHashesTheKey checks that the pipeline hands the picker the
// hash of the upstream's key, and says when a request has none (so that
// consistent_hash falls back).
func TestPipelineHashesTheKey(t *testing.T) {
	bs := []*upstream.Backend{{State: upstream.NewState(nil), Addr: "b1", Weight: 1}}
	rec := &keyRecorder{bs: bs}
	up := &Upstream{Name: "app", Backends: bs, Picker: rec, Transport: &wire.Transport{Name: "app"},
		Key: RequestKey{Kind: KeyCookie, Name: "sid"}, Stats: &UpstreamStats{}}
	tab, err := route.New([]route.Entry[*Route]{{Name: "app", Value: &Route{Name: "app", Upstream: up}}})
	if err != nil {
		t.Fatal(err)
	}
	p := New(&Graph{Routes: tab, Upstreams: []*Upstream{up}})
	for _, cookie := range []string{"sid=a", "x=1; sid=a", "sid=b", "other=1"} {
		serve(p.NewFlow(), okTransport{}, &fakeExchange{method: "GET", hdr: []field{{"Cookie", []byte(cookie)}}})
	}
	k := rec.keys
	switch {
	case len(k) != 4:
		t.Fatalf("picks: got %d, want 4", len(k))
	case !k[0].Hashed || !k[1].Hashed || !k[2].Hashed || k[3].Hashed:
		t.Errorf("hashed: got %v %v %v %v, want true true true false", k[0].Hashed, k[1].Hashed, k[2].Hashed, k[3].Hashed)
	case k[0].Hash != k[1].Hash:
		t.Errorf("the same cookie in two headers: got hashes %#x and %#x, want equal", k[0].Hash, k[1].Hash)
	case k[0].Hash == k[2].Hash:
		t.Errorf("two cookies: got the same hash %#x, want different", k[0].Hash)
	}
}
