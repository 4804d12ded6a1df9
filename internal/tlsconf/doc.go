// Package tlsconf turns Helios's TLS settings into crypto/tls
// configurations and keeps them current: for a listener, a Provider whose
// *tls.Config picks a certificate by SNI (exact and wildcard names, ECDSA
// and RSA side by side), asks for client certificates when configured,
// offers ALPN, issues session tickets under keys that rotate, staples OCSP
// responses fetched in the background, and takes renewed certificates on
// reload without a dropped connection; for an upstream, a Client config
// that verifies backends and resumes sessions.
//
// The package knows nothing about configuration files or the HTTP engine:
// internal/server maps the configuration onto ServerOptions and
// ClientOptions, and the engine serves handshakes with
// Provider.TLSConfig, each between Provider.BeginHandshake and its
// Handshake.End (Gate: the cap on handshakes in progress, and shedding).
package tlsconf
