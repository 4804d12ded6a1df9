package main

import (
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/acme/pebbletest"
)

// Two Helios processes sharing one ACME storage directory (a fleet on a
// shared volume) issue a name's certificate exactly once and both serve
// it. Pebble's validations reach only the first process (as a load
// balancer in front of a fleet sends the CA to any instance): when the
// second takes the name's lock and orders, the first answers the
// challenges from the shared storage.
func TestACMETwoProcessesShareStorageAndIssueOnce(t *testing.T) {
	port := func(a string) int {
		_, p, _ := net.SplitHostPort(a)
		n, _ := strconv.Atoi(p)
		return n
	}
	type inst struct{ http, https string }
	insts := []inst{{freePort(t), freePort(t)}, {freePort(t), freePort(t)}}
	pb := pebbletest.Start(t, pebbletest.Options{HTTPPort: port(insts[0].http), TLSPort: port(insts[0].https)})
	dir := t.TempDir()
	name := fmt.Sprintf("fleet-%d.helios.test", time.Now().UnixNano()%1e9)
	var procs []*proc
	for i, in := range insts {
		cfg := filepath.Join(dir, fmt.Sprintf("helios%d.yaml", i+1))
		if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
listeners:
  - {name: http, address: %q}
  - name: https
    address: %q
    tls:
      acme: {ca: %q, ca_root: %q, storage: %q, http_listener: http, domains: [%s]}
routes:
  - {name: app, respond: {body: "hello"}}
admin: {address: "off"}
`, in.http, in.https, pb.Directory, pb.RootFile, filepath.Join(dir, "acme"), name)), 0o644); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, start(t, "serve", "--config", cfg))
	}
	defer func() {
		if t.Failed() {
			t.Logf("first helios:\n%s\nsecond helios:\n%s", procs[0].out.String(), procs[1].out.String())
		}
	}()
	roots := pb.IssuerRoots(t)
	serial := func(addr string) string {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr, &tls.Config{ServerName: name, RootCAs: roots})
		if err != nil {
			return ""
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	var got []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		got = []string{serial(insts[0].https), serial(insts[1].https)}
		if got[0] != "" && got[1] != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not served by both processes within 30s: got serials %q", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got[0] != got[1] {
		t.Errorf("the processes serve different certificates: %q", got)
	}
	if n := pb.Issued(); n != 1 {
		t.Errorf("pebble issued %d certificates, want exactly 1", n)
	}

	// `helios cert list` shows what is stored: the name, its expiry
	// (Pebble's default: 90 days) and where it came from.
	out, err := exec.Command(helios, "cert", "list", "--config", filepath.Join(dir, "helios1.yaml")).CombinedOutput()
	if err != nil {
		t.Fatalf("cert list: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "LISTENER") ||
		!strings.Contains(lines[1], name) || !strings.Contains(lines[1], "(89d left)") || !strings.Contains(lines[1], "acme 127.0.0.1-") {
		t.Errorf("cert list: got\n%s\nwant a header and one line for %s, 89d left, from acme", out, name)
	}
}
