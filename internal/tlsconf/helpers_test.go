package tlsconf

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/certgen"
)

// testPKI is a root CA with an intermediate that issues server
// certificates, as public CAs work, and the root's pool for clients.
type testPKI struct {
	root, inter *certgen.Cert
	pool        *x509.CertPool
	dir         string
}

func newPKI(t *testing.T) *testPKI {
	t.Helper()
	root, err := certgen.NewCA("test root")
	if err != nil {
		t.Fatal(err)
	}
	inter, err := root.NewIntermediate("test intermediate")
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(root.Leaf)
	return &testPKI{root: root, inter: inter, pool: pool, dir: t.TempDir()}
}

// issue makes a certificate from the intermediate and writes it (with the
// intermediate in its chain) to name.pem and name.key.
func (k *testPKI) issue(t *testing.T, name string, r certgen.Request) (*certgen.Cert, KeyPairFiles) {
	t.Helper()
	c, err := k.inter.Issue(r)
	if err != nil {
		t.Fatal(err)
	}
	return c, writePair(t, k.dir, name, c)
}

// writePair writes c to dir/name.pem and dir/name.key.
func writePair(t *testing.T, dir, name string, c *certgen.Cert) KeyPairFiles {
	t.Helper()
	certFile, keyFile, err := c.WriteFiles(dir, name)
	if err != nil {
		t.Fatal(err)
	}
	return KeyPairFiles{CertFile: certFile, KeyFile: keyFile}
}

// writeFile writes data to dir/name and returns its path.
func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// newTestProvider returns a Provider closed at the end of the test.
func newTestProvider(t *testing.T, o ServerOptions, env Env) *Provider {
	t.Helper()
	p, err := NewProvider("test", o, env)
	if err != nil {
		t.Fatalf("NewProvider: got %v, want nil", err)
	}
	t.Cleanup(p.Close)
	return p
}

// serve accepts TLS connections on a loopback listener with p's config,
// as the engine does: BeginHandshake, a handshake bounded by p's timeout,
// End. Each connection then gets "hello\n" and its lines
// echoed until it closes. It returns the address; everything stops at the
// end of the test.
func serve(t *testing.T, p *Provider) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tln := tls.NewListener(ln, p.TLSConfig())
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := tln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				serveConn(p, c.(*tls.Conn))
			}()
		}
	}()
	t.Cleanup(func() {
		tln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func serveConn(p *Provider, c *tls.Conn) {
	ctx, cancel := context.WithCancel(context.Background())
	if d := p.HandshakeTimeout(); d > 0 {
		ctx, cancel = context.WithTimeout(context.Background(), d)
	}
	defer cancel()
	h := p.BeginHandshake(cancel)
	if h == nil {
		return
	}
	err := c.HandshakeContext(ctx)
	h.End(c.ConnectionState(), err)
	if err != nil {
		return
	}
	if _, err := io.WriteString(c, "hello\n"); err != nil {
		return
	}
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		if _, err := io.WriteString(c, line); err != nil {
			return
		}
	}
}

// session is a client connection to serve's server.
type session struct {
	conn *tls.Conn
	r    *bufio.Reader
}

// dial connects with cfg and reads the greeting, which proves the server
// accepted the handshake (with TLS 1.3 a refused client certificate shows
// only then) and lets the client take in the session tickets sent before
// it.
func dial(t *testing.T, addr string, cfg *tls.Config) (*session, error) {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	s := &session{conn: c, r: bufio.NewReader(c)}
	line, err := s.r.ReadString('\n')
	if err != nil {
		c.Close()
		return nil, err
	}
	if line != "hello\n" {
		c.Close()
		return nil, errors.New("unexpected greeting " + line)
	}
	t.Cleanup(func() { c.Close() })
	return s, nil
}

// mustDial is dial that fails the test on error.
func mustDial(t *testing.T, addr string, cfg *tls.Config) *session {
	t.Helper()
	s, err := dial(t, addr, cfg)
	if err != nil {
		t.Fatalf("dial %s: got %v, want nil", addr, err)
	}
	return s
}

// echo sends a line and checks it comes back.
func (s *session) echo(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(s.conn, line+"\n"); err != nil {
		t.Fatalf("write on the open connection: got %v, want nil", err)
	}
	got, err := s.r.ReadString('\n')
	if err != nil || got != line+"\n" {
		t.Fatalf("echo on the open connection: got %q, %v, want %q, nil", got, err, line+"\n")
	}
}

// served returns the certificate the server presented.
func (s *session) served() *x509.Certificate { return s.conn.ConnectionState().PeerCertificates[0] }

// clientConfig returns a client config trusting k's root, for name.
func (k *testPKI) clientConfig(name string) *tls.Config {
	return &tls.Config{RootCAs: k.pool, ServerName: name}
}

// counts collects a provider's handshake counters as "result version
// resumed" -> n.
func counts(p *Provider) map[string]uint64 {
	out := make(map[string]uint64)
	p.Stats().Each(func(result, version string, resumed bool, n uint64) {
		r := "new"
		if resumed {
			r = "resumed"
		}
		out[result+" "+version+" "+r] = n
	})
	return out
}

// waitFor polls cond until it holds, failing the test after 10 seconds.
// It is for events another goroutine makes happen soon, not for timing.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
