package systemd

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

// TestListenFDs runs itself as a socket-activated process: sh sets
// LISTEN_PID to its own pid and execs the test binary (the pid stays),
// with two listening sockets at descriptors 3 and 4, as systemd does.
func TestListenFDs(t *testing.T) {
	if os.Getenv("HELIOS_TEST_ACTIVATED") == "1" {
		activatedChild()
		return
	}
	var files []*os.File
	var addrs []string
	for i := 0; i < 2; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		f, err := ln.(*net.TCPListener).File()
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		files = append(files, f)
		addrs = append(addrs, ln.Addr().String())
	}
	cmd := exec.Command("sh", "-c", `LISTEN_PID=$$ exec "$0" -test.run='^TestListenFDs$'`, os.Args[0])
	cmd.ExtraFiles = files
	cmd.Env = append(os.Environ(), "HELIOS_TEST_ACTIVATED=1", "LISTEN_FDS=2", "LISTEN_FDNAMES=web:admin")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("activated child: %v\n%s", err, out)
	}
	got := strings.Join(strings.Fields(string(out))[:3], " ")
	want := fmt.Sprintf("admin=%s web=%s env=cleared", addrs[1], addrs[0])
	if got != want {
		t.Errorf("got %q, want %q (output:\n%s)", got, want, out)
	}
}

// activatedChild prints name=address for each socket passed, then
// whether the environment was cleared.
func activatedChild() {
	a, err := ListenFDs(OSEnv())
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	var lines []string
	for _, name := range a.Names() {
		for _, f := range a.Take(name) {
			ln, err := net.FileListener(f)
			if err != nil {
				fmt.Println("error:", err)
				os.Exit(1)
			}
			lines = append(lines, name+"="+ln.Addr().String())
		}
	}
	sort.Strings(lines)
	env := "env=cleared"
	for _, k := range []string{"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"} {
		if os.Getenv(k) != "" {
			env = "env=kept:" + k
		}
	}
	fmt.Println(strings.Join(lines, " "), env)
}

func TestListenFDsNotOurs(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		wantErr string
	}{
		{name: "no LISTEN_FDS", env: map[string]string{}},
		{name: "another pid", env: map[string]string{"LISTEN_PID": "8", "LISTEN_FDS": "1"}},
		{name: "no LISTEN_PID", env: map[string]string{"LISTEN_FDS": "1"}},
		{name: "names do not match", env: map[string]string{"LISTEN_PID": "7", "LISTEN_FDS": "2", "LISTEN_FDNAMES": "web"},
			wantErr: "LISTEN_FDNAMES has 1 names for LISTEN_FDS=2 descriptors"},
		{name: "garbage", env: map[string]string{"LISTEN_PID": "7", "LISTEN_FDS": "two"},
			wantErr: `LISTEN_FDS="two": not a number of descriptors`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := Env{
				Getenv:   func(k string) string { return tt.env[k] },
				Unsetenv: func(k string) error { delete(tt.env, k); return nil },
				Pid:      7,
			}
			a, err := ListenFDs(env)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if len(a) != 0 || gotErr != tt.wantErr {
				t.Errorf("got %v sockets, error %q; want none, error %q", len(a), gotErr, tt.wantErr)
			}
			if len(tt.env) != 0 {
				t.Errorf("environment left: %v, want LISTEN_* cleared", tt.env)
			}
		})
	}
}
