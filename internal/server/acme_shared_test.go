package server

import (
	"crypto/x509"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/acme/pebbletest"
	"github.com/helios-lb/helios/internal/redisstore/redistest"
)

// acmeFleet is one instance of a fleet sharing its ACME storage in Redis:
// {{HTTP}} and {{HTTPS}} are its listeners (the first instance's are the
// ports Pebble validates on), {{REDIS}} the store.
const acmeFleet = `
listeners:
  - {name: http, address: "{{HTTP}}"}
  - name: https
    address: "{{HTTPS}}"
    tls:
      acme: {ca: "{{CA}}", ca_root: "{{ROOT}}", storage: "redis://{{REDIS}}/0", http_listener: http, challenges: [http-01], domains: [%s]}
routes:
  - {name: app, respond: {body: "hello"}}
admin: {address: "off"}
`

// TestACMESharedRedisStorageIssuesOnce is issue 23's shared certificates:
// two instances with tls.acme.storage on one redis-server, started
// together, get one certificate from Pebble (one instance orders under
// the name's lock, the other loads it; the CA's validation reaches the
// first instance whichever presented the challenge, answered from the
// storage), both serve it; with redis-server stopped both keep serving
// it.
func TestACMESharedRedisStorageIssuesOnce(t *testing.T) {
	redis := redistest.Start(t, redistest.Options{})
	s := newACMESetup(t, pebbletest.Options{})
	name := acmeName("fleet")
	tmpl := strings.ReplaceAll(fmt.Sprintf(acmeFleet, name), "{{REDIS}}", redis.Addr)
	a := s.start(t, s.config(t, tmpl))
	// The second instance on ports of its own: Pebble never reaches it.
	other := strings.NewReplacer("{{HTTP}}", fmt.Sprintf("127.0.0.1:%d", reservePort(t)), "{{HTTPS}}", fmt.Sprintf("127.0.0.1:%d", reservePort(t))).Replace(tmpl)
	b := s.start(t, s.config(t, other))
	roots := s.pebble.IssuerRoots(t)

	addrs := []string{a.Addr("https").String(), b.Addr("https").String()}
	leaves := make([]*x509.Certificate, 2)
	deadline := time.Now().Add(30 * time.Second)
	for i, addr := range addrs {
		var err error
		for {
			if leaves[i], err = handshakeAt(addr, roots, name); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("instance %d: no certificate for %s within 30s: %v\npebble:\n%s", i, name, err, s.pebble.Log())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if leaves[0].SerialNumber.Cmp(leaves[1].SerialNumber) != 0 {
		t.Errorf("the instances serve serials %x and %x, want one certificate", leaves[0].SerialNumber, leaves[1].SerialNumber)
	}
	time.Sleep(500 * time.Millisecond) // a second order would show by now
	if n := s.pebble.Issued(); n != 1 {
		t.Errorf("pebble issued %d certificates, want 1", n)
	}
	if got := managerOf(t, a).Stats().Obtained.Load() + managerOf(t, b).Stats().Obtained.Load(); got != 1 {
		t.Errorf("obtained by the two instances: got %d, want 1", got)
	}

	redis.Stop()
	for i, addr := range addrs {
		leaf, err := handshakeAt(addr, roots, name)
		if err != nil || leaf.SerialNumber.Cmp(leaves[i].SerialNumber) != 0 {
			t.Errorf("instance %d with redis-server stopped: got %v, want the certificate it had", i, err)
		}
	}
}
