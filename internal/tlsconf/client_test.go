package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/certgen"
)

// tlsBackend is an httptest TLS server with a certificate from k for
// 127.0.0.1 and backend.internal. clientCA, when set, makes it require
// client certificates from that CA. h2 turns on HTTP/2.
func tlsBackend(t *testing.T, k *testPKI, clientCA *certgen.Cert, h2 bool) *httptest.Server {
	t.Helper()
	cert, err := k.inter.Issue(certgen.Request{Hosts: []string{"127.0.0.1", "backend.internal"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := "anonymous"
		if len(r.TLS.PeerCertificates) > 0 {
			name = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		io.WriteString(w, r.Proto+" "+name)
	}))
	srv.EnableHTTP2 = h2
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert.TLS()}}
	if clientCA != nil {
		pool := x509.NewCertPool()
		pool.AddCert(clientCA.Leaf)
		srv.TLS.ClientAuth = tls.RequireAndVerifyClientCert
		srv.TLS.ClientCAs = pool
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// get makes one HTTP/1.1 request to srv over a connection configured by
// c, and returns the body or the error.
func get(c *Client, srv *httptest.Server) (string, error) {
	addr := srv.Listener.Addr().String()
	tr := &http.Transport{TLSClientConfig: c.Config(addr), ForceAttemptHTTP2: false}
	defer tr.CloseIdleConnections()
	res, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("https://" + addr + "/")
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return string(b), err
}

func TestClientConfig(t *testing.T) {
	k := newPKI(t)
	clientCA, err := certgen.NewCA("client CA")
	if err != nil {
		t.Fatal(err)
	}
	helios, err := clientCA.Issue(certgen.Request{CommonName: "helios", Client: true})
	if err != nil {
		t.Fatal(err)
	}
	heliosFiles := writePair(t, k.dir, "helios-client", helios)
	caFile := writeFile(t, k.dir, "ca.pem", k.root.CertPEM())
	plain := tlsBackend(t, k, nil, false)
	mtls := tlsBackend(t, k, clientCA, false)

	tests := []struct {
		name    string
		opts    ClientOptions
		srv     *httptest.Server
		want    string // body; "" when the request must fail
		unknown bool   // the failure must be an unknown authority
	}{
		{name: "CA file, server name from the address", opts: ClientOptions{CAFile: caFile}, srv: plain, want: "HTTP/1.1 anonymous"},
		{name: "CA file and server_name", opts: ClientOptions{CAFile: caFile, ServerName: "backend.internal"}, srv: plain, want: "HTTP/1.1 anonymous"},
		{name: "server_name the certificate does not carry", opts: ClientOptions{CAFile: caFile, ServerName: "other.internal"}, srv: plain},
		{name: "system roots do not know the test CA", opts: ClientOptions{}, srv: plain, unknown: true},
		{name: "insecure_skip_verify", opts: ClientOptions{InsecureSkipVerify: true}, srv: plain, want: "HTTP/1.1 anonymous"},
		{name: "client certificate", opts: ClientOptions{CAFile: caFile, CertFile: heliosFiles.CertFile, KeyFile: heliosFiles.KeyFile}, srv: mtls, want: "HTTP/1.1 helios"},
		{name: "no client certificate where one is required", opts: ClientOptions{CAFile: caFile}, srv: mtls},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewClient(tt.opts, nil)
			if err != nil {
				t.Fatalf("NewClient: got %v, want nil", err)
			}
			got, err := get(c, tt.srv)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("got %q, want an error", got)
				}
				if tt.unknown && !errors.As(err, new(x509.UnknownAuthorityError)) {
					t.Errorf("got %v, want an x509.UnknownAuthorityError", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %q, %v, want %q, nil", got, err, tt.want)
			}
		})
	}
}

func TestClientBadFiles(t *testing.T) {
	k := newPKI(t)
	_, files := k.issue(t, "c", certgen.Request{CommonName: "c", Client: true})
	_, other := k.issue(t, "d", certgen.Request{CommonName: "d", Client: true})
	text := writeFile(t, k.dir, "text.pem", []byte("x\n"))
	tests := []struct {
		name string
		opts ClientOptions
		want error
	}{
		{name: "CA file without certificates", opts: ClientOptions{CAFile: text}, want: ErrNoCertificate},
		{name: "key of another certificate", opts: ClientOptions{CertFile: files.CertFile, KeyFile: other.KeyFile}, want: ErrKeyMismatch},
		{name: "certificate without key", opts: ClientOptions{CertFile: files.CertFile}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewClient(tt.opts, nil)
			if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) {
				t.Errorf("got %v, want %v", err, tt.want)
			}
		})
	}
}

func TestClientALPN(t *testing.T) {
	k := newPKI(t)
	caFile := writeFile(t, k.dir, "ca.pem", k.root.CertPEM())
	cert, err := k.inter.Issue(certgen.Request{Hosts: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		serverProto []string // the backend's ALPN list
		clientH2    bool
		wantDialErr bool
		wantProto   string
		wantErr     error
	}{
		{name: "h2 to an h2 backend", serverProto: []string{"h2", "http/1.1"}, clientH2: true, wantProto: "h2"},
		{name: "h2 to a backend that ignores ALPN", clientH2: true, wantErr: ErrNoH2},
		{name: "h2 to an HTTP/1.1-only backend", serverProto: []string{"http/1.1"}, clientH2: true, wantDialErr: true},
		{name: "http1 to an h2 backend", serverProto: []string{"h2", "http/1.1"}, wantProto: "http/1.1"},
		{name: "http1 to a backend that ignores ALPN", wantProto: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := handshakeOnly(t, &tls.Config{Certificates: []tls.Certificate{cert.TLS()}, NextProtos: tt.serverProto})
			c, err := NewClient(ClientOptions{CAFile: caFile, HTTP2: tt.clientH2}, nil)
			if err != nil {
				t.Fatal(err)
			}
			conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, c.Config(addr))
			if (err != nil) != tt.wantDialErr {
				t.Fatalf("dial: got %v, want an error %v", err, tt.wantDialErr)
			}
			if err != nil {
				return
			}
			defer conn.Close()
			cs := conn.ConnectionState()
			if err := c.CheckALPN(cs); !errors.Is(err, tt.wantErr) {
				t.Errorf("CheckALPN: got %v, want %v", err, tt.wantErr)
			}
			if cs.NegotiatedProtocol != tt.wantProto {
				t.Errorf("negotiated: got %q, want %q", cs.NegotiatedProtocol, tt.wantProto)
			}
		})
	}
}

// handshakeOnly serves TLS handshakes with cfg on loopback, then closes
// each connection once the client does.
func handshakeOnly(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.SetDeadline(time.Now().Add(10 * time.Second))
			c.(*tls.Conn).Handshake()
			io.Copy(io.Discard, c)
			c.Close()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return ln.Addr().String()
}

func TestClientSessionResumption(t *testing.T) {
	k := newPKI(t)
	caFile := writeFile(t, k.dir, "ca.pem", k.root.CertPEM())
	otherCA := writeFile(t, k.dir, "both.pem", append(k.root.CertPEM(), k.inter.CertPEM()...))
	// Two backends with the same server name: each resumes its own
	// session.
	a, b := tlsBackend(t, k, nil, false), tlsBackend(t, k, nil, false)
	opts := ClientOptions{CAFile: caFile, ServerName: "backend.internal"}
	c, err := NewClient(opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	// dial connects to srv and reports whether the session resumed. A
	// request is sent so that the TLS 1.3 ticket, which follows the
	// handshake, is read.
	dial := func(c *Client, srv *httptest.Server) bool {
		t.Helper()
		addr := srv.Listener.Addr().String()
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, c.Config(addr))
		if err != nil {
			t.Fatalf("dial: got %v, want nil", err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		io.ReadAll(conn)
		return conn.ConnectionState().DidResume
	}
	steps := []struct {
		name   string
		client func() *Client
		srv    *httptest.Server
		want   bool
	}{
		{name: "first to a", client: func() *Client { return c }, srv: a, want: false},
		{name: "first to b", client: func() *Client { return c }, srv: b, want: false},
		{name: "again to a", client: func() *Client { return c }, srv: a, want: true},
		{name: "again to b", client: func() *Client { return c }, srv: b, want: true},
		{name: "after a reload that changed nothing", client: func() *Client {
			n, err := NewClient(opts, c)
			if err != nil {
				t.Fatal(err)
			}
			c = n
			return c
		}, srv: a, want: true},
		{name: "after a reload that changed the CAs", client: func() *Client {
			n, err := NewClient(ClientOptions{CAFile: otherCA, ServerName: "backend.internal"}, c)
			if err != nil {
				t.Fatal(err)
			}
			c = n
			return c
		}, srv: a, want: false},
	}
	for _, s := range steps {
		if got := dial(s.client(), s.srv); got != s.want {
			t.Errorf("%s: resumed %v, want %v", s.name, got, s.want)
		}
	}
}
