package config

import (
	"io/fs"
	"strings"
	"syscall"
	"testing"
)

// TestParseProblem checks the exact message, file and line of each kind of
// problem. Each config holds exactly one problem.
func TestParseProblem(t *testing.T) {
	tests := append(append([]problemCase(nil), frontProblems...), backProblems...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := testEnv(t)
			want := strings.NewReplacer("$DIR", env["DIR"], "$FILE", env["FILE"]).Replace(tt.want)
			_, ps := parseProblems(t, tt.yaml, env)
			if got := ps.Error(); got != want {
				t.Errorf("got\n%v\nwant\n%v", got, want)
			}
		})
	}
}

func TestHostPortError(t *testing.T) {
	tests := []struct {
		addr string
		want string
	}{
		{addr: ":80", want: ""},
		{addr: "0.0.0.0:65535", want: ""},
		{addr: "[::]:443", want: ""},
		{addr: "[fe80::1%eth0]:80", want: ""},
		{addr: "localhost:1", want: ""},
		{addr: "a-b.example.COM:80", want: ""},
		{addr: "example.com", want: "is not host:port"},
		{addr: "[::1]", want: "is not host:port"},
		{addr: "example.com:", want: "has no port"},
		{addr: "example.com:-1", want: `has port "-1", not a number`},
		{addr: "example.com:+80", want: `has port "+80", not a number`},
		{addr: "example.com:65536", want: "has port 65536, out of range"},
		{addr: "-example.com:80", want: `has host "-example.com", not an IP address or hostname`},
		{addr: "example-.com:80", want: `has host "example-.com", not an IP address or hostname`},
		{addr: "example..com:80", want: `has host "example..com", not an IP address or hostname`},
		{addr: "ex_ample.com:80", want: `has host "ex_ample.com", not an IP address or hostname`},
		{addr: strings.Repeat("a", 64) + ".com:80", want: `has host "` + strings.Repeat("a", 64) + `.com", not an IP address or hostname`},
		{addr: strings.Repeat("a.", 127) + "aa:80", want: `has host "` + strings.Repeat("a.", 127) + `aa", not an IP address or hostname`},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			if got := hostPortError(tt.addr); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestIsHostPattern(t *testing.T) {
	tests := []struct {
		host string
		want bool
	}{
		{host: "", want: true},
		{host: "*", want: true},
		{host: "example.com", want: true},
		{host: "*.example.com", want: true},
		{host: "10.0.0.1", want: true},
		{host: "*.", want: false},
		{host: "*example.com", want: false},
		{host: "a.*.com", want: false},
		{host: "example.com:80", want: false},
		{host: "exämple.com", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			if got := isHostPattern(tt.host); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestIsToken(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{name: "X-Request-Id", want: true},
		{name: "!#$%&'*+-.^_`|~09az", want: true},
		{name: "", want: false},
		{name: "X A", want: false},
		{name: "X:A", want: false},
		{name: "Xé", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := isToken(tt.name); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestValidateUnreadableRoot fakes the file system through validator.stat,
// since a test running as root cannot make a directory unreadable.
func TestValidateUnreadableRoot(t *testing.T) {
	v := validator{file: "t.yaml", stat: func(name string) (fs.FileInfo, error) {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: syscall.EACCES}
	}}
	v.static(&Static{Root: "/srv/www", Index: "index.html"}, "routes[0].static")
	want := `t.yaml: routes[0].static.root: "/srv/www" cannot be read: permission denied (an existing directory)`
	if got := v.problems.Error(); got != want {
		t.Errorf("got %v, want %v", got, want)
	}
}
