package compress

import "testing"

func TestNegotiate(t *testing.T) {
	all := []Coding{Brotli, Zstd, Gzip}
	tests := []struct {
		name    string
		value   string
		accept  bool
		offered []Coding
		want    Coding
	}{
		{name: "no field", accept: false, offered: all, want: Identity},
		{name: "empty field", value: "", accept: true, offered: all, want: Identity},
		{name: "gzip only", value: "gzip", accept: true, offered: all, want: Gzip},
		{name: "browser", value: "gzip, deflate, br, zstd", accept: true, offered: all, want: Brotli},
		{name: "server order breaks ties", value: "gzip, zstd", accept: true, offered: all, want: Zstd},
		{name: "q decides", value: "br;q=0.5, gzip;q=0.9", accept: true, offered: all, want: Gzip},
		{name: "q zero refuses", value: "gzip;q=0, br;q=0", accept: true, offered: all, want: Identity},
		{name: "star", value: "*", accept: true, offered: all, want: Brotli},
		{name: "star minus one", value: "br;q=0, *;q=0.5", accept: true, offered: all, want: Zstd},
		{name: "not offered", value: "br", accept: true, offered: []Coding{Gzip}, want: Identity},
		{name: "case and spaces", value: " GZip ; Q=1.000 ", accept: true, offered: all, want: Gzip},
		{name: "bad q ignored", value: "br;q=2, gzip", accept: true, offered: all, want: Gzip},
		{name: "other params", value: "gzip;level=9;q=0.4, zstd;q=0.3", accept: true, offered: all, want: Gzip},
		{name: "identity only", value: "identity", accept: true, offered: all, want: Identity},
		{name: "brotli alias", value: "brotli", accept: true, offered: all, want: Brotli},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Negotiate([]byte(tt.value), tt.accept, tt.offered); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestNegotiateAllocatesNothing(t *testing.T) {
	v := []byte("gzip;q=0.8, deflate, br;q=1.0, zstd;q=0.9, *;q=0.1")
	all := []Coding{Brotli, Zstd, Gzip}
	if n := testing.AllocsPerRun(100, func() { Negotiate(v, true, all) }); n != 0 {
		t.Errorf("got %v allocations, want 0", n)
	}
}

// FuzzNegotiate: whatever the value, the coding chosen is one offered
// (or Identity), and one the value does not refuse with q=0 by name.
func FuzzNegotiate(f *testing.F) {
	f.Add("gzip, deflate, br, zstd")
	f.Add("br;q=0, *;q=0.5")
	f.Add(";;,,q=,*;q=1.0000")
	f.Fuzz(func(t *testing.T, v string) {
		offered := []Coding{Brotli, Zstd, Gzip}
		got := Negotiate([]byte(v), true, offered)
		if got == Identity {
			return
		}
		if qualityOf([]byte(v), got) <= 0 {
			t.Fatalf("%q: got %v, which it does not accept", v, got)
		}
	})
}
