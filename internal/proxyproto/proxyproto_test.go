package proxyproto

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"
)

func TestParse(t *testing.T) {
	v4src, v4dst := netip.MustParseAddrPort("192.0.2.1:56324"), netip.MustParseAddrPort("198.51.100.2:443")
	v6src, v6dst := netip.MustParseAddrPort("[2001:db8::1]:1234"), netip.MustParseAddrPort("[2001:db8::2]:80")
	tests := []struct {
		name    string
		in      string
		want    Header
		wantN   int
		wantErr error
	}{
		{name: "v1 tcp4", in: "PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\nGET", want: Header{Version: V1, Source: v4src, Destination: v4dst}, wantN: 45},
		{name: "v1 tcp6", in: "PROXY TCP6 2001:db8::1 2001:db8::2 1234 80\r\n", want: Header{Version: V1, Source: v6src, Destination: v6dst}, wantN: 44},
		{name: "v1 unknown", in: "PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n", want: Header{Version: V1, Local: true}, wantN: 35},
		{name: "v1 bare unknown", in: "PROXY UNKNOWN\r\n", want: Header{Version: V1, Local: true}, wantN: 15},
		{name: "v1 partial", in: "PROXY TCP4 192.0.2.1 198.5", wantN: 0},
		{name: "v1 one byte", in: "P", wantN: 0},
		{name: "v1 family mismatch", in: "PROXY TCP4 2001:db8::1 198.51.100.2 1 2\r\n", wantErr: ErrMalformed},
		{name: "v1 leading zero port", in: "PROXY TCP4 192.0.2.1 198.51.100.2 080 443\r\n", wantErr: ErrMalformed},
		{name: "v1 port too large", in: "PROXY TCP4 192.0.2.1 198.51.100.2 65536 443\r\n", wantErr: ErrMalformed},
		{name: "v1 missing field", in: "PROXY TCP4 192.0.2.1 198.51.100.2 1\r\n", wantErr: ErrMalformed},
		{name: "v1 extra field", in: "PROXY TCP4 192.0.2.1 198.51.100.2 1 2 3\r\n", wantErr: ErrMalformed},
		{name: "v1 double space", in: "PROXY TCP4  192.0.2.1 198.51.100.2 1 2\r\n", wantErr: ErrMalformed},
		{name: "v1 bare LF", in: "PROXY TCP4 192.0.2.1 198.51.100.2 1 2\n", wantErr: ErrMalformed},
		{name: "v1 zone", in: "PROXY TCP6 fe80::1%eth0 2001:db8::2 1 2\r\n", wantErr: ErrMalformed},
		{name: "v1 too long", in: "PROXY TCP4 " + string(bytes.Repeat([]byte("1"), 120)), wantErr: ErrMalformed},
		{name: "http request", in: "GET / HTTP/1.1\r\n", wantErr: ErrNoHeader},
		{name: "post request", in: "POST / HTTP/1.1\r\n", wantErr: ErrNoHeader},
		{name: "v2 tcp4", in: string(AppendV2(nil, v4src, v4dst)) + "GET", want: Header{Version: V2, Source: v4src, Destination: v4dst}, wantN: 28},
		{name: "v2 tcp6", in: string(AppendV2(nil, v6src, v6dst)), want: Header{Version: V2, Source: v6src, Destination: v6dst}, wantN: 52},
		{name: "v2 local", in: string(AppendV2(nil, netip.AddrPort{}, v4dst)), want: Header{Version: V2, Local: true}, wantN: 16},
		{name: "v2 with TLVs", in: string(v2Sig) + "\x21\x11\x00\x11" + "\xc0\x00\x02\x01\xc6\x33\x64\x02\xdc\x04\x01\xbb" + "\x04\x00\x02ab", want: Header{Version: V2, Source: v4src, Destination: v4dst}, wantN: 33},
		{name: "v2 partial signature", in: string(v2Sig[:5]), wantN: 0},
		{name: "v2 partial body", in: string(AppendV2(nil, v4src, v4dst))[:20], wantN: 0},
		{name: "v2 wrong version", in: string(v2Sig) + "\x11\x11\x00\x0c" + "\xc0\x00\x02\x01\xc6\x33\x64\x02\xdc\x04\x01\xbb", wantErr: ErrMalformed},
		{name: "v2 wrong command", in: string(v2Sig) + "\x22\x11\x00\x0c" + "\xc0\x00\x02\x01\xc6\x33\x64\x02\xdc\x04\x01\xbb", wantErr: ErrMalformed},
		{name: "v2 short for family", in: string(v2Sig) + "\x21\x11\x00\x04" + "\xc0\x00\x02\x01", wantErr: ErrMalformed},
		{name: "v2 unix family", in: string(v2Sig) + "\x21\x31\x00\x00", wantErr: ErrMalformed},
		{name: "v2 bad signature", in: "\r\n\r\n\x00\r\nQUIX\n", wantErr: ErrNoHeader},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, n, err := Parse([]byte(tt.in))
			if !errors.Is(err, tt.wantErr) || err == nil && tt.wantErr != nil {
				t.Fatalf("got error %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if n != tt.wantN || h != tt.want {
				t.Errorf("got %+v, %d; want %+v, %d", h, n, tt.want, tt.wantN)
			}
		})
	}
}

func TestAppendRoundTrip(t *testing.T) {
	for _, c := range []struct{ src, dst string }{
		{"192.0.2.1:1", "198.51.100.2:65535"},
		{"[2001:db8::1]:0", "[2001:db8::2]:443"},
		{"[::ffff:192.0.2.1]:9", "192.0.2.2:10"}, // mapped: sent as IPv4
		{"192.0.2.1:9", "[2001:db8::2]:10"},      // mixed: sent as IPv6, read back unmapped
	} {
		src, dst := netip.MustParseAddrPort(c.src), netip.MustParseAddrPort(c.dst)
		want := Header{Source: netip.AddrPortFrom(src.Addr().Unmap(), src.Port()), Destination: netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port())}
		for _, v := range []Version{V1, V2} {
			var b []byte
			if v == V1 {
				b = AppendV1(nil, src, dst)
			} else {
				b = AppendV2(nil, src, dst)
			}
			h, n, err := Parse(b)
			want.Version = v
			if err != nil || n != len(b) || h != want {
				t.Errorf("v%d %s -> %s: got %+v, %d, %v; want %+v, %d", v, c.src, c.dst, h, n, err, want, len(b))
			}
		}
	}
}

func TestPrefix(t *testing.T) {
	for _, c := range []struct {
		in   string
		want bool
	}{{"", true}, {"PRO", true}, {"PROXY TCP4", true}, {"POST", false}, {"\r\n\r\n", true}, {"\r\n\r\n\x00\r\nQUIT\n!", true}, {"\r\n\r\nX", false}, {"GET", false}} {
		if got := Prefix([]byte(c.in)); got != c.want {
			t.Errorf("Prefix(%q): got %v, want %v", c.in, got, c.want)
		}
	}
}

func TestParseAllocatesNothing(t *testing.T) {
	v1 := []byte("PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\n")
	v2 := AppendV2(nil, netip.MustParseAddrPort("[2001:db8::1]:1"), netip.MustParseAddrPort("[2001:db8::2]:2"))
	if n := testing.AllocsPerRun(100, func() { Parse(v1); Parse(v2) }); n != 0 {
		t.Errorf("got %v allocations, want 0", n)
	}
}

// FuzzParse: whatever the bytes, Parse does not panic, takes no more than
// it was given, and fed the same bytes one at a time agrees with itself
// whole (a header is never taken from a prefix that a longer input would
// read differently); what it accepts re-encodes to a header it reads the
// same.
func FuzzParse(f *testing.F) {
	f.Add([]byte("PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\nGET / HTTP/1.1\r\n"))
	f.Add([]byte("PROXY TCP6 2001:db8::1 2001:db8::2 1234 80\r\n"))
	f.Add([]byte("PROXY UNKNOWN\r\n"))
	f.Add(AppendV2(nil, netip.MustParseAddrPort("192.0.2.1:1"), netip.MustParseAddrPort("192.0.2.2:2")))
	f.Add(AppendV2(nil, netip.MustParseAddrPort("[2001:db8::1]:1"), netip.MustParseAddrPort("[2001:db8::2]:2")))
	f.Add([]byte("GET / HTTP/1.1\r\n"))
	f.Add([]byte("PROXY TCP6 ::ffff:192.0.2.1 2001:db8::2 1234 80\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, n, err := Parse(b)
		if n < 0 || n > len(b) {
			t.Fatalf("%q: took %d of %d bytes", b, n, len(b))
		}
		for i := 0; i < len(b); i++ {
			hp, np, errp := Parse(b[:i])
			if np > 0 && (errp != nil || np != n || hp != h || err != nil) {
				t.Fatalf("%q: prefix of %d read %+v, %d, %v; whole %+v, %d, %v", b, i, hp, np, errp, h, n, err)
			}
			if errp != nil && err == nil {
				t.Fatalf("%q: prefix of %d refused (%v), whole accepted", b, i, errp)
			}
		}
		if err != nil || n == 0 || h.Local {
			return
		}
		var again []byte
		if h.Version == V1 {
			again = AppendV1(nil, h.Source, h.Destination)
		} else {
			again = AppendV2(nil, h.Source, h.Destination)
		}
		h2, n2, err2 := Parse(again)
		if err2 != nil || n2 != len(again) || h2 != h {
			t.Fatalf("%q: read %+v; re-encoded %q read %+v, %d, %v", b, h, again, h2, n2, err2)
		}
	})
}
