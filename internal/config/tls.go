package config

// ListenerTLS makes a listener speak TLS: HTTPS, and HTTP/2 through ALPN
// unless Listener.HTTP2 is false. Certificates come either from CertFile
// and KeyFile (one certificate) or from Certificates (several, chosen by
// the name the client asks for in SNI), not both, and from ACME.
type ListenerTLS struct {
	// CertFile is a PEM file holding the certificate, then the
	// intermediates of its chain. Required with KeyFile unless
	// Certificates is set.
	CertFile string `yaml:"cert_file"`
	// KeyFile is a PEM file holding CertFile's unencrypted private key.
	KeyFile string `yaml:"key_file"`
	// Certificates are several certificates, each served to the clients
	// that ask (in SNI) for a name it carries in its subject alternative
	// names, exact (a.example.com) or wildcard (*.example.com covers
	// a.example.com, not example.com or a.b.example.com). An ECDSA and an
	// RSA certificate may carry the same names: each client gets ECDSA if
	// it supports it. The first certificate is the default, for clients
	// that send no SNI or a name none carries. Empty: CertFile and
	// KeyFile are the only certificate.
	Certificates []CertKey `yaml:"certificates"`
	// MinVersion is the oldest TLS version accepted: "1.2" or "1.3".
	// Default "1.2".
	MinVersion string `yaml:"min_version"`
	// ClientCAFile, when set, is a PEM file of CA certificates: every
	// client must present a certificate one of them issued (mutual TLS),
	// or the handshake fails. Empty: no client certificate is asked for.
	ClientCAFile string `yaml:"client_ca_file"`
	// HandshakeTimeout bounds a TLS handshake, from the connection's
	// accept to the handshake's end; more than 0. Default 10s.
	HandshakeTimeout Duration `yaml:"handshake_timeout"`
	// ClientHelloTimeout bounds the wait for the client's ClientHello,
	// from the connection's accept: a connection that has sent nothing,
	// or only part of its ClientHello, is closed then. Until its
	// ClientHello is whole a connection holds no place among
	// MaxHandshakes. More than 0 and at most HandshakeTimeout. Default
	// 5s, or HandshakeTimeout when that is shorter.
	ClientHelloTimeout Duration `yaml:"client_hello_timeout"`
	// MaxHandshakes caps the handshakes in progress at once on the
	// listener, counted from a connection's whole ClientHello to the
	// handshake's end. At the cap, the oldest handshake waiting for its
	// client is shed to make room for a new one; a new one is refused
	// (closed at once) only when none waits. 0 means no cap. Default
	// 1024.
	MaxHandshakes int `yaml:"max_handshakes"`
	// SessionTickets lets clients resume sessions (an abbreviated
	// handshake) with tickets encrypted under keys that rotate hourly.
	// nil means the default, true; Tickets reads it.
	SessionTickets *bool `yaml:"session_tickets"`
	// ACME gets certificates from an ACME CA and renews them (automatic
	// HTTPS); with it, certificate files are optional. Nil: files only.
	ACME *ACME `yaml:"acme"`
}

// CertKey is a certificate file and its key file, as for
// ListenerTLS.CertFile and ListenerTLS.KeyFile. Both are required.
type CertKey struct {
	// CertFile is a PEM file: the certificate, then its chain.
	CertFile string `yaml:"cert_file"`
	// KeyFile is a PEM file with the certificate's private key.
	KeyFile string `yaml:"key_file"`
}

// Pairs returns the certificates to serve, the default first: CertFile
// and KeyFile when set, then Certificates.
func (t *ListenerTLS) Pairs() []CertKey {
	var out []CertKey
	if t.CertFile != "" || t.KeyFile != "" {
		out = append(out, CertKey{CertFile: t.CertFile, KeyFile: t.KeyFile})
	}
	return append(out, t.Certificates...)
}

// Tickets reports SessionTickets, reading nil as the default, true.
func (t *ListenerTLS) Tickets() bool { return t.SessionTickets == nil || *t.SessionTickets }

// TransportTLS makes an upstream's connections to its backends use TLS
// (HTTPS backends, or HTTP/2 with Transport.Protocol h2).
type TransportTLS struct {
	// CAFile is a PEM file of the CA certificates backends' certificates
	// are verified against. Empty: the system's trusted roots.
	CAFile string `yaml:"ca_file"`
	// ServerName is the name sent in SNI and that each backend's
	// certificate must carry. Empty: the host part of each backend's
	// address (an IP address must then be in the certificate's IP SANs).
	ServerName string `yaml:"server_name"`
	// CertFile and KeyFile are a client certificate presented to backends
	// that ask for one (mutual TLS). Both or neither. Empty: none.
	CertFile string `yaml:"cert_file"`
	// KeyFile is CertFile's unencrypted private key.
	KeyFile string `yaml:"key_file"`
	// MinVersion is the oldest TLS version spoken: "1.2" or "1.3".
	// Default "1.2".
	MinVersion string `yaml:"min_version"`
	// InsecureSkipVerify accepts whatever certificate a backend presents:
	// anyone on the network path can then impersonate the backends.
	// Validation warns, and so does every start and reload. Default false.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}

// The TLS version names of ListenerTLS.MinVersion and
// TransportTLS.MinVersion.
const (
	TLS12 = "1.2"
	TLS13 = "1.3"
)

// The Transport.Protocol values.
const (
	// ProtocolHTTP1 is HTTP/1.1, over TLS when Transport.TLS is set.
	ProtocolHTTP1 = "http1"
	// ProtocolH2 is HTTP/2 over TLS, agreed through ALPN.
	ProtocolH2 = "h2"
	// ProtocolH2C is cleartext HTTP/2 with prior knowledge (RFC 9113,
	// section 3.3).
	ProtocolH2C = "h2c"
)

// OffersHTTP2 reports whether the listener offers HTTP/2 over TLS
// (ALPN h2): it has TLS and HTTP2 is not false.
func (l *Listener) OffersHTTP2() bool {
	return l.TLS != nil && (l.HTTP2 == nil || *l.HTTP2)
}

// setListenerTLSDefaults fills the absent TLS keys of the listener l at
// path p.
func setListenerTLSDefaults(m *meta, l *Listener, p string) {
	t := l.TLS
	if t == nil {
		return
	}
	if l.HTTP2 == nil {
		on := true
		l.HTTP2 = &on
	}
	tp := p + ".tls"
	setString(&t.MinVersion, TLS12)
	setDefault(m, tp+".handshake_timeout", &t.HandshakeTimeout, seconds(10))
	hello := seconds(5)
	if t.HandshakeTimeout > 0 {
		hello = min(hello, t.HandshakeTimeout)
	}
	setDefault(m, tp+".client_hello_timeout", &t.ClientHelloTimeout, hello)
	setDefault(m, tp+".max_handshakes", &t.MaxHandshakes, 1024)
	if t.SessionTickets == nil {
		on := true
		t.SessionTickets = &on
	}
}

// setTransportTLSDefaults fills the absent protocol and TLS keys of the
// transport t.
func setTransportTLSDefaults(t *Transport) {
	setString(&t.Protocol, ProtocolHTTP1)
	// h2 is HTTP/2 over TLS: without a tls block it gets the defaults
	// (the system's roots, each backend's host as the server name).
	if t.Protocol == ProtocolH2 && t.TLS == nil {
		t.TLS = &TransportTLS{}
	}
	if t.TLS != nil {
		setString(&t.TLS.MinVersion, TLS12)
	}
}
