package tlstest

import (
	"crypto/tls"
	"testing"
)

func TestClientHello(t *testing.T) {
	rec, err := ClientHello(&tls.Config{ServerName: "site.example"})
	if err != nil {
		t.Fatalf("got %v, want nil", err)
	}
	// A handshake record (22) whose message is a ClientHello (1).
	if len(rec) < 6 || rec[0] != 22 || rec[5] != 1 {
		t.Errorf("got % x..., want a handshake record holding a ClientHello", rec[:min(len(rec), 6)])
	}
}
