// Package redistest runs the real redis-server (Debian's redis-server
// package: make redis-deps installs it) on loopback for tests, in a
// temporary directory, without persistence.
//
// Start skips the test when redis-server is not installed, except under
// CI (the environment's CI set), where it fails.
package redistest

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Server is a redis-server the test started; it stops with the test.
type Server struct {
	// Addr is its 127.0.0.1:PORT.
	Addr string
	// Port is its port.
	Port int

	t    testing.TB
	bin  string
	dir  string
	args []string
	cmd  *exec.Cmd
	exit chan struct{}
}

// Options say how to run redis-server. The zero value of each field is
// noted.
type Options struct {
	// Password makes the server require it (requirepass). Empty: none.
	Password string
	// TLSCert and TLSKey make the server speak TLS only (tls-port, port
	// 0), with this certificate. Empty: cleartext.
	TLSCert, TLSKey string
}

// Binary returns the path of redis-server, skipping the test (failing it
// under CI) when there is none.
func Binary(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("redis-server")
	if err == nil {
		return p
	}
	msg := "redis-server not found: run make redis-deps (Debian package redis-server)"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// Start runs a redis-server on a free loopback port until the test ends.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	s := &Server{t: t, bin: Binary(t), dir: t.TempDir()}
	for attempt := 0; ; attempt++ {
		s.Port = freePort(t)
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))
		s.args = []string{"--bind", "127.0.0.1", "--dir", s.dir, "--save", "", "--appendonly", "no",
			"--protected-mode", "no", "--daemonize", "no", "--logfile", filepath.Join(s.dir, "redis.log")}
		if o.TLSCert != "" {
			s.args = append(s.args, "--port", "0", "--tls-port", strconv.Itoa(s.Port),
				"--tls-cert-file", o.TLSCert, "--tls-key-file", o.TLSKey, "--tls-auth-clients", "no")
		} else {
			s.args = append(s.args, "--port", strconv.Itoa(s.Port))
		}
		if o.Password != "" {
			s.args = append(s.args, "--requirepass", o.Password)
		}
		err := s.start()
		if err == nil {
			break
		}
		if attempt == 4 {
			t.Fatalf("starting redis-server: %v", err)
		}
	}
	t.Cleanup(s.Stop)
	return s
}

// start runs the server and waits until it listens.
func (s *Server) start() error {
	s.cmd = exec.Command(s.bin, s.args...)
	if err := s.cmd.Start(); err != nil {
		return err
	}
	s.exit = make(chan struct{})
	go func(cmd *exec.Cmd, exit chan struct{}) { cmd.Wait(); close(exit) }(s.cmd, s.exit)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.exit:
			return fmt.Errorf("redis-server exited: %s", s.lastLog())
		default:
		}
		if c, err := net.DialTimeout("tcp", s.Addr, 200*time.Millisecond); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.Stop()
	return fmt.Errorf("redis-server did not listen on %s within 10s: %s", s.Addr, s.lastLog())
}

// Stop stops the server (SIGTERM, then SIGKILL after 5 s) and waits for
// it. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.exit:
	case <-time.After(5 * time.Second):
		s.cmd.Process.Kill()
		<-s.exit
	}
	s.cmd = nil
}

// Restart starts the server again on the same port, with nothing in it
// (as after a crash without persistence).
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	var err error
	for i := 0; i < 50; i++ { // the port may linger a moment
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.t.Fatalf("restarting redis-server: %v", err)
}

func (s *Server) lastLog() string {
	f, err := os.Open(filepath.Join(s.dir, "redis.log"))
	if err != nil {
		return ""
	}
	defer f.Close()
	var last string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		last = sc.Text()
	}
	return last
}

// freePort returns a loopback port nothing listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	for i := 0; i < 100; i++ {
		p := 20000 + rand.IntN(12000) // below the ephemeral range
		if ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p))); err == nil {
			ln.Close()
			return p
		}
	}
	t.Fatal("no free port")
	return 0
}
