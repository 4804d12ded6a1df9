package config

import (
	"slices"
	"testing"
)

func TestParseStatusRanges(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		has     []int // codes that must be in the set
		hasNot  []int // codes that must not be
		str     string
		wantErr string
	}{
		{name: "range", in: "200-399", has: []int{200, 204, 399}, hasNot: []int{199, 400, 500}, str: "200-399"},
		{name: "codes and ranges", in: "200,204,300-399", has: []int{200, 204, 300, 399}, hasNot: []int{201, 299, 400}, str: "200,204,300-399"},
		{name: "spaces", in: " 200 , 300 - 302 ", has: []int{200, 301}, hasNot: []int{201}, str: "200,300-302"},
		{name: "bounds", in: "100,599", has: []int{100, 599}, hasNot: []int{0, 99, 101, 598, 600}, str: "100,599"},
		{name: "overlap merges", in: "200-250,240-260,261", has: []int{200, 261}, hasNot: []int{262}, str: "200-261"},
		{name: "across a word boundary", in: "127-129,191-193", has: []int{127, 128, 129, 191, 192, 193}, hasNot: []int{126, 130, 190, 194}, str: "127-129,191-193"},
		{name: "empty", in: "", wantErr: "empty status list"},
		{name: "empty entry", in: "200,,300", wantErr: "empty entry in status list"},
		{name: "trailing comma", in: "200,", wantErr: "empty entry in status list"},
		{name: "backwards", in: "300-200", wantErr: "range 300-200 ends before it starts"},
		{name: "too low", in: "99", wantErr: "status 99 is out of range 100-599"},
		{name: "too high", in: "200-600", wantErr: "status 600 is out of range 100-599"},
		{name: "word", in: "ok", wantErr: `"ok" is not a status code`},
		{name: "sign", in: "+200", wantErr: `"+200" is not a status code`},
		{name: "open range", in: "200-", wantErr: `"" is not a status code`},
		{name: "long", in: "0200", wantErr: `"0200" is not a status code`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseStatusRanges(tt.in)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("got error %v, want %v", err, tt.wantErr)
				}
				if s != (StatusSet{}) {
					t.Errorf("got set %v with the error, want the empty set", s)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			for _, c := range tt.has {
				if !s.Contains(c) {
					t.Errorf("Contains(%d): got false, want true", c)
				}
			}
			for _, c := range tt.hasNot {
				if s.Contains(c) {
					t.Errorf("Contains(%d): got true, want false", c)
				}
			}
			if got := s.String(); got != tt.str {
				t.Errorf("String: got %q, want %q", got, tt.str)
			}
			if again, err := ParseStatusRanges(s.String()); err != nil || again != s {
				t.Errorf("round trip: got %v, %v, want %v, nil", again, err, s)
			}
		})
	}
}

func TestStatusSetZero(t *testing.T) {
	var s StatusSet
	for _, c := range []int{-1, 0, 100, 200, 599, 600, 1 << 20} {
		if s.Contains(c) {
			t.Errorf("zero set Contains(%d): got true, want false", c)
		}
	}
	if got := s.String(); got != "" {
		t.Errorf("got %q, want %q", got, "")
	}
}

func TestHealthCheckExpect(t *testing.T) {
	tests := []struct {
		name   string
		expect string
		want   string
	}{
		{name: "valid", expect: "200,204", want: "200,204"},
		{name: "invalid passes nothing", expect: "2xx", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &HealthCheck{ExpectStatus: tt.expect}
			if got := h.Expect().String(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRetriesConditions(t *testing.T) {
	tests := []struct {
		name         string
		on           []string
		connectError bool
		reset        bool
		timeout      bool
		statuses     string
	}{
		{name: "default", on: []string{"connect_error", "reset", "502", "503", "504"}, connectError: true, reset: true, statuses: "502-504"},
		{name: "timeout only", on: []string{"timeout"}, timeout: true},
		{name: "reset only", on: []string{"reset"}, reset: true},
		{name: "none", on: nil},
		{name: "invalid entries ignored", on: []string{"404", "refused", "500"}, statuses: "500"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := (&Retries{On: tt.on}).Conditions()
			got := []any{c.ConnectError, c.Reset, c.Timeout, c.Statuses.String()}
			want := []any{tt.connectError, tt.reset, tt.timeout, tt.statuses}
			if !slices.Equal(got, want) {
				t.Errorf("got %v, want %v", got, want)
			}
		})
	}
}

func TestRetriesIdempotent(t *testing.T) {
	tests := []struct {
		name string
		v    *bool
		want bool
	}{
		{name: "nil is the default", v: nil, want: true},
		{name: "true", v: ptr(true), want: true},
		{name: "false", v: ptr(false), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (&Retries{IdempotentOnly: tt.v}).Idempotent(); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}
