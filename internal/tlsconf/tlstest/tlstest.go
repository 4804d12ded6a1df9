// Package tlstest helps tests of TLS servers play clients that stall a
// handshake: it gives the bytes such a client sends first.
package tlstest

import (
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"time"
)

// ClientHello returns the first record a TLS client configured with cfg
// sends, its ClientHello, whole. It fails only if the client sends no
// record within 10 seconds.
func ClientHello(cfg *tls.Config) ([]byte, error) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go tls.Client(a, cfg).Handshake() // ends when the pipe closes
	b.SetReadDeadline(time.Now().Add(10 * time.Second))
	rec := make([]byte, 5) // the record header: type, version, length
	if _, err := io.ReadFull(b, rec); err != nil {
		return nil, err
	}
	rec = append(rec, make([]byte, binary.BigEndian.Uint16(rec[3:5]))...)
	if _, err := io.ReadFull(b, rec[5:]); err != nil {
		return nil, err
	}
	return rec, nil
}
