package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/certgen"
	"github.com/helios-lb/helios/internal/config"
	"github.com/helios-lb/helios/internal/redisstore"
	"github.com/helios-lb/helios/internal/redisstore/redistest"
)

// TestCertListRedisStorage: helios cert list reads a Redis ACME storage
// as it reads a directory: the stored certificate of a managed name, with
// its expiry and its place (the store, without its password, and key).
func TestCertListRedisStorage(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{Password: "pw"})
	now := time.Now()
	c, err := certgen.SelfSigned(certgen.Request{Hosts: []string{"a.example"}, NotAfter: now.Add(50 * 24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	st := redisstore.Open(redisstore.Options{Addr: srv.Addr, Password: "pw"})
	defer st.Close()
	key := "certificates/ca.example-directory/a.example/a.example.crt"
	if err := st.CertStorage(nil).Store(context.Background(), key, c.CertPEM()); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(`
listeners:
  - name: https
    address: ":8443"
    tls: {acme: {domains: [a.example, b.example], storage: "redis://`+srv.Addr+`/0", storage_password_env: PW}}
routes: [{name: r, respond: {}}]
`), "t.yaml", func(k string) (string, bool) { return "pw", k == "PW" })
	if err != nil {
		t.Fatal(err)
	}
	rows, err := certRows(cfg, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("got %d rows (%v), want 2", len(rows), rows)
	}
	want := "acme ca.example-directory redis://" + srv.Addr + "/0 " + key
	if rows[0].names != "a.example" || !strings.Contains(rows[0].expires, "(49d left)") || rows[0].source != want {
		t.Errorf("a.example: got %+v, want 49d left from %q", rows[0], want)
	}
	if rows[1].names != "b.example" || !strings.HasPrefix(rows[1].source, "acme: none yet") {
		t.Errorf("b.example: got %+v, want none yet", rows[1])
	}
}
