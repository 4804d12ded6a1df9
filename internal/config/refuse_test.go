package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestValidateRefusesWhatServeRefuses guards issue 18 item 4: configs
// that validate said were ok, and that serve then refused at start
// (without a line) or that failed every request.
func TestValidateRefusesWhatServeRefuses(t *testing.T) {
	dir := writeTestTLS(t)
	logDir := t.TempDir()
	if err := os.Mkdir(filepath.Join(logDir, "sub.log"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(logDir, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	const logAllowed = "(a file in an existing directory this user may write, or off, stdout, stderr)"
	head := "listeners: [{name: web, address: \":8080\"}]\nroutes: [{name: r, respond: {}}]\n"
	tests := []struct {
		name string
		yaml string
		want string // "" for valid
	}{
		{
			name: "access log in a directory that does not exist",
			yaml: head + "logging: {access_log: /nonexistent-dir/a.log}\n",
			want: `t.yaml:3: logging.access_log: "/nonexistent-dir/a.log": the directory "/nonexistent-dir" does not exist ` + logAllowed,
		},
		{
			name: "access log that is a directory",
			yaml: head + "logging: {access_log: ${L}/sub.log}\n",
			want: `t.yaml:3: logging.access_log: "$L/sub.log" is a directory ` + logAllowed,
		},
		{
			name: "access log under a file",
			yaml: head + "logging: {access_log: ${L}/file/a.log}\n",
			want: `t.yaml:3: logging.access_log: "$L/file/a.log": "$L/file" is not a directory ` + logAllowed,
		},
		{name: "access log in a directory that exists", yaml: head + "logging: {access_log: ${L}/a.log}\n"},
		{
			name: "backend address that is no IPv4 address",
			yaml: "listeners: [{name: web, address: \":8080\"}]\nroutes: [{name: r, upstream: app}]\nupstreams: [{name: app, backends: [{address: \"192.168.1.300:80\"}]}]\n",
			want: `t.yaml:3: upstreams[0].backends[0].address: "192.168.1.300:80" has host "192.168.1.300", not an IP address (an IPv4 address is four numbers 0-255, such as 192.168.1.30) (` + testHostPort + `)`,
		},
		{
			name: "backend address with three numbers",
			yaml: "listeners: [{name: web, address: \":8080\"}]\nroutes: [{name: r, upstream: app}]\nupstreams: [{name: app, backends: [{address: \"10.0.1:80\"}]}]\n",
			want: `t.yaml:3: upstreams[0].backends[0].address: "10.0.1:80" has host "10.0.1", not an IP address (an IPv4 address is four numbers 0-255, such as 192.168.1.30) (` + testHostPort + `)`,
		},
		{
			name: "backend host name with digits",
			yaml: "listeners: [{name: web, address: \":8080\"}]\nroutes: [{name: r, upstream: app}]\nupstreams: [{name: app, backends: [{address: \"web-1.internal:80\"}, {address: \"1e100.net:80\"}]}]\n",
		},
		{
			name: "certificate and key both missing",
			yaml: tlsListener("      cert_file: ${D}/nope.pem\n      key_file: ${D}/nope.key\n", ""),
			want: `t.yaml:5: listeners[0].tls.cert_file: "$D/nope.pem" does not exist (a PEM file: the certificate, then the intermediates of its chain)
t.yaml:6: listeners[0].tls.key_file: "$D/nope.key" does not exist (a PEM file with the certificate's unencrypted private key)`,
		},
		{
			name: "certificate missing, key there",
			yaml: tlsListener("      cert_file: ${D}/nope.pem\n      key_file: ${D}/a.key\n", ""),
			want: `t.yaml:5: listeners[0].tls.cert_file: "$D/nope.pem" does not exist (a PEM file: the certificate, then the intermediates of its chain)`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ps := parseProblems(t, tt.yaml, map[string]string{"D": dir, "L": logDir})
			got := ""
			if ps != nil {
				got = ps.Error()
			}
			want := strings.NewReplacer("$D", dir, "$L", logDir).Replace(tt.want)
			if got != want {
				t.Errorf("got\n%v\nwant\n%v", got, want)
			}
		})
	}
}

// TestAccessLogNotWritable: an access log this user may not write (or
// create) is refused; the test fakes access(2)'s answer, since root may
// write anything.
func TestAccessLogNotWritable(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, "old.log")
	if err := os.WriteFile(existing, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		file, want string
	}{
		{existing, `logging.access_log: "` + existing + `" cannot be written: permission denied`},
		{filepath.Join(dir, "new.log"), `logging.access_log: "` + filepath.Join(dir, "new.log") + `" cannot be created in "` + dir + `": permission denied`},
	} {
		v := validator{stat: os.Stat, writable: func(string) error { return syscall.EACCES }, now: time.Now}
		v.accessLogFile(tt.file)
		if got := v.problems.Error(); !strings.HasPrefix(got, tt.want) {
			t.Errorf("got %q, want it to start with %q", got, tt.want)
		}
	}
	v := validator{stat: func(string) (fs.FileInfo, error) { return nil, errors.New("unreachable") }, writable: writable, now: time.Now}
	v.accessLogFile(existing)
	if got := v.problems.Error(); !strings.Contains(got, "cannot be read: unreachable") {
		t.Errorf("got %q, want the stat error", got)
	}
}

// TestWarningsBesideErrors guards issue 18 item 4: a certificate about to
// expire was reported only once the rest of the file was right.
func TestWarningsBesideErrors(t *testing.T) {
	dir := writeTestTLS(t)
	now := time.Now()
	soon := now.Add(5*24*time.Hour - time.Hour)
	writeDatedCert(t, dir, "soon", now.Add(-time.Hour), soon)
	src := tlsListener("      cert_file: ${D}/soon.pem\n      key_file: ${D}/soon.key\n", "    idle_timeout: forever\n")
	_, ps := parseProblems(t, src, map[string]string{"D": dir})
	want := `t.yaml:5: listeners[0].tls.cert_file: WARNING: "` + dir + `/soon.pem" (soon.example) expires in 5 days, on ` + soon.UTC().Format("2006-01-02 15:04 MST") + ` (renew it)
t.yaml:7: listeners[0].idle_timeout: "forever" is not a duration (a Go duration such as 500ms, 2s or 1m)`
	if got := ps.Error(); got != want {
		t.Errorf("got\n%v\nwant\n%v", got, want)
	}
	if got := len(ps.Errors()); got != 1 {
		t.Errorf("Errors: got %d, want 1 (the warning is not one)", got)
	}
}
